// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
)

// TestUserPolicyShapes parses the short syntax into every HPA shape.
func TestUserPolicyShapes(t *testing.T) {
	q := resource.MustParse
	object := func(name, target string, typ autoscalingv2.MetricTargetType) autoscalingv2.MetricSpec {
		v := q(target)
		mt := autoscalingv2.MetricTarget{Type: typ}
		if typ == autoscalingv2.ValueMetricType {
			mt.Value = &v
		} else {
			mt.AverageValue = &v
		}
		return autoscalingv2.MetricSpec{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricSource{
			DescribedObject: deploymentRef(), Metric: autoscalingv2.MetricIdentifier{Name: name}, Target: mt}}
	}
	external := func(name, target string, typ autoscalingv2.MetricTargetType) autoscalingv2.MetricSpec {
		m := object(name, target, typ)
		return autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: name, Selector: fleetSelector()}, Target: m.Object.Target}}
	}
	withDown := defaultBehavior()
	withDown.ScaleDown.StabilizationWindowSeconds = new(int32(60))
	withUp := defaultBehavior()
	withUp.ScaleUp.StabilizationWindowSeconds = new(int32(30))
	withUp.ScaleDown.StabilizationWindowSeconds = new(int32(600))
	withDown10m := defaultBehavior()
	withDown10m.ScaleDown.StabilizationWindowSeconds = new(int32(600))
	for _, tc := range []struct {
		def        string
		want       *autoscalingv2.HorizontalPodAutoscalerSpec // nil: the short form of old
		wantMetric string
		family     string
	}{
		{def: "inference_queue_size:3", wantMetric: metricQueue, family: "queue"},
		{def: "pods/gpu_utilization:0.6", wantMetric: metricGPU, family: "gpu"},
		{def: "inference_demand_per_replica:3", family: "demand",
			want: &autoscalingv2.HorizontalPodAutoscalerSpec{Metrics: []autoscalingv2.MetricSpec{object("inference_demand_per_replica", "3", autoscalingv2.ValueMetricType)}}},
		{def: "inference_demand_forecast_per_replica:3", family: "forecast",
			want: &autoscalingv2.HorizontalPodAutoscalerSpec{Metrics: []autoscalingv2.MetricSpec{object("inference_demand_forecast_per_replica", "3", autoscalingv2.ValueMetricType)}}},
		{def: "inference_demand_forecast_per_replica:2+inference_queue_size:4@down-window=10m", family: "forecast+queue",
			want: &autoscalingv2.HorizontalPodAutoscalerSpec{Metrics: []autoscalingv2.MetricSpec{object("inference_demand_forecast_per_replica", "2", autoscalingv2.ValueMetricType), podsMetric(metricQueue, q("4"))},
				Behavior: withDown10m}},
		{def: "object-avg/inference_queue_size:2", family: "queue",
			want: &autoscalingv2.HorizontalPodAutoscalerSpec{Metrics: []autoscalingv2.MetricSpec{object(metricQueue, "2", autoscalingv2.AverageValueMetricType)}}},
		{def: "external/inference_requests_per_second:10", family: "rate",
			want: &autoscalingv2.HorizontalPodAutoscalerSpec{Metrics: []autoscalingv2.MetricSpec{external("inference_requests_per_second", "10", autoscalingv2.ValueMetricType)}}},
		{def: "external-avg/inference_batch_size:2", family: "batch",
			want: &autoscalingv2.HorizontalPodAutoscalerSpec{Metrics: []autoscalingv2.MetricSpec{external(metricBatch, "2", autoscalingv2.AverageValueMetricType)}}},
		{def: "inference_queue_size:3+gpu_utilization:0.8", family: "queue+gpu",
			want: &autoscalingv2.HorizontalPodAutoscalerSpec{Metrics: []autoscalingv2.MetricSpec{podsMetric(metricQueue, q("3")), podsMetric(metricGPU, q("800m"))}}},
		{def: "inference_queue_size:3@down-window=60s", family: "queue",
			want: &autoscalingv2.HorizontalPodAutoscalerSpec{Metrics: []autoscalingv2.MetricSpec{podsMetric(metricQueue, q("3"))}, Behavior: withDown}},
		{def: "inference_demand_per_replica:2+inference_batch_size:2@up-window=30s@down-window=10m@min=2", family: "demand+batch",
			want: &autoscalingv2.HorizontalPodAutoscalerSpec{Metrics: []autoscalingv2.MetricSpec{object("inference_demand_per_replica", "2", autoscalingv2.ValueMetricType), podsMetric(metricBatch, q("2"))},
				Behavior: withUp, MinReplicas: new(int32(2))}},
	} {
		t.Run(tc.def, func(t *testing.T) {
			p, err := userPolicy("p", tc.def, 8)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == nil {
				if p.Spec != nil || p.Metric != tc.wantMetric {
					t.Errorf("policy %+v, want the short form on %s", p, tc.wantMetric)
				}
			} else {
				tc.want.ScaleTargetRef = deploymentRef()
				if diff := cmp.Diff(tc.want, p.Spec); diff != "" {
					t.Errorf("spec (-want +got):\n%s", diff)
				}
			}
			if got := family(p); got != tc.family {
				t.Errorf("family %q, want %q", got, tc.family)
			}
		})
	}
}

// TestUserPolicyRefused: every bad form is refused with a message naming it.
func TestUserPolicyRefused(t *testing.T) {
	for _, tc := range []struct{ def, want string }{
		{"inference_queue_size", "no ':'"},
		{"pods/inference_demand_per_replica:3", `pods do not serve "inference_demand_per_replica"`},
		{"object/inference_front_door_pending_requests:1", `does not serve "inference_front_door_pending_requests"`},
		{"external/inference_demand_per_replica:1", `no external metric "inference_demand_per_replica"`},
		{"pods/inference_demand_forecast_per_replica:3", `pods do not serve "inference_demand_forecast_per_replica"`},
		{"external/inference_demand_forecast_per_replica:1", `no external metric "inference_demand_forecast_per_replica"`},
		{"resource/cpu:1", `unknown kind "resource"`},
		{"inference_queue_size:-1", "positive quantity"},
		{"inference_queue_size:3+inference_queue_size:2", "pods/inference_queue_size given twice"},
		{"inference_queue_size:3@down-window=2h", `option "down-window=2h"`},
		{"inference_queue_size:3@down-window=1.5s", `option "down-window=1.5s"`},
		{"inference_queue_size:3@sideways=1", `unknown option "sideways"`},
		{"inference_queue_size:3@min", `option "min"`},
		{"inference_queue_size:3@min=9", "minReplicas <= maxReplicas <= 8"},
		{"fixed:0", "1 to 8 replicas"},
		{"+", "no ':'"},
	} {
		t.Run(tc.def, func(t *testing.T) {
			_, err := userPolicy("p", tc.def, 8)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `"p=`+tc.def+`"`) {
				t.Errorf("error %v, want one naming the policy and %q", err, tc.want)
			}
		})
	}
}

// TestHPACompresses: the HPA of a policy of any shape has the run's bounds
// unless the policy sets its own, its behavior seconds compressed, and its
// rate targets per wall-clock second.
func TestHPACompresses(t *testing.T) {
	tm := newTiming(15, time.Minute)
	p, err := userPolicy("p", "inference_demand_per_replica:3+inference_requests_per_second:2@down-window=60s@min=2", 8)
	if err != nil {
		t.Fatal(err)
	}
	h := hpa(p, deploymentName, 1, 8, tm)
	if *h.Spec.MinReplicas != 2 || h.Spec.MaxReplicas != 8 {
		t.Errorf("replicas %d to %d, want the policy's 2 to the run's 8", *h.Spec.MinReplicas, h.Spec.MaxReplicas)
	}
	if got := *h.Spec.Behavior.ScaleDown.StabilizationWindowSeconds; got != 4 {
		t.Errorf("scale-down window %ds wall, want 60s / 15 = 4s", got)
	}
	if got := h.Spec.Behavior.ScaleUp.Policies[0].PeriodSeconds; got != 1 {
		t.Errorf("scale-up period %ds wall, want 15s / 15 = 1s", got)
	}
	if got := h.Spec.Metrics[0].Object.Target.Value.String(); got != "3" {
		t.Errorf("demand target %s, want 3 (not a rate: unchanged)", got)
	}
	if got := h.Spec.Metrics[1].Pods.Target.AverageValue.String(); got != "30" {
		t.Errorf("rate target %s per wall-clock second, want 2 × 15 = 30", got)
	}
	// The policy itself is not changed.
	if got := p.Spec.Metrics[1].Pods.Target.AverageValue.String(); got != "2" || *p.Spec.Behavior.ScaleDown.StabilizationWindowSeconds != 60 {
		t.Errorf("the policy's spec was changed: target %s", got)
	}
	def := hpa(policy{Name: "q", Metric: metricQueue, Target: "3"}, deploymentName, 1, 8, tm)
	if *def.Spec.Behavior.ScaleDown.StabilizationWindowSeconds != 20 || *def.Spec.Behavior.ScaleUp.StabilizationWindowSeconds != 0 {
		t.Errorf("default behavior %+v, want windows 0 and 300/15", def.Spec.Behavior)
	}
}

// TestHPAReads maps an HPA's status back to its metrics, in the spec's
// order, rates per simulated second, an unread metric without a value.
func TestHPAReads(t *testing.T) {
	tm := newTiming(15, time.Minute)
	p, err := userPolicy("p", "inference_demand_per_replica:3+inference_requests_per_second:2+gpu_utilization:0.8", 8)
	if err != nil {
		t.Fatal(err)
	}
	h := hpa(p, deploymentName, 1, 8, tm)
	h.Status.CurrentMetrics = []autoscalingv2.MetricStatus{
		{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricStatus{Metric: autoscalingv2.MetricIdentifier{Name: "inference_requests_per_second"},
			Current: autoscalingv2.MetricValueStatus{AverageValue: new(resource.MustParse("45"))}}},
		{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricStatus{Metric: autoscalingv2.MetricIdentifier{Name: "inference_demand_per_replica"},
			Current: autoscalingv2.MetricValueStatus{Value: new(resource.MustParse("2500m"))}}},
	}
	got := hpaReads(h, tm, fleetCounts{Ready: 4, Current: 5})
	f := func(v float64) *float64 { return &v }
	n := func(v int) *int { return &v }
	// Recommended: 2.5 / 3 × 4 Ready → 4; 45 / (2 × 15) per wall second × 4
	// Ready → 6; the unread metric none.
	want := []HPARead{{Metric: "object/inference_demand_per_replica", Value: f(2.5), Recommended: n(4)},
		{Metric: "pods/inference_requests_per_second", Value: f(3), Recommended: n(6)}, {Metric: "pods/gpu_utilization"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("reads (-want +got):\n%s", diff)
	}
	s := summarize("p", "tr", scoring{}, nil, []Sample{{HPA: got}})
	if !s.MetricRead || !cmp.Equal(s.MetricsRead, []string{"object/inference_demand_per_replica", "pods/inference_requests_per_second"}) {
		t.Errorf("metrics read %v (%v)", s.MetricsRead, s.MetricRead)
	}
}

// TestPolicyFile reads each form of --policy-file and refuses bad ones,
// naming the file, the policy and what is wrong.
func TestPolicyFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	yamlFile := write("policies.yaml", `
policies:
- name: demand-3
  why: the cold-start-safe signal
  spec:
    metrics:
    - type: Object
      object:
        metric: {name: inference_demand_per_replica}
        target: {type: Value, value: "3"}
    behavior:
      scaleDown:
        stabilizationWindowSeconds: 120
        policies: [{type: Pods, value: 1, periodSeconds: 30}]
- name: queue-gpu
  spec:
    minReplicas: 2
    metrics:
    - {type: Pods, pods: {metric: {name: inference_queue_size}, target: {type: AverageValue, averageValue: "3"}}}
    - {type: Pods, pods: {metric: {name: gpu_utilization}, target: {type: AverageValue, averageValue: 600m}}}
`)
	pols, err := readPolicyFile(yamlFile, 8)
	if err != nil {
		t.Fatal(err)
	}
	if len(pols) != 2 || pols[0].Name != "demand-3" || family(pols[0]) != "demand" || family(pols[1]) != "queue+gpu" || pols[0].Why != "the cold-start-safe signal" {
		t.Fatalf("policies %+v", pols)
	}
	if d := pols[0].Spec.Metrics[0].Object.DescribedObject; d != deploymentRef() {
		t.Errorf("describedObject %+v, want the Deployment filled in", d)
	}
	h := hpa(pols[0], deploymentName, 1, 8, newTiming(15, time.Minute))
	if w := *h.Spec.Behavior.ScaleDown.StabilizationWindowSeconds; w != 8 || h.Spec.Behavior.ScaleDown.Policies[0].PeriodSeconds != 2 {
		t.Errorf("behavior %+v, want the file's 120 s window and 30 s period compressed ×15", h.Spec.Behavior.ScaleDown)
	}
	if *h.Spec.Behavior.ScaleUp.StabilizationWindowSeconds != 0 || len(h.Spec.Behavior.ScaleUp.Policies) != 2 {
		t.Errorf("scale-up %+v, want every policy's (the file sets only scale-down)", h.Spec.Behavior.ScaleUp)
	}

	// A report handed back gives its policies, each once.
	rep := report{Trace: "tr", Runs: []runResult{{Policy: pols[0], Repeat: 1}, {Policy: pols[1], Repeat: 1}, {Policy: pols[0], Repeat: 2},
		{Policy: policy{Name: "gpu-80", Metric: metricGPU, Target: "800m"}}, {Policy: policy{Name: "fixed-4", Fixed: 4}},
		{Policy: policy{Name: "oracle-1", Oracle: &oracle{Capacity: 1}}}}}
	raw, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	back, err := readPolicyFile(write("tr.json", string(raw)), 8)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]policy{pols[0], pols[1], rep.Runs[3].Policy, rep.Runs[4].Policy, rep.Runs[5].Policy}, back, cmp.AllowUnexported(policy{})); diff != "" {
		t.Errorf("policies of a report handed back (-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		name string
		p    policy
		want string
	}{
		{"oracle and fixed", policy{Name: "both", Fixed: 2, Oracle: &oracle{Capacity: 1}}, "give one of spec, metric, fixed and oracle"},
		{"oracle of no capacity", policy{Name: "o", Oracle: &oracle{}}, "capacity above 0"},
	} {
		raw, err := json.Marshal(report{Trace: "tr", Runs: []runResult{{Policy: tc.p}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := readPolicyFile(write("bad-report.json", string(raw)), 8); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one with %q", tc.name, err, tc.want)
		}
	}

	// An HPA of a cluster: its workload becomes the fleet.
	hpaFile := write("hpa.yaml", `
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: vllm, namespace: prod}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: vllm}
  minReplicas: 1
  maxReplicas: 8
  metrics:
  - type: Object
    object:
      describedObject: {apiVersion: apps/v1, kind: Deployment, name: vllm}
      metric: {name: inference_demand_per_replica}
      target: {type: Value, value: "4"}
`)
	got, err := readPolicyFile(hpaFile, 8)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Name != "vllm" || got[0].Spec.ScaleTargetRef != deploymentRef() || got[0].Spec.Metrics[0].Object.DescribedObject != deploymentRef() {
		t.Errorf("policy of an HPA: %+v", got)
	}

	// A List, as kubectl get hpa -A -o yaml writes it: the shootout's own
	// HPAs are named after their namespace.
	listFile := write("list.yaml", `
apiVersion: v1
kind: List
items:
- apiVersion: autoscaling/v2
  kind: HorizontalPodAutoscaler
  metadata: {name: model, namespace: shootout-queue-3}
  spec:
    maxReplicas: 8
    scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: model}
    metrics:
    - {type: Pods, pods: {metric: {name: inference_queue_size}, target: {type: AverageValue, averageValue: "3"}}}
`)
	if got, err := readPolicyFile(listFile, 8); err != nil || len(got) != 1 || got[0].Name != "queue-3" || family(got[0]) != "queue" {
		t.Errorf("policies of a List: %+v (%v), want queue-3", got, err)
	}

	for _, tc := range []struct{ name, text, want string }{
		{"unknown field", "policies:\n- name: x\n  spec: {metrics: [], sideways: 1}\n", `unknown field "sideways"`},
		{"no spec", "policies:\n- name: x\n", `policy 1 ("x"): no spec`},
		{"bad name", "policies:\n- name: X_1\n  spec: {metrics: [{type: Pods, pods: {metric: {name: inference_queue_size}, target: {type: AverageValue, averageValue: '1'}}}]}\n", `policy "X_1": the name`},
		{"no metrics", "policies:\n- name: x\n  spec: {maxReplicas: 4}\n", `policy "x": no metrics`},
		{"resource metric", "policies:\n- name: x\n  spec: {metrics: [{type: Resource, resource: {name: cpu, target: {type: Utilization, averageUtilization: 50}}}]}\n", `type "Resource" is not run`},
		{"utilization target", "policies:\n- name: x\n  spec: {metrics: [{type: Pods, pods: {metric: {name: gpu_utilization}, target: {type: Utilization, averageUtilization: 50}}}]}\n", `target type "Utilization"`},
		{"zero target", "policies:\n- name: x\n  spec: {metrics: [{type: Object, object: {metric: {name: inference_demand_per_replica}, target: {type: Value, value: '0'}}}]}\n", "positive quantity"},
		{"other object", "policies:\n- name: x\n  spec: {metrics: [{type: Object, object: {describedObject: {kind: Service, name: front, apiVersion: v1}, metric: {name: inference_front_door_pending_requests}, target: {type: Value, value: '1'}}}]}\n", "describedObject Service"},
		{"too many replicas", "policies:\n- name: x\n  spec: {maxReplicas: 20, metrics: [{type: Pods, pods: {metric: {name: inference_queue_size}, target: {type: AverageValue, averageValue: '1'}}}]}\n", "maxReplicas <= 8"},
		{"bad behavior", "policies:\n- name: x\n  spec: {behavior: {scaleDown: {stabilizationWindowSeconds: 7200}}, metrics: [{type: Pods, pods: {metric: {name: inference_queue_size}, target: {type: AverageValue, averageValue: '1'}}}]}\n", "behavior.scaleDown.stabilizationWindowSeconds 7200"},
		{"other workload", "policies:\n- name: x\n  spec: {scaleTargetRef: {kind: StatefulSet, name: db, apiVersion: apps/v1}, metrics: [{type: Pods, pods: {metric: {name: inference_queue_size}, target: {type: AverageValue, averageValue: '1'}}}]}\n", "scaleTargetRef StatefulSet"},
		{"something else", "kind: ConfigMap\n", "want {\"policies\""},
		{"not YAML", "policies: [\n", "not JSON or YAML"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := write(strings.ReplaceAll(tc.name, " ", "-")+".yaml", tc.text)
			_, err := readPolicyFile(path, 8)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("error %v, want one naming %s and %q", err, path, tc.want)
			}
		})
	}
}

// TestParseFlagsPolicySources: -policies defaults to none beside
// --policy-file or --sweep; --policy-file is repeatable, every file read in
// order; names are unique across the sources and the files.
func TestParseFlagsPolicySources(t *testing.T) {
	getenv := func(string) string { return "/bin" }
	dir := t.TempDir()
	file := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(file, []byte("policies:\n- name: queue-3\n  spec: {metrics: [{type: Pods, pods: {metric: {name: inference_queue_size}, target: {type: AverageValue, averageValue: '3'}}}]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := parseArgs([]string{"--policy-file", file}, getenv)
	if err != nil || len(cfg.pols) != 1 || cfg.pols[0].Name != "queue-3" {
		t.Errorf("--policy-file alone: %+v (%v), want its one policy", cfg.pols, err)
	}
	other := filepath.Join(dir, "q.yaml")
	if err := os.WriteFile(other, []byte("policies:\n- name: queue-1\n  spec: {metrics: [{type: Pods, pods: {metric: {name: inference_queue_size}, target: {type: AverageValue, averageValue: '1'}}}]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err = parseArgs([]string{"--policy-file", file, "--policy-file", other}, getenv)
	if err != nil || len(cfg.pols) != 2 || cfg.pols[0].Name != "queue-3" || cfg.pols[1].Name != "queue-1" {
		t.Errorf("--policy-file twice: %+v (%v), want both files' policies, in order", cfg.pols, err)
	}
	if _, err := parseArgs([]string{"--policy-file", file, "--policy-file", file}, getenv); err == nil || !strings.Contains(err.Error(), `"queue-3" is named twice`) {
		t.Errorf("one file given twice: %v, want its names refused as named twice", err)
	}
	if _, err := parseArgs([]string{"--policy-file", file, "--policies", "gpu-80,queue-3"}, getenv); err == nil || !strings.Contains(err.Error(), `"queue-3" is named twice`) {
		t.Errorf("a name in -policies and the file: %v, want it refused", err)
	}
	cfg, err = parseArgs([]string{"--policy-file", file, "--policies", "gpu-80", "--repeats", "1"}, getenv)
	if err != nil || len(cfg.pols) != 2 || cfg.repeats != 1 {
		t.Errorf("--policies and --policy-file: %d policies, %d repeats (%v)", len(cfg.pols), cfg.repeats, err)
	}
	if _, err := parseArgs([]string{"--repeats", "0"}, getenv); err == nil || !strings.Contains(err.Error(), "--repeats") {
		t.Errorf("--repeats 0: %v", err)
	}
	if _, err := parseArgs([]string{"--policies", "none"}, getenv); err == nil || !strings.Contains(err.Error(), "no policies") {
		t.Errorf("--policies none: %v", err)
	}
	if cfg, err := parseArgs([]string{"--seed", "7"}, getenv); err != nil || cfg.seed != 7 || cfg.repeats != 3 {
		t.Errorf("--seed 7: seed %d, repeats %d (%v), want 7 and the default 3", cfg.seed, cfg.repeats, err)
	}
	if cfg, err := parseArgs(nil, getenv); err != nil || cfg.seed == 0 {
		t.Errorf("no -seed: seed %d (%v), want one drawn from the clock", cfg.seed, err)
	}
}

// TestCommittedPolicyFile reads the policy file kept for the runs.
func TestCommittedPolicyFile(t *testing.T) {
	pols, err := readPolicyFile("policies/multi-metric.yaml", 8)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range pols {
		got = append(got, p.Name+" "+family(p)+" "+p.targetText())
	}
	want := []string{"queue-3-gpu-600m queue+gpu 3 + 600m", "demand-3-gpu-600m demand+gpu 3 (Value) + 600m", "queue-1-batch-2 queue+batch 1 + 2", "demand-3-down-2m demand 3 (Value)"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("policies (-want +got):\n%s", diff)
	}
	if w := *hpa(pols[3], deploymentName, 1, 8, newTiming(15, time.Minute)).Spec.Behavior.ScaleDown.StabilizationWindowSeconds; w != 8 {
		t.Errorf("demand-3-down-2m: scale-down window %ds wall, want 120 s / 15", w)
	}
}

// TestStatusKey: the key of a metric in an HPA's status is the key of the
// spec's metric it reports on, for every kind (the samples match them).
func TestStatusKey(t *testing.T) {
	id := autoscalingv2.MetricIdentifier{Name: catalog.DemandForecastPerReplica}
	for _, tc := range []struct {
		spec   autoscalingv2.MetricSpec
		status autoscalingv2.MetricStatus
		want   string
	}{
		{podsMetric(metricQueue, resource.MustParse("1")),
			autoscalingv2.MetricStatus{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricStatus{Metric: autoscalingv2.MetricIdentifier{Name: metricQueue}}},
			"pods/" + metricQueue},
		{autoscalingv2.MetricSpec{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricSource{Metric: id}},
			autoscalingv2.MetricStatus{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricStatus{Metric: id}},
			"object/" + catalog.DemandForecastPerReplica},
		{autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: metricKV}}},
			autoscalingv2.MetricStatus{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricStatus{Metric: autoscalingv2.MetricIdentifier{Name: metricKV}}},
			"external/" + metricKV},
		{autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType},
			autoscalingv2.MetricStatus{Type: autoscalingv2.ResourceMetricSourceType},
			"resource"},
	} {
		if got, spec := statusKey(tc.status), metricKey(tc.spec); got != tc.want || spec != tc.want {
			t.Errorf("statusKey %q, metricKey %q; want %q for both", got, spec, tc.want)
		}
	}
}

// forecastPolicy is a policy of one Object metric, the demand forecast,
// whose metric selector is sel.
func forecastPolicy(sel *metav1.LabelSelector) policy {
	v := resource.MustParse("2.951")
	return policy{Name: "fc", Spec: &autoscalingv2.HorizontalPodAutoscalerSpec{Metrics: []autoscalingv2.MetricSpec{{
		Type: autoscalingv2.ObjectMetricSourceType,
		Object: &autoscalingv2.ObjectMetricSource{
			DescribedObject: deploymentRef(),
			Metric:          autoscalingv2.MetricIdentifier{Name: catalog.DemandForecastPerReplica, Selector: sel},
			Target:          autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: &v},
		},
	}}}}
}

// TestForecastDurationsCompressed: the durations of the forecast's metric
// selector, simulated time in the policy, are wall-clock time in the HPA,
// label values the adapter parses: the window in whole milliseconds, the
// rate floor's time in system in whole microseconds, in matchLabels and
// matchExpressions, each beside the other keys (converted or left alone);
// the policy keeps what was written; a window the conversion makes shorter
// than the scrape interval, one over the forecast window, a rate floor past
// a minute and a value that is no duration are refused, naming policy and
// metric.
func TestForecastDurationsCompressed(t *testing.T) {
	const (
		window    = catalog.ForecastWindowLabel
		rateFloor = catalog.ForecastRateFloorLabel
	)
	for _, tc := range []struct {
		name     string
		key      string
		compress float64
		value    string
		want     string // the HPA's value; empty: refused
		err      string
	}{
		{"window 2m at ×15", window, 15, "2m", "8s", ""},
		{"window 90s at ×15", window, 15, "90s", "6s", ""},
		{"window 5m at ×15: the whole forecast window", window, 15, "5m", "20s", ""},
		{"window 1m at ×7: whole milliseconds", window, 7, "1m", "8.571s", ""},
		{"window 2m at ×1: unchanged", window, 1, "2m", "2m0s", ""},
		{"window 5s at ×15: the scrape interval", window, 15, "5s", "333ms", ""},
		{"window 4s at ×15: under the scrape interval", window, 15, "4s", "", "4s simulated is 267ms wall at compression ×15, shorter than the adapter's scrape interval (333.333333ms wall, 5s simulated)"},
		{"window over the forecast window", window, 15, "6m", "", "window 6m0s is over the adapter's forecast window, 5m0s simulated"},
		{"window not a duration", window, 15, "2", "", `window "2": want a positive Go duration in simulated time`},
		{"window zero", window, 15, "0s", "", `window "0s": want a positive Go duration`},
		{"rate floor 1131ms at ×15", rateFloor, 15, "1131ms", "75.4ms", ""},
		{"rate floor 1s at ×7: whole microseconds", rateFloor, 7, "1s", "142.857ms", ""},
		{"rate floor 0 stays 0", rateFloor, 15, "0", "0s", ""},
		{"rate floor 1.5s at ×1: unchanged", rateFloor, 1, "1.5s", "1.5s", ""},
		{"rate floor past a minute", rateFloor, 15, "2m", "", `ratefloor "2m": want a Go duration from 0 to 1m0s in simulated time`},
		{"rate floor not a duration", rateFloor, 15, "1.5", "", `ratefloor "1.5": want a Go duration`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tm := newTiming(tc.compress, time.Minute)
			labels := map[string]string{catalog.ForecastMethodLabel: "staffing", tc.key: tc.value}
			if tc.key != window {
				labels[window] = "5m"
			}
			for _, sel := range []*metav1.LabelSelector{
				{MatchLabels: labels},
				{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: tc.key, Operator: metav1.LabelSelectorOpIn, Values: []string{tc.value}}}},
			} {
				p := forecastPolicy(sel)
				err := checkForecastDurations(p, tm)
				if tc.want == "" {
					if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), `policy "fc": metric object/`+catalog.DemandForecastPerReplica) {
						t.Errorf("%v: %v, want an error naming the policy, the metric and saying %q", sel, err, tc.err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%v: %v", sel, err)
				}
				got := hpa(p, deploymentName, 1, 8, tm).Spec.Metrics[0].Object.Metric.Selector
				var wall string
				if got.MatchLabels != nil {
					wall = got.MatchLabels[tc.key]
					if m := got.MatchLabels[catalog.ForecastMethodLabel]; m != "staffing" {
						t.Errorf("method %q, want staffing unchanged", m)
					}
					if w, want := got.MatchLabels[window], tm.wall(5*time.Minute).Round(time.Millisecond).String(); tc.key != window && w != want {
						t.Errorf("the window beside it %q, want %q", w, want)
					}
				} else {
					wall = got.MatchExpressions[0].Values[0]
				}
				if wall != tc.want {
					t.Errorf("%v: the HPA's %s %q, want %q", sel, tc.key, wall, tc.want)
				}
				if errs := validation.IsValidLabelValue(wall); len(errs) > 0 {
					t.Errorf("%q is not a label value: %v", wall, errs)
				}
				if d, err := time.ParseDuration(wall); err != nil || (tc.key == window && d > tm.wall(tm.ForecastWindow)) {
					t.Errorf("%q: %v, or a window over the adapter's --forecast-window %s", wall, err, tm.wall(tm.ForecastWindow))
				}
				// The policy, which the report keeps, is as written.
				if back := p.Spec.Metrics[0].Object.Metric.Selector; back.MatchLabels[tc.key] != tc.value && (len(back.MatchExpressions) == 0 || back.MatchExpressions[0].Values[0] != tc.value) {
					t.Errorf("the policy's selector became %v", back)
				}
			}
		})
	}
	// Other metrics' selectors are not the forecast's: left alone.
	p := forecastPolicy(&metav1.LabelSelector{MatchLabels: map[string]string{window: "2m", rateFloor: "1s"}})
	p.Spec.Metrics[0].Object.Metric.Name = catalog.DemandPerReplica
	got := hpa(p, deploymentName, 1, 8, newTiming(15, time.Minute)).Spec.Metrics[0].Object.Metric.Selector.MatchLabels
	if got[window] != "2m" || got[rateFloor] != "1s" {
		t.Errorf("%s's selector became %v", catalog.DemandPerReplica, got)
	}
}

// TestCommittedForecastStaffingPolicyFile reads the policy file of the
// staffing settings' measurement (part 5): four policies, the recipe's
// targets, method=staffing with z and window; the windows compressed at
// the default ×15.
func TestCommittedForecastStaffingPolicyFile(t *testing.T) {
	pols, err := readPolicyFile("../../docs/shootout-runs/2026-12-02-code-part5/forecast-staffing.yaml", 8)
	if err != nil {
		t.Fatal(err)
	}
	tm := newTiming(15, time.Minute)
	var got []string
	for _, p := range pols {
		if err := checkForecastDurations(p, tm); err != nil {
			t.Errorf("%s: %v", p.Name, err)
		}
		h := hpa(p, deploymentName, 1, 8, tm)
		sel := h.Spec.Metrics[0].Object.Metric.Selector.MatchLabels
		got = append(got, fmt.Sprintf("%s %s %s max %d method=%s z=%s window=%s", p.Name, family(p), p.targetText(), h.Spec.MaxReplicas, sel["method"], sel["z"], sel["window"]))
	}
	want := []string{
		"st-z1 forecast-staffing-z1+queue 2.951 (Value) + 1 max 8 method=staffing z=1 window=",
		"st-z05 forecast-staffing-z0.5+queue 2.951 (Value) + 1 max 8 method=staffing z=0.5 window=",
		"st-w2m forecast-staffing-w2m+queue 2.951 (Value) + 1 max 8 method=staffing z= window=8s",
		"st-z1-w2m forecast-staffing-z1-w2m+queue 2.951 (Value) + 1 max 8 method=staffing z=1 window=8s",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("policies (-want +got):\n%s", diff)
	}
}

// TestSetUpRefusesForecastWindow: a forecast window the compression makes
// shorter than the scrape interval is refused before anything is built or
// started.
func TestSetUpRefusesForecastWindow(t *testing.T) {
	bad := forecastPolicy(&metav1.LabelSelector{MatchLabels: map[string]string{catalog.ForecastWindowLabel: "4s"}})
	e, err := setUp(t.Context(), config{pols: []policy{bad}}, newTiming(15, time.Minute), func(string, ...any) { t.Error("set-up started") })
	if e != nil || err == nil || !strings.Contains(err.Error(), "shorter than the adapter's scrape interval") {
		t.Errorf("env %v, %v; want nothing started and the window refused", e, err)
	}
}

// TestCommittedRateFloorPolicyFiles read the policy files of the rate
// floor's measurements (parts 67 and 68): the recipe with method=auto and
// the rate floor at the probe's time in system at capacity and at half of
// it, compressed at the default ×15.
func TestCommittedRateFloorPolicyFiles(t *testing.T) {
	for file, want := range map[string][]string{
		"2026-12-06-code-part67": {
			"recipe-ratefloor-905ms recipe+ratefloor 2.951 (Value) + 1 max 8 method=auto ratefloor=60.333ms down=20s",
			"recipe-ratefloor-453ms recipe+ratefloor 2.951 (Value) + 1 max 8 method=auto ratefloor=30.2ms down=20s",
		},
		"2026-12-06-conv-part68": {
			"recipe-ratefloor-3552ms recipe+ratefloor 16.195 (Value) + 1 max 8 method=auto ratefloor=236.8ms down=20s",
			"recipe-ratefloor-1776ms recipe+ratefloor 16.195 (Value) + 1 max 8 method=auto ratefloor=118.4ms down=20s",
		},
	} {
		pols, err := readPolicyFile("../../docs/shootout-runs/"+file+"/recipe-ratefloor.yaml", 8)
		if err != nil {
			t.Fatal(err)
		}
		tm := newTiming(15, time.Minute)
		var got []string
		for _, p := range pols {
			if err := checkForecastDurations(p, tm); err != nil {
				t.Errorf("%s: %v", p.Name, err)
			}
			h := hpa(p, deploymentName, 1, 8, tm)
			sel := h.Spec.Metrics[0].Object.Metric.Selector.MatchLabels
			got = append(got, fmt.Sprintf("%s %s %s max %d method=%s ratefloor=%s down=%ds", p.Name, family(p), p.targetText(), h.Spec.MaxReplicas, sel["method"], sel["ratefloor"], *h.Spec.Behavior.ScaleDown.StabilizationWindowSeconds))
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: policies (-want +got):\n%s", file, diff)
		}
	}
}

// TestHPALatencyTargets: a latency percentile (the simulator observes it
// in simulated time) keeps its target and its reads as written, in
// simulated seconds; its family is "latency".
func TestHPALatencyTargets(t *testing.T) {
	tm := newTiming(15, time.Minute)
	p, err := userPolicy("p", "inference_demand_per_replica:3+inference_inter_token_latency_p90_seconds:0.1", 8)
	if err != nil {
		t.Fatal(err)
	}
	if got := family(p); got != "demand+latency" {
		t.Errorf("family %q, want demand+latency", got)
	}
	h := hpa(p, deploymentName, 1, 8, tm)
	if got := h.Spec.Metrics[1].Pods.Target.AverageValue; got.String() != "100m" {
		t.Errorf("latency target %s, want 100m as written", got.String())
	}
	h.Status.CurrentMetrics = []autoscalingv2.MetricStatus{
		{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricStatus{Metric: autoscalingv2.MetricIdentifier{Name: "inference_inter_token_latency_p90_seconds"},
			Current: autoscalingv2.MetricValueStatus{AverageValue: new(resource.MustParse("150m"))}}},
	}
	got := hpaReads(h, tm, fleetCounts{Ready: 4, Current: 4})
	if v := got[1].Value; v == nil || math.Abs(*v-0.15) > 1e-9 {
		t.Errorf("latency read %v, want 0.15 as read", v)
	}
	if r := got[1].Recommended; r == nil || *r != 6 {
		t.Errorf("recommended %v, want ⌈4 × 0.15 / 0.1⌉ = 6", r)
	}
}
