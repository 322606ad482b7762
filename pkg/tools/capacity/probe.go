// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package capacity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"time"

	"k8s.io/klog/v2"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/loadgen"
)

// Config describes one capacity run. Rates and durations are in the
// target's time (see loadgen.Config.TimeScale).
type Config struct {
	// URL is the server's base URL; MetricsURL its /metrics page ("" to
	// run without the server's signals).
	URL, MetricsURL string
	// Model is sent with each request and must be listed by GET /v1/models.
	Model    string
	Endpoint string
	// Rates is the step plan, requests/s, run in this order.
	Rates []float64
	// Warmup is excluded from each step; Window is the measured part, made
	// longer where needed so that it holds MinRequests arrivals.
	Warmup, Window time.Duration
	MinRequests    int
	// PromptLen and OutputLen, or Prompts: the request mix.
	PromptLen, OutputLen loadgen.Dist
	Prompts              []loadgen.Prompt
	SLOs                 []SLO
	Seed                 uint64
	TimeScale            float64
	MaxInFlight          int
	RequestTimeout       time.Duration
	// MetricsInterval is how often /metrics is read during a window (target's time).
	MetricsInterval time.Duration
	// StopAfterFailures ends the plan after this many failing steps in a
	// row (0: run every step).
	StopAfterFailures int
	Cost              Cost
	// Client is the HTTP client for /v1/models and /metrics; nil means a default one.
	Client *http.Client
}

// Validate reports every problem with c at once.
func (c Config) Validate() error {
	var errs []error
	if !strings.HasPrefix(c.URL, "http://") && !strings.HasPrefix(c.URL, "https://") {
		errs = append(errs, fmt.Errorf("url must start with http:// or https://, got %q", c.URL))
	}
	if c.MetricsURL != "" && !strings.HasPrefix(c.MetricsURL, "http://") && !strings.HasPrefix(c.MetricsURL, "https://") {
		errs = append(errs, fmt.Errorf("metrics-url must start with http:// or https://, got %q", c.MetricsURL))
	}
	if len(c.Rates) == 0 {
		errs = append(errs, errors.New("the step plan has no rates"))
	}
	for _, r := range c.Rates {
		if !(r > 0) || math.IsInf(r, 0) {
			errs = append(errs, fmt.Errorf("every rate must be a positive number, got %v", r))
			break
		}
	}
	if c.Warmup < 0 || c.Window <= 0 {
		errs = append(errs, fmt.Errorf("warmup must not be negative and the window must be positive, got %s and %s", c.Warmup, c.Window))
	}
	if c.MinRequests < 1 {
		errs = append(errs, fmt.Errorf("min-requests must be at least 1, got %d", c.MinRequests))
	}
	if len(c.SLOs) == 0 {
		errs = append(errs, errors.New("at least one SLO is required"))
	}
	if c.MetricsInterval <= 0 {
		errs = append(errs, fmt.Errorf("metrics-interval must be positive, got %s", c.MetricsInterval))
	}
	if c.StopAfterFailures < 0 {
		errs = append(errs, fmt.Errorf("stop-after-failures must not be negative, got %d", c.StopAfterFailures))
	}
	if !(c.Cost.PricePerGPUHour >= 0) || math.IsInf(c.Cost.PricePerGPUHour, 0) || c.Cost.GPUsPerReplica < 1 {
		errs = append(errs, fmt.Errorf("price must not be negative and gpus per replica must be at least 1, got %v and %d", c.Cost.PricePerGPUHour, c.Cost.GPUsPerReplica))
	}
	if math.IsInf(c.TimeScale, 0) {
		errs = append(errs, fmt.Errorf("time-scale must be finite, got %v", c.TimeScale))
	}
	if err := c.load(1, time.Second, 0).Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// load is the load-generator configuration of one step.
func (c Config) load(rate float64, length time.Duration, step int) loadgen.Config {
	return loadgen.Config{
		URL: c.URL, Model: c.Model, Endpoint: c.Endpoint,
		Schedule:  []loadgen.Phase{{Rate: rate, Duration: length}},
		PromptLen: c.PromptLen, OutputLen: c.OutputLen, Prompts: c.Prompts,
		Seed: c.Seed + uint64(step), TimeScale: c.TimeScale,
		MaxInFlight: c.MaxInFlight, RequestTimeout: c.RequestTimeout,
	}
}

// window is the measured length of a step at rate: at least Window, and
// long enough to hold MinRequests arrivals.
func (c Config) window(rate float64) time.Duration {
	const unit = 100 * time.Millisecond
	need := time.Duration(math.Ceil(float64(c.MinRequests)/rate*float64(time.Second)/float64(unit))) * unit
	return max(c.Window, need)
}

// ErrInterrupted is returned (wrapped) when ctx ended during the run; the
// steps measured so far are still returned.
var ErrInterrupted = errors.New("interrupted")

// Run checks the endpoint, runs the step plan and returns every step. onStep,
// when not nil, is called after each step (also an interrupted one) with all
// steps so far, so that partial results can be written as they come.
func Run(ctx context.Context, cfg Config, onStep func([]Step)) ([]Step, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid capacity configuration: %w", err)
	}
	client := cfg.Client
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	if err := CheckEndpoint(ctx, client, cfg.URL, cfg.Model); err != nil {
		return nil, err
	}
	var steps []Step
	failing := 0
	for i, rate := range cfg.Rates {
		st, err := runStep(ctx, cfg, client, i, rate)
		if st != nil {
			steps = append(steps, *st)
			if onStep != nil {
				onStep(steps)
			}
		}
		if err != nil {
			return steps, err
		}
		if st.Pass {
			failing = 0
		} else if failing++; cfg.StopAfterFailures > 0 && failing >= cfg.StopAfterFailures {
			klog.InfoS("Stopping the plan", "failingStepsInARow", failing, "lastRate", rate)
			break
		}
	}
	return steps, nil
}

func runStep(ctx context.Context, cfg Config, client *http.Client, i int, rate float64) (*Step, error) {
	window := cfg.window(rate)
	in := StepInput{Index: i, Offered: rate, Warmup: cfg.Warmup, Window: window}

	// Sample the server's page during the window only (wall clock).
	var smp sampler
	sctx, stopSampling := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if cfg.MetricsURL == "" {
			return
		}
		wait := time.NewTimer(time.Duration(float64(cfg.Warmup) / cfg.TimeScale))
		defer wait.Stop()
		select {
		case <-sctx.Done():
			return
		case <-wait.C:
		}
		wctx, cancel := context.WithTimeout(sctx, time.Duration(float64(window)/cfg.TimeScale))
		defer cancel()
		smp.run(wctx, newMetricsReader(cfg.MetricsURL, cfg.Model, client), max(time.Millisecond, time.Duration(float64(cfg.MetricsInterval)/cfg.TimeScale)))
	}()
	rep, err := loadgen.Run(ctx, cfg.load(rate, cfg.Warmup+window, i))
	stopSampling()
	<-done
	in.Server, _ = smp.signals()
	if cfg.MetricsURL != "" && in.Server.Samples == 0 {
		klog.InfoS("No /metrics sample in the step's window", "url", cfg.MetricsURL, "step", i, "failures", in.Server.Failures)
	}
	if rep != nil {
		in.Results, in.Dropped = rep.Results, len(rep.Drops)
	}
	if err != nil {
		if ctx.Err() == nil {
			return nil, fmt.Errorf("step %d at %.4g req/s: %w", i, rate, err)
		}
		in.Interrupted = true
		st := Measure(in, cfg.SLOs, cfg.MinRequests)
		return &st, fmt.Errorf("step %d at %.4g req/s: %w", i, rate, ErrInterrupted)
	}
	st := Measure(in, cfg.SLOs, cfg.MinRequests)
	return &st, nil
}

// CheckEndpoint asks GET /v1/models and fails with a clear message when the
// server cannot be reached or does not list model.
func CheckEndpoint(ctx context.Context, client *http.Client, baseURL, model string) error {
	u := strings.TrimSuffix(baseURL, "/") + "/v1/models"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("building request for %s: %w", u, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach the endpoint %s: %w", baseURL, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("reading %s: %w", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the endpoint %s answered GET /v1/models with status %d: %.200q", baseURL, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return fmt.Errorf("the endpoint %s is not OpenAI-compatible: GET /v1/models is not a model list: %w", baseURL, err)
	}
	var ids []string
	for _, m := range list.Data {
		if m.ID == model {
			return nil
		}
		ids = append(ids, m.ID)
	}
	return fmt.Errorf("the endpoint %s does not serve model %q; it lists %q (set --model)", baseURL, model, ids)
}
