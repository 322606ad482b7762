// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package kubectlplugin

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
)

func f(v float64) *float64 { return &v }

// approx compares floats to 1e-9 so that computed figures can be written as
// their decimal values.
var approx = cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) < 1e-9 })

func TestSummarize(t *testing.T) {
	rates := map[catalog.Signal]float64{catalog.GenerationTokensPerSecond: 300, catalog.RequestsPerSecond: 10}
	withPct := func(ttft50, ttft90, ttft99 float64) map[catalog.Signal]float64 {
		m := map[catalog.Signal]float64{catalog.TimeToFirstTokenP50: ttft50, catalog.TimeToFirstTokenP90: ttft90, catalog.TimeToFirstTokenP99: ttft99}
		for k, v := range rates {
			m[k] = v
		}
		return m
	}
	twoPods := []PodGPU{{Name: "a", GPUs: 1, Util: f(1), SM: f(0.4)}, {Name: "b", GPUs: 2, Util: f(0.4), SM: f(0.1)}}
	cases := []struct {
		name  string
		w     Workload
		slo   SLO
		price float64
		want  Summary
	}{{
		name: "busy weighted by GPUs, tokens per GPU-second",
		w:    Workload{Name: "llm", Pods: twoPods, Values: rates},
		want: Summary{Deployment: "llm", Pods: 2, GPUsAllocated: 3, GPUBusyShare: f(0.6), GPUSMActiveShare: f(0.2),
			GenerationTokensPerSecond: f(300), RequestsPerSecond: f(10), TokensPerGPUSecond: f(100)},
	}, {
		name: "a GPU pod without a value: no busy share, not a partial one",
		w:    Workload{Name: "llm", Pods: []PodGPU{{Name: "a", GPUs: 1, Util: f(1)}, {Name: "b", GPUs: 1}}},
		want: Summary{Deployment: "llm", Pods: 2, GPUsAllocated: 2},
	}, {
		name: "pods without GPUs: 0 allocated, nothing per GPU",
		w:    Workload{Name: "cpu", Pods: []PodGPU{{Name: "a"}}, Values: rates},
		want: Summary{Deployment: "cpu", Pods: 1, GenerationTokensPerSecond: f(300), RequestsPerSecond: f(10)},
	}, {
		name: "measured zero stays zero",
		w:    Workload{Name: "idle", Pods: []PodGPU{{Name: "a", GPUs: 1, Util: f(0)}}, Values: map[catalog.Signal]float64{catalog.GenerationTokensPerSecond: 0}},
		want: Summary{Deployment: "idle", Pods: 1, GPUsAllocated: 1, GPUBusyShare: f(0), GenerationTokensPerSecond: f(0), TokensPerGPUSecond: f(0)},
	}, {
		name: "no running pods",
		w:    Workload{Name: "gone", Missing: map[string]string{"pods": "no Running pods"}},
		want: Summary{Deployment: "gone", Missing: map[string]string{"pods": "no Running pods"}},
	}, {
		name:  "TTFT p90 within the SLO, p99 not: 90 to 99% of requests, cost per 1,000",
		w:     Workload{Name: "llm", Pods: twoPods, Values: withPct(0.2, 0.8, 1.5)},
		slo:   SLO{TimeToFirstToken: time.Second},
		price: 3.6, // 3 GPUs: 0.003 per second
		want: Summary{Deployment: "llm", Pods: 2, GPUsAllocated: 3, GPUBusyShare: f(0.6), GPUSMActiveShare: f(0.2),
			GenerationTokensPerSecond: f(300), RequestsPerSecond: f(10), TokensPerGPUSecond: f(100),
			TimeToFirstToken:          Percentiles{f(0.2), f(0.8), f(1.5)},
			SLOMetShare:               &Range{f(0.9), f(0.99)},
			SLOMetRequestsPerSecond:   &Range{f(9), f(9.9)},
			CostPer1000SLOMetRequests: &Range{f(0.003 / 9.9 * 1000), f(0.003 / 9 * 1000)}},
	}, {
		name:  "SLO below p50: under half, cost unbounded above",
		w:     Workload{Name: "llm", Pods: twoPods, Values: withPct(2, 3, 4)},
		slo:   SLO{TimeToFirstToken: time.Second},
		price: 3.6,
		want: Summary{Deployment: "llm", Pods: 2, GPUsAllocated: 3, GPUBusyShare: f(0.6), GPUSMActiveShare: f(0.2),
			GenerationTokensPerSecond: f(300), RequestsPerSecond: f(10), TokensPerGPUSecond: f(100),
			TimeToFirstToken:          Percentiles{f(2), f(3), f(4)},
			SLOMetShare:               &Range{f(0), f(0.5)},
			SLOMetRequestsPerSecond:   &Range{f(0), f(5)},
			CostPer1000SLOMetRequests: &Range{f(0.003 / 5 * 1000), nil}},
	}, {
		name: "an SLO but no percentiles (no requests in the window): no share",
		w:    Workload{Name: "llm", Pods: twoPods, Values: rates},
		slo:  SLO{TimeToFirstToken: time.Second},
		want: Summary{Deployment: "llm", Pods: 2, GPUsAllocated: 3, GPUBusyShare: f(0.6), GPUSMActiveShare: f(0.2),
			GenerationTokensPerSecond: f(300), RequestsPerSecond: f(10), TokensPerGPUSecond: f(100)},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Summarize(tc.w, tc.slo, tc.price)
			if diff := cmp.Diff(tc.want, got, approx); diff != "" {
				t.Errorf("Summarize (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSLOShare(t *testing.T) {
	p := func(p50, p90, p99 *float64) Percentiles { return Percentiles{p50, p90, p99} }
	cases := []struct {
		name      string
		slo       SLO
		ttft, e2e Percentiles
		want      *Range
	}{
		{"no SLO", SLO{}, p(f(1), f(2), f(3)), Percentiles{}, nil},
		{"p99 within", SLO{TimeToFirstToken: time.Second}, p(f(0.1), f(0.5), f(1)), Percentiles{}, &Range{f(0.99), f(1)}},
		{"p50 within, p90 not", SLO{TimeToFirstToken: time.Second}, p(f(0.5), f(1.2), f(3)), Percentiles{}, &Range{f(0.5), f(0.9)}},
		{"only p90 known, within", SLO{TimeToFirstToken: time.Second}, p(nil, f(0.9), nil), Percentiles{}, &Range{f(0.9), f(1)}},
		{"no percentile", SLO{TimeToFirstToken: time.Second}, Percentiles{}, p(f(1), f(2), f(3)), nil},
		{"both bounds: misses may fall on different requests", SLO{TimeToFirstToken: time.Second, E2ELatency: 10 * time.Second},
			p(f(0.1), f(0.5), f(2)), p(f(3), f(8), f(12)), &Range{f(0.8), f(0.99)}},
		{"both bounds, one without percentiles", SLO{TimeToFirstToken: time.Second, E2ELatency: 10 * time.Second},
			p(f(0.1), f(0.5), f(2)), Percentiles{}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, sloShare(tc.slo, tc.ttft, tc.e2e), approx); diff != "" {
				t.Errorf("sloShare (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPodGPUs(t *testing.T) {
	gpus := func(req, lim string) corev1.ResourceRequirements {
		var r corev1.ResourceRequirements
		if req != "" {
			r.Requests = corev1.ResourceList{GPUResource: resource.MustParse(req)}
		}
		if lim != "" {
			r.Limits = corev1.ResourceList{GPUResource: resource.MustParse(lim)}
		}
		return r
	}
	always := corev1.ContainerRestartPolicyAlways
	cases := []struct {
		name string
		spec corev1.PodSpec
		want int64
	}{
		{"no GPUs", corev1.PodSpec{Containers: []corev1.Container{{}}}, 0},
		{"limit only", corev1.PodSpec{Containers: []corev1.Container{{Resources: gpus("", "2")}}}, 2},
		{"request and limit", corev1.PodSpec{Containers: []corev1.Container{{Resources: gpus("1", "1")}}}, 1},
		{"two containers add", corev1.PodSpec{Containers: []corev1.Container{{Resources: gpus("", "1")}, {Resources: gpus("", "2")}}}, 3},
		{"a larger init container", corev1.PodSpec{InitContainers: []corev1.Container{{Resources: gpus("", "4")}}, Containers: []corev1.Container{{Resources: gpus("", "1")}}}, 4},
		{"a sidecar adds", corev1.PodSpec{InitContainers: []corev1.Container{{RestartPolicy: &always, Resources: gpus("", "1")}}, Containers: []corev1.Container{{Resources: gpus("", "1")}}}, 2},
	}
	for _, tc := range cases {
		if got := PodGPUs(&corev1.Pod{Spec: tc.spec}); got != tc.want {
			t.Errorf("%s: PodGPUs = %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestTopJSONShape checks that missing values are null (never 0 or left
// out) and the field names users script against.
func TestTopJSONShape(t *testing.T) {
	rows := []Summary{
		Summarize(Workload{Name: "idle", Pods: []PodGPU{{Name: "a", GPUs: 1}}}, SLO{TimeToFirstToken: time.Second}, 2),
	}
	var b strings.Builder
	if err := WriteJSON(&b, NewTopReport("ns", "team=ml", SLO{TimeToFirstToken: time.Second}, Pricing{GPUHourPrice: 2}, rows)); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(b.String()), &got); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	want := map[string]any{
		"namespace":    "ns",
		"selector":     "team=ml",
		"slo":          map[string]any{"timeToFirstTokenSeconds": 1.0, "e2eLatencySeconds": nil},
		"gpuHourPrice": 2.0,
		"openCost":     nil,
		"deployments": []any{map[string]any{
			"deployment": "idle", "pods": 1.0, "gpusAllocated": 1.0,
			"gpuBusyShare": nil, "gpuSMActiveShare": nil,
			"generationTokensPerSecond": nil, "requestsPerSecond": nil,
			"timeToFirstTokenSeconds": map[string]any{"p50": nil, "p90": nil, "p99": nil},
			"e2eLatencySeconds":       map[string]any{"p50": nil, "p90": nil, "p99": nil},
			"tokensPerGPUSecond":      nil, "sloMetShare": nil, "sloMetRequestsPerSecond": nil, "costPer1000SLOMetRequests": nil,
		}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("JSON (-want +got):\n%s", diff)
	}

	b.Reset()
	if err := WriteJSON(&b, NewTopReport("ns", "", SLO{}, Pricing{}, nil)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `"deployments": []`) {
		t.Errorf("no Deployments must be an empty list, not null:\n%s", b.String())
	}
}

func TestPodsJSONShape(t *testing.T) {
	rep := NewPodsReport("ns", "app=llm", []Row{{Pod: "p", GPUs: 1, Values: map[catalog.Signal]float64{catalog.QueueSize: 0, catalog.GPUUtilization: 1}}})
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Pods []struct {
			Pod     string
			GPUs    int64
			Values  map[string]*float64
			Reading string
		}
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Pods) != 1 || len(got.Pods[0].Values) != int(catalog.Count) {
		t.Fatalf("want one pod with every signal named: %s", b)
	}
	vals := got.Pods[0].Values
	if q := vals["inference_queue_size"]; q == nil || *q != 0 {
		t.Errorf("a measured 0 must be 0: %s", b)
	}
	if _, present := vals["inference_batch_size"]; !present || vals["inference_batch_size"] != nil {
		t.Errorf("a missing value must be null: %s", b)
	}
	if got.Pods[0].Reading == "" || got.Pods[0].GPUs != 1 {
		t.Errorf("reading and GPUs: %s", b)
	}
}

func TestWriteTop(t *testing.T) {
	rows := []Summary{
		Summarize(Workload{Name: "llm", Pods: []PodGPU{{Name: "a", GPUs: 2, Util: f(0.5), SM: f(0.25)}},
			Values: map[catalog.Signal]float64{catalog.GenerationTokensPerSecond: 100, catalog.RequestsPerSecond: 2, catalog.TimeToFirstTokenP50: 0.1, catalog.TimeToFirstTokenP90: 0.5, catalog.TimeToFirstTokenP99: 2}},
			SLO{TimeToFirstToken: time.Second}, 2),
		Summarize(Workload{Name: "new", Pods: []PodGPU{{Name: "b", GPUs: 1}}}, SLO{TimeToFirstToken: time.Second}, 2),
	}
	var b strings.Builder
	if err := WriteTop(&b, rows, SLO{TimeToFirstToken: time.Second}, Pricing{GPUHourPrice: 2}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	want := [][]string{
		{"DEPLOYMENT", "PODS", "GPUS", "GPU", "BUSY", "SM", "ACTIVE", "TOKENS/S", "REQ/S", "TTFT", "P90", "E2E", "P90", "TOKENS/GPU-S", "SLO", "MET", "COST/1K", "SLO", "REQ"},
		{"llm", "1", "2", "50%", "25%", "100", "2", "500ms", "-", "50", "90%-99%", "0.5612-0.6173"},
		{"new", "1", "1", "-", "-", "-", "-", "-", "-", "-", "-", "-"},
	}
	if len(lines) != len(want) {
		t.Fatalf("table:\n%s", b.String())
	}
	for i := range want {
		if diff := cmp.Diff(want[i], strings.Fields(lines[i])); diff != "" {
			t.Errorf("line %d (-want +got):\n%s", i, diff)
		}
	}
}
