// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package provider

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	testclock "k8s.io/utils/clock/testing"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/forecast"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/store"
)

// forecastFixture is a provider over one namespace's pods and deployments
// (one per app label, of the same name), a store and a clock the test moves.
type forecastFixture struct {
	t     testing.TB
	clk   *testclock.FakePassiveClock
	st    *store.Store
	pods  cache.Indexer
	prov  *Provider
	count map[string]float64 // each pod's finished requests so far
}

func newForecastFixture(t testing.TB, start time.Time, cfg ForecastConfig, deployments ...string) *forecastFixture {
	t.Helper()
	idx := func() cache.Indexer {
		return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	}
	pi, di := idx(), idx()
	for _, n := range deployments {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: n}, Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": n}}}}
		if err := di.Add(d); err != nil {
			t.Fatal(err)
		}
	}
	f := &forecastFixture{t: t, clk: testclock.NewFakePassiveClock(start), st: store.New(), pods: pi, count: map[string]float64{}}
	f.prov = New(Config{MaxAge: 15 * time.Second, Window: 5 * time.Second, Forecast: cfg},
		Listers{Pods: corelisters.NewPodLister(pi), Deployments: appslisters.NewDeploymentLister(di), StatefulSets: appslisters.NewStatefulSetLister(idx())},
		f.st, &recordingDemand{}, f.clk)
	return f
}

// addPod adds a Ready pod of app that took startup to become Ready.
func (f *forecastFixture) addPod(name, app string, startup time.Duration) {
	p := pod(name, map[string]string{"app": app}, true, true, nil)
	created := f.clk.Now().Add(-time.Hour)
	p.CreationTimestamp = metav1.NewTime(created)
	p.Status.Conditions[0].LastTransitionTime = metav1.NewTime(created.Add(startup))
	if err := f.pods.Add(p); err != nil {
		f.t.Fatal(err)
	}
}

// scrape records a page for pod at the clock's time less a second: queue q,
// running b, and rate requests finished per second since the last scrape.
func (f *forecastFixture) scrape(name string, q, b, rate, seconds float64) {
	f.count[name] += rate * seconds
	m := model("m", q, b, 0.1)
	m.Counters[catalog.Requests] = f.count[name]
	m.HasCounter |= 1 << catalog.Requests
	f.st.Record(types.NamespacedName{Namespace: "ns", Name: name}, f.clk.Now().Add(-time.Second), page(m), nil)
}

func (f *forecastFixture) ask(metric, deployment, metricSelector string) (float64, error) {
	f.t.Helper()
	sel, err := labels.Parse(metricSelector)
	if err != nil {
		f.t.Fatal(err)
	}
	info := cmprovider.CustomMetricInfo{GroupResource: deploymentsGR, Namespaced: true, Metric: metric}
	v, err := f.prov.GetMetricByName(context.Background(), types.NamespacedName{Namespace: "ns", Name: deployment}, info, sel)
	if err != nil {
		return 0, err
	}
	if v.Metric.Name != metric {
		f.t.Errorf("the value is named %q, want %q", v.Metric.Name, metric)
	}
	return v.Value.AsApproximateFloat64(), nil
}

// TestForecastPerReplica: steady demand of 10 over 2 Ready pods, 2
// requests finishing a second, asked every 15 s: absent until 3 samples
// span half the horizon (auto: the pods' 2m start-up), then each method;
// the default, auto, is holt on these steady arrivals.
func TestForecastPerReplica(t *testing.T) {
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	f := newForecastFixture(t, start, DefaultForecastConfig(), "llm", "empty")
	f.addPod("a", "llm", 2*time.Minute)
	f.addPod("b", "llm", 90*time.Second)
	step := func(i int) {
		f.clk.SetTime(start.Add(time.Duration(i) * 15 * time.Second))
		f.scrape("a", 2, 3, 1, 15)
		f.scrape("b", 2, 3, 1, 15)
	}
	// Two scrapes before the first question, so that the rate exists.
	step(-1)
	for i := range 4 {
		step(i)
		_, err := f.ask(catalog.DemandForecastPerReplica, "llm", "")
		if !apierrors.IsNotFound(err) {
			t.Fatalf("question %d: %v, want a 404 while the history is short", i, err)
		}
		for _, want := range []string{"auto forecast over a horizon of 2m0s", "needs at least 3 spanning at least 1m0s", "starts empty when the adapter starts"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("question %d: %q does not say %q", i, err, want)
			}
		}
	}
	if n := testutil.CollectAndCount(f.prov.forecasts); n != 5 {
		t.Errorf("forecasts_total has %d series, want 5 (each method's estimator, auto's two)", n)
	}
	if got := sumCounter(t, f.prov.forecasts); got != 0 {
		t.Errorf("forecasts_total sums to %g after only absent answers, want 0", got)
	}
	step(4)
	steady := 10 + forecast.DefaultZ*math.Sqrt(10)
	for _, tc := range []struct {
		selector string
		want     float64
	}{
		{"", 5},
		{"method=auto", 5},
		{"method=staffing", steady / 2},
		{"method=envelope", 5},
		{"method==holt", 5},
		{"method in (envelope)", 5},
	} {
		got, err := f.ask(catalog.DemandForecastPerReplica, "llm", tc.selector)
		if err != nil {
			t.Fatalf("%q: %v", tc.selector, err)
		}
		if math.Abs(got-tc.want) > 0.001 {
			t.Errorf("%q: %g, want %g", tc.selector, got, tc.want)
		}
	}
	// A model selector's history is its own: one question so far; a
	// model no pod serves has no demand, and no history.
	for _, tc := range []struct{ sel, want string }{
		{"model_name=m", "has 1 samples"},
		{"model_name=other,method=holt", "no model matching the metric selector); the history holds 0 samples"},
	} {
		if _, err := f.ask(catalog.DemandForecastPerReplica, "llm", tc.sel); !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want a 404 saying %q", tc.sel, err, tc.want)
		}
	}
	// The answers made are counted by method asked and estimator (auto
	// chose holt twice); the absent ones are not.
	for _, tc := range []struct {
		method, estimator string
		want              float64
	}{
		{"auto", "holt", 2}, {"auto", "staffing", 0}, {"staffing", "staffing", 1}, {"envelope", "envelope", 2}, {"holt", "holt", 1},
	} {
		if got := testutil.ToFloat64(f.prov.forecasts.WithLabelValues(tc.method, tc.estimator)); got != tc.want {
			t.Errorf("forecasts_total{method=%q,estimator=%q} = %g, want %g", tc.method, tc.estimator, got, tc.want)
		}
	}

	t.Run("the method selector: 400 naming what is wrong", func(t *testing.T) {
		for _, tc := range []struct{ selector, want string }{
			{"method=arima", `"arima"`},
			{"method in (holt,staffing)", `must name one method`},
			{"method!=holt", `must name one method`},
			{"team=x", `key "team"`},
		} {
			_, err := f.ask(catalog.DemandForecastPerReplica, "llm", tc.selector)
			if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%q: %v, want a 400 saying %s", tc.selector, err, tc.want)
			}
		}
	})
	t.Run("a role selector is read, not refused", func(t *testing.T) {
		_, err := f.ask(catalog.DemandForecastPerReplica, "llm", catalog.RoleSelectorLabel+"=prefill,method=holt")
		if !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), "no pods match") {
			t.Errorf("%v, want a 404: no pod of llm has the role", err)
		}
	})
	t.Run("scaled to zero: absent with the demand's reason", func(t *testing.T) {
		_, err := f.ask(catalog.DemandForecastPerReplica, "empty", "")
		if !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), `no pods match \"app=empty\"`) && !strings.Contains(err.Error(), `no pods match "app=empty"`) {
			t.Errorf("%v, want a 404 saying no pods match", err)
		}
		if err != nil && !strings.Contains(err.Error(), "the history holds 0 samples") {
			t.Errorf("%v does not say how much history there is", err)
		}
	})
	t.Run("pods only", func(t *testing.T) {
		info := cmprovider.CustomMetricInfo{GroupResource: podsGR, Namespaced: true, Metric: catalog.DemandForecastPerReplica}
		_, err := f.prov.GetMetricByName(context.Background(), types.NamespacedName{Namespace: "ns", Name: "a"}, info, labels.Everything())
		if !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), "served for deployments and statefulsets") {
			t.Errorf("%v, want a 404 naming the kinds served", err)
		}
	})
	t.Run("by selector", func(t *testing.T) {
		info := cmprovider.CustomMetricInfo{GroupResource: deploymentsGR, Namespaced: true, Metric: catalog.DemandForecastPerReplica}
		list, err := f.prov.GetMetricBySelector(context.Background(), "ns", labels.Everything(), info, labels.SelectorFromSet(labels.Set{"method": "envelope"}))
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != 1 || list.Items[0].DescribedObject.Name != "llm" || list.Items[0].Value.AsApproximateFloat64() != 5 {
			t.Errorf("items %+v, want llm at 5", list.Items)
		}
	})
}

// TestForecastHistoryFromDemandQuestions: questions about
// inference_demand_per_replica fill the forecast's history too, and a new
// adapter (a restart) starts it empty.
func TestForecastHistoryFromDemandQuestions(t *testing.T) {
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	cfg := DefaultForecastConfig()
	cfg.Horizon = 2 * time.Minute
	f := newForecastFixture(t, start, cfg, "llm")
	f.addPod("a", "llm", time.Minute)
	for i := range 5 {
		f.clk.SetTime(start.Add(time.Duration(i) * 15 * time.Second))
		f.scrape("a", 1, 1, 1, 15)
		if _, err := f.ask(catalog.DemandPerReplica, "llm", ""); err != nil {
			t.Fatal(err)
		}
	}
	// A question closer than half a scrape interval adds no sample.
	f.clk.SetTime(start.Add(60*time.Second + 2*time.Second))
	if got, err := f.ask(catalog.DemandForecastPerReplica, "llm", "method=envelope"); err != nil || got != 2 {
		t.Fatalf("%g, %v; want 2 from the demand questions' history", got, err)
	}
	key := forecast.Key{Namespace: "ns", Kind: "deployment", Name: "llm"}
	if n := len(f.prov.histories.Series(key, f.clk.Now())); n != 5 {
		t.Errorf("%d samples, want 5 (the question 2 s after the last is skipped)", n)
	}

	restarted := newForecastFixture(t, f.clk.Now(), cfg, "llm")
	restarted.addPod("a", "llm", time.Minute)
	restarted.scrape("a", 1, 1, 1, 15)
	_, err := restarted.ask(catalog.DemandForecastPerReplica, "llm", "")
	if !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), "has 1 samples spanning 0s") {
		t.Errorf("after a restart: %v, want a 404 saying the history has 1 sample", err)
	}
}

// TestForecastNonFinite: a demand that overflows is never stored and never
// served.
func TestForecastNonFinite(t *testing.T) {
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	f := newForecastFixture(t, start, DefaultForecastConfig(), "llm")
	f.addPod("a", "llm", time.Minute)
	f.addPod("b", "llm", time.Minute)
	for i := range 6 {
		f.clk.SetTime(start.Add(time.Duration(i) * 15 * time.Second))
		f.scrape("a", math.MaxFloat64, math.MaxFloat64, 1, 15)
		f.scrape("b", math.MaxFloat64, 1, 1, 15)
		if _, err := f.ask(catalog.DemandForecastPerReplica, "llm", "method=envelope"); !apierrors.IsNotFound(err) {
			t.Fatalf("question %d: %v, want a 404", i, err)
		}
	}
	if n := len(f.prov.histories.Series(forecast.Key{Namespace: "ns", Kind: "deployment", Name: "llm"}, f.clk.Now())); n != 0 {
		t.Errorf("%d non-finite samples stored", n)
	}
}

// TestForecastUnknownCompletions: with no completions rate (a Ready pod
// has none) the default, auto, cannot measure the burstiness and is
// staffing, which takes the dispersion as 1 and still answers.
func TestForecastUnknownCompletions(t *testing.T) {
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	f := newForecastFixture(t, start, DefaultForecastConfig(), "llm")
	f.addPod("a", "llm", time.Minute)
	var got float64
	var err error
	for i := range 6 {
		f.clk.SetTime(start.Add(time.Duration(i) * 15 * time.Second))
		f.st.Record(types.NamespacedName{Namespace: "ns", Name: "a"}, f.clk.Now().Add(-time.Second), page(model("m", 4, 5, 0.1)), nil)
		got, err = f.ask(catalog.DemandForecastPerReplica, "llm", "")
	}
	if want := 9 + forecast.DefaultZ*3; err != nil || math.Abs(got-want) > 0.001 {
		t.Errorf("%g, %v; want %g", got, err, want)
	}
}

// TestDiscoveryListsForecast: listed for deployments and statefulsets only.
func TestDiscoveryListsForecast(t *testing.T) {
	kinds := map[string]bool{}
	for _, m := range New(Config{}, Listers{}, nil, nil, testclock.NewFakePassiveClock(time.Now())).ListAllMetrics() {
		if m.Metric == catalog.DemandForecastPerReplica {
			kinds[m.GroupResource.String()] = true
		}
	}
	if len(kinds) != 2 || !kinds["deployments.apps"] || !kinds["statefulsets.apps"] {
		t.Errorf("listed for %v, want deployments.apps and statefulsets.apps", kinds)
	}
}

// sumCounter is the sum of a counter vector's series.
func sumCounter(t *testing.T, c *prometheus.CounterVec) float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 16)
	go func() { c.Collect(ch); close(ch) }()
	var sum float64
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			t.Fatal(err)
		}
		sum += pb.GetCounter().GetValue()
	}
	return sum
}

// TestForecastCounterRegistered: the provider registers
// inference_metrics_adapter_forecasts_total in Config.Registerer, its five
// series present at 0 before any forecast.
func TestForecastCounterRegistered(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	New(Config{MaxAge: 15 * time.Second, Window: 5 * time.Second, Registerer: reg}, Listers{}, store.New(), &recordingDemand{}, testclock.NewFakePassiveClock(time.Now()))
	if n, err := testutil.GatherAndCount(reg, "inference_metrics_adapter_forecasts_total"); err != nil || n != 5 {
		t.Errorf("gathered %d series (%v), want 5", n, err)
	}
}
