// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package capacity_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/capacity"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/loadgen"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/sim"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/sim/simtest"
)

// simCase is a simulator configuration with its request mix.
type simCase struct {
	name           string
	cfg            sim.Config
	prompt, output int
}

func simCases() []simCase {
	a := sim.DefaultConfig()
	a.Model = "decode-bound"
	a.MaxNumSeqs = 32
	a.MaxModelLen = 4096
	a.StepBase = 10 * time.Millisecond
	a.StepPerSeq = 500 * time.Microsecond
	a.PrefillPerToken = 50 * time.Microsecond
	a.TimeScale = 5

	b := sim.DefaultConfig()
	b.Model = "prefill-heavy"
	b.MaxNumSeqs = 8
	b.MaxModelLen = 4096
	b.StepBase = 5 * time.Millisecond
	b.StepPerSeq = 500 * time.Microsecond
	b.PrefillPerToken = 20 * time.Microsecond
	b.TimeScale = 5
	return []simCase{{"decode-bound", a, 64, 32}, {"prefill-heavy", b, 256, 16}}
}

// serviceTime is how long one request stays in a full batch, in simulated
// time: outputLen steps of a batch of B with its share of prefill.
func serviceTime(c sim.Config, prompt, output int) time.Duration {
	b := c.MaxBatch(prompt, output)
	return time.Duration(output) * c.StepDuration(b, prompt*b/output)
}

// TestCapacityMatchesSimulatorModel: against inference-sim, the capacity
// found lies within ±15% of sim.Config.Capacity, for two configurations.
//
// The SLO, TTFT p90 ≤ 2.5 × the service time S of a full batch, breaks at
// saturation: below capacity with a batch of B ≥ 8 slots, queueing delay
// (Erlang C with deterministic service) stays well under S up to 0.94 of
// capacity, and above capacity the queue grows without bound, by
// (rate − capacity) × time, which over the window is several S at 1.12×.
// So the SLO-bound rate is the saturation rate, sim.Config.Capacity.
func TestCapacityMatchesSimulatorModel(t *testing.T) {
	for _, tc := range simCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			want := tc.cfg.Capacity(tc.prompt, tc.output)
			s := serviceTime(tc.cfg, tc.prompt, tc.output)
			slo := fmt.Sprintf("ttft:p90<=%s,errors<=1%%", (s * 5 / 2).Round(time.Millisecond))
			slos, err := capacity.ParseSLOs(slo)
			if err != nil {
				t.Fatal(err)
			}
			var rates []float64
			for _, f := range []float64{0.5, 0.7, 0.82, 0.9, 0.96, 1.04, 1.12, 1.25} {
				rates = append(rates, f*want)
			}
			url := simtest.Start(t, tc.cfg)
			cfg := capacity.Config{
				URL: url, MetricsURL: url + "/metrics", Model: tc.cfg.Model, Endpoint: loadgen.EndpointCompletions,
				Rates: rates, Warmup: 3 * s, Window: 15 * time.Second, MinRequests: 100,
				PromptLen: loadgen.Fixed{N: tc.prompt}, OutputLen: loadgen.Fixed{N: tc.output}, SLOs: slos,
				Seed: 3, TimeScale: tc.cfg.TimeScale, MaxInFlight: 10000, RequestTimeout: 30 * time.Second,
				MetricsInterval: 250 * time.Millisecond, StopAfterFailures: 2, Cost: capacity.Cost{PricePerGPUHour: 3, GPUsPerReplica: 1},
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			start := time.Now()
			steps, err := capacity.Run(ctx, cfg, nil)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			rep := capacity.NewReport(capacity.Setup{SLOs: []string{slo}}, steps, cfg.Cost, capacity.HPAOptions{Metric: capacity.MetricAuto, Margin: 0.2, Name: "m", MinReplicas: 1, MaxReplicas: 5}, false)
			var table strings.Builder
			if err := rep.WriteTable(&table); err != nil {
				t.Fatal(err)
			}
			t.Logf("model capacity %.2f req/s, service time %s, SLO %s, %s wall\n%s", want, s, slo, time.Since(start).Round(time.Second), table.String())
			a := rep.Analysis
			if !a.Found {
				t.Fatalf("no capacity found: %v", a.Notes)
			}
			if a.Capacity < 0.85*want || a.Capacity > 1.15*want {
				t.Errorf("capacity %.2f req/s, want within 15%% of the model's %.2f", a.Capacity, want)
			}
			at := steps[a.CapacityStep]
			if at.Server.Batch == nil || at.Server.Queue == nil || at.Server.KV == nil {
				t.Errorf("server signals missing at the capacity step: %+v", at.Server)
			} else if *at.Server.Batch <= 0 {
				t.Errorf("mean batch %.2f at capacity, want > 0", *at.Server.Batch)
			}
			if rep.Recommendation == nil {
				t.Errorf("no recommendation: %s", rep.NoRecommendation)
			}
		})
	}
}

// TestRunErrors: an unreachable endpoint, a model the server does not list,
// and an interrupted run (partial steps are returned, the last marked).
func TestRunErrors(t *testing.T) {
	c := simCases()[1]
	url := simtest.Start(t, c.cfg)
	slos, _ := capacity.ParseSLOs("ttft:p90<=1s")
	base := capacity.Config{
		URL: url, MetricsURL: url + "/metrics", Model: c.cfg.Model, Endpoint: loadgen.EndpointCompletions,
		Rates: []float64{5, 10}, Warmup: time.Second, Window: 5 * time.Second, MinRequests: 10,
		PromptLen: loadgen.Fixed{N: 16}, OutputLen: loadgen.Fixed{N: 4}, SLOs: slos,
		Seed: 1, TimeScale: c.cfg.TimeScale, MaxInFlight: 100, RequestTimeout: 10 * time.Second,
		MetricsInterval: 100 * time.Millisecond, Cost: capacity.Cost{GPUsPerReplica: 1},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	_ = ln.Close()

	t.Run("unreachable", func(t *testing.T) {
		cfg := base
		cfg.URL = closed
		_, err := capacity.Run(context.Background(), cfg, nil)
		if err == nil || !strings.Contains(err.Error(), "cannot reach the endpoint "+closed) {
			t.Errorf("error %v, want cannot reach the endpoint", err)
		}
	})
	t.Run("unknown model", func(t *testing.T) {
		cfg := base
		cfg.Model = "not-served"
		_, err := capacity.Run(context.Background(), cfg, nil)
		if err == nil || !strings.Contains(err.Error(), `does not serve model "not-served"`) || !strings.Contains(err.Error(), c.cfg.Model) {
			t.Errorf("error %v, want one naming the model and what the server lists", err)
		}
	})
	t.Run("interrupted", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var seen int
		steps, err := capacity.Run(ctx, base, func(s []capacity.Step) {
			seen = len(s)
			cancel() // Ctrl-C during the second step, right after the first
		})
		if !errors.Is(err, capacity.ErrInterrupted) {
			t.Fatalf("error %v, want ErrInterrupted", err)
		}
		if len(steps) != 2 || steps[0].Interrupted || !steps[1].Interrupted || seen != 2 {
			t.Fatalf("steps %d (callback saw %d), want the first complete and the second interrupted", len(steps), seen)
		}
		if steps[0].Completed == 0 {
			t.Errorf("first step measured nothing: %+v", steps[0])
		}
	})
}
