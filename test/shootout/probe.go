// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/capacity"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/loadgen"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/sim"
)

// policyCapacity is the policy whose metric and target come from the
// capacity probe (docs/capacity.md), measured for each trace before it runs.
const policyCapacity = "capacity"

// probeMixSize bounds the requests of the trace that make up the probe's
// request mix (every k-th request, in order).
const probeMixSize = 1000

// probeRateFactors is the probe's plan, as fractions of the saturation rate
// the simulator's model gives for the mix's mean prompt and output lengths:
// from well below it to past it, so that the probe finds where the SLOs
// break whatever the mix.
var probeRateFactors = []float64{0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2}

// probeResult is what the capacity probe measured for one trace, and how:
// it goes into the JSON report.
type probeResult struct {
	// How says in words how the recommendation was obtained.
	How            string                   `json:"how"`
	Setup          capacity.Setup           `json:"setup"`
	Steps          []capacity.Step          `json:"steps"`
	Analysis       capacity.Analysis        `json:"analysis"`
	Recommendation *capacity.Recommendation `json:"recommendation"`
}

// defaultCapacitySLO is the probe's SLO for the shootout's own: the same
// TTFT and inter-token bounds at p90, the percentile the probe's
// documentation recommends for steps of this length, and at most 0.1% of
// requests failed.
func defaultCapacitySLO(slo SLO) string {
	return fmt.Sprintf("ttft:p90<=%s,itl:p90<=%s,errors<=0.1%%", slo.TTFT, slo.TPOT)
}

// probeMix is the probe's request mix: up to probeMixSize of the trace's
// requests, every k-th, each as a prompt of its length (the simulator
// counts 4 bytes per token) with its output length as max_tokens.
func probeMix(reqs []loadgen.TraceRequest) []loadgen.Prompt {
	step := max(1, (len(reqs)+probeMixSize-1)/probeMixSize)
	var out []loadgen.Prompt
	for i := 0; i < len(reqs); i += step {
		out = append(out, loadgen.Prompt{Text: loadgen.PromptText(reqs[i].PromptTokens), MaxTokens: reqs[i].OutputTokens})
	}
	return out
}

// meanLengths is the mean prompt and output length of a mix, in tokens.
func meanLengths(mix []loadgen.Prompt) (prompt, output int) {
	if len(mix) == 0 {
		return 0, 0
	}
	var p, o int
	for _, m := range mix {
		p += len(m.Text) / 4
		o += m.MaxTokens
	}
	return p / len(mix), o / len(mix)
}

// stepVerdict is "pass", or "fail" with the checks the step missed and
// their values (a latency in ms, an error rate or attainment in percent),
// or that the server fell behind.
func stepVerdict(s capacity.Step) string {
	if s.Pass {
		return "pass"
	}
	var missed []string
	for _, c := range s.Checks {
		switch {
		case c.Met:
		case c.Note != "":
			missed = append(missed, fmt.Sprintf("%s (%s)", c.SLO, c.Note))
		case strings.HasPrefix(c.SLO, capacity.KindErrors), strings.HasPrefix(c.SLO, capacity.KindGood):
			missed = append(missed, fmt.Sprintf("%s at %.1f%%", c.SLO, c.Value*100))
		default:
			missed = append(missed, fmt.Sprintf("%s at %.0f ms", c.SLO, c.Value))
		}
	}
	if !s.KeepsUp {
		missed = append(missed, "fell behind (fewer than 90% of the requests sent completed in the window)")
	}
	if s.Interrupted {
		missed = append(missed, "interrupted")
	}
	if len(missed) == 0 {
		return "fail"
	}
	return "fail: " + strings.Join(missed, ", ")
}

// probeCapacity runs the capacity probe against one simulator with the
// shootout's profile and compression (no cold start: the probe measures a
// loaded replica), on 127.0.0.1, with the trace's request mix, and returns
// the policy on the metric and target it recommends. The replicas bounds
// are the shootout's, as for every policy; the recommended behavior is not
// used, so that only the metric and its target differ between policies.
func probeCapacity(ctx context.Context, cfg config, tm timing, traceName string, reqs []loadgen.TraceRequest, say func(string, ...any)) (_ policy, _ *probeResult, err error) {
	prof, err := sim.LookupProfile(sim.ProfileLlama3_8BA100)
	if err != nil {
		return policy{}, nil, err
	}
	simCfg := prof.Apply(sim.DefaultConfig())
	simCfg.TimeScale = tm.Compress
	srv, err := sim.NewServer(simCfg, sim.NewScaledClock(simCfg.TimeScale))
	if err != nil {
		return policy{}, nil, fmt.Errorf("capacity probe: simulator: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return policy{}, nil, fmt.Errorf("capacity probe: listen: %w", err)
	}
	srvCtx, stopServer := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(srvCtx, ln, time.Second) }()
	defer func() {
		stopServer()
		if serr := <-served; serr != nil {
			err = errors.Join(err, fmt.Errorf("capacity probe: simulator: %w", serr))
		}
	}()

	mix := probeMix(reqs)
	promptMean, outputMean := meanLengths(mix)
	saturation := simCfg.Capacity(promptMean, outputMean)
	if !(saturation > 0) {
		return policy{}, nil, fmt.Errorf("capacity probe: the simulator's model gives no saturation rate for prompts of %d and outputs of %d tokens", promptMean, outputMean)
	}
	rates := make([]float64, len(probeRateFactors))
	for i, f := range probeRateFactors {
		rates[i] = f * saturation
	}
	slos, err := capacity.ParseSLOs(cfg.capacitySLO)
	if err != nil {
		return policy{}, nil, fmt.Errorf("--capacity-slo: %w", err)
	}
	url := "http://" + ln.Addr().String()
	pc := capacity.Config{
		URL: url, MetricsURL: url + "/metrics", Model: simCfg.Model, Endpoint: loadgen.EndpointCompletions,
		Rates: rates, Warmup: 10 * time.Second, Window: 30 * time.Second, MinRequests: 200,
		Prompts: mix, SLOs: slos, Seed: 1, TimeScale: tm.Compress, MaxInFlight: cfg.maxInFlight,
		RequestTimeout: tm.wall(cfg.requestTimeout), MetricsInterval: time.Second, StopAfterFailures: 2,
		Cost: capacity.Cost{GPUsPerReplica: 1},
	}
	say("capacity probe on %s: %d requests of the trace as the mix (mean prompt %d, output %d tokens), SLO %s, plan %.2g to %.2g req/s (0.1 to 1.2 × the model's saturation %.3g req/s)",
		traceName, len(mix), promptMean, outputMean, cfg.capacitySLO, rates[0], rates[len(rates)-1], saturation)
	steps, err := capacity.Run(ctx, pc, func(steps []capacity.Step) {
		s := steps[len(steps)-1]
		good := "-"
		if s.Attainment != nil {
			good = fmt.Sprintf("%.1f%%", *s.Attainment*100)
		}
		say("capacity probe: step %d at %.3g req/s: %d sent, %.3g completed/s, goodput %.3g/s, good %s: %s", s.Index, s.Offered, s.Sent, s.Throughput, s.Goodput, good, stepVerdict(s))
	})
	if err != nil {
		return policy{}, nil, fmt.Errorf("capacity probe: %w", err)
	}
	var sloText []string
	for _, s := range slos {
		sloText = append(sloText, s.String())
	}
	setup := capacity.Setup{URL: url, Model: simCfg.Model, Endpoint: pc.Endpoint,
		Mix:   fmt.Sprintf("%d requests of the trace %s (every %d-th), mean prompt %d and output %d tokens", len(mix), traceName, max(1, (len(reqs)+probeMixSize-1)/probeMixSize), promptMean, outputMean),
		Rates: rates, Warmup: pc.Warmup.String(), Window: pc.Window.String(), SLOs: sloText, TimeScale: pc.TimeScale, Cost: pc.Cost}
	rep := capacity.NewReport(setup, steps, pc.Cost, capacity.HPAOptions{
		Metric: capacity.MetricAuto, Margin: 0.2, Name: deploymentName, MinReplicas: cfg.minReplicas, MaxReplicas: cfg.maxReplicas,
	}, false)
	res := &probeResult{
		How: fmt.Sprintf("capacity probe (pkg/tools/capacity, as `capacity` runs it) against one inference-sim --profile %s at --time-scale %g on 127.0.0.1, "+
			"with the trace's request mix and the SLO %s; recommendation with --hpa-metric auto and --margin 0.2",
			sim.ProfileLlama3_8BA100, tm.Compress, cfg.capacitySLO),
		Setup: setup, Steps: rep.Steps, Analysis: rep.Analysis, Recommendation: rep.Recommendation,
	}
	if rep.Recommendation == nil {
		return policy{}, res, errors.New("capacity probe: no recommendation: " + rep.NoRecommendation)
	}
	r := rep.Recommendation
	say("capacity probe: capacity %.3g req/s per replica; recommends %s at %s per pod", r.Capacity, r.Metric, r.Quantity)
	return policy{
		Name: policyCapacity, Metric: r.Metric, Target: r.Quantity,
		Why: fmt.Sprintf("recommended by the capacity probe for this trace's mix and SLO %s: %s", cfg.capacitySLO, strings.Join(r.Explanation[:3], "; ")),
	}, res, nil
}
