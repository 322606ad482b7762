// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func profileConfig(t *testing.T) Config {
	t.Helper()
	p, err := LookupProfile(ProfileLlama3_8BA100)
	if err != nil {
		t.Fatal(err)
	}
	c := p.Apply(DefaultConfig())
	if err := c.Validate(); err != nil {
		t.Fatalf("profile config invalid: %v", err)
	}
	return c
}

// TestProfileStepTime checks the calibrated curve against the published
// figures it is built from.
func TestProfileStepTime(t *testing.T) {
	c := profileConfig(t)
	tests := []struct {
		name                  string
		seqs, tokens, prefill int
		context               int
		want                  time.Duration
	}{
		{"one decode token, no context", 1, 1, 0, 0, 9700 * time.Microsecond},
		{"flat up to 64 tokens", 64, 64, 0, 0, 9700 * time.Microsecond},
		{"128 tokens", 1, 128, 127, 0, 13 * time.Millisecond},
		{"between points: 192 tokens", 1, 192, 191, 0, 16250 * time.Microsecond},
		{"512 tokens", 1, 512, 511, 0, 35 * time.Millisecond},
		{"2048 tokens: about 15k prefill tokens/s", 1, 2048, 2047, 0, 146 * time.Millisecond},
		{"beyond the curve: last slope", 1, 3584, 3583, 0, 257 * time.Millisecond},
		{"decode of 32 requests holding 2,000 tokens each reads 64k tokens of KV", 32, 32, 0, 64000, 9700*time.Microsecond + 64000*75*time.Nanosecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := c.StepTime(tc.seqs, tc.tokens, tc.prefill, tc.context)
			if d := got - tc.want; d < -time.Microsecond || d > time.Microsecond {
				t.Errorf("StepTime = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestLinearStepTimeUnchanged: without a curve, StepTime is the linear model.
func TestLinearStepTimeUnchanged(t *testing.T) {
	c := DefaultConfig()
	if got, want := c.StepTime(4, 100, 96, 5000), c.StepDuration(4, 96); got != want {
		t.Errorf("StepTime = %s, want StepDuration %s", got, want)
	}
}

// TestProfileCapacity checks Capacity against a hand computation on the
// curve: a batch of B = 256 of 512+128-token requests computes 256 + 1024
// tokens per step for 256 × 576 tokens of context.
func TestProfileCapacity(t *testing.T) {
	c := profileConfig(t)
	step := curveTime(c.StepCurve, 1280) + 75e-9*256*576
	want := 256 / (128 * step)
	if got := c.Capacity(512, 128); math.Abs(got-want) > want*1e-9 {
		t.Errorf("Capacity = %v, want %v", got, want)
	}
}

func TestValidateCurve(t *testing.T) {
	c := DefaultConfig()
	c.StepCurve = []StepPoint{{Tokens: 64, Time: time.Millisecond}, {Tokens: 32, Time: 2 * time.Millisecond}}
	if err := c.Validate(); err == nil {
		t.Error("Validate accepted a curve whose tokens decrease")
	}
	c.StepCurve = []StepPoint{{Tokens: 0, Time: time.Millisecond}}
	if err := c.Validate(); err == nil {
		t.Error("Validate accepted a curve point of 0 tokens")
	}
	c.StepCurve = nil
	c.LoadTime = -time.Second
	if err := c.Validate(); err == nil {
		t.Error("Validate accepted a negative load time")
	}
}

// TestBusyLikeNVML: one running request keeps the engine busy every step,
// so the busy fraction is 1 while SM activity is the step's fullness; an
// idle engine is not busy.
func TestBusyLikeNVML(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxNumSeqs, cfg.MaxNumBatchedTokens = 4, 64
	clock := &manualClock{}
	e := NewEngine(cfg, clock, nil)
	s := &seq{prompt: 8, maxTokens: 10, notify: make(chan struct{}, 1)}
	e.enqueue(s, 0)
	now := time.Duration(0)
	for range 10 {
		d := e.schedule(now)
		e.stepping(now, now+d, e.fullness())
		clock.now = now + d/2
		mid := e.Busy()
		if mid.Busy < now+d/2-time.Nanosecond || mid.Busy > now+d/2 {
			t.Fatalf("mid-step busy %s at %s, want the elapsed time", mid.Busy, clock.now)
		}
		now += d
		clock.now = now
		e.stepped()
		e.commit(now)
	}
	b := e.Busy()
	if b.Busy != b.Now {
		t.Errorf("busy %s of %s, want all of it", b.Busy, b.Now)
	}
	// The first step computes 8 prompt tokens of a 64-token budget (1/8),
	// the nine decode steps 1 of 4 requests (1/4).
	if f := b.SMBusy.Seconds() / b.Busy.Seconds(); f < 0.125 || f > 0.25 {
		t.Errorf("SM fraction %v, want between 1/8 and 1/4", f)
	}
	clock.now = 2 * now
	if idle := e.Busy(); idle.Busy != b.Busy {
		t.Errorf("an idle engine accrued busy time: %s, then %s", b.Busy, idle.Busy)
	}
}

// TestLoadTime: until the load time has passed, /health, /metrics and the
// API answer 503 and /sim/busy says not loaded; afterwards they answer.
func TestLoadTime(t *testing.T) {
	cfg := DefaultConfig()
	cfg.LoadTime = time.Minute
	clock := &manualClock{}
	srv, err := NewServer(cfg, clock)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	get := func(path string) int {
		t.Helper()
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, ts.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	busy := func() BusyReading {
		t.Helper()
		resp, err := http.Get(ts.URL + "/sim/busy")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b BusyReading
		if err := json.NewDecoder(resp.Body).Decode(&b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tc := range []struct {
		at     time.Duration
		want   int
		loaded bool
	}{{0, http.StatusServiceUnavailable, false}, {59 * time.Second, http.StatusServiceUnavailable, false}, {time.Minute, http.StatusOK, true}} {
		clock.now = tc.at
		for _, path := range []string{"/health", "/metrics", "/v1/models"} {
			if got := get(path); got != tc.want {
				t.Errorf("at %s: GET %s = %d, want %d", tc.at, path, got, tc.want)
			}
		}
		if b := busy(); b.Loaded != tc.loaded || b.NowSeconds != tc.at.Seconds() {
			t.Errorf("at %s: /sim/busy = %+v, want loaded %v", tc.at, b, tc.loaded)
		}
	}
}

// manualClock is a Clock set by the test.
type manualClock struct{ now time.Duration }

func (c *manualClock) Now() time.Duration { return c.now }

func (c *manualClock) SleepUntil(ctx context.Context, _ time.Duration) error { return ctx.Err() }
