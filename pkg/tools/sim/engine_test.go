// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// testRecorder keeps what the engine reports.
type testRecorder struct {
	ttft, itl   []time.Duration
	done        []finishedRequest
	preemptions int
	maxWaiting  int
	maxRunning  int
	maxBlocks   int
	lastState   [3]int
	prompt, gen int
	loraReports [][2]string // running, waiting adapters, comma-separated
}

func (r *testRecorder) state(running, waiting, used, _ int) {
	r.maxWaiting = max(r.maxWaiting, waiting)
	r.maxRunning = max(r.maxRunning, running)
	r.maxBlocks = max(r.maxBlocks, used)
	r.lastState = [3]int{running, waiting, used}
}
func (r *testRecorder) step(_, prompt, gen int)    { r.prompt += prompt; r.gen += gen }
func (r *testRecorder) preempted()                 { r.preemptions++ }
func (r *testRecorder) firstToken(d time.Duration) { r.ttft = append(r.ttft, d) }
func (r *testRecorder) interToken(d time.Duration) { r.itl = append(r.itl, d) }
func (r *testRecorder) finished(f finishedRequest) { r.done = append(r.done, f) }
func (r *testRecorder) adapters(run, wait []string) {
	r.loraReports = append(r.loraReports, [2]string{strings.Join(run, ","), strings.Join(wait, ",")})
}

type testArrival struct {
	at             time.Duration
	prompt, output int
}

// simulate drives the engine's schedule/commit directly on virtual time,
// without goroutines or sleeping, until every arrival has finished. It
// returns the recorder and the final simulated time.
func simulate(t *testing.T, cfg Config, arrivals []testArrival) (*testRecorder, time.Duration) {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("config: %v", err)
	}
	rec := &testRecorder{}
	e := NewEngine(cfg, nil, rec)
	var now time.Duration
	next := 0
	for steps := 0; ; steps++ {
		if steps > 10_000_000 {
			t.Fatalf("simulation did not finish")
		}
		for next < len(arrivals) && arrivals[next].at <= now {
			a := arrivals[next]
			e.enqueue(&seq{prompt: a.prompt, maxTokens: a.output, arrival: a.at, notify: make(chan struct{}, 1)}, now)
			next++
		}
		if len(e.running) == 0 && len(e.waiting) == 0 {
			if next == len(arrivals) {
				break
			}
			now = arrivals[next].at
			continue
		}
		now += e.schedule(now)
		e.commit(now)
	}
	if len(rec.done) != len(arrivals) {
		t.Fatalf("finished %d of %d requests", len(rec.done), len(arrivals))
	}
	if rec.lastState != [3]int{0, 0, 0} {
		t.Fatalf("engine not empty at the end: running, waiting, blocks = %v", rec.lastState)
	}
	return rec, now
}

func testConfig() Config {
	c := DefaultConfig()
	c.MaxModelLen = 4096
	return c
}

func TestSingleRequestTimings(t *testing.T) {
	cfg := testConfig()
	rec, _ := simulate(t, cfg, []testArrival{{at: time.Second, prompt: 100, output: 10}})
	wantTTFT := cfg.StepDuration(1, 100)
	if len(rec.ttft) != 1 || rec.ttft[0] != wantTTFT {
		t.Errorf("TTFT = %v, want [%v]", rec.ttft, wantTTFT)
	}
	if len(rec.itl) != 9 {
		t.Fatalf("got %d inter-token latencies, want 9", len(rec.itl))
	}
	for _, d := range rec.itl {
		if d != cfg.StepDuration(1, 0) {
			t.Errorf("ITL = %v, want %v", d, cfg.StepDuration(1, 0))
		}
	}
	f := rec.done[0]
	if want := wantTTFT + 9*cfg.StepDuration(1, 0); f.e2e != want || f.queue != 0 || f.reason != ReasonLength || f.genTokens != 10 {
		t.Errorf("finished = %+v, want e2e %v, queue 0, reason length, 10 tokens", f, want)
	}
	if rec.prompt != 100 || rec.gen != 10 {
		t.Errorf("prompt, generation tokens = %d, %d; want 100, 10", rec.prompt, rec.gen)
	}
}

func TestSchedulingCases(t *testing.T) {
	tests := []struct {
		name     string
		mutate   func(*Config)
		arrivals []testArrival
		check    func(t *testing.T, cfg Config, rec *testRecorder)
	}{
		{
			name:     "max-num-seqs bounds the batch and the rest waits in FIFO order",
			mutate:   func(c *Config) { c.MaxNumSeqs = 2 },
			arrivals: []testArrival{{0, 10, 5}, {0, 10, 5}, {0, 10, 5}, {0, 10, 5}},
			check: func(t *testing.T, cfg Config, rec *testRecorder) {
				if rec.maxRunning != 2 || rec.maxWaiting != 2 {
					t.Errorf("max running, waiting = %d, %d; want 2, 2", rec.maxRunning, rec.maxWaiting)
				}
				if rec.done[0].queue != 0 || rec.done[2].queue <= 0 || rec.done[3].queue != rec.done[2].queue {
					t.Errorf("queue times = %v %v %v %v; want 0, 0, >0, same as third", rec.done[0].queue, rec.done[1].queue, rec.done[2].queue, rec.done[3].queue)
				}
			},
		},
		{
			name: "KV exhaustion preempts the newest running request, which is recomputed and finishes",
			mutate: func(c *Config) {
				c.NumGPUBlocks, c.BlockSize, c.MaxModelLen, c.DefaultMaxTokens = 10, 16, 160, 16
			},
			arrivals: []testArrival{{0, 64, 80}, {0, 64, 80}},
			check: func(t *testing.T, cfg Config, rec *testRecorder) {
				if rec.preemptions == 0 {
					t.Errorf("no preemption counted")
				}
				if rec.maxBlocks > cfg.NumGPUBlocks {
					t.Errorf("used %d blocks of %d", rec.maxBlocks, cfg.NumGPUBlocks)
				}
				for _, f := range rec.done {
					if f.genTokens != 80 || f.reason != ReasonLength {
						t.Errorf("finished %+v, want 80 tokens, reason length", f)
					}
				}
				if rec.gen != 160 {
					t.Errorf("generation tokens = %d, want 160 (recompute generates nothing twice)", rec.gen)
				}
			},
		},
		{
			name:     "chunked prefill spreads a long prompt over several steps",
			mutate:   func(c *Config) { c.MaxNumBatchedTokens, c.MaxNumSeqs = 64, 4 },
			arrivals: []testArrival{{0, 200, 2}},
			check: func(t *testing.T, cfg Config, rec *testRecorder) {
				want := cfg.StepDuration(1, 64)*3 + cfg.StepDuration(1, 8)
				if rec.ttft[0] != want {
					t.Errorf("TTFT = %v, want 4 steps = %v", rec.ttft[0], want)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			tc.mutate(&cfg)
			rec, _ := simulate(t, cfg, tc.arrivals)
			tc.check(t, cfg, rec)
		})
	}
}

func poisson(seed uint64, rate float64, n, prompt, output int) []testArrival {
	r := rand.New(rand.NewPCG(seed, seed))
	out := make([]testArrival, n)
	t := 0.0
	for i := range out {
		t += r.ExpFloat64() / rate
		out[i] = testArrival{at: time.Duration(t * float64(time.Second)), prompt: prompt, output: output}
	}
	return out
}

// TestCapacity checks Config.Capacity against the simulated engine: at
// half of it the queue stays near empty; at twice it the queue grows, and
// completed requests per second saturate near the computed capacity.
func TestCapacity(t *testing.T) {
	cfg := testConfig()
	cfg.MaxNumSeqs = 32
	const prompt, output = 256, 64
	capacity := cfg.Capacity(prompt, output)
	if capacity <= 0 {
		t.Fatalf("capacity = %v", capacity)
	}

	below, _ := simulate(t, cfg, poisson(1, capacity/2, 2000, prompt, output))
	if below.maxWaiting > cfg.MaxNumSeqs/4 {
		t.Errorf("at half capacity the queue reached %d", below.maxWaiting)
	}

	n := 2000
	above, end := simulate(t, cfg, poisson(2, capacity*2, n, prompt, output))
	if above.maxWaiting < n/4 {
		t.Errorf("at twice capacity the queue only reached %d", above.maxWaiting)
	}
	throughput := float64(n) / end.Seconds()
	if ratio := throughput / capacity; ratio < 0.85 || ratio > 1.15 {
		t.Errorf("saturated throughput %.2f req/s vs capacity %.2f req/s (ratio %.2f)", throughput, capacity, ratio)
	}
	p50 := func(ds []time.Duration) time.Duration {
		s := append([]time.Duration(nil), ds...)
		for i := range s { // insertion sort is fine for test sizes
			for j := i; j > 0 && s[j] < s[j-1]; j-- {
				s[j], s[j-1] = s[j-1], s[j]
			}
		}
		return s[len(s)/2]
	}
	if p50(above.ttft) < 10*p50(below.ttft) {
		t.Errorf("TTFT p50 above capacity %v is not well above the one below %v", p50(above.ttft), p50(below.ttft))
	}
}

func TestCapacityFormula(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxNumSeqs, cfg.NumGPUBlocks, cfg.BlockSize = 4, 1000, 16
	cfg.StepBase, cfg.StepPerSeq, cfg.PrefillPerToken = 10*time.Millisecond, time.Millisecond, 0
	// B=4, step = 14 ms, each request 10 steps: 4 / 0.14 s.
	if got, want := cfg.Capacity(10, 10), 4/0.14; got < want*0.999 || got > want*1.001 {
		t.Errorf("Capacity = %v, want %v", got, want)
	}
	cfg.NumGPUBlocks = 2 // one 20-token request per 2 blocks: B=1
	if got := cfg.MaxBatch(10, 10); got != 1 {
		t.Errorf("MaxBatch = %d, want 1 (KV-bound)", got)
	}
}
