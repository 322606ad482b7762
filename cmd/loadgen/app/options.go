// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Package app is the loadgen command: its flags (Options, in sections),
// their checks and the load configuration (Options.Config), and the run
// that sends the load and prints the latencies (Main).
package app

import (
	"errors"
	"fmt"
	"time"

	cliflag "k8s.io/component-base/cli/flag"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/loadgen"
)

// Options are the command-line flags of loadgen.
type Options struct {
	url, model, endpoint string
	rate                 float64
	duration             time.Duration
	schedule             string
	promptLen, outputLen string
	seed                 uint64
	timeScale            float64
	maxInFlight          int
	requestTimeout       time.Duration
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{
		url: "http://127.0.0.1:8000", model: "meta-llama/Llama-3.1-8B-Instruct", endpoint: loadgen.EndpointCompletions,
		rate: 1, duration: 30 * time.Second, promptLen: "512", outputLen: "128", seed: 1, timeScale: 1,
		maxInFlight: 10000, requestTimeout: 10 * time.Minute,
	}
}

// Flags returns loadgen's flags bound to o, in sections: the server driven,
// the load (arrivals) and each request.
func (o *Options) Flags() cliflag.NamedFlagSets {
	var fss cliflag.NamedFlagSets
	fs := fss.FlagSet("server")
	fs.StringVar(&o.url, "url", o.url, "Base URL of the OpenAI-compatible server.")
	fs.StringVar(&o.model, "model", o.model, "Model name sent in each request.")
	fs.StringVar(&o.endpoint, "endpoint", o.endpoint, "API to drive: completions or chat.")
	fs.Float64Var(&o.timeScale, "time-scale", o.timeScale, "The server's --time-scale: send that much faster and report latencies in the server's time.")

	fs = fss.FlagSet("load")
	fs.Float64Var(&o.rate, "rate", o.rate, "Poisson arrival rate, requests per second (ignored with --schedule).")
	fs.DurationVar(&o.duration, "duration", o.duration, "How long to send at --rate (ignored with --schedule).")
	fs.StringVar(&o.schedule, "schedule", o.schedule, "Rate schedule RATE:DURATION[,RATE:DURATION...], e.g. 5:30s,20:1m.")
	fs.Uint64Var(&o.seed, "seed", o.seed, "Seed of arrival times and lengths.")
	fs.IntVar(&o.maxInFlight, "max-in-flight", o.maxInFlight, "Most concurrent requests; arrivals beyond it are dropped and counted.")

	fs = fss.FlagSet("request")
	fs.StringVar(&o.promptLen, "prompt-len", o.promptLen, "Prompt length in tokens: N, uniform:MIN:MAX, exp:MEAN[:MAX] or normal:MEAN:STDDEV.")
	fs.StringVar(&o.outputLen, "output-len", o.outputLen, "Output length in tokens (sent as max_tokens), same forms as --prompt-len.")
	fs.DurationVar(&o.requestTimeout, "request-timeout", o.requestTimeout, "Wall-clock limit of one request.")
	return fss
}

// Config validates the options, listing every problem at once, and turns
// them into a load configuration.
func (o *Options) Config() (loadgen.Config, error) {
	var errs []error
	// The rest of the configuration is validated too when a part fails to
	// parse, over a stand-in for that part, so that every problem is listed.
	stand := loadgen.Config{Schedule: []loadgen.Phase{{Rate: 1, Duration: time.Second}}, PromptLen: loadgen.Fixed{N: 1}, OutputLen: loadgen.Fixed{N: 1}}
	sched := []loadgen.Phase{{Rate: o.rate, Duration: o.duration}}
	if o.schedule != "" {
		s, err := loadgen.ParseSchedule(o.schedule)
		if err != nil {
			errs = append(errs, fmt.Errorf("schedule: %w", err))
		}
		sched = s
	} else if o.rate < 0 || o.duration <= 0 {
		errs = append(errs, fmt.Errorf("rate must not be negative and duration must be positive, got %v and %s", o.rate, o.duration))
		sched = nil
	}
	prompt, err := loadgen.ParseDist(o.promptLen)
	if err != nil {
		errs = append(errs, fmt.Errorf("prompt-len: %w", err))
	}
	output, err := loadgen.ParseDist(o.outputLen)
	if err != nil {
		errs = append(errs, fmt.Errorf("output-len: %w", err))
	}
	c := loadgen.Config{
		URL: o.url, Model: o.model, Endpoint: o.endpoint, Schedule: sched,
		PromptLen: prompt, OutputLen: output, Seed: o.seed, TimeScale: o.timeScale,
		MaxInFlight: o.maxInFlight, RequestTimeout: o.requestTimeout,
	}
	check := c
	if sched == nil {
		check.Schedule = stand.Schedule
	}
	if prompt == nil {
		check.PromptLen = stand.PromptLen
	}
	if output == nil {
		check.OutputLen = stand.OutputLen
	}
	if err := check.Validate(); err != nil {
		errs = append(errs, err)
	}
	return c, errors.Join(errs...)
}
