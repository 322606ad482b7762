// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/forecast"
)

// term parses one short-syntax term or fails the test.
func term(t *testing.T, s string) autoscalingv2.MetricSpec {
	t.Helper()
	m, err := parseTerm(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestRecommend checks the HPA's rule per metric kind and target type:
// which replica count it multiplies by, the rounding up, and what it does
// not compute.
func TestRecommend(t *testing.T) {
	n := fleetCounts{Ready: 4, Current: 6}
	util := int32(80)
	for _, tc := range []struct {
		name   string
		metric autoscalingv2.MetricSpec
		value  float64
		want   int
		ok     bool
	}{
		{"pods average value × Ready", term(t, "pods/inference_queue_size:3"), 5, 7, true}, // 5×4/3 = 6.67
		{"pods exact stays", term(t, "pods/inference_queue_size:3"), 6, 8, true},
		{"pods floating point hair above a whole number", term(t, "pods/gpu_utilization:0.1"), 0.3, 12, true}, // 0.3×4/0.1
		{"object value × Ready", term(t, "object/inference_demand_per_replica:3"), 5, 7, true},
		{"object average value × Current", term(t, "object-avg/inference_queue_size:3"), 5, 10, true}, // 5×6/3
		{"external value × Ready", term(t, "external/inference_queue_size:2"), 1, 2, true},
		{"external average value × Current", term(t, "external-avg/inference_queue_size:2"), 1, 3, true},
		{"zero value", term(t, "pods/inference_queue_size:3"), 0, 0, true},
		{"NaN value", term(t, "pods/inference_queue_size:3"), math.NaN(), 0, false},
		{"resource metric not run", autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: "cpu",
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: &util}}}, 90, 0, false},
		{"utilization target on a pods metric", autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: "x"}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: &util}}}, 90, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := recommend(tc.metric, tc.value, n)
			if ok != tc.ok || (ok && got != tc.want) {
				t.Errorf("recommend(%s, %g) = %d, %v; want %d, %v", metricKey(tc.metric), tc.value, got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestClampReplicas bounds a recommendation by minReplicas and maxReplicas.
func TestClampReplicas(t *testing.T) {
	for _, tc := range []struct{ n, lo, hi, want int }{
		{0, 1, 8, 1}, {5, 1, 8, 5}, {12, 1, 8, 8}, {1, 2, 8, 2}, {8, 1, 8, 8},
	} {
		if got := clampReplicas(tc.n, tc.lo, tc.hi); got != tc.want {
			t.Errorf("clampReplicas(%d, %d, %d) = %d, want %d", tc.n, tc.lo, tc.hi, got, tc.want)
		}
	}
}

// TestHPAReadsRecommendedClamped: hpaReads clamps each metric's
// recommendation to the HPA's bounds, and the sample's RecommendedMax is
// the largest only when every metric was read.
func TestHPAReadsRecommendedClamped(t *testing.T) {
	tm := newTiming(15, time.Minute)
	p, err := userPolicy("p", "inference_queue_size:1+inference_batch_size:10@min=2", 8)
	if err != nil {
		t.Fatal(err)
	}
	status := func(name, v string) autoscalingv2.MetricStatus {
		return autoscalingv2.MetricStatus{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricStatus{Metric: autoscalingv2.MetricIdentifier{Name: name},
			Current: autoscalingv2.MetricValueStatus{AverageValue: new(resource.MustParse(v))}}}
	}
	n := func(v int) *int { return &v }
	for _, tc := range []struct {
		name    string
		status  []autoscalingv2.MetricStatus
		want    []*int
		wantMax *int
	}{
		{"above max and below min", []autoscalingv2.MetricStatus{status("inference_queue_size", "30"), status("inference_batch_size", "1")}, []*int{n(8), n(2)}, n(8)},
		{"within bounds", []autoscalingv2.MetricStatus{status("inference_queue_size", "1500m"), status("inference_batch_size", "12")}, []*int{n(5), n(4)}, n(5)}, // 1.5×3/1, 12×3/10
		{"one unread: no max", []autoscalingv2.MetricStatus{status("inference_queue_size", "1")}, []*int{n(3), nil}, nil},
		{"none read", nil, []*int{nil, nil}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := hpa(p, deploymentName, 1, 8, tm)
			h.Status.CurrentMetrics = tc.status
			reads := hpaReads(h, tm, fleetCounts{Ready: 3, Current: 4})
			var got []*int
			for _, r := range reads {
				got = append(got, r.Recommended)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("recommended (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantMax, recommendedMax(reads)); diff != "" {
				t.Errorf("recommendedMax (-want +got):\n%s", diff)
			}
		})
	}
}

// TestHeldByWindow integrates the desired replicas above RecommendedMax
// after the warm-up, and gives no share without recommendations.
func TestHeldByWindow(t *testing.T) {
	n := func(v int) *int { return &v }
	at := func(min int, desired int, rec *int) Sample {
		return Sample{T: time.Duration(min) * time.Minute, Desired: desired, RecommendedMax: rec}
	}
	for _, tc := range []struct {
		name      string
		samples   []Sample
		from      time.Duration
		wantShare *float64
		wantHours float64
	}{
		{"none recommended", []Sample{at(0, 4, nil), at(60, 4, nil)}, 0, nil, 0},
		{"never held", []Sample{at(0, 4, n(4)), at(30, 4, n(5)), at(60, 5, n(5))}, 0, new(0.0), 0},
		// 3 above for 30 minutes, then 1 above for 30: 1.5 + 0.5 (the last
		// sample ends the integral).
		{"held", []Sample{at(0, 8, n(5)), at(30, 8, n(7)), at(60, 8, n(8))}, 0, new(2.0 / 3), 2},
		// From minute 30: the first sample is left out of the share and
		// the integral.
		{"after warm-up", []Sample{at(0, 8, n(5)), at(30, 8, n(7)), at(60, 8, n(8))}, 30 * time.Minute, new(0.5), 0.5},
		// A sample without a recommendation counts in neither.
		{"gap", []Sample{at(0, 8, n(6)), at(30, 8, nil), at(60, 8, n(8))}, 0, new(0.5), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			share, hours := heldByWindow(tc.samples, tc.from)
			if diff := cmp.Diff(tc.wantShare, share, cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) < 1e-9 })); diff != "" {
				t.Errorf("share (-want +got):\n%s", diff)
			}
			if math.Abs(hours-tc.wantHours) > 1e-9 {
				t.Errorf("hours %g, want %g", hours, tc.wantHours)
			}
		})
	}
	// summarize carries it, after the scoring's warm-up.
	s := summarize("p", "tr", scoring{Warmup: 30 * time.Minute}, nil, []Sample{at(0, 8, n(5)), at(30, 8, n(7)), at(60, 8, n(8))})
	if s.HeldByWindow == nil || *s.HeldByWindow != 0.5 || math.Abs(s.HeldReplicaHours-0.5) > 1e-9 {
		t.Errorf("summary held %v, %g; want 0.5, 0.5", s.HeldByWindow, s.HeldReplicaHours)
	}
	if !strings.Contains(heldText(s), "50% of samples, 0.50 replica-hours") {
		t.Errorf("heldText %q", heldText(s))
	}
}

// TestSampledDemand sums queue + batch as the adapter does: terminating
// pods left out, a starting pod without values adding nothing, a Ready
// pod without one making it unknown.
func TestSampledDemand(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	for _, tc := range []struct {
		name         string
		pods         []PodSample
		want         float64
		wantReplicas int
		ok           bool
	}{
		{"sum", []PodSample{{Ready: true, Queue: f(2), Batch: f(5)}, {Ready: true, Queue: f(0), Batch: f(3)}}, 10, 2, true},
		{"starting pod counts as a replica", []PodSample{{Ready: true, Queue: f(2), Batch: f(5)}, {}}, 7, 2, true},
		{"terminating left out", []PodSample{{Ready: true, Queue: f(2), Batch: f(5)}, {Ready: true, Terminating: true, Queue: f(9), Batch: f(9)}}, 7, 1, true},
		{"ready pod without batch", []PodSample{{Ready: true, Queue: f(2)}, {Ready: true, Queue: f(0), Batch: f(3)}}, 0, 2, false},
		{"none ready", []PodSample{{}, {}}, 0, 2, false},
		{"no pods", nil, 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, replicas, ok := sampledDemand(tc.pods)
			if ok != tc.ok || got != tc.want || replicas != tc.wantReplicas {
				t.Errorf("sampledDemand = %g, %d, %v; want %g, %d, %v", got, replicas, ok, tc.want, tc.wantReplicas, tc.ok)
			}
		})
	}
}

// TestStaffingDispersion: z from the selector or the default, only for
// the staffing forecast (or auto, which may be staffing), and the
// dispersion it implies.
func TestStaffingDispersion(t *testing.T) {
	withSel := func(labels map[string]string) autoscalingv2.MetricSpec {
		m := term(t, "object/"+catalog.DemandForecastPerReplica+":4")
		m.Object.Metric.Selector = &metav1.LabelSelector{MatchLabels: labels}
		return m
	}
	for _, tc := range []struct {
		name   string
		metric autoscalingv2.MetricSpec
		want   float64
		ok     bool
	}{
		{"default method and z", term(t, "object/"+catalog.DemandForecastPerReplica+":4"), forecast.DefaultZ, true},
		{"staffing with z", withSel(map[string]string{catalog.ForecastMethodLabel: "staffing", catalog.ForecastZLabel: "1"}), 1, true},
		{"auto", withSel(map[string]string{catalog.ForecastMethodLabel: "auto"}), forecast.DefaultZ, true},
		{"holt", withSel(map[string]string{catalog.ForecastMethodLabel: "holt"}), 0, false},
		{"bad z", withSel(map[string]string{catalog.ForecastZLabel: "x"}), 0, false},
		{"demand, not forecast", term(t, "object/"+catalog.DemandPerReplica+":4"), 0, false},
		{"object-avg forecast", term(t, "object-avg/"+catalog.DemandForecastPerReplica+":4"), 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			z, ok := staffingZ(tc.metric)
			if ok != tc.ok || z != tc.want {
				t.Errorf("staffingZ = %g, %v; want %g, %v", z, ok, tc.want, tc.ok)
			}
		})
	}
	// D = 16, z = 2, I = 4: F = 16 + 2·√64 = 32, over 4 replicas 8 each.
	if got, ok := impliedDispersion(8, 4, 16, 2); !ok || math.Abs(got-4) > 1e-9 {
		t.Errorf("impliedDispersion = %g, %v; want 4", got, ok)
	}
	for _, bad := range [][4]float64{{8, 4, 0, 2}, {3, 4, 16, 2}, {8, 0, 16, 2}} {
		if got, ok := impliedDispersion(bad[0], int(bad[1]), bad[2], bad[3]); ok {
			t.Errorf("impliedDispersion%v = %g, want none", bad, got)
		}
	}
	f := func(v float64) *float64 { return &v }
	s := Sample{Demand: f(16), HPA: []HPARead{{Metric: "object/" + catalog.DemandForecastPerReplica, Value: f(8)}},
		Pods: []PodSample{{Ready: true}, {Ready: true}, {Ready: true}, {}, {Terminating: true}}}
	got := sampleDispersion([]autoscalingv2.MetricSpec{withSel(map[string]string{catalog.ForecastZLabel: "2"})}, s)
	if got == nil || math.Abs(*got-4) > 1e-9 {
		t.Errorf("sampleDispersion = %v, want 4", got)
	}
	if got := sampleDispersion([]autoscalingv2.MetricSpec{term(t, "inference_queue_size:3")}, s); got != nil {
		t.Errorf("sampleDispersion without a staffing metric = %v, want none", *got)
	}
}

// TestOldReportLoads: a committed summary from before the recommendations
// loads, renders without the held line, and is written back without the
// new fields; its samples (none) give no held share.
func TestOldReportLoads(t *testing.T) {
	for _, path := range []string{
		"../../docs/shootout-runs/2026-12-02-code-part1/azure-llm-2023-code-summary.json",
		"../../docs/shootout-runs/2026-12-02-code-part5/azure-llm-2023-code-summary.json",
	} {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var r report
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(r.Runs) == 0 {
			t.Fatalf("%s: no runs", path)
		}
		md := r.markdown()
		if !strings.Contains(md, "| policy | repeat |") || strings.Contains(md, "Held by the scale-down window") {
			t.Errorf("%s: markdown without the runs' table or with a held line:\n%s", path, md)
		}
		for _, run := range r.Runs {
			if run.Summary.HeldByWindow != nil {
				t.Errorf("%s: %s has a held share", path, run.Policy.Name)
			}
			s := summarize(run.Policy.Name, r.Trace, r.scoring(), nil, run.Samples)
			if s.HeldByWindow != nil {
				t.Errorf("%s: %s resummarized has a held share", path, run.Policy.Name)
			}
		}
		out, err := json.Marshal(r.summaryOf())
		if err != nil {
			t.Fatal(err)
		}
		for _, field := range []string{`"heldByWindow"`, `"heldReplicaHours"`, `"recommendedMax"`, `"demand"`} {
			if strings.Contains(string(out), field) {
				t.Errorf("%s: written back with %s", path, field)
			}
		}
	}
}
