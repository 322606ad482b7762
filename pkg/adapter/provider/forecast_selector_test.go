// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package provider

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/forecast"
)

// askForecast asks the forecast of deployment llm with metricSelector.
func askForecast(f *forecastFixture, metricSelector labels.Selector) (value float64, windowSeconds int64, err error) {
	info := cmprovider.CustomMetricInfo{GroupResource: deploymentsGR, Namespaced: true, Metric: catalog.DemandForecastPerReplica}
	v, err := f.prov.GetMetricByName(context.Background(), types.NamespacedName{Namespace: "ns", Name: "llm"}, info, metricSelector)
	if err != nil {
		return 0, 0, err
	}
	if v.WindowSeconds == nil {
		f.t.Fatalf("%q: no windowSeconds", metricSelector)
	}
	return v.Value.AsApproximateFloat64(), *v.WindowSeconds, nil
}

func mustParse(t *testing.T, s string) labels.Selector {
	t.Helper()
	sel, err := labels.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return sel
}

// TestForecastSelectorSettingsRefused: each bad z or window is a 400 that
// names the key, the value and the range, asked both by name and by
// selector. A value a label cannot hold (z=-1) never passes the API
// server's parser; it is built unvalidated here to check the provider's
// own range.
func TestForecastSelectorSettingsRefused(t *testing.T) {
	f := newForecastFixture(t, time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC), DefaultForecastConfig(), "llm")
	unvalidated := func(k, v string) labels.Selector { return labels.SelectorFromValidatedSet(labels.Set{k: v}) }
	for _, tc := range []struct {
		name string
		sel  labels.Selector
		want []string
	}{
		{"z=-1", unvalidated("z", "-1"), []string{`z "-1"`, "from 0 to 10"}},
		{"z=11", mustParse(t, "z=11"), []string{`z "11"`, "from 0 to 10"}},
		{"z=abc", mustParse(t, "z=abc"), []string{`z "abc"`, "from 0 to 10"}},
		{"z=1e1", mustParse(t, "z=1e1"), []string{`z "1e1"`, "decimal number"}},
		{"z in (1,2)", mustParse(t, "z in (1,2)"), []string{`"z" must name one number from 0 to 10`, `z in (1,2)`}},
		{"z!=1", mustParse(t, "z!=1"), []string{`"z" must name one number`, `z!=1`}},
		{"window=0s", mustParse(t, "window=0s"), []string{`window "0s"`, "above 0 and at most the adapter's --forecast-window, 5m0s"}},
		{"window=10m", mustParse(t, "window=10m"), []string{`window "10m"`, "at most the adapter's --forecast-window, 5m0s"}},
		{"window=abc", mustParse(t, "window=abc"), []string{`window "abc"`, "a duration above 0"}},
		{"window in (1m,2m)", mustParse(t, "window in (1m,2m)"), []string{`"window" must name one duration above 0 and at most 5m0s`, `window in (1m,2m)`}},
		{"z with holt", mustParse(t, "method=holt,z=1"), []string{"z applies to method=staffing and auto only, not holt"}},
		{"z with envelope", mustParse(t, "method=envelope,z=1"), []string{"z applies to method=staffing and auto only, not envelope"}},
		{"window with envelope", mustParse(t, "method=envelope,window=2m"), []string{"window applies to method=holt, staffing and auto only, not envelope"}},
		{"floor=2", mustParse(t, "floor=2"), []string{`floor "2"`, "from 0 to 1", "largest demand of the last 15m0s"}},
		{"floor=-1", unvalidated("floor", "-1"), []string{`floor "-1"`, "from 0 to 1"}},
		{"floor=half", mustParse(t, "floor=half"), []string{`floor "half"`, "decimal number"}},
		{"floor in (0.1,0.2)", mustParse(t, "floor in (0.1,0.2)"), []string{`"floor" must name one number from 0 to 1`}},
		{"ratefloor=2m", mustParse(t, "ratefloor=2m"), []string{`ratefloor "2m"`, "from 0 to 1m0s", "largest arrival rate of the last 15m0s"}},
		{"ratefloor=-1s", unvalidated("ratefloor", "-1s"), []string{`ratefloor "-1s"`, "from 0 to 1m0s"}},
		{"ratefloor=1.5", mustParse(t, "ratefloor=1.5"), []string{`ratefloor "1.5"`, "such as 1500ms or 1.5s"}},
		{"ratefloor in (1s,2s)", mustParse(t, "ratefloor in (1s,2s)"), []string{`"ratefloor" must name one duration from 0 to 1m0s`}},
		{"an unknown key lists z, window, floor and ratefloor", mustParse(t, "team=x"), []string{`key "team"`, "method (envelope, holt, staffing or auto), z, window, floor, ratefloor, model_name and role"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			info := cmprovider.CustomMetricInfo{GroupResource: deploymentsGR, Namespaced: true, Metric: catalog.DemandForecastPerReplica}
			_, byName := f.prov.GetMetricByName(context.Background(), types.NamespacedName{Namespace: "ns", Name: "llm"}, info, tc.sel)
			_, bySelector := f.prov.GetMetricBySelector(context.Background(), "ns", labels.Everything(), info, tc.sel)
			for _, err := range []error{byName, bySelector} {
				if !apierrors.IsBadRequest(err) {
					t.Fatalf("%v, want a 400", err)
				}
				for _, want := range tc.want {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("%q does not say %q", err, want)
					}
				}
			}
		})
	}
}

// TestForecastSelectorSettings: on a history bursty for four minutes and
// steady (demand 10, one request finishing a second) in the last, z=0 is
// the demand itself, the default z more; window=1m reads only the steady
// minute (dispersion 1: 10 + z·√10) where the 5m window reads the bursts,
// and the answer's windowSeconds is the window read. The settings do not
// key the history: every question reads the same samples.
func TestForecastSelectorSettings(t *testing.T) {
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	f := newForecastFixture(t, start, DefaultForecastConfig(), "llm")
	f.addPod("a", "llm", time.Minute)
	at := func(i int) { f.clk.SetTime(start.Add(time.Duration(i) * 15 * time.Second)) }
	at(-1)
	f.scrape("a", 1, 1, 1, 15)
	for i := 0; i <= 20; i++ {
		at(i)
		q := 9.0 // demand 10 in the last minute (samples 16 to 20)
		if i < 16 {
			q = []float64{1, 19}[i%2] // 2 and 20 by turns
		}
		f.scrape("a", q, 1, 1, 15)
		if _, err := f.ask(catalog.DemandPerReplica, "llm", ""); err != nil {
			t.Fatalf("sample %d: %v", i, err)
		}
	}
	steady := 10 + forecast.DefaultZ*math.Sqrt(10)
	got := map[string]float64{}
	for _, tc := range []struct {
		selector   string
		wantWindow int64
		check      func(v float64) bool // the answer is a quantity in thousandths
		want       string
	}{
		{"z=0", 300, func(v float64) bool { return v == 10 }, "10, the demand itself"},
		{"method=staffing,z=0,window=1m", 60, func(v float64) bool { return v == 10 }, "10, the demand itself"},
		{"", 300, func(v float64) bool { return v > steady+1 }, "above 10 + 1.645·√10: the bursts' dispersion"},
		{"window=1m", 60, func(v float64) bool { return math.Abs(v-steady) < 0.001 }, "10 + 1.645·√10: the last minute is steady"},
		{"window=90s", 90, func(v float64) bool { return v > steady+1 }, "above 10 + 1.645·√10: 90 s reaches the last burst"},
		{"z=1,window==1m", 60, func(v float64) bool { return math.Abs(v-(10+math.Sqrt(10))) < 0.001 }, "10 + √10"},
		{"z in (0.5)", 300, func(v float64) bool { return v > 10 && v < got[""] }, "between the demand and the default z's"},
		{"method=holt,window=1m", 60, func(v float64) bool { return math.Abs(v-10) < 0.001 }, "10: holt over the steady minute"},
		{"method=holt", 300, func(v float64) bool { return math.Abs(v-10) > 0.01 }, "not 10: holt over the bursts"},
	} {
		v, w, err := askForecast(f, mustParse(t, tc.selector))
		if err != nil {
			t.Fatalf("%q: %v", tc.selector, err)
		}
		got[tc.selector] = v
		if !tc.check(v) {
			t.Errorf("%q: %g, want %s", tc.selector, v, tc.want)
		}
		if w != tc.wantWindow {
			t.Errorf("%q: windowSeconds %d, want %d", tc.selector, w, tc.wantWindow)
		}
	}
	if got["window=1m"] >= got[""] {
		t.Errorf("window=1m %g is not below the 5m window's %g", got["window=1m"], got[""])
	}
	// One history for every setting: the questions above added none of their own.
	if n := len(f.prov.histories.Series(forecast.Key{Namespace: "ns", Kind: "deployment", Name: "llm"}, f.clk.Now())); n != 21 {
		t.Errorf("%d samples in the workload's history, want 21", n)
	}

	// A window shorter than half the horizon's need: too short to forecast
	// from, and the 404 names the window read.
	_, _, err := askForecast(f, mustParse(t, "window=20s"))
	if !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), "in the last 20s") || !strings.Contains(err.Error(), "spanning at least 10s") {
		t.Errorf("window=20s: %v, want a 404 about the 20s window", err)
	}
}

// burstyThenSteady is a history, asked every 15 s from start, bursty
// (demand 2 and 20 by turns, one request finishing a second) for four
// minutes and steady at 10 in the last.
func burstyThenSteady(t testing.TB, start time.Time, cfg ForecastConfig) *forecastFixture {
	t.Helper()
	f := newForecastFixture(t, start, cfg, "llm")
	f.addPod("a", "llm", time.Minute)
	f.clk.SetTime(start.Add(-15 * time.Second))
	f.scrape("a", 1, 1, 1, 15)
	for i := 0; i <= 20; i++ {
		f.clk.SetTime(start.Add(time.Duration(i) * 15 * time.Second))
		q := 9.0
		if i < 16 {
			q = []float64{1, 19}[i%2]
		}
		f.scrape("a", q, 1, 1, 15)
		if _, err := f.ask(catalog.DemandPerReplica, "llm", ""); err != nil {
			t.Fatalf("sample %d: %v", i, err)
		}
	}
	return f
}

// TestForecastAuto: method=auto (by the selector or by default) is
// staffing while the bursts are in the history's span (the longer of the
// window and the floor window) and holt once they are not, or when the
// threshold is above their burstiness.
func TestForecastAuto(t *testing.T) {
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	byDefault := DefaultForecastConfig()
	steadySpan := DefaultForecastConfig()
	steadySpan.Window, steadySpan.FloorWindow = time.Minute, time.Minute
	staffingByFlag := steadySpan
	staffingByFlag.Method = forecast.Staffing
	high := DefaultForecastConfig()
	high.Bursty = 1000
	for _, tc := range []struct {
		name     string
		cfg      ForecastConfig
		selector string
		same     string // the selector whose answer auto's must equal
		// asked and chose are the method the selector (or the default)
		// asks for and the estimator that answers it, as counted.
		asked, chose forecast.Method
	}{
		{"bursts in the span: staffing", byDefault, "method=auto", "method=staffing", forecast.Auto, forecast.Staffing},
		{"auto is the default", byDefault, "", "method=staffing", forecast.Auto, forecast.Staffing},
		{"the default on a steady span: holt", steadySpan, "", "method=holt", forecast.Auto, forecast.Holt},
		{"--forecast-method staffing on a steady span", staffingByFlag, "", "method=staffing", forecast.Staffing, forecast.Staffing},
		{"z applies to auto's staffing", byDefault, "method=auto,z=0", "method=staffing,z=0", forecast.Auto, forecast.Staffing},
		{"a 1m span holds the steady minute only: holt", steadySpan, "method=auto", "method=holt", forecast.Auto, forecast.Holt},
		{"a threshold above the bursts': holt", high, "method=auto", "method=holt", forecast.Auto, forecast.Holt},
		{"auto's window is holt's", high, "method=auto,window=1m", "method=holt,window=1m", forecast.Auto, forecast.Holt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := burstyThenSteady(t, start, tc.cfg)
			v, _, err := askForecast(f, mustParse(t, tc.selector))
			if err != nil {
				t.Fatal(err)
			}
			want, _, err := askForecast(f, mustParse(t, tc.same))
			if err != nil {
				t.Fatal(err)
			}
			if v != want {
				t.Errorf("%q: %g, want %q's %g", tc.selector, v, tc.same, want)
			}
			// inference_metrics_adapter_forecasts_total counts each answer
			// by the method asked and the estimator that made it.
			counts := map[[2]forecast.Method]float64{{tc.asked, tc.chose}: 1}
			counts[[2]forecast.Method{tc.chose, tc.chose}]++
			for _, series := range [][2]forecast.Method{
				{forecast.Auto, forecast.Holt}, {forecast.Auto, forecast.Staffing},
				{forecast.Holt, forecast.Holt}, {forecast.Staffing, forecast.Staffing}, {forecast.Envelope, forecast.Envelope},
			} {
				if got := testutil.ToFloat64(f.prov.forecasts.WithLabelValues(string(series[0]), string(series[1]))); got != counts[series] {
					t.Errorf("forecasts_total{method=%q,estimator=%q} = %g, want %g", series[0], series[1], got, counts[series])
				}
			}
		})
	}
	// The two methods differ on this history, so the equalities above
	// tell which one auto chose.
	f := burstyThenSteady(t, start, byDefault)
	s, _, errS := askForecast(f, mustParse(t, "method=staffing"))
	h, _, errH := askForecast(f, mustParse(t, "method=holt"))
	if errS != nil || errH != nil || math.Abs(s-h) < 1 {
		t.Errorf("staffing %g (%v) and holt %g (%v): want apart by at least 1", s, errS, h, errH)
	}
}

// TestForecastFloor: on a history bursty (demand 2 and 20 by turns) for
// four minutes and steady at 10 in the last, one request completing a
// second, the floor is a share of the largest demand in the floor's window
// and the rate floor the largest arrival rate there times a time in system
// (the bursts' rises from 2 to 20 bring 15 + 18 = 33 arrivals in 15 s, 2.2
// a second; the steady minute 1 a second), for every method, set by the
// metric selector or by the adapter's default; a floor window that holds
// only the steady minute reads only it.
func TestForecastFloor(t *testing.T) {
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	byDefault := DefaultForecastConfig()
	floored := DefaultForecastConfig()
	floored.Floor = 0.75
	rateByFlag := DefaultForecastConfig()
	rateByFlag.RateFloor = 5 * time.Second
	short := DefaultForecastConfig()
	short.FloorWindow = time.Minute
	for _, tc := range []struct {
		name     string
		cfg      ForecastConfig
		selector string
		want     float64
	}{
		{"no floor by default: the demand", byDefault, "z=0", 10},
		{"ratefloor=10s: 2.2 a second for 10 s", byDefault, "z=0,ratefloor=10s", 22},
		{"ratefloor=1s: 2.2, below the demand", byDefault, "z=0,ratefloor=1s", 10},
		{"holt held at the rate floor", byDefault, "method=holt,window=1m,ratefloor=20s", 44},
		{"envelope held at the rate floor", byDefault, "method=envelope,ratefloor=20s", 44},
		{"floor=1 and ratefloor=5s: the larger", byDefault, "z=0,floor=1,ratefloor=5s", 20},
		{"--forecast-rate-floor 5s", rateByFlag, "z=0", 11},
		{"the selector's ratefloor=0 over the flag's", rateByFlag, "z=0,ratefloor=0", 10},
		{"a 1m floor window holds the steady minute's 1 a second only", short, "z=0,ratefloor=20s", 20},
		{"floor=1: the bursts' 20", byDefault, "z=0,floor=1", 20},
		{"floor=0.25: 5, below the demand", byDefault, "z=0,floor=0.25", 10},
		{"holt floored", byDefault, "method=holt,window=1m,floor=0.9", 18},
		{"envelope floored", byDefault, "method=envelope,floor=1", 20},
		{"--forecast-floor 0.75", floored, "z=0", 15},
		{"the selector's floor=0 over the flag's", floored, "z=0,floor=0", 10},
		{"a 1m floor window holds the steady minute only", short, "z=0,floor=1", 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := burstyThenSteady(t, start, tc.cfg)
			v, _, err := askForecast(f, mustParse(t, tc.selector))
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(v-tc.want) > 0.001 {
				t.Errorf("%q: %g, want %g", tc.selector, v, tc.want)
			}
		})
	}
}
