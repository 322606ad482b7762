// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/forecast"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/capacity"
)

// recordedProbe is a probe result shaped as the code trace's in
// docs/shootout.md: the capacity step (3.25 req/s per replica) had 0.25
// requests waiting and 2.7 running on average, 16% of the KV cache used,
// 3.2 completed requests and 93 output tokens per second.
func recordedProbe() *probeResult {
	f := func(v float64) *float64 { return &v }
	return &probeResult{
		How: "recorded",
		Steps: []capacity.Step{
			{Index: 0, Offered: 0.65, Pass: true, Throughput: 0.64, OutputTokens: 19, Server: capacity.Signals{Queue: f(0), Batch: f(0.4), KV: f(0.03)}},
			{Index: 1, Offered: 3.25, Pass: true, Throughput: 3.2, OutputTokens: 93, Server: capacity.Signals{Queue: f(0.25), Batch: f(2.7), KV: f(0.16)}},
			{Index: 2, Offered: 3.9, Pass: false, Throughput: 3.6, OutputTokens: 104, Server: capacity.Signals{Queue: f(4), Batch: f(3.1), KV: f(0.2)}},
		},
		Analysis: capacity.Analysis{Found: true, Capacity: 3.25, CapacityStep: 1, BestStep: -1, CheapestPerGood: -1},
	}
}

func TestSweepFlag(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		want    sweepList
		wantErr string
	}{
		{args: []string{"gpu=0.4,0.6,0.8,0.9"}, want: sweepList{{Family: "gpu", Targets: []string{"0.4", "0.6", "0.8", "0.9"}}}},
		{args: []string{"queue=1,2,3,5,probe", "fixed=1,2,4,8"}, want: sweepList{{Family: "queue", Targets: []string{"1", "2", "3", "5", "probe"}}, {Family: "fixed", Targets: []string{"1", "2", "4", "8"}}}},
		{args: []string{"gpu=0.6,0.8,0.9"}, wantErr: "3 targets; a sweep needs at least 4"},
		{args: []string{"gpu=0.6,0.8,0.9,probe"}, wantErr: "3 targets"},
		{args: []string{"cpu=1,2,3,4"}, wantErr: `unknown family "cpu"`},
		{args: []string{"gpu"}, wantErr: "want FAMILY=T1,T2"},
		{args: []string{"queue=1,2,x,4"}, wantErr: `target "x" is not a positive quantity`},
		{args: []string{"queue=1,2,0,4"}, wantErr: `target "0" is not a positive quantity`},
		{args: []string{"queue=1,2,2,4"}, wantErr: `target "2" given twice`},
		{args: []string{"fixed=1,2,3,probe"}, wantErr: "no probe-derived target"},
		{args: []string{"fixed=1,2,3,4.5"}, wantErr: "replica count"},
		{args: []string{"kv=0.1,0.2,0.3,0.4", "kv=0.5,0.6,0.7,0.8"}, wantErr: "family kv swept twice"},
		{args: []string{"forecast=1,2,3,4", "forecast-holt=1,2,3,4,probe"}, want: sweepList{{Family: "forecast", Targets: []string{"1", "2", "3", "4"}}, {Family: "forecast-holt", Targets: []string{"1", "2", "3", "4", "probe"}}}},
		{args: []string{"forecast-arima=1,2,3,4"}, wantErr: `--sweep "forecast-arima=1,2,3,4": unknown family "forecast-arima"`},
		{args: []string{"forecast-=1,2,3,4"}, wantErr: `unknown family "forecast-"`},
		{args: []string{"forecast=1,2,3,probe"}, wantErr: `--sweep "forecast=1,2,3,probe": 3 targets`},
		{args: []string{"forecast-envelope=1,2,-3,4"}, wantErr: `--sweep "forecast-envelope=1,2,-3,4": target "-3" is not a positive quantity`},
		{args: []string{"forecast-staffing=1,2,3,4", "forecast-staffing=5,6,7,8"}, wantErr: "family forecast-staffing swept twice"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			f, err := parseSweeps(tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, f); diff != "" {
				t.Errorf("sweeps (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSweepPolicies generates the policies of sweeps, the probe-derived
// targets from the recorded probe.
func TestSweepPolicies(t *testing.T) {
	f, err := parseSweeps([]string{"gpu=0.4,0.6,0.8,0.9", "demand=1,2,3,4,probe", "queue=0.5,1,3,5,probe", "batch=1,2,4,8,probe", "kv=0.05,0.1,0.2,0.4,probe",
		"rps=1,2,3,4,probe", "tokens=50,100,150,200,probe", "fixed=1,2,4,8"})
	if err != nil {
		t.Fatal(err)
	}
	pols, err := sweepPolicies(f, recordedProbe(), 8)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, p := range pols {
		got[p.Name] = family(p) + " " + p.metricText() + " " + p.targetText()
	}
	want := map[string]string{
		"gpu-400m": "gpu gpu_utilization 400m", "gpu-600m": "gpu gpu_utilization 600m", "gpu-800m": "gpu gpu_utilization 800m", "gpu-900m": "gpu gpu_utilization 900m",
		"demand-1": "demand object/inference_demand_per_replica 1 (Value)", "demand-2": "demand object/inference_demand_per_replica 2 (Value)",
		"demand-3": "demand object/inference_demand_per_replica 3 (Value)", "demand-4": "demand object/inference_demand_per_replica 4 (Value)",
		"demand-probe": "demand object/inference_demand_per_replica 2360m (Value)", // (0.25 + 2.7) × 0.8
		"queue-500m":   "queue inference_queue_size 500m", "queue-1": "queue inference_queue_size 1", "queue-3": "queue inference_queue_size 3", "queue-5": "queue inference_queue_size 5",
		"queue-probe": "queue inference_queue_size 200m", // 0.25 × 0.8
		"batch-1":     "batch inference_batch_size 1", "batch-2": "batch inference_batch_size 2", "batch-4": "batch inference_batch_size 4", "batch-8": "batch inference_batch_size 8",
		"batch-probe": "batch inference_batch_size 2160m", // 2.7 × 0.8
		"kv-50m":      "kv inference_kv_cache_usage 50m", "kv-100m": "kv inference_kv_cache_usage 100m", "kv-200m": "kv inference_kv_cache_usage 200m", "kv-400m": "kv inference_kv_cache_usage 400m",
		"kv-probe": "kv inference_kv_cache_usage 128m", // 0.16 × 0.8
		"rps-1":    "rps inference_requests_per_second 1", "rps-2": "rps inference_requests_per_second 2", "rps-3": "rps inference_requests_per_second 3", "rps-4": "rps inference_requests_per_second 4",
		"rps-probe": "rps inference_requests_per_second 2560m", // 3.2 × 0.8
		"tokens-50": "tokens inference_generation_tokens_per_second 50", "tokens-100": "tokens inference_generation_tokens_per_second 100",
		"tokens-150": "tokens inference_generation_tokens_per_second 150", "tokens-200": "tokens inference_generation_tokens_per_second 200",
		"tokens-probe": "tokens inference_generation_tokens_per_second 74400m", // 93 × 0.8
		"fixed-1":      "fixed  1 replicas", "fixed-2": "fixed  2 replicas", "fixed-4": "fixed  4 replicas", "fixed-8": "fixed  8 replicas",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("sweep policies (-want +got):\n%s", diff)
	}
	for _, p := range pols {
		if strings.HasSuffix(p.Name, "-probe") && !strings.Contains(p.Why, "at the SLO capacity (3.25 req/s per replica)") {
			t.Errorf("%s: why %q does not say where the target comes from", p.Name, p.Why)
		}
	}
	if err := checkNames(pols); err != nil {
		t.Error(err)
	}

	// Without a recorded probe the probe-derived policies wait for the
	// probe run on the trace.
	q, err := parseSweeps([]string{"queue=1,2,3,5,probe"})
	if err != nil {
		t.Fatal(err)
	}
	pending, err := sweepPolicies(q, nil, 8)
	if err != nil || len(pending) != 5 || pending[4].probeFamily != "queue" || pending[4].isHPA() {
		t.Fatalf("pending %+v (%v)", pending, err)
	}
	resolved, err := resolveProbePolicies(pending, recordedProbe(), newTiming(15, time.Minute), 8)
	if err != nil || resolved[4].targetText() != "200m" || resolved[4].probeFamily != "" || pending[4].probeFamily != "queue" {
		t.Errorf("resolved %+v (%v)", resolved, err)
	}
}

// TestProbeTargetRefused: what the probe did not measure is not made up.
func TestProbeTargetRefused(t *testing.T) {
	noQueue := recordedProbe()
	noQueue.Steps[1].Server.Queue = nil
	notFound := recordedProbe()
	notFound.Analysis = capacity.Analysis{CapacityStep: -1}
	for _, tc := range []struct {
		name  string
		fam   string
		probe *probeResult
		want  string
	}{
		{"gpu", "gpu", recordedProbe(), "does not measure the gpu signal"},
		{"no queue measured", "demand", noQueue, "did not measure the queue and batch at capacity"},
		{"no capacity", "queue", notFound, "found no capacity"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := probePolicy(tc.fam, tc.probe, 8)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "--sweep "+tc.fam+"=probe") {
				t.Errorf("error %v, want one naming --sweep %s=probe and %q", err, tc.fam, tc.want)
			}
		})
	}
}

// TestReadProbeFile reads the probe of a shootout report and a capacity
// report, and refuses another file.
func TestReadProbeFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, v any) string {
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	probe := recordedProbe()
	fromReport, err := readProbeFile(write("tr.json", report{Trace: "tr", Capacity: probe}))
	if err != nil || fromReport.Analysis.Capacity != 3.25 || len(fromReport.Steps) != 3 {
		t.Errorf("probe of a shootout report: %+v (%v)", fromReport, err)
	}
	fromCapacity, err := readProbeFile(write("capacity.json", capacity.Report{Steps: probe.Steps, Analysis: probe.Analysis}))
	if err != nil || fromCapacity.Analysis.CapacityStep != 1 {
		t.Errorf("probe of a capacity report: %+v (%v)", fromCapacity, err)
	}
	if p, err := probePolicy("batch", fromCapacity, 8); err != nil || p.targetText() != "2160m" {
		t.Errorf("batch target of the capacity report: %+v (%v)", p, err)
	}
	other := write("other.json", map[string]int{"x": 1})
	if _, err := readProbeFile(other); err == nil || !strings.Contains(err.Error(), other) {
		t.Errorf("a file without a probe: %v", err)
	}
}

func TestParseFlagsSweep(t *testing.T) {
	getenv := func(string) string { return "/bin" }
	cfg, err := parseArgs([]string{"--sweep", "queue=1,2,3,5", "--sweep", "fixed=1,2,4,8"}, getenv)
	if err != nil || len(cfg.pols) != 8 {
		t.Errorf("two sweeps: %d policies (%v), want 8 (and no default policy)", len(cfg.pols), err)
	}
	if _, err := parseArgs([]string{"--sweep", "queue=1,2,3,5", "--policies", "queue-3"}, getenv); err == nil || !strings.Contains(err.Error(), `"queue-3" is named twice`) {
		t.Errorf("a sweep's name in -policies: %v", err)
	}
	if _, err := parseArgs([]string{"--sweep", "queue=1,2,3"}, getenv); err == nil || !strings.Contains(err.Error(), "--sweep") {
		t.Errorf("a short sweep: %v", err)
	}
	probe := filepath.Join(t.TempDir(), "tr.json")
	raw, err := json.Marshal(report{Trace: "tr", Capacity: recordedProbe()})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(probe, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err = parseArgs([]string{"--trace", "a.csv", "--sweep", "batch=1,2,3,4,probe", "--probe-file", probe}, getenv)
	if err != nil || len(cfg.pols) != 5 || cfg.pols[4].targetText() != "2160m" {
		t.Errorf("--probe-file: %+v (%v), want batch-probe at 2160m", cfg.pols, err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--sweep", "batch=1,2,3,4,probe", "--probe-file", probe}, "give one --trace"},
		{[]string{"--trace", "a.csv", "--sweep", "batch=1,2,3,4", "--probe-file", probe}, "--probe-file is used only by"},
		{[]string{"--trace", "a.csv", "--sweep", "gpu=1,2,3,4,probe", "--probe-file", probe}, "does not measure the gpu signal"},
	} {
		if _, err := parseArgs(tc.args, getenv); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
}

// TestRecipePolicies: the recipe policies are the HPA the capacity probe
// writes for the recorded probe: the forecast at queue + batch at capacity
// (Value, no margin), the queue guard (at least 1), the recipe's scale-down
// window (max(300 s, 2 × the cold start)) for recipe, every policy's
// behavior for recipe-signal; the shootout's minReplicas for both.
func TestRecipePolicies(t *testing.T) {
	pending, err := selectPolicies(defaultPolicies(8), policyRecipe+","+policyRecipeSignal, 8)
	if err != nil {
		t.Fatal(err)
	}
	for _, cold := range []time.Duration{time.Minute, 4 * time.Minute} {
		resolved, err := resolveProbePolicies(pending, recordedProbe(), newTiming(15, cold), 8)
		if err != nil {
			t.Fatal(err)
		}
		wantWindow := int32(max(300, 2*cold.Seconds()))
		for _, p := range resolved {
			if p.Spec == nil || len(p.Spec.Metrics) != 2 {
				t.Fatalf("%s: spec %+v, want two metrics", p.Name, p.Spec)
			}
			f, g := p.Spec.Metrics[0], p.Spec.Metrics[1]
			if f.Object == nil || f.Object.Metric.Name != catalog.DemandForecastPerReplica || f.Object.Target.Value == nil || f.Object.Target.Value.String() != "2950m" || f.Object.DescribedObject != deploymentRef() {
				t.Errorf("%s: forecast metric %+v, want %s at 2950m (queue 0.25 + batch 2.7) on the fleet's Deployment", p.Name, f, catalog.DemandForecastPerReplica)
			}
			if g.Pods == nil || g.Pods.Metric.Name != metricQueue || g.Pods.Target.AverageValue == nil || g.Pods.Target.AverageValue.String() != "1" {
				t.Errorf("%s: guard %+v, want %s at 1 per pod", p.Name, g, metricQueue)
			}
			if p.Spec.MinReplicas != nil {
				t.Errorf("%s: minReplicas %d, want the shootout's", p.Name, *p.Spec.MinReplicas)
			}
			h := hpa(p, deploymentName, 1, 8, newTiming(1, cold))
			got := *h.Spec.Behavior.ScaleDown.StabilizationWindowSeconds
			switch p.Name {
			case policyRecipe:
				if got != wantWindow {
					t.Errorf("recipe, cold start %s: scale-down window %d s, want %d", cold, got, wantWindow)
				}
			case policyRecipeSignal:
				if got != *defaultBehavior().ScaleDown.StabilizationWindowSeconds {
					t.Errorf("recipe-signal: scale-down window %d s, want every policy's", got)
				}
			default:
				t.Errorf("unexpected policy %q", p.Name)
			}
		}
	}
	notFound := recordedProbe()
	notFound.Analysis = capacity.Analysis{CapacityStep: -1}
	if _, err := resolveProbePolicies(pending, notFound, newTiming(15, time.Minute), 8); err == nil || !strings.Contains(err.Error(), "no step met the SLOs") {
		t.Errorf("no capacity: error %v, want one saying no step met the SLOs", err)
	}
}

// TestGuidelinePolicies: batch-90pct and kv-80 are read from what a
// saturated replica reached in the probe (the largest step mean), not from
// max-num-seqs or a full cache, which the signal never reaches.
func TestGuidelinePolicies(t *testing.T) {
	pending, err := selectPolicies(defaultPolicies(8), policyBatch90+","+policyKV80, 8)
	if err != nil {
		t.Fatal(err)
	}
	resolved, err := resolveProbePolicies(pending, recordedProbe(), newTiming(15, time.Minute), 8)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct{ metric, target, fam string }{
		policyBatch90: {metricBatch, "2790m", "batch"}, // 0.9 × 3.1, step 2's batch
		policyKV80:    {metricKV, "160m", "kv"},        // 0.8 × 0.2
	}
	for _, p := range resolved {
		w := want[p.Name]
		if p.Metric != w.metric || p.targetText() != w.target || family(p) != w.fam || !strings.Contains(p.Why, "step 2") {
			t.Errorf("%s: metric %s target %s family %s why %q, want %s at %s (%s) naming step 2", p.Name, p.Metric, p.targetText(), family(p), p.Why, w.metric, w.target, w.fam)
		}
	}
	noKV := recordedProbe()
	for i := range noKV.Steps {
		noKV.Steps[i].Server.KV = nil
	}
	if _, err := resolveProbePolicies(pending, noKV, newTiming(15, time.Minute), 8); err == nil || !strings.Contains(err.Error(), "kv-80: the capacity probe measured no KV-cache usage") {
		t.Errorf("no KV measured: error %v, want one naming kv-80 and the KV-cache usage", err)
	}
}

// TestForecastFamilies: there is a forecast-METHOD family for every method
// the adapter's forecast has, and no other.
func TestForecastFamilies(t *testing.T) {
	want := map[string]bool{}
	for _, m := range forecast.Methods() {
		fam := familyForecast + "-" + string(m)
		want[fam] = true
		if got, ok := forecastMethod(fam); !ok || got != string(m) {
			t.Errorf("forecastMethod(%q) = %q, %v; want %q", fam, got, ok, m)
		}
	}
	for fam := range sweepFamilies {
		if strings.HasPrefix(fam, familyForecast+"-") && !want[fam] {
			t.Errorf("family %s names no forecast method (methods: %v)", fam, forecast.Methods())
		}
		delete(want, fam)
	}
	if len(want) > 0 {
		t.Errorf("no family for %v", want)
	}
	if m, ok := forecastMethod(familyForecast); !ok || m != "" {
		t.Errorf("forecastMethod(forecast) = %q, %v; want the adapter's default", m, ok)
	}
	for _, fam := range []string{"demand", "forecast-arima", "gpu"} {
		if _, ok := forecastMethod(fam); ok {
			t.Errorf("forecastMethod(%q) says it is a forecast family", fam)
		}
	}
}

// TestSweepForecastPolicies: the forecast families are the demand forecast
// alone, an Object metric on the fleet's Deployment at a Value, with the
// method's selector for forecast-METHOD; their probe-derived target is the
// recipe's (queue + batch at capacity, no margin), the same as the recipe
// policies run from the same probe.
func TestSweepForecastPolicies(t *testing.T) {
	f, err := parseSweeps([]string{"forecast=1,2,3,5,probe", "forecast-envelope=1,2,3,5,probe", "forecast-holt=0.5,1,2,4", "forecast-staffing=2,4,6,8,probe"})
	if err != nil {
		t.Fatal(err)
	}
	pols, err := sweepPolicies(f, recordedProbe(), 8)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkNames(pols); err != nil {
		t.Error(err)
	}
	got := map[string]string{}
	for _, p := range pols {
		if len(p.Spec.Metrics) != 1 {
			t.Fatalf("%s: %d metrics, want the forecast alone", p.Name, len(p.Spec.Metrics))
		}
		m := p.Spec.Metrics[0]
		method := "default"
		if sel := m.Object.Metric.Selector; sel != nil {
			method = sel.MatchLabels[catalog.ForecastMethodLabel]
		}
		if m.Object.DescribedObject != deploymentRef() {
			t.Errorf("%s: describedObject %+v, want the fleet's Deployment", p.Name, m.Object.DescribedObject)
		}
		got[p.Name] = family(p) + " " + p.metricText() + " " + p.targetText() + " " + method
	}
	const fc = "object/" + catalog.DemandForecastPerReplica
	want := map[string]string{
		"forecast-1": "forecast " + fc + " 1 (Value) default", "forecast-2": "forecast " + fc + " 2 (Value) default",
		"forecast-3": "forecast " + fc + " 3 (Value) default", "forecast-5": "forecast " + fc + " 5 (Value) default",
		"forecast-probe":          "forecast " + fc + " 2950m (Value) default", // 0.25 + 2.7, no margin
		"forecast-envelope-1":     "forecast-envelope " + fc + " 1 (Value) envelope",
		"forecast-envelope-2":     "forecast-envelope " + fc + " 2 (Value) envelope",
		"forecast-envelope-3":     "forecast-envelope " + fc + " 3 (Value) envelope",
		"forecast-envelope-5":     "forecast-envelope " + fc + " 5 (Value) envelope",
		"forecast-envelope-probe": "forecast-envelope " + fc + " 2950m (Value) envelope",
		"forecast-holt-500m":      "forecast-holt " + fc + " 500m (Value) holt",
		"forecast-holt-1":         "forecast-holt " + fc + " 1 (Value) holt",
		"forecast-holt-2":         "forecast-holt " + fc + " 2 (Value) holt",
		"forecast-holt-4":         "forecast-holt " + fc + " 4 (Value) holt",
		"forecast-staffing-2":     "forecast-staffing " + fc + " 2 (Value) staffing",
		"forecast-staffing-4":     "forecast-staffing " + fc + " 4 (Value) staffing",
		"forecast-staffing-6":     "forecast-staffing " + fc + " 6 (Value) staffing",
		"forecast-staffing-8":     "forecast-staffing " + fc + " 8 (Value) staffing",
		"forecast-staffing-probe": "forecast-staffing " + fc + " 2950m (Value) staffing",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("forecast sweep policies (-want +got):\n%s", diff)
	}

	// The probe-derived target is the recipe's forecast target.
	recipe, err := recipePolicy(policyRecipeSignal, recordedProbe(), newTiming(15, time.Minute), 8)
	if err != nil {
		t.Fatal(err)
	}
	recipeTarget := recipe.Spec.Metrics[0].Object.Target.Value.String()
	for _, p := range pols {
		if !strings.HasSuffix(p.Name, "-probe") {
			continue
		}
		if got := p.Spec.Metrics[0].Object.Target.Value.String(); got != recipeTarget {
			t.Errorf("%s: target %s, want the recipe's %s", p.Name, got, recipeTarget)
		}
		if !strings.Contains(p.Why, "the recipe's forecast target") || !strings.Contains(p.Why, "at the SLO capacity (3.25 req/s per replica)") || !strings.Contains(p.Why, "no margin") {
			t.Errorf("%s: why %q does not say where the target comes from", p.Name, p.Why)
		}
	}

	// The HPA the shootout creates keeps the method's selector, and the
	// forecast's Value target is not a rate: not scaled by the compression.
	var envelope policy
	for _, p := range pols {
		if p.Name == "forecast-envelope-3" {
			envelope = p
		}
	}
	h := hpa(envelope, deploymentName, 1, 8, newTiming(15, time.Minute))
	if m := h.Spec.Metrics[0].Object; m == nil || m.Metric.Selector == nil || m.Metric.Selector.MatchLabels[catalog.ForecastMethodLabel] != "envelope" || m.Target.Value.String() != "3" {
		t.Errorf("forecast-envelope-3's HPA metric %+v, want %s at 3 with the selector method=envelope", h.Spec.Metrics[0], catalog.DemandForecastPerReplica)
	}

	// Without a recorded probe the probe-derived policy waits for the probe
	// run on the trace, and gets the same target from it.
	pending, err := sweepPolicies(sweepList{{Family: "forecast-holt", Targets: []string{"1", "2", "3", "4", "probe"}}}, nil, 8)
	if err != nil || len(pending) != 5 || pending[4].probeFamily != "forecast-holt" || pending[4].isHPA() {
		t.Fatalf("pending %+v (%v)", pending, err)
	}
	resolved, err := resolveProbePolicies(pending, recordedProbe(), newTiming(15, time.Minute), 8)
	if err != nil || resolved[4].targetText() != "2950m (Value)" || resolved[4].Spec.Metrics[0].Object.Metric.Selector.MatchLabels[catalog.ForecastMethodLabel] != "holt" {
		t.Errorf("resolved %+v (%v)", resolved[4], err)
	}
}

// TestForecastProbeRefused: a forecast family's probe-derived target is
// refused, naming the sweep, when the probe found no capacity or did not
// measure the queue and batch there.
func TestForecastProbeRefused(t *testing.T) {
	noBatch := recordedProbe()
	noBatch.Steps[1].Server.Batch = nil
	notFound := recordedProbe()
	notFound.Analysis = capacity.Analysis{CapacityStep: -1}
	for _, tc := range []struct {
		name  string
		fam   string
		probe *probeResult
		want  string
	}{
		{"no batch measured", "forecast-holt", noBatch, "queue and batch size were not measured"},
		{"no capacity", "forecast", notFound, "found no capacity"},
		{"no probe", "forecast-envelope", nil, "found no capacity"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := probePolicy(tc.fam, tc.probe, 8)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "--sweep "+tc.fam+"=probe") {
				t.Errorf("error %v, want one naming --sweep %s=probe and %q", err, tc.fam, tc.want)
			}
		})
	}
}

// TestParseFlagsForecastSweep: the forecast families on the command line,
// with a recorded probe.
func TestParseFlagsForecastSweep(t *testing.T) {
	getenv := func(string) string { return "/bin" }
	probe := filepath.Join(t.TempDir(), "capacity.json")
	raw, err := json.Marshal(capacity.Report{Steps: recordedProbe().Steps, Analysis: recordedProbe().Analysis})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(probe, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := parseArgs([]string{"--trace", "a.csv", "--sweep", "forecast-envelope=1,2,3,5,probe", "--sweep", "forecast=1,2,3,5", "--probe-file", probe}, getenv)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.pols) != 9 || cfg.pols[4].Name != "forecast-envelope-probe" || cfg.pols[4].targetText() != "2950m (Value)" {
		t.Errorf("policies %+v, want 9 with forecast-envelope-probe at 2950m", cfg.pols)
	}
	if _, err := parseArgs([]string{"--sweep", "forecast-arima=1,2,3,4", "--sweep", "forecast=1,2"}, getenv); err == nil ||
		!strings.Contains(err.Error(), `unknown family "forecast-arima"`) || !strings.Contains(err.Error(), `"forecast=1,2": 2 targets`) {
		t.Errorf("two bad forecast sweeps: %v, want both named", err)
	}
}
