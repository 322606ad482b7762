// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/labels"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/capacity"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/loadgen"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/sim"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/test/e2e/framework"
)

const (
	capacitySLO      = "ttft:p90<=500ms,errors<=0.1%"
	capacityTTFT     = 500 * time.Millisecond
	capacityLoadFor  = 60 * time.Second
	capacityJudgeFor = 30 * time.Second // the last part of the load, once scaled
)

// TestCapacityRecommendedHPA: the capacity probe measures one replica of a
// Deployment of simulators, and an HPA made from its recommended manifest
// (unchanged, created as written) then keeps TTFT p90 within the SLO under
// about three times one replica's capacity, once it has scaled.
func TestCapacityRecommendedHPA(t *testing.T) {
	e := requireEnv(t, framework.ComponentSim, framework.ComponentAdapter)
	t.Parallel()
	ns := e.Namespace(t)
	d := simDeployment("capacity", 1, "--max-num-seqs=4")
	pods := createSimDeployment(t, e, ns, d, 1)
	podURL, ok := e.Kubelet.Endpoint(ns, pods[0].Name)
	if !ok {
		t.Fatalf("no endpoint for pod %s", pods[0].Name)
	}

	// The plan brackets the simulator's model capacity for these flags.
	sc := sim.DefaultConfig()
	sc.MaxNumSeqs = 4
	model := sc.Capacity(64, 32)
	var rates []float64
	for _, f := range []float64{0.3, 0.5, 0.65, 0.8, 0.9, 1.0, 1.1} {
		rates = append(rates, float64(int(f*model*10))/10)
	}
	slos, err := capacity.ParseSLOs(capacitySLO)
	if err != nil {
		t.Fatal(err)
	}
	cfg := capacity.Config{
		URL: podURL, MetricsURL: podURL + "/metrics", Model: simModel, Endpoint: loadgen.EndpointCompletions,
		Rates: rates, Warmup: time.Second, Window: 6 * time.Second, MinRequests: 40,
		PromptLen: loadgen.Fixed{N: 64}, OutputLen: loadgen.Fixed{N: 32}, SLOs: slos,
		Seed: 1, TimeScale: 1, MaxInFlight: 1000, RequestTimeout: 30 * time.Second,
		MetricsInterval: 250 * time.Millisecond, StopAfterFailures: 2, Cost: capacity.Cost{GPUsPerReplica: 1},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	probeStart := time.Now()
	steps, err := capacity.Run(ctx, cfg, func(s []capacity.Step) {
		var b strings.Builder
		_ = capacity.WriteProgress(&b, s[len(s)-1], len(rates))
		t.Log(strings.TrimSpace(b.String()))
	})
	if err != nil {
		t.Fatalf("capacity probe: %v", err)
	}
	// Plan for a peak of three times the measured capacity: maxReplicas
	// follows from it.
	peak := 3 * capacity.Analyze(steps, cfg.Cost).Capacity
	rep := capacity.NewReport(capacity.Setup{URL: podURL, Model: simModel, SLOs: []string{capacitySLO}}, steps, cfg.Cost,
		capacity.HPAOptions{Metric: capacity.MetricAuto, Margin: 0.2, Name: d.Name, Namespace: ns, MinReplicas: 1, MaxReplicas: 6, PeakRate: peak}, false)
	var table strings.Builder
	_ = rep.WriteTable(&table)
	t.Logf("probe took %s (model capacity %.2f req/s)\n%s", time.Since(probeStart).Round(time.Second), model, table.String())
	if !rep.Analysis.Found || rep.Recommendation == nil {
		t.Fatalf("no capacity or recommendation: %v %s", rep.Analysis.Notes, rep.NoRecommendation)
	}
	t.Logf("recommended manifest:\n%s", rep.Recommendation.Manifest)

	var hpa autoscalingv2.HorizontalPodAutoscaler
	if err := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(rep.Recommendation.Manifest), 4096).Decode(&hpa); err != nil {
		t.Fatalf("the recommended manifest does not decode: %v", err)
	}
	createHPA(t, e, ns, &hpa)
	selector := labels.SelectorFromSet(d.Spec.Selector.MatchLabels)
	svc, err := framework.StartServiceProxy(func() []string { return e.Kubelet.Endpoints(ns, selector) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })

	s := startSampler(t, e, ns, d.Name, rep.Recommendation.Metric, selector)
	l := startLoad(t, svc.URL, peak, capacityLoadFor, 2000)
	report := l.wait(t, capacityLoadFor+time.Minute)
	rows := s.stop()
	t.Logf("load: %.1f req/s (3 × %.2f) for %s: %s", peak, rep.Analysis.Capacity, capacityLoadFor, summary(report))
	logTable(t, rep.Recommendation.Metric, rows, report, l.start)

	judged := capacityLoadFor - capacityJudgeFor
	p90, n := p90TTFT(report, judged, capacityLoadFor)
	held := s.lowestSince(l.start.Add(judged))
	if held < 2 {
		t.Errorf("%d replicas in the last %s of the load, want the HPA to have scaled up", held, capacityJudgeFor)
	}
	if n == 0 {
		t.Fatalf("no successful requests in the last %s of the load", capacityJudgeFor)
	}
	if p90 > capacityTTFT {
		t.Errorf("TTFT p90 %s over %d requests in the last %s of the load, want within the SLO %s", p90.Round(time.Millisecond), n, capacityJudgeFor, capacityTTFT)
	} else {
		t.Logf("once scaled (last %s of the load, at least %d replicas): TTFT p90 %s over %d requests, SLO %s",
			capacityJudgeFor, held, p90.Round(time.Millisecond), n, capacityTTFT)
	}
}
