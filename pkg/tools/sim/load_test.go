// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package sim_test

import (
	"context"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/loadgen"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/sim"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/sim/simtest"
)

// value is the sum of a family's series (counter, gauge) or, for a
// histogram, sum/count.
func value(t *testing.T, mfs map[string]*dto.MetricFamily, name string) float64 {
	t.Helper()
	mf, ok := mfs[name]
	if !ok {
		t.Fatalf("family %s missing", name)
	}
	var v, sum, count float64
	for _, m := range mf.GetMetric() {
		v += m.GetGauge().GetValue() + m.GetCounter().GetValue()
		sum += m.GetHistogram().GetSampleSum()
		count += float64(m.GetHistogram().GetSampleCount())
	}
	if mf.GetType() == dto.MetricType_HISTOGRAM {
		if count == 0 {
			return 0
		}
		return sum / count
	}
	return v
}

// loadConfig is a small server whose capacity is ≈23.6 requests per
// simulated second for 64-token prompts and 16-token outputs, run 5× faster
// than real time.
func loadConfig() sim.Config {
	cfg := sim.DefaultConfig()
	cfg.MaxNumSeqs = 8
	cfg.MaxModelLen = 4096
	cfg.StepBase = 10 * time.Millisecond
	cfg.StepPerSeq = time.Millisecond
	cfg.PrefillPerToken = 100 * time.Microsecond
	cfg.TimeScale = 5
	return cfg
}

const loadPrompt, loadOutput = 64, 16

func runLoad(t *testing.T, cfg sim.Config, base string, rate float64, d time.Duration, during func()) loadgen.Summary {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lc := loadgen.Config{
		URL: base, Model: cfg.Model, Endpoint: loadgen.EndpointCompletions,
		Schedule:  []loadgen.Phase{{Rate: rate, Duration: d}},
		PromptLen: loadgen.Fixed{N: loadPrompt}, OutputLen: loadgen.Fixed{N: loadOutput},
		Seed: 7, TimeScale: cfg.TimeScale, MaxInFlight: 1000, RequestTimeout: 20 * time.Second,
	}
	done := make(chan struct{})
	if during != nil {
		go func() {
			defer close(done)
			timer := time.NewTimer(time.Duration(float64(d) / cfg.TimeScale))
			defer timer.Stop()
			select {
			case <-timer.C:
				during()
			case <-ctx.Done():
			}
		}()
	} else {
		close(done)
	}
	rep, err := loadgen.Run(ctx, lc)
	<-done
	if err != nil {
		t.Fatalf("load run: %v", err)
	}
	s := loadgen.Summarize(rep)
	if s.Failed > 0 || s.Dropped > 0 || s.Completed == 0 {
		t.Fatalf("load run: %+v", s)
	}
	return s
}

// TestLoadBelowAndAboveCapacity runs the real HTTP server under the load
// generator: below capacity the queue stays empty and TTFT stays near its
// floor; above it the queue grows and TTFT rises.
func TestLoadBelowAndAboveCapacity(t *testing.T) {
	cfg := loadConfig()
	capacity := cfg.Capacity(loadPrompt, loadOutput)
	floor := cfg.StepDuration(1, loadPrompt)

	t.Run("below capacity", func(t *testing.T) {
		base := simtest.Start(t, cfg)
		s := runLoad(t, cfg, base, 0.3*capacity, 6*time.Second, nil)
		mfs := scrape(t, base)
		// Server-side figures are in simulated time and immune to the
		// wall-clock jitter a shared CPU adds; the client's are not, and
		// the time scale multiplies that jitter, so its bound is loose.
		if q := value(t, mfs, "vllm:request_queue_time_seconds"); q > 0.25 {
			t.Errorf("mean queue time %.3fs, want about 0", q)
		}
		if ttft := value(t, mfs, "vllm:time_to_first_token_seconds"); ttft > 5*floor.Seconds() {
			t.Errorf("server mean TTFT %.3fs, floor %v", ttft, floor)
		}
		if s.TTFT.P50 > 20*floor {
			t.Errorf("client TTFT p50 %v, floor %v", s.TTFT.P50, floor)
		}
		if got := value(t, mfs, "vllm:request_success_total"); int(got) != s.Completed {
			t.Errorf("request_success_total %v, client completed %d", got, s.Completed)
		}
		if got := value(t, mfs, "vllm:generation_tokens_total"); int(got) != s.Tokens {
			t.Errorf("generation_tokens_total %v, client received %d tokens", got, s.Tokens)
		}
		t.Logf("capacity %.1f req/s, rate %.1f: %+v", capacity, 0.3*capacity, s)
	})

	t.Run("above capacity", func(t *testing.T) {
		base := simtest.Start(t, cfg)
		var waiting float64
		s := runLoad(t, cfg, base, 3*capacity, 2*time.Second, func() {
			waiting = value(t, scrape(t, base), "vllm:num_requests_waiting")
		})
		if waiting < 20 {
			t.Errorf("waiting at the end of the arrivals = %v, want a growing queue", waiting)
		}
		mfs := scrape(t, base)
		if q := value(t, mfs, "vllm:request_queue_time_seconds"); q < 0.5 {
			t.Errorf("mean queue time %.3fs, want well above 0", q)
		}
		if ttft := value(t, mfs, "vllm:time_to_first_token_seconds"); ttft < 20*floor.Seconds() {
			t.Errorf("server mean TTFT %.3fs, want well above the floor %v", ttft, floor)
		}
		if s.TTFT.P50 < 20*floor {
			t.Errorf("client TTFT p50 %v, want well above the floor %v", s.TTFT.P50, floor)
		}
		if r := value(t, mfs, "vllm:num_requests_running"); r != 0 {
			t.Errorf("running after the load = %v", r)
		}
		t.Logf("capacity %.1f req/s, rate %.1f: waiting %v; %+v", capacity, 3*capacity, waiting, s)
	})
}

// TestLoadPastKVBudget: requests that outgrow the KV cache are preempted,
// counted, recomputed and still complete.
func TestLoadPastKVBudget(t *testing.T) {
	cfg := loadConfig()
	cfg.MaxNumSeqs = 16
	cfg.NumGPUBlocks = 40 // 640 tokens: ten 64-token prompts, not ten 192-token sequences
	cfg.MaxModelLen = 640
	cfg.DefaultMaxTokens = 16
	base := simtest.Start(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, err := loadgen.Run(ctx, loadgen.Config{
		URL: base, Model: cfg.Model, Endpoint: loadgen.EndpointChat,
		Schedule:  []loadgen.Phase{{Rate: 50, Duration: 400 * time.Millisecond}},
		PromptLen: loadgen.Fixed{N: 64}, OutputLen: loadgen.Fixed{N: 128},
		Seed: 3, TimeScale: cfg.TimeScale, MaxInFlight: 100, RequestTimeout: 20 * time.Second,
	})
	if err != nil {
		t.Fatalf("load run: %v", err)
	}
	s := loadgen.Summarize(rep)
	if s.Failed > 0 || s.Completed < 10 || s.Tokens != 128*s.Completed {
		t.Fatalf("load: %+v", s)
	}
	mfs := scrape(t, base)
	if p := value(t, mfs, "vllm:num_preemptions_total"); p == 0 {
		t.Errorf("no preemptions counted")
	}
	if kv := value(t, mfs, "vllm:kv_cache_usage_perc"); kv != 0 {
		t.Errorf("KV usage after the load = %v, want 0", kv)
	}
	t.Logf("%d requests, preemptions %v", s.Completed, value(t, mfs, "vllm:num_preemptions_total"))
}
