// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Package app is the capacity command: its flags (Options, in sections),
// their checks and the resolved Config (Options.Config), and the probe's run
// (Main).
package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	cliflag "k8s.io/component-base/cli/flag"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/capacity"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/loadgen"
)

// Options are the command-line flags of capacity.
type Options struct {
	url, metricsURL, model, endpoint string
	rates, ramp                      string
	warmup, window                   time.Duration
	minRequests                      int
	promptLen, outputLen, prompts    string
	slo                              string
	seed                             uint64
	timeScale                        float64
	maxInFlight                      int
	requestTimeout, metricsInterval  time.Duration
	stopAfterFailures                int
	price                            float64
	gpus                             int
	hpaMetric                        string
	margin                           float64
	hpaName, namespace               string
	minReplicas, maxReplicas         int
	peakRate                         float64
	output, kind, method, scaler     string
	modelLoadTime                    time.Duration
	fromJSON                         string
	jsonOut, svgOut, hpaOut          string
}

// The values of --output.
const (
	outputHPA    = "hpa"
	outputKEDA   = "keda"
	outputBoth   = "both"
	outputSingle = "single-metric"
)

var outputs = []string{outputHPA, outputKEDA, outputBoth, outputSingle}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{
		url: "http://127.0.0.1:8000", model: "meta-llama/Llama-3.1-8B-Instruct", endpoint: loadgen.EndpointCompletions,
		warmup: 10 * time.Second, window: 30 * time.Second, minRequests: 200,
		promptLen: "512", outputLen: "128", slo: "ttft:p90<=500ms,itl:p90<=50ms,errors<=0.1%",
		seed: 1, timeScale: 1, maxInFlight: 10000, requestTimeout: 2 * time.Minute, metricsInterval: time.Second,
		stopAfterFailures: 2, gpus: 1, hpaMetric: capacity.MetricAuto, margin: 0.2, hpaName: "model-server",
		minReplicas: 1, maxReplicas: 10,
		output: outputHPA, kind: capacity.KindDeployment, modelLoadTime: capacity.DefaultModelLoadTime, scaler: capacity.DefaultScalerAddress,
	}
}

// Flags returns capacity's flags bound to o, in sections by concern: the
// replica probed, the step plan, the load of each step, the SLOs and the
// cost, the recommendation, and the files read and written.
func (o *Options) Flags() cliflag.NamedFlagSets {
	var fss cliflag.NamedFlagSets
	fs := fss.FlagSet("server")
	fs.StringVar(&o.url, "url", o.url, "Base URL of one replica of the OpenAI-compatible server.")
	fs.StringVar(&o.metricsURL, "metrics-url", o.metricsURL, "The replica's Prometheus page; empty means URL/metrics, \"none\" runs without the server's signals (and without a recommendation).")
	fs.StringVar(&o.model, "model", o.model, "Model name sent in each request; the server must list it in GET /v1/models.")
	fs.StringVar(&o.endpoint, "endpoint", o.endpoint, "API to drive: completions or chat.")
	fs.Float64Var(&o.timeScale, "time-scale", o.timeScale, "The server's --time-scale (inference-sim): send that much faster and report in the server's time.")

	fs = fss.FlagSet("probe plan")
	fs.StringVar(&o.rates, "rates", o.rates, "Step plan: arrival rates in requests/s, e.g. 2,4,6,8 (or use --ramp).")
	fs.StringVar(&o.ramp, "ramp", o.ramp, "Step plan START:STOP:STEP in requests/s, e.g. 2:20:2.")
	fs.DurationVar(&o.warmup, "warmup", o.warmup, "Start of each step that is not measured (server time).")
	fs.DurationVar(&o.window, "window", o.window, "Measured part of each step (server time); lengthened to hold --min-requests arrivals.")
	fs.IntVar(&o.minRequests, "min-requests", o.minRequests, "Fewest requests a step's window must hold for its percentiles to count as stable.")
	fs.DurationVar(&o.metricsInterval, "metrics-interval", o.metricsInterval, "How often the server's page is read during a window (server time).")
	fs.IntVar(&o.stopAfterFailures, "stop-after-failures", o.stopAfterFailures, "End the plan after this many failing steps in a row; 0 runs every step.")

	fs = fss.FlagSet("load")
	fs.StringVar(&o.promptLen, "prompt-len", o.promptLen, "Prompt length in tokens: N, uniform:MIN:MAX, exp:MEAN[:MAX] or normal:MEAN:STDDEV.")
	fs.StringVar(&o.outputLen, "output-len", o.outputLen, "Output length in tokens (sent as max_tokens), same forms as --prompt-len.")
	fs.StringVar(&o.prompts, "prompts", o.prompts, "JSONL request mix, one {\"prompt\": ..., \"max_tokens\": N} per line; replaces --prompt-len and --output-len.")
	fs.Uint64Var(&o.seed, "seed", o.seed, "Seed of arrival times and lengths.")
	fs.IntVar(&o.maxInFlight, "max-in-flight", o.maxInFlight, "Most concurrent requests; arrivals beyond it are dropped and count as errors.")
	fs.DurationVar(&o.requestTimeout, "request-timeout", o.requestTimeout, "Wall-clock limit of one request; a request past it is an error.")

	fs = fss.FlagSet("SLO and cost")
	fs.StringVar(&o.slo, "slo", o.slo, "SLOs, comma-separated: ttft:pNN<=DURATION, itl:pNN<=DURATION, tpot:pNN<=DURATION, e2e:pNN<=DURATION, errors<=PERCENT%, good>=PERCENT% (docs/capacity.md#the-method).")
	fs.Float64Var(&o.price, "price-per-gpu-hour", o.price, "Price of one GPU-hour, for the cost per 1,000 requests; 0 leaves cost out.")
	fs.IntVar(&o.gpus, "gpus-per-replica", o.gpus, "GPUs one replica uses.")

	fs = fss.FlagSet("recommendation")
	fs.StringVar(&o.output, "output", o.output, "Manifest to write: hpa (the recipe: forecast, queue guard, replicas, behavior), keda (the recipe as a KEDA ScaledObject), both (apply only one of them), or single-metric (an HPA on the queue or the batch alone).")
	fs.StringVar(&o.hpaName, "hpa-name", o.hpaName, "Name of the HPA (or ScaledObject) and of the workload it scales.")
	fs.StringVar(&o.namespace, "namespace", o.namespace, "Namespace written into the manifests; empty leaves it out.")
	fs.StringVar(&o.kind, "workload-kind", o.kind, "Kind of the workload scaled, the forecast's describedObject: Deployment or StatefulSet.")
	fs.IntVar(&o.minReplicas, "min-replicas", o.minReplicas, "minReplicas of the HPA.")
	fs.IntVar(&o.maxReplicas, "max-replicas", o.maxReplicas, "maxReplicas of the HPA (derived from --peak-rate when that is set).")
	fs.Float64Var(&o.peakRate, "peak-rate", o.peakRate, "Expected peak requests/s for the whole workload; sets maxReplicas = ceil(peak ÷ planning rate).")
	fs.Float64Var(&o.margin, "margin", o.margin, "Safety margin: the single-metric target is the value observed at capacity times (1 - margin); the planning rate is capacity times (1 - margin).")
	fs.DurationVar(&o.modelLoadTime, "model-load-time", o.modelLoadTime, "Measured time from a replica's pod creation to Ready; the scale-down window is max(300s, 2 × it).")
	fs.StringVar(&o.method, "forecast-method", o.method, "Forecast method (the metric selector's method label): envelope, holt, staffing or auto; empty leaves it to the adapter's default. Not with --output keda or both.")
	fs.StringVar(&o.scaler, "keda-scaler-address", o.scaler, "The adapter's KEDA scaler port, HOST:PORT, written into the ScaledObject's triggers.")
	fs.StringVar(&o.hpaMetric, "hpa-metric", o.hpaMetric, "Metric of the single-metric HPA: auto, inference_queue_size or inference_batch_size.")

	fs = fss.FlagSet("files")
	fs.StringVar(&o.fromJSON, "from-json", o.fromJSON, "Derive the recommendation from a recorded run (a --json file) instead of probing; the plan and load flags are then not used.")
	fs.StringVar(&o.jsonOut, "json", o.jsonOut, "Write the results as JSON to this file (rewritten after every step).")
	fs.StringVar(&o.svgOut, "svg", o.svgOut, "Write the chart as SVG to this file (rewritten after every step).")
	fs.StringVar(&o.hpaOut, "hpa-out", o.hpaOut, "Write the manifest --output picks (YAML) to this file instead of stdout.")
	return fss
}

// Config is what the run needs, from valid Options.
type Config struct {
	probe  capacity.Config
	setup  capacity.Setup
	hpa    capacity.HPAOptions
	json   string
	svg    string
	hpaOut string
	output string
	// recorded is the run read with --from-json; nil when probing.
	recorded *capacity.Report
}

// Config validates the options, joining the problems it finds, and builds
// the run's configuration; it reads --prompts and --from-json.
func (o *Options) Config() (*Config, error) {
	hpa := capacity.HPAOptions{Metric: o.hpaMetric, Margin: o.margin, Name: o.hpaName, Namespace: o.namespace,
		MinReplicas: o.minReplicas, MaxReplicas: o.maxReplicas, PeakRate: o.peakRate,
		Kind: o.kind, ModelLoadTime: o.modelLoadTime, Method: o.method, ScalerAddress: o.scaler}
	errs := o.recommendationErrors(hpa)
	if o.fromJSON != "" {
		return o.recordedConfig(hpa, errs)
	}
	rates, err := capacity.ParseRates(o.rates, o.ramp)
	if err != nil {
		errs = append(errs, err)
	}
	slos, err := capacity.ParseSLOs(o.slo)
	if err != nil {
		errs = append(errs, err)
	}
	pc := capacity.Config{
		URL: o.url, MetricsURL: o.metricsURL, Model: o.model, Endpoint: o.endpoint,
		Rates: rates, Warmup: o.warmup, Window: o.window, MinRequests: o.minRequests, SLOs: slos,
		Seed: o.seed, TimeScale: o.timeScale, MaxInFlight: o.maxInFlight, RequestTimeout: o.requestTimeout,
		MetricsInterval: o.metricsInterval, StopAfterFailures: o.stopAfterFailures,
		Cost: capacity.Cost{PricePerGPUHour: o.price, GPUsPerReplica: o.gpus},
	}
	switch o.metricsURL {
	case "":
		pc.MetricsURL = strings.TrimSuffix(o.url, "/") + "/metrics"
	case "none":
		pc.MetricsURL = ""
	}
	mix := fmt.Sprintf("prompt %s tokens, output %s tokens", o.promptLen, o.outputLen)
	if o.prompts != "" {
		f, err := os.Open(o.prompts)
		if err != nil {
			errs = append(errs, fmt.Errorf("prompts: %w", err))
		} else {
			pc.Prompts, err = capacity.ReadPrompts(f)
			_ = f.Close()
			if err != nil {
				errs = append(errs, fmt.Errorf("prompts %s: %w", o.prompts, err))
			}
		}
		mix = fmt.Sprintf("%d prompts from %s", len(pc.Prompts), filepath.Base(o.prompts))
	} else {
		if pc.PromptLen, err = loadgen.ParseDist(o.promptLen); err != nil {
			errs = append(errs, fmt.Errorf("prompt-len: %w", err))
		}
		if pc.OutputLen, err = loadgen.ParseDist(o.outputLen); err != nil {
			errs = append(errs, fmt.Errorf("output-len: %w", err))
		}
	}
	if len(errs) == 0 {
		if err := pc.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	var sloText []string
	for _, s := range slos {
		sloText = append(sloText, s.String())
	}
	return &Config{
		probe: pc,
		setup: capacity.Setup{URL: o.url, Model: o.model, Endpoint: o.endpoint, Mix: mix, Rates: rates,
			Warmup: o.warmup.String(), Window: o.window.String(), SLOs: sloText, TimeScale: o.timeScale, Cost: pc.Cost},
		hpa:  hpa,
		json: o.jsonOut, svg: o.svgOut, hpaOut: o.hpaOut, output: o.output,
	}, nil
}

// recommendationErrors lists the problems with the flags that shape the
// recommendation, which a recorded run (--from-json) uses too.
func (o *Options) recommendationErrors(hpa capacity.HPAOptions) []error {
	var errs []error
	if o.hpaMetric != capacity.MetricAuto && o.hpaMetric != capacity.MetricQueue && o.hpaMetric != capacity.MetricBatch {
		errs = append(errs, fmt.Errorf("hpa-metric must be auto, %s or %s, got %q", capacity.MetricQueue, capacity.MetricBatch, o.hpaMetric))
	}
	if !(o.margin >= 0 && o.margin < 1) {
		errs = append(errs, fmt.Errorf("margin must be in [0, 1), got %v", o.margin))
	}
	if o.minReplicas < 1 || o.maxReplicas < o.minReplicas {
		errs = append(errs, fmt.Errorf("want 1 <= min-replicas <= max-replicas, got %d and %d", o.minReplicas, o.maxReplicas))
	}
	if !(o.peakRate >= 0) || math.IsInf(o.peakRate, 0) {
		errs = append(errs, fmt.Errorf("peak-rate must be a finite number, 0 or more, got %v", o.peakRate))
	}
	if o.hpaName == "" {
		errs = append(errs, errors.New("hpa-name must not be empty"))
	}
	if !slices.Contains(outputs, o.output) {
		errs = append(errs, fmt.Errorf("output must be one of %s, got %q", strings.Join(outputs, ", "), o.output))
	}
	if o.modelLoadTime == 0 {
		// Zero is the library's default; as a flag it is a mistake.
		errs = append(errs, errors.New("model-load-time must be more than 0: give the measured time from a pod's creation to Ready"))
	}
	if o.kind == "" {
		errs = append(errs, fmt.Errorf("workload-kind must be %s or %s", capacity.KindDeployment, capacity.KindStatefulSet))
	}
	if o.scaler == "" {
		errs = append(errs, errors.New("keda-scaler-address must not be empty"))
	}
	if err := hpa.ValidateRecipe(); err != nil {
		errs = append(errs, err)
	}
	if o.method != "" && (o.output == outputKEDA || o.output == outputBoth) {
		errs = append(errs, fmt.Errorf("forecast-method %q cannot go into a ScaledObject: the KEDA scaler's trigger metadata has no method key, so KEDA reads the adapter's default method; leave --forecast-method empty or use --output hpa", o.method))
	}
	return errs
}

// recordedConfig is the configuration of a run that reads a recorded one.
func (o *Options) recordedConfig(hpa capacity.HPAOptions, errs []error) (*Config, error) {
	if o.rates != "" || o.ramp != "" {
		errs = append(errs, errors.New("from-json derives the recommendation from a recorded run: give no --rates or --ramp"))
	}
	var rep *capacity.Report
	if b, err := os.ReadFile(o.fromJSON); err != nil {
		errs = append(errs, fmt.Errorf("from-json: %w", err))
	} else if err := json.Unmarshal(b, &rep); err != nil || rep == nil || len(rep.Steps) == 0 {
		if err == nil {
			err = errors.New("no steps in it")
		}
		errs = append(errs, fmt.Errorf("from-json %s: not a capacity --json file: %w", o.fromJSON, err))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &Config{setup: rep.Setup, hpa: hpa, json: o.jsonOut, svg: o.svgOut, hpaOut: o.hpaOut, output: o.output, recorded: rep}, nil
}
