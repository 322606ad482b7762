// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"maps"
	"strings"
	"testing"
	"time"
)

// TestParseForecastCounts: the counter's series are read from a page that
// holds many others, by METHOD/ESTIMATOR; a page without it, or with a
// malformed line of it, is an error.
func TestParseForecastCounts(t *testing.T) {
	const other = "# HELP apiserver_request_total x\n# TYPE apiserver_request_total counter\napiserver_request_total{code=\"200\"} 5\n"
	const own = "# HELP inference_metrics_adapter_forecasts_total Forecasts.\n# TYPE inference_metrics_adapter_forecasts_total counter\n" +
		"inference_metrics_adapter_forecasts_total{estimator=\"holt\",method=\"auto\"} 7\n" +
		"inference_metrics_adapter_forecasts_total{estimator=\"staffing\",method=\"auto\"} 3\n" +
		"inference_metrics_adapter_forecasts_total{estimator=\"envelope\",method=\"envelope\"} 0\n"
	for _, tc := range []struct {
		name, page string
		want       map[string]float64
		wantErr    string
	}{
		{"among other series", other + own + "inference_metrics_adapter_forecasts_totally 9\n", map[string]float64{"auto/holt": 7, "auto/staffing": 3, "envelope/envelope": 0}, ""},
		{"an adapter without the counter", other, nil, "has no inference_metrics_adapter_forecasts_total"},
		{"a malformed line", own + "inference_metrics_adapter_forecasts_total{method=\"auto\"} x\n", nil, "parse inference_metrics_adapter_forecasts_total"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseForecastCounts([]byte(tc.page))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !maps.Equal(got, tc.want) {
				t.Errorf("%v (%v), want %v", got, err, tc.want)
			}
		})
	}
}

// TestCountsSince: the growth of each series since the previous read, the
// series that grew only; one that fell (the adapter restarted) counts from
// zero; nothing grown is nil.
func TestCountsSince(t *testing.T) {
	for _, tc := range []struct {
		name        string
		now, before map[string]float64
		want        map[string]int
	}{
		{"grew", map[string]float64{"auto/holt": 9, "auto/staffing": 3}, map[string]float64{"auto/holt": 7, "auto/staffing": 3}, map[string]int{"auto/holt": 2}},
		{"a new series", map[string]float64{"auto/holt": 1}, map[string]float64{}, map[string]int{"auto/holt": 1}},
		{"a restart", map[string]float64{"auto/holt": 2}, map[string]float64{"auto/holt": 40}, map[string]int{"auto/holt": 2}},
		{"nothing", map[string]float64{"auto/holt": 2}, map[string]float64{"auto/holt": 2}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := countsSince(tc.now, tc.before)
			if !maps.Equal(got, tc.want) || (tc.want == nil) != (got == nil) {
				t.Errorf("%v, want %v", got, tc.want)
			}
		})
	}
}

// TestForecastsInReport: the samples' counts after the warm-up are summed
// into the run's summary and printed per run as shares; a run without
// counts prints nothing.
func TestForecastsInReport(t *testing.T) {
	slo := SLO{TTFT: 2 * time.Second, TPOT: 100 * ms}
	samples := []Sample{
		{T: 0, Replicas: 1, Ready: 1, Desired: 1, Forecasts: map[string]int{"auto/staffing": 50}},
		{T: 10 * time.Minute, Replicas: 1, Ready: 1, Desired: 1, Forecasts: map[string]int{"auto/holt": 3}},
		{T: 20 * time.Minute, Replicas: 1, Ready: 1, Desired: 1},
		{T: 30 * time.Minute, Replicas: 1, Ready: 1, Desired: 1, Forecasts: map[string]int{"auto/holt": 3, "auto/staffing": 2}},
	}
	recs := []Record{{Sent: 15 * time.Minute, OutputTokens: 1, Tokens: 1, TTFT: time.Second, E2E: time.Second}}
	sc := scoring{SLO: slo, Warmup: 5 * time.Minute}
	recipe := policy{Name: "recipe", Metric: metricQueue, Target: "3"}
	fixed := policy{Name: "fixed-2", Fixed: 2}
	r := report{Trace: "tr", SLO: slo, Warmup: sc.Warmup, Timing: newTiming(15, time.Minute), MaxReplicas: 8, Runs: []runResult{
		{Policy: recipe, Repeat: 1, Summary: summarize(recipe.Name, "tr", sc, recs, samples)},
		{Policy: fixed, Repeat: 1, Summary: summarize(fixed.Name, "tr", sc, recs, samples[2:3])},
	}}
	if got, want := r.Runs[0].Summary.Forecasts, map[string]int{"auto/holt": 6, "auto/staffing": 2}; !maps.Equal(got, want) {
		t.Errorf("forecasts after the warm-up %v, want %v (the warm-up's 50 left out)", got, want)
	}
	if r.Runs[1].Summary.Forecasts != nil {
		t.Errorf("a run without counts: %v, want none", r.Runs[1].Summary.Forecasts)
	}
	md := r.markdown()
	if want := "by method/estimator (for auto, the estimator it chose): recipe #1 auto/holt 75%, auto/staffing 25% of 8.\n"; !strings.Contains(md, want) {
		t.Errorf("markdown lacks %q:\n%s", want, md)
	}
	if strings.Contains(md, "fixed-2 #1 auto") {
		t.Errorf("markdown names forecasts for the fixed fleet:\n%s", md)
	}
}
