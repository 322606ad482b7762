// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Package loadgen owns the load generator used by the end-to-end tests, the
// demo and the loadgen CLI: open-loop Poisson arrivals following a rate
// schedule, prompt and output lengths drawn from distributions, and a
// streaming OpenAI-API client that records time to first token, inter-token
// latency and end-to-end latency per request.
package loadgen

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Phase is one step of a rate schedule: Rate requests per second for Duration.
type Phase struct {
	Rate     float64
	Duration time.Duration
}

// ParseSchedule parses "RATE:DURATION[,RATE:DURATION...]", e.g. "5:30s,20:1m".
func ParseSchedule(s string) ([]Phase, error) {
	var out []Phase
	for _, p := range strings.Split(s, ",") {
		rate, dur, ok := strings.Cut(strings.TrimSpace(p), ":")
		if !ok {
			return nil, fmt.Errorf("schedule phase %q: want RATE:DURATION", p)
		}
		r, err := strconv.ParseFloat(rate, 64)
		if err != nil || !validRate(r) {
			return nil, fmt.Errorf("schedule phase %q: rate %q is not a finite non-negative number", p, rate)
		}
		d, err := time.ParseDuration(dur)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("schedule phase %q: duration %q is not a positive duration", p, dur)
		}
		out = append(out, Phase{Rate: r, Duration: d})
	}
	return out, nil
}

// validRate reports whether r is a usable arrival rate: finite and not
// negative (an infinite rate would plan arrivals without end).
func validRate(r float64) bool { return r >= 0 && !math.IsInf(r, 1) }

// Endpoints the generator can drive.
const (
	EndpointCompletions = "completions"
	EndpointChat        = "chat"
)

// Config describes one load run. Rates, durations and reported latencies
// are in the target's time: with TimeScale s (the simulator's
// --time-scale), requests are sent s times faster and measured latencies
// are multiplied by s, so a run against a sped-up simulator reads like a
// run at normal speed.
type Config struct {
	// URL is the server's base URL, e.g. http://127.0.0.5:8000.
	URL string
	// Model is the "model" field of each request.
	Model string
	// Endpoint is EndpointCompletions or EndpointChat.
	Endpoint string
	// Schedule is the arrival-rate schedule; arrivals are Poisson.
	Schedule []Phase
	// Trace, when not empty, replaces Schedule, PromptLen, OutputLen and
	// Prompts: its requests are sent at their recorded times (in the
	// target's time) with their prompt and output lengths.
	Trace []TraceRequest
	// PromptLen and OutputLen are the token-length distributions; the
	// output length is sent as max_tokens. They are not used when Prompts
	// is set.
	PromptLen, OutputLen Dist
	// Prompts, when not empty, is a fixed request mix: each arrival sends
	// one of them, drawn uniformly (with Seed), instead of a synthetic
	// prompt of PromptLen tokens.
	Prompts []Prompt
	// Seed makes the arrival times and lengths reproducible.
	Seed uint64
	// TimeScale is the target's speed-up factor (1: none).
	TimeScale float64
	// MaxInFlight bounds concurrent requests; arrivals beyond it are
	// counted as dropped, not delayed, so the load stays open-loop.
	MaxInFlight int
	// RequestTimeout bounds one request (wall-clock).
	RequestTimeout time.Duration
	// Client is the HTTP client; nil means a keep-alive client sized for MaxInFlight.
	Client *http.Client
}

// Validate reports every problem with c at once.
func (c Config) Validate() error {
	var errs []error
	if !strings.HasPrefix(c.URL, "http://") && !strings.HasPrefix(c.URL, "https://") {
		errs = append(errs, fmt.Errorf("url must start with http:// or https://, got %q", c.URL))
	}
	if c.Endpoint != EndpointCompletions && c.Endpoint != EndpointChat {
		errs = append(errs, fmt.Errorf("endpoint must be %q or %q, got %q", EndpointCompletions, EndpointChat, c.Endpoint))
	}
	if len(c.Schedule) == 0 && len(c.Trace) == 0 {
		errs = append(errs, errors.New("schedule must have at least one phase"))
	}
	for i, p := range c.Schedule {
		if !validRate(p.Rate) || p.Duration <= 0 {
			errs = append(errs, fmt.Errorf("schedule phase %d: want a finite non-negative rate and a positive duration, got %v for %s", i+1, p.Rate, p.Duration))
		}
	}
	if len(c.Trace) == 0 && len(c.Prompts) == 0 && (c.PromptLen == nil || c.OutputLen == nil) {
		errs = append(errs, errors.New("prompt and output length distributions are required"))
	}
	for i, p := range c.Prompts {
		if p.Text == "" || p.MaxTokens < 1 {
			errs = append(errs, fmt.Errorf("prompt %d: want non-empty text and max_tokens of at least 1", i+1))
			break
		}
	}
	if !(c.TimeScale > 0) || math.IsInf(c.TimeScale, 1) {
		errs = append(errs, fmt.Errorf("time-scale must be positive and finite, got %v", c.TimeScale))
	}
	if c.MaxInFlight < 1 {
		errs = append(errs, fmt.Errorf("max-in-flight must be at least 1, got %d", c.MaxInFlight))
	}
	if c.RequestTimeout <= 0 {
		errs = append(errs, fmt.Errorf("request-timeout must be positive, got %s", c.RequestTimeout))
	}
	return errors.Join(errs...)
}

// Prompt is one request of a fixed mix: the prompt text (or chat message)
// and the max_tokens to send with it.
type Prompt struct {
	Text      string
	MaxTokens int
}

// Result is what one request saw. Times are in the target's time (scaled).
type Result struct {
	// Sent is when the request was sent, since the start of the run.
	Sent         time.Duration
	PromptTokens int
	MaxTokens    int
	// Tokens is the number of token events received.
	Tokens int
	TTFT   time.Duration
	// ITL holds the gaps between consecutive token events.
	ITL []time.Duration
	E2E time.Duration
	// Err is set when the request failed; the timings above are then partial.
	Err error
	// Source is the TraceRequest's Source in a trace replay; 0 otherwise.
	Source int
}

// Report is the outcome of a run.
type Report struct {
	Results []Result
	// Drops are the arrivals not sent because MaxInFlight requests were
	// open, in the order they were due.
	Drops []Drop
	// Wall is the run's wall-clock length.
	Wall time.Duration
}

// Drop is an arrival not sent because MaxInFlight requests were open.
type Drop struct {
	// At is when it was due, since the start of the run, in the target's
	// time (as Result.Sent).
	At           time.Duration
	PromptTokens int
	MaxTokens    int
	// Source is the TraceRequest's Source in a trace replay; 0 otherwise.
	Source int
}

// arrival is one planned request.
type arrival struct {
	at             time.Duration // wall-clock offset
	prompt, output int
	text           string // from Config.Prompts; "" means a synthetic prompt of prompt tokens
	source         int    // TraceRequest.Source
}

// Plan returns the arrivals of cfg's schedule: wall-clock offsets from the
// start and lengths, deterministic in cfg.Seed.
func plan(cfg Config) []arrival {
	if len(cfg.Trace) > 0 {
		out := make([]arrival, 0, len(cfg.Trace))
		for _, t := range cfg.Trace {
			out = append(out, arrival{at: time.Duration(float64(t.At) / cfg.TimeScale), prompt: t.PromptTokens, output: t.OutputTokens, source: t.Source})
		}
		return out
	}
	r := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x5eed))
	var out []arrival
	var phaseStart time.Duration // in target time
	for _, ph := range cfg.Schedule {
		t := 0.0
		for ph.Rate > 0 {
			t += r.ExpFloat64() / ph.Rate
			if t >= ph.Duration.Seconds() {
				break
			}
			at := phaseStart + time.Duration(t*float64(time.Second))
			a := arrival{at: time.Duration(float64(at) / cfg.TimeScale)}
			if len(cfg.Prompts) > 0 {
				p := cfg.Prompts[r.IntN(len(cfg.Prompts))]
				a.text, a.prompt, a.output = p.Text, approxTokens(p.Text), p.MaxTokens
			} else {
				a.prompt, a.output = cfg.PromptLen.Sample(r), cfg.OutputLen.Sample(r)
			}
			out = append(out, a)
		}
		phaseStart += ph.Duration
	}
	return out
}

// Run sends the planned load and waits for every request to finish (or
// ctx to end, which cancels open requests).
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid load configuration: %w", err)
	}
	client := cfg.Client
	if client == nil {
		client = &http.Client{Transport: &http.Transport{
			MaxIdleConns:        cfg.MaxInFlight,
			MaxIdleConnsPerHost: cfg.MaxInFlight,
			DisableCompression:  true,
		}}
		defer client.CloseIdleConnections()
	}
	arrivals := plan(cfg)
	rep := &Report{Results: make([]Result, 0, len(arrivals))}
	var (
		mu  sync.Mutex
		wg  sync.WaitGroup
		sem = make(chan struct{}, cfg.MaxInFlight)
	)
	start := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
loop:
	for _, a := range arrivals {
		if d := time.Until(start.Add(a.at)); d > 0 {
			timer.Reset(d)
			select {
			case <-ctx.Done():
				break loop
			case <-timer.C:
			}
		}
		select {
		case sem <- struct{}{}:
		default:
			rep.Drops = append(rep.Drops, Drop{At: scale(a.at, cfg.TimeScale), PromptTokens: a.prompt, MaxTokens: a.output, Source: a.source})
			continue
		}
		wg.Add(1)
		go func(a arrival) {
			defer wg.Done()
			defer func() { <-sem }()
			res := doRequest(ctx, client, cfg, a)
			res.Sent = scale(time.Since(start), cfg.TimeScale) - res.E2E
			mu.Lock()
			rep.Results = append(rep.Results, res)
			mu.Unlock()
		}(a)
	}
	wg.Wait()
	rep.Wall = time.Since(start)
	sort.Slice(rep.Results, func(i, j int) bool { return rep.Results[i].Sent < rep.Results[j].Sent })
	return rep, ctx.Err()
}

func scale(d time.Duration, s float64) time.Duration {
	return time.Duration(float64(d) * s)
}
