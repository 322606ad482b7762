// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Package sim owns inference-sim: a stand-in for a vLLM model server that
// models continuous batching (a running batch bounded by max-num-seqs and a
// KV-cache block budget, a FIFO waiting queue, preemption by recompute) on a
// virtual clock, speaks enough of the OpenAI HTTP API for real clients, and
// serves /metrics in the shape of vLLM V1 (or V0, TGI, SGLang). FrontDoor
// (frontdoor.go) plays a router in front of such servers instead: it holds
// requests while its backend has no healthy endpoint and publishes them as
// the Gateway API Inference Extension's endpoint picker does.
//
// The model, its formulas and what it leaves out are documented in
// docs/inference-sim.md.
package sim

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// Metrics formats offered by --metrics-format.
const (
	FormatVLLMV1 = "vllm-v1"
	FormatVLLMV0 = "vllm-v0"
	FormatTGI    = "tgi"
	FormatSGLang = "sglang"
)

// Formats lists the metrics formats in the order --help shows them.
var Formats = []string{FormatVLLMV1, FormatVLLMV0, FormatTGI, FormatSGLang}

// Config is the validated configuration of one simulated model server. All
// durations are in simulated time; TimeScale maps them to wall-clock time.
type Config struct {
	// Model is the served model name (the OpenAI "model" and the metrics'
	// model_name label), or several names separated by commas: each model
	// then gets an engine of its own with all the limits below, and its own
	// series on /metrics. Only formats that label models (vllm-v1, sglang)
	// serve several. ModelNames splits it.
	Model string
	// MaxNumSeqs is the maximum number of requests in the running batch.
	MaxNumSeqs int
	// MaxNumBatchedTokens is the token budget of one engine step (decode
	// tokens plus prefill chunks).
	MaxNumBatchedTokens int
	// NumGPUBlocks is the KV-cache budget in blocks of BlockSize tokens.
	NumGPUBlocks int
	// BlockSize is the number of tokens per KV-cache block.
	BlockSize int
	// MaxModelLen is the maximum prompt plus output length of one request.
	MaxModelLen int
	// DefaultMaxTokens is the output length of a request that sets no max_tokens.
	DefaultMaxTokens int
	// PrefillPerToken is the step time added per prompt token computed in the step.
	PrefillPerToken time.Duration
	// StepBase is the fixed time of one engine step.
	StepBase time.Duration
	// StepPerSeq is the step time added per request scheduled in the step.
	StepPerSeq time.Duration
	// TimeScale divides simulated durations into wall-clock durations
	// (10 runs the same scenario 10 times faster).
	TimeScale float64
	// Seed makes generated text deterministic.
	Seed int64
	// MetricsFormat is one of Formats.
	MetricsFormat string
	// Engine is the value of the engine label (vLLM V1 data-parallel rank)
	// of a single-model server; with several models, model i's engine is "i".
	Engine string
	// Profile names the Profile applied, if any (informational).
	Profile string
	// StepCurve, when set, replaces the linear step model: a step's time is
	// the curve interpolated at its batched tokens (decode plus prefill),
	// plus KVReadPerToken per token of context its requests hold.
	// StepBase, StepPerSeq and PrefillPerToken are then unused.
	StepCurve []StepPoint
	// KVReadPerToken is the attention time per token of context in a step
	// (with StepCurve only).
	KVReadPerToken time.Duration
	// LoadTime is how long, in simulated time, the server loads its model
	// after starting: until then /health answers 503 and no request is
	// served.
	LoadTime time.Duration
	// LoRAAdapters names the LoRA adapters served on the (single) base
	// model, comma-separated; empty: none. AdapterNames splits it. A
	// request whose model is an adapter runs on the base model's engine.
	LoRAAdapters string
	// MaxLoRAs is vLLM's --max-loras: the most distinct adapters in one
	// running batch.
	MaxLoRAs int
}

// DefaultConfig returns the defaults of the inference-sim flags: a single
// engine loosely shaped like Llama-3.1-8B on one H100.
func DefaultConfig() Config {
	return Config{
		Model:               "meta-llama/Llama-3.1-8B-Instruct",
		MaxNumSeqs:          256,
		MaxNumBatchedTokens: 8192,
		NumGPUBlocks:        27264,
		BlockSize:           16,
		MaxModelLen:         131072,
		DefaultMaxTokens:    256,
		PrefillPerToken:     50 * time.Microsecond,
		StepBase:            10 * time.Millisecond,
		StepPerSeq:          100 * time.Microsecond,
		TimeScale:           1,
		Seed:                1,
		MetricsFormat:       FormatVLLMV1,
		Engine:              "0",
		MaxLoRAs:            1,
	}
}

// Validate reports every problem with c at once.
func (c Config) Validate() error {
	var errs []error
	errs = append(errs, c.validateModels()...)
	errs = append(errs, c.validateAdapters()...)
	if c.MaxNumSeqs < 1 {
		errs = append(errs, fmt.Errorf("max-num-seqs must be at least 1, got %d", c.MaxNumSeqs))
	}
	if c.MaxNumBatchedTokens < c.MaxNumSeqs {
		errs = append(errs, fmt.Errorf("max-num-batched-tokens (%d) must be at least max-num-seqs (%d)", c.MaxNumBatchedTokens, c.MaxNumSeqs))
	}
	if c.BlockSize < 1 {
		errs = append(errs, fmt.Errorf("block-size must be at least 1, got %d", c.BlockSize))
	}
	if c.NumGPUBlocks < 1 {
		errs = append(errs, fmt.Errorf("num-gpu-blocks must be at least 1, got %d", c.NumGPUBlocks))
	}
	if c.MaxModelLen < 2 {
		errs = append(errs, fmt.Errorf("max-model-len must be at least 2, got %d", c.MaxModelLen))
	}
	if c.BlockSize >= 1 && c.NumGPUBlocks >= 1 && c.MaxModelLen > c.NumGPUBlocks*c.BlockSize {
		errs = append(errs, fmt.Errorf("max-model-len (%d) must fit in the KV cache: num-gpu-blocks × block-size = %d tokens", c.MaxModelLen, c.NumGPUBlocks*c.BlockSize))
	}
	if c.DefaultMaxTokens < 1 || c.DefaultMaxTokens >= c.MaxModelLen {
		errs = append(errs, fmt.Errorf("default-max-tokens must be in [1, max-model-len), got %d", c.DefaultMaxTokens))
	}
	if c.PrefillPerToken < 0 || c.StepPerSeq < 0 {
		errs = append(errs, errors.New("prefill-time-per-token and decode-time-per-seq must not be negative"))
	}
	errs = append(errs, c.validateCurve()...)
	if c.LoadTime < 0 {
		errs = append(errs, fmt.Errorf("load-time must not be negative, got %s", c.LoadTime))
	}
	if c.StepBase <= 0 {
		errs = append(errs, fmt.Errorf("decode-time-base must be positive, got %s", c.StepBase))
	}
	if !(c.TimeScale > 0) || math.IsInf(c.TimeScale, 0) {
		errs = append(errs, fmt.Errorf("time-scale must be a positive number, got %v", c.TimeScale))
	}
	if !validFormat(c.MetricsFormat) {
		errs = append(errs, fmt.Errorf("metrics-format must be one of %v, got %q", Formats, c.MetricsFormat))
	}
	return errors.Join(errs...)
}

// ModelNames returns the served model names, in the order of Model.
func (c Config) ModelNames() []string { return strings.Split(c.Model, ",") }

// multiModel reports whether format can describe several models on one
// page: its series carry model_name, as vLLM V1's and SGLang's do. TGI
// labels no model, and the V0 format stays one model per server as V0 was.
func multiModel(format string) bool {
	return format == FormatVLLMV1 || format == FormatSGLang
}

func (c Config) validateModels() []error {
	if c.Model == "" {
		return []error{errors.New("model must not be empty")}
	}
	names := c.ModelNames()
	errs := checkNames("model", c.Model, names)
	if len(names) > 1 && !multiModel(c.MetricsFormat) && validFormat(c.MetricsFormat) {
		errs = append(errs, fmt.Errorf("metrics-format %s serves one model, got %d (%q): several models need %s or %s",
			c.MetricsFormat, len(names), c.Model, FormatVLLMV1, FormatSGLang))
	}
	return errs
}

// AdapterNames returns the LoRA adapter names, in the order of
// LoRAAdapters; nil when there are none.
func (c Config) AdapterNames() []string {
	if c.LoRAAdapters == "" {
		return nil
	}
	return strings.Split(c.LoRAAdapters, ",")
}

func (c Config) validateAdapters() []error {
	var errs []error
	if c.MaxLoRAs < 1 {
		errs = append(errs, fmt.Errorf("max-loras must be at least 1, got %d", c.MaxLoRAs))
	}
	names := c.AdapterNames()
	if len(names) == 0 {
		return errs
	}
	if len(c.ModelNames()) > 1 {
		errs = append(errs, fmt.Errorf("lora-adapters need a single base model, got %q", c.Model))
	}
	models := map[string]bool{}
	for _, m := range c.ModelNames() {
		models[m] = true
	}
	errs = append(errs, checkNames("lora-adapters", c.LoRAAdapters, names)...)
	for _, n := range names {
		if models[n] {
			errs = append(errs, fmt.Errorf("lora-adapters: adapter %q has the name of the base model", n))
		}
	}
	return errs
}

// checkNames checks the comma-separated names of a flag's value: each
// non-empty, without surrounding spaces, and given once.
func checkNames(flag, value string, names []string) []error {
	var errs []error
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		switch {
		case n == "" || strings.TrimSpace(n) != n:
			errs = append(errs, fmt.Errorf("%s %q: each comma-separated name must be non-empty without surrounding spaces", flag, value))
		case seen[n]:
			errs = append(errs, fmt.Errorf("%s %q names %q twice", flag, value, n))
		}
		seen[n] = true
	}
	return errs
}

func validFormat(f string) bool {
	for _, v := range Formats {
		if f == v {
			return true
		}
	}
	return false
}

func (c Config) validateCurve() []error {
	var errs []error
	for i, p := range c.StepCurve {
		if p.Tokens < 1 || p.Time <= 0 {
			errs = append(errs, fmt.Errorf("step curve point %d (%d tokens, %s) must have at least 1 token and a positive time", i, p.Tokens, p.Time))
		}
		if i > 0 && p.Tokens <= c.StepCurve[i-1].Tokens {
			errs = append(errs, fmt.Errorf("step curve point %d: tokens must increase, got %d after %d", i, p.Tokens, c.StepCurve[i-1].Tokens))
		}
	}
	if c.KVReadPerToken < 0 {
		errs = append(errs, fmt.Errorf("KV read time per token must not be negative, got %s", c.KVReadPerToken))
	}
	return errs
}

// StepTime is the simulated length of one engine step that schedules seqs
// requests, computes tokens batched tokens of which prefillTokens are prompt
// tokens, for requests that hold contextTokens tokens of KV cache together.
// With a StepCurve it is
//
//	curve(tokens) + KVReadPerToken × contextTokens
//
// and otherwise the linear StepDuration(seqs, prefillTokens).
func (c Config) StepTime(seqs, tokens, prefillTokens, contextTokens int) time.Duration {
	if len(c.StepCurve) == 0 {
		return c.StepDuration(seqs, prefillTokens)
	}
	return time.Duration(c.stepSeconds(float64(seqs), float64(tokens), float64(prefillTokens), float64(contextTokens)) * float64(time.Second))
}

func (c Config) stepSeconds(seqs, tokens, prefill, context float64) float64 {
	if len(c.StepCurve) == 0 {
		return c.StepBase.Seconds() + c.StepPerSeq.Seconds()*seqs + c.PrefillPerToken.Seconds()*prefill
	}
	return curveTime(c.StepCurve, tokens) + c.KVReadPerToken.Seconds()*context
}

// StepDuration is the simulated length of one engine step that schedules
// seqs requests and computes prefillTokens prompt tokens (decode tokens are
// counted in seqs):
//
//	StepBase + StepPerSeq × seqs + PrefillPerToken × prefillTokens
func (c Config) StepDuration(seqs, prefillTokens int) time.Duration {
	return c.StepBase + time.Duration(seqs)*c.StepPerSeq + time.Duration(prefillTokens)*c.PrefillPerToken
}

// MaxBatch is the largest batch the server sustains for requests of
// promptLen prompt tokens and outputLen output tokens: max-num-seqs, unless
// the KV cache holds fewer such requests at their full length.
func (c Config) MaxBatch(promptLen, outputLen int) int {
	perReq := blocksFor(promptLen+outputLen, c.BlockSize)
	b := c.MaxNumSeqs
	if perReq > 0 && c.NumGPUBlocks/perReq < b {
		b = c.NumGPUBlocks / perReq
	}
	return b
}

// Capacity is the theoretical maximum sustainable arrival rate, in requests
// per simulated second, for requests of promptLen prompt tokens and
// outputLen output tokens. With B = MaxBatch(promptLen, outputLen) requests
// in the batch, each request stays for outputLen steps (its prefill step
// emits the first token), so B/outputLen requests start per step, and
// a step lasts StepDuration(B, promptLen × B/outputLen):
//
//	capacity = B / (outputLen × (StepBase + StepPerSeq × B) + PrefillPerToken × promptLen × B)
//
// With a StepCurve the step computes B + promptLen × B/outputLen tokens
// for requests holding B × (promptLen + outputLen/2) tokens of context on
// average, and capacity = B / (outputLen × StepTime of that step).
//
// Multiply by TimeScale for requests per wall-clock second. It ignores the per-step token budget
// (chunked prefill), which only matters when B + prefill tokens per step
// exceed MaxNumBatchedTokens.
func (c Config) Capacity(promptLen, outputLen int) float64 {
	if promptLen < 1 || outputLen < 1 {
		return 0
	}
	b := float64(c.MaxBatch(promptLen, outputLen))
	if b < 1 {
		return 0
	}
	prefill := float64(promptLen) * b / float64(outputLen)
	context := b * (float64(promptLen) + float64(outputLen)/2)
	step := c.stepSeconds(b, b+prefill, prefill, context)
	return b / (float64(outputLen) * step)
}

func blocksFor(tokens, blockSize int) int {
	if tokens <= 0 {
		return 0
	}
	return (tokens + blockSize - 1) / blockSize
}
