// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package parse

import "github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"

// Server identifies whose metric names a page used.
type Server uint8

// Known servers. Unknown means "detect from the page" when passed to ParseAs,
// and "no known series found" in a Page. Custom servers (see Servers) are
// numbered after FrontDoor.
const (
	Unknown Server = iota
	VLLMV1
	VLLMV0
	TGI
	SGLang
	TRTLLMServe
	TritonTRTLLM
	JetStream
	// GIEEPP is the Gateway API Inference Extension's endpoint picker (and
	// llm-d's, which exports renamed gauges beside the deprecated names): a
	// front door whose flow-control queue holds requests not yet dispatched.
	GIEEPP
	// FrontDoor is any router or proxy that publishes the requests it holds
	// as the gauge inference_front_door_pending_requests.
	FrontDoor
)

var serverNames = [...]string{
	Unknown:      "unknown",
	VLLMV1:       "vllm-v1",
	VLLMV0:       "vllm-v0",
	TGI:          "tgi",
	SGLang:       "sglang",
	TRTLLMServe:  "trtllm-serve",
	TritonTRTLLM: "triton-trtllm",
	JetStream:    "jetstream",
	GIEEPP:       "gie-epp",
	FrontDoor:    "front-door",
}

// String returns the server's flag/annotation spelling, e.g. "vllm-v1", or
// "custom" for a custom server (Servers.Name has its configured name).
func (s Server) String() string {
	if int(s) < len(serverNames) {
		return serverNames[s]
	}
	return "custom"
}

// ServerByName parses the spelling String returns.
func ServerByName(name string) (Server, bool) {
	for i, n := range serverNames {
		if n == name {
			return Server(i), true
		}
	}
	return Unknown, false
}

// Model holds the serving signals one page reported for one model. Name is
// the value of the model label (vLLM/SGLang `model_name`, Triton `model`), or
// "" for series without one. Values are already aggregated over the page's
// series for that model: queue and batch summed over `engine`, KV usage and
// batch fill maxed over `engine`/`pid`.
type Model struct {
	Name   string
	Values [catalog.NumServing]float64
	Has    catalog.Set

	// Counters are the page's cumulative counters (tokens, requests,
	// preemptions), summed over the model's series; HasCounter has bit c
	// set when Counters[c] was on the page.
	Counters   [catalog.NumCounters]float64
	HasCounter uint8
	// Hists are the page's latency histograms, buckets summed over the
	// model's series; nil when the page had none (or a bad one). They point
	// into the Parser's memory, like the Page: copy what you keep.
	Hists [catalog.NumLatencies]*Histogram

	// Adapters are the LoRA adapters named on the model's latest
	// vllm:lora_requests_info line (vLLM; that line has no model label, so
	// they are on the model ""), each once, running ones first, in the
	// order listed; set only when Has has LoRAAdaptersRunning. At most
	// MaxAdapters are kept per page (all models together), of names at
	// most MaxAdapterNameBytes long:
	// AdaptersCut says the line named more, or a longer name, so that an
	// adapter missing from Adapters may still be running or waiting. Like
	// Hists, Adapters points into the Parser's memory: copy what you keep.
	Adapters    []Adapter
	AdaptersCut bool
}

// Bounds on the LoRA adapters a Model keeps from one page (see
// Model.Adapters); the adapter counts (LoRAAdaptersRunning, -Waiting)
// count every name, whatever these bounds.
const (
	MaxAdapters         = 64
	MaxAdapterNameBytes = 256
)

// Adapter is one LoRA adapter named on a vllm:lora_requests_info line: in
// its running_lora_adapters list (Running), its waiting_lora_adapters
// list (Waiting), or both. vLLM says no more than that: not how many of
// the adapter's requests wait or run.
type Adapter struct {
	Name    string
	Running bool
	Waiting bool
}

// Counter returns counter c and whether the page had it.
func (m *Model) Counter(c catalog.Counter) (float64, bool) {
	if c >= catalog.NumCounters || m.HasCounter&(1<<c) == 0 {
		return 0, false
	}
	return m.Counters[c], true
}

// MaxBuckets is the most buckets (the +Inf one included) of a histogram the
// parser keeps; a histogram with more is left out, as if absent.
const MaxBuckets = 40

// Histogram is one cumulative Prometheus histogram: Count[i] observations
// were at most Le[i]. Le ascends and Le[N-1] is +Inf.
type Histogram struct {
	N     int
	Le    [MaxBuckets]float64
	Count [MaxBuckets]float64
}

// Value returns the value of s and whether the page had it.
func (m *Model) Value(s catalog.Signal) (float64, bool) {
	if !m.Has.Has(s) || int(s) >= catalog.NumServing {
		return 0, false
	}
	return m.Values[s], true
}

// Page is what one parsed page said. A Page returned by a Parser is owned by
// that Parser and valid until its next call; copy what you keep.
type Page struct {
	Server Server
	// Models has one entry per distinct model label value, in first-seen order.
	Models []Model
	// Rejected counts the sample values refused on this page, by reason.
	Rejected [NumRejects]uint32
	// HistogramsSkipped says the page was parsed without its latency
	// histograms' bucket lines (see Servers.WithHistograms): every Model's
	// Hists is nil whatever the page held.
	HistogramsSkipped bool
}

// Reject says why a sample value on a page was refused. A refused sample
// counts as absent for its series (never as zero) and is counted in
// Page.Rejected under its reason.
type Reject uint8

// Reasons a sample value is refused.
const (
	// RejectNonFinite: NaN or ±Inf, or a sum over series that overflowed.
	RejectNonFinite Reject = iota
	// RejectNegative: a count (queue, batch) or fraction below zero.
	RejectNegative
	// RejectAboveOne: a fraction (KV-cache usage, batch fill) above 1.
	RejectAboveOne
	// NumRejects is the number of reasons.
	NumRejects
)

var rejectNames = [NumRejects]string{
	RejectNonFinite: "non_finite",
	RejectNegative:  "negative",
	RejectAboveOne:  "above_one",
}

// String returns the reason as a metric label value, e.g. "non_finite".
func (r Reject) String() string {
	if r < NumRejects {
		return rejectNames[r]
	}
	return "unknown"
}
