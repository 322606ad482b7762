// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Package app is the inference-sim command: its flags (Options, in
// sections), their checks (Validate, after --profile's defaults), and the
// server or front door it runs (Main).
package app

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	cliflag "k8s.io/component-base/cli/flag"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/cli"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/sim"
)

// Options are the command-line flags of inference-sim.
type Options struct {
	profile         string
	listen          string
	shutdownTimeout time.Duration
	sim             sim.Config
	frontDoor       sim.FrontDoorConfig // front-door mode when Backend is set
	// logging is klog's configuration: --logging-format, -v, --vmodule.
	logging *logsapi.LoggingConfiguration
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{listen: "127.0.0.1:8000", shutdownTimeout: 10 * time.Second, sim: sim.DefaultConfig(),
		frontDoor: sim.FrontDoorConfig{Pool: "pool", MaxHold: 5 * time.Minute, ProbeEvery: 100 * time.Millisecond, Names: sim.NamesDeprecated},
		logging:   logsapi.NewLoggingConfiguration()}
}

// Flags returns inference-sim's flags bound to o, in sections: the server
// (address, models, page format, clock), the engine (profile, batch and KV
// limits, step time), the front door, and logging (k8s.io/component-base/logs:
// --logging-format text or json, -v, --vmodule).
func (o *Options) Flags() cliflag.NamedFlagSets {
	var fss cliflag.NamedFlagSets
	c := &o.sim
	fs := fss.FlagSet("server")
	fs.StringVar(&o.listen, "listen", o.listen, "Address to serve the OpenAI API and /metrics on, host:port (e.g. 127.0.0.5:8000).")
	fs.StringVar(&c.Model, "model", c.Model, "Served model name: the API's model id and the metrics' model_name label. Several comma-separated names serve several models, each with its own engine and series (vllm-v1 and sglang only).")
	fs.StringVar(&c.LoRAAdapters, "lora-adapters", c.LoRAAdapters, "LoRA adapters served beside the base --model (a single model), comma-separated: a request whose model is an adapter runs on the base model's engine, /v1/models lists them, and vllm-v1 pages carry vllm:lora_requests_info. Empty: none.")
	fs.StringVar(&c.MetricsFormat, "metrics-format", c.MetricsFormat, "Shape of /metrics: one of "+strings.Join(sim.Formats, ", ")+".")
	fs.DurationVar(&c.LoadTime, "load-time", c.LoadTime, "Simulated time the server spends loading the model after it starts: until then /health, /metrics and the API answer 503.")
	fs.Float64Var(&c.TimeScale, "time-scale", c.TimeScale, "Run simulated time this many times faster than the wall clock; metrics stay in simulated seconds.")
	fs.Int64Var(&c.Seed, "seed", c.Seed, "Seed of the generated text.")
	fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", o.shutdownTimeout, "On SIGTERM or SIGINT, how long to let in-flight requests finish.")

	fs = fss.FlagSet("engine")
	fs.StringVar(&o.profile, "profile", o.profile, "Calibrated model profile ("+strings.Join(sim.ProfileNames(), ", ")+"): sets the model name, the batch and KV limits and a step time measured on that GPU, in place of the linear step model; flags given explicitly still override the limits. Empty: the linear model of this section's other flags.")
	fs.IntVar(&c.MaxNumSeqs, "max-num-seqs", c.MaxNumSeqs, "Maximum number of requests in the running batch.")
	fs.IntVar(&c.MaxNumBatchedTokens, "max-num-batched-tokens", c.MaxNumBatchedTokens, "Token budget of one engine step (decode tokens plus prefill chunks).")
	fs.IntVar(&c.MaxLoRAs, "max-loras", c.MaxLoRAs, "vLLM's --max-loras: the most distinct LoRA adapters in the running batch; a waiting request of another adapter waits.")
	fs.IntVar(&c.NumGPUBlocks, "num-gpu-blocks", c.NumGPUBlocks, "KV-cache budget in blocks.")
	fs.IntVar(&c.BlockSize, "block-size", c.BlockSize, "Tokens per KV-cache block.")
	fs.IntVar(&c.MaxModelLen, "max-model-len", c.MaxModelLen, "Maximum prompt plus output tokens of one request; also sets the token histograms' buckets.")
	fs.IntVar(&c.DefaultMaxTokens, "default-max-tokens", c.DefaultMaxTokens, "Output length of a request that sets no max_tokens.")
	fs.DurationVar(&c.PrefillPerToken, "prefill-time-per-token", c.PrefillPerToken, "Step time added per prompt token computed in the step.")
	fs.DurationVar(&c.StepBase, "decode-time-base", c.StepBase, "Fixed time of one engine step.")
	fs.DurationVar(&c.StepPerSeq, "decode-time-per-seq", c.StepPerSeq, "Step time added per request in the step's batch.")

	fs = fss.FlagSet("front door")
	fs.StringVar(&o.frontDoor.Backend, "front-door-backend", o.frontDoor.Backend, "Run as a front door (a router) instead of a model server: hold every request while this backend's /health does not answer 200 (e.g. a Service with no Ready pod), forward them once it does, and publish the held requests and those in flight on /metrics as an endpoint picker does (names by --front-door-metric-names). Base URL, e.g. http://my-model:8000. Empty: a model server.")
	fs.StringVar(&o.frontDoor.Pool, "front-door-pool", o.frontDoor.Pool, "Front door: the inference_pool label of its gauge.")
	fs.DurationVar(&o.frontDoor.MaxHold, "front-door-max-hold", o.frontDoor.MaxHold, "Front door: how long one request is held at most before it is answered 503.")
	fs.StringVar(&o.frontDoor.Names, "front-door-metric-names", o.frontDoor.Names, "Front door: whose names its gauges carry: deprecated (the Gateway API Inference Extension's endpoint picker: inference_extension_flow_control_queue_size, inference_objective_running_requests, inference_extension_flow_control_pool_saturation), current (llm-d's router: llm_d_epp_flow_control_queue_size, llm_d_epp_request_running, llm_d_epp_flow_control_pool_saturation) or both (llm-d's router as it ships: the current names and the deprecated ones beside them, with the same values).")
	fs.IntVar(&o.frontDoor.SaturationAt, "front-door-saturation-at", o.frontDoor.SaturationAt, "Front door: publish the pool's saturation as the requests in flight over this many (1 while the backend has no healthy endpoint, as llm-d reads an empty pool). 0: no saturation series, as an endpoint picker without flow control.")

	fs = fss.FlagSet("logging")
	logsapi.AddFlags(o.logging, fs)
	// Split output streams need the LoggingAlphaOptions feature gate, which
	// the simulator does not offer (as the adapter): --help does not list them.
	for _, name := range []string{"log-text-split-stream", "log-text-info-buffer-size", "log-json-split-stream", "log-json-info-buffer-size"} {
		_ = fs.MarkHidden(name)
	}
	return fss
}

// Validate checks the options, listing every problem at once.
func (o *Options) Validate() error {
	var errs []error
	if _, _, err := net.SplitHostPort(o.listen); err != nil {
		errs = append(errs, fmt.Errorf("listen: %w", err))
	}
	if o.shutdownTimeout < 0 {
		errs = append(errs, fmt.Errorf("shutdown-timeout must not be negative, got %s", o.shutdownTimeout))
	}
	if err := o.sim.Validate(); err != nil {
		errs = append(errs, err)
	}
	if o.frontDoor.Backend != "" {
		if err := o.frontDoor.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := logsapi.Validate(o.logging, nil, nil).ToAggregate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// parse parses args. With --profile, the profile's values become the
// defaults and args are parsed again over them, so that explicit flags win.
func parse(args []string, stdout, stderr io.Writer) (*Options, bool, error) {
	o := NewOptions()
	if done, err := parseInto(o, args, stdout, stderr); done || err != nil {
		return o, done, err
	}
	if o.profile == "" {
		return o, false, nil
	}
	p, err := sim.LookupProfile(o.profile)
	if err != nil {
		return o, false, cli.Usage(fmt.Errorf("profile: %w", err))
	}
	o = NewOptions()
	o.sim = p.Apply(o.sim)
	done, err := parseInto(o, args, stdout, stderr)
	return o, done, err
}

// parseInto parses args into o's flags with cli.ParseSections: --help
// prints the usage and the flags, section by section, on stdout.
func parseInto(o *Options, args []string, stdout, stderr io.Writer) (bool, error) {
	return cli.ParseSections("inference-sim", usage, o.Flags(), args, stdout, stderr)
}
