// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/quick"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	testclock "k8s.io/utils/clock/testing"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/scrape"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/store"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/targets"
)

const (
	v1beta2 = "/apis/custom.metrics.k8s.io/v1beta2/"
	inNS    = v1beta2 + "namespaces/ns/"
)

func itemValues(t *testing.T, body string) map[string]string {
	t.Helper()
	var list struct{ Items []valueJSON }
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	got := map[string]string{}
	for _, it := range list.Items {
		got[it.DescribedObject.Namespace+"/"+it.DescribedObject.Name] = it.Value
	}
	return got
}

// Questions without a namespace or without a labelSelector create no demand
// and answer only from pods already scraped; what cannot be narrowed is a 400.
// Was wrong: such a question made every pod it could match a scrape target.
func TestUnnarrowedQuestionsReadScrapedPodsOnly(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	st := store.New()
	st.Record(types.NamespacedName{Namespace: "ns", Name: "llm"}, now.Add(-time.Second), page(model("m", 4, 1, 0.1)), nil)
	other := pod("db", map[string]string{"app": "db"}, true, true, nil)
	other.Namespace = "other"
	f := fixture{now: now, store: st, pods: []*corev1.Pod{
		pod("llm", map[string]string{"app": "llm"}, true, true, nil),
		pod("postgres", map[string]string{"app": "postgres"}, true, true, nil),
		other,
	}}
	srv, dem := newServer(t, f)

	cases := []struct {
		name   string
		path   string
		code   int
		want   string // values, or text of the error
		demand string
	}{
		{"no selector reads scraped pods only", inNS + "pods/*/inference_queue_size", 200, "map[ns/llm:4]", "[]"},
		{"no namespace reads scraped pods only", v1beta2 + "pods/*/inference_queue_size?labelSelector=app", 200, "map[ns/llm:4]", "[]"},
		{"no namespace, nothing scraped", v1beta2 + "pods/*/inference_queue_size?labelSelector=app%3Ddb", 404, "labelSelector", "[]"},
		{"no selector, nothing scraped", v1beta2 + "namespaces/other/pods/*/inference_queue_size", 404, "ask within a namespace with a labelSelector", "[]"},
		{"deployments across namespaces", v1beta2 + "deployments.apps/*/inference_queue_size", 400, "across all namespaces", "[]"},
		{"statefulsets across namespaces", v1beta2 + "statefulsets.apps/*/inference_queue_size?labelSelector=app%3Dllm", 400, "across all namespaces", "[]"},
		{"with a selector demand is registered", inNS + "pods/*/inference_queue_size?labelSelector=app%3Dllm", 200, "map[ns/llm:4]", "[ns/app=llm:1]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dem.asked = nil
			code, body := get(t, srv, tc.path)
			if code != tc.code {
				t.Fatalf("status %d, want %d: %s", code, tc.code, body)
			}
			if code == 200 {
				if got := fmt.Sprint(itemValues(t, body)); got != tc.want {
					t.Fatalf("values %s, want %s", got, tc.want)
				}
			} else if !strings.Contains(body, tc.want) {
				t.Fatalf("body %s does not say %q", body, tc.want)
			}
			if fmt.Sprint(dem.asked) != tc.demand {
				t.Fatalf("demand %v, want %s", dem.asked, tc.demand)
			}
		})
	}
}

// storeProber scrapes by recording a page into the store, and counts.
type storeProber struct {
	st    *store.Store
	at    time.Time
	count int
}

func (s *storeProber) ScrapeNow(_ context.Context, ts []scrape.Target) {
	for _, t := range ts {
		s.count++
		s.st.Record(t.Pod, s.at, page(model("m", 2, 1, 0.1)), nil)
	}
}

type nopSetter struct{}

func (nopSetter) SetTargets([]scrape.Target) {}

// A by-name question about an unlabelled pod keeps it scraped by the
// background loop: asking again does not scrape it again.
// Was wrong: every question about an unlabelled pod scraped it anew.
func TestPodByNameScrapedOnce(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	clk := testclock.NewFakePassiveClock(now)
	bare := pod("bare", nil, true, true, nil)
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	if err := idx.Add(bare); err != nil {
		t.Fatal(err)
	}
	empty := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	st := store.New()
	prober := &storeProber{st: st, at: now}
	tr := targets.New(targets.Config{DemandTTL: time.Hour, FirstScrapeTimeout: time.Second, Resync: time.Second},
		corelisters.NewPodLister(idx), struct {
			targets.Setter
			targets.Prober
		}{nopSetter{}, prober}, st, clk)
	prov := New(Config{MaxAge: 15 * time.Second, Window: 5 * time.Second},
		Listers{Pods: corelisters.NewPodLister(idx), Deployments: appslisters.NewDeploymentLister(empty), StatefulSets: appslisters.NewStatefulSetLister(empty)},
		st, tr, clk)
	srv := httptest.NewServer(handler(t, prov))
	t.Cleanup(srv.Close)

	for i := range 3 {
		code, body := get(t, srv, inNS+"pods/bare/inference_queue_size")
		if code != 200 {
			t.Fatalf("question %d: status %d: %s", i, code, body)
		}
		tr.Reconcile() // the background loop; it drops the values of pods that are no target
	}
	if prober.count != 1 {
		t.Fatalf("%d on-demand scrapes for 3 questions, want 1", prober.count)
	}
}

// quantityBack is what a client reads back from the JSON of quantity(v).
func quantityBack(t *testing.T, v float64) (float64, bool) {
	t.Helper()
	q, ok := quantity(v)
	if !ok {
		return 0, false
	}
	b, err := json.Marshal(q)
	if err != nil {
		t.Fatalf("marshal %g: %v", v, err)
	}
	var back resource.Quantity
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("%g served as %s, which does not parse: %v", v, b, err)
	}
	return back.AsApproximateFloat64(), true
}

// Property: every finite value is served with its sign, finite, and within
// relative 1e-3 (or 0.001 absolute); non-finite values are refused.
// Was wrong: a value of about 9.2e15 or more overflowed to a negative quantity.
func TestQuantityKeepsSignAndPrecision(t *testing.T) {
	check := func(v float64) bool {
		back, ok := quantityBack(t, v)
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return !ok
		}
		if !ok || math.IsNaN(back) || math.IsInf(back, 0) {
			return false
		}
		if (v > 0 && back < 0) || (v < 0 && back > 0) {
			return false
		}
		return math.Abs(back-v) <= max(1e-3*math.Abs(v), 0.001)
	}
	seeds := []float64{0, 1, -1, 0.0004, 0.0005, -0.0005, 0.4213, 3, 9.2e15, 9.223372036854775e15, 9.3e15, -9.3e15, 1e16,
		9.999999999999999e15, 1.5e17, 9.3e18, 1e19, 1e300, -1e300, math.MaxFloat64, -math.MaxFloat64, math.SmallestNonzeroFloat64,
		math.MaxInt64, math.Nextafter(9e15, 0), 9e15, math.NaN(), math.Inf(1), math.Inf(-1)}
	for _, v := range seeds {
		if !check(v) {
			back, ok := quantityBack(t, v)
			t.Errorf("%g served as %g (ok %v)", v, back, ok)
		}
	}
	// Values spread over every exponent, not only the large ones
	// quick draws for a float64.
	r := rand.New(rand.NewPCG(1, 2))
	cfg := &quick.Config{MaxCount: 20000}
	if err := quick.Check(func(bits uint64) bool { return check(math.Float64frombits(bits)) }, cfg); err != nil {
		t.Error(err)
	}
	for range 20000 {
		v := (r.Float64()*2 - 1) * math.Pow(10, float64(r.IntN(40)-10))
		if !check(v) {
			back, _ := quantityBack(t, v)
			t.Fatalf("%g served as %g", v, back)
		}
	}
}

// fakeValues serves fixed samples per pod.
type fakeValues map[string]store.Sample

func (f fakeValues) Get(pod types.NamespacedName, _ catalog.Signal, _ store.ModelMatcher, _ time.Time, _ time.Duration) store.Sample {
	if s, ok := f[pod.Name]; ok {
		return s
	}
	return store.Sample{Status: store.NotScraped}
}

func (f fakeValues) Scraped(pod types.NamespacedName) bool { _, ok := f[pod.Name]; return ok }

// A value beyond int64 milli range is served positive, and a sum over pods
// that overflows is a 404 saying the value is out of range.
// Was wrong: such a value was served negative, and the overflowing sum as +Inf.
func TestHugeValuesServedPositive(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	at := now.Add(-time.Second)
	vals := fakeValues{
		"big":   {Value: 1e16, Time: at, Status: store.OK},
		"huge1": {Value: math.MaxFloat64, Time: at, Status: store.OK},
		"huge2": {Value: math.MaxFloat64, Time: at, Status: store.OK},
	}
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	di := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, p := range []*corev1.Pod{pod("big", map[string]string{"app": "big"}, true, true, nil), pod("huge1", map[string]string{"app": "huge"}, true, true, nil), pod("huge2", map[string]string{"app": "huge"}, true, true, nil)} {
		if err := idx.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := di.Add(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "huge"}, Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "huge"}}}}); err != nil {
		t.Fatal(err)
	}
	prov := New(Config{MaxAge: 15 * time.Second, Window: 5 * time.Second},
		Listers{Pods: corelisters.NewPodLister(idx), Deployments: appslisters.NewDeploymentLister(di), StatefulSets: appslisters.NewStatefulSetLister(di)},
		vals, &recordingDemand{}, testclock.NewFakePassiveClock(now))
	srv := httptest.NewServer(handler(t, prov))
	t.Cleanup(srv.Close)

	code, body := get(t, srv, inNS+"pods/big/inference_queue_size")
	if code != 200 {
		t.Fatalf("status %d: %s", code, body)
	}
	var q resource.Quantity
	if err := q.UnmarshalJSON([]byte(`"` + itemValues(t, body)["ns/big"] + `"`)); err != nil || q.AsApproximateFloat64() != 1e16 {
		t.Fatalf("1e16 served as %s (%v)", itemValues(t, body)["ns/big"], err)
	}
	code, body = get(t, srv, inNS+"deployments.apps/huge/inference_queue_size")
	if code != 404 || !strings.Contains(body, "out of range") {
		t.Fatalf("a sum overflowing to +Inf: status %d: %s", code, body)
	}
}

// Object values: a not-Ready pod with a fresh value counts, a not-Ready pod
// without one is left out, a Ready pod without one makes a 404 naming it.
// Was wrong: an overloaded pod failing readiness was dropped, understating load.
func TestObjectValueReadinessRule(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	fresh := now.Add(-time.Second)
	st := store.New()
	for name, q := range map[string]float64{"ready": 3, "overloaded": 10} {
		st.Record(types.NamespacedName{Namespace: "ns", Name: name}, fresh, page(model("m", q, 1, 0.5)), nil)
	}
	dep := func(name, app string) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}
	}
	srv, _ := newServer(t, fixture{now: now, store: st,
		pods: []*corev1.Pod{
			pod("ready", map[string]string{"app": "llm"}, true, true, nil),
			pod("overloaded", map[string]string{"app": "llm"}, true, false, nil),
			pod("loading", map[string]string{"app": "llm"}, true, false, nil),
			pod("silent", map[string]string{"app": "broken"}, true, true, nil),
			pod("busy", map[string]string{"app": "broken"}, true, false, nil),
		},
		deps: []*appsv1.Deployment{dep("llm", "llm"), dep("broken", "broken")},
	})
	code, body := get(t, srv, inNS+"deployments.apps/llm/inference_queue_size")
	if code != 200 || fmt.Sprint(itemValues(t, body)) != "map[ns/llm:13]" {
		t.Fatalf("status %d %s: want 13 (the not-Ready pod's load counts, the loading pod is left out)", code, body)
	}
	code, body = get(t, srv, inNS+"deployments.apps/broken/inference_queue_size")
	if code != 404 || !strings.Contains(body, "silent") {
		t.Fatalf("status %d %s: want a 404 naming the Ready pod without a value", code, body)
	}
}

// A pod whose IP a newer pod has taken is never served a value: the value
// at its address is the newer pod's.
// Was wrong: both were scraped at the shared IP, the older served the newer's page.
func TestShadowedPodHasNoValue(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	st := store.New()
	for _, n := range []string{"old", "young"} {
		st.Record(types.NamespacedName{Namespace: "ns", Name: n}, now.Add(-time.Second), page(model("m", 5, 1, 0.5)), nil)
	}
	srv, dem := newServer(t, fixture{now: now, store: st,
		pods: []*corev1.Pod{pod("old", map[string]string{"app": "llm"}, true, true, nil), pod("young", map[string]string{"app": "llm"}, true, true, nil)},
		deps: []*appsv1.Deployment{{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "llm"}, Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "llm"}}}}},
	})
	dem.shadowed = map[types.NamespacedName]types.NamespacedName{{Namespace: "ns", Name: "old"}: {Namespace: "ns", Name: "young"}}

	if code, body := get(t, srv, inNS+"pods/old/inference_queue_size"); code != 404 || !strings.Contains(body, "ns/young") {
		t.Fatalf("by name: status %d %s", code, body)
	}
	if code, body := get(t, srv, inNS+"pods/*/inference_queue_size?labelSelector=app%3Dllm"); code != 200 || fmt.Sprint(itemValues(t, body)) != "map[ns/young:5]" {
		t.Fatalf("by selector: status %d %s", code, body)
	}
	if code, body := get(t, srv, inNS+"deployments.apps/llm/inference_queue_size"); code != 200 || fmt.Sprint(itemValues(t, body)) != "map[ns/llm:5]" {
		t.Fatalf("object: status %d %s", code, body)
	}
}
