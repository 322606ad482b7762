// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Package catalog is the catalogue of served metrics: it names the
// server-agnostic signals the adapter serves and how each one aggregates
// across series, models and pods. It is the API contract of the project (see
// docs/metrics.md); every other package refers to signals by the Signal
// values defined here, never by metric-name strings.
package catalog

import "fmt"

// Signal identifies one served metric.
type Signal uint8

// The served signals. The serving signals come from a model server's own
// /metrics page; the GPU signals come from the gpu-agent on the pod's node.
const (
	QueueSize Signal = iota
	BatchSize
	KVCacheUsage
	BatchFill
	LoRAAdaptersRunning
	LoRAAdaptersWaiting
	GPUUtilization
	GPUSMActive
	GPUMemoryUsedBytes

	// Rates of the server's counters, from the deltas between two
	// consecutive good scrapes of one pod.
	GenerationTokensPerSecond
	PromptTokensPerSecond
	RequestsPerSecond
	PreemptionsPerSecond

	// Latency percentiles over the sliding window (--slo-window), from the
	// deltas of the server's histogram buckets.
	TimeToFirstTokenP50
	TimeToFirstTokenP90
	TimeToFirstTokenP99
	InterTokenLatencyP50
	InterTokenLatencyP90
	InterTokenLatencyP99
	QueueTimeP50
	QueueTimeP90
	QueueTimeP99
	E2ELatencyP50
	E2ELatencyP90
	E2ELatencyP99

	// Count is the number of signals; arrays indexed by Signal have this length.
	Count
)

// Counter identifies one of the cumulative counters a model server
// publishes, which the rate signals come from.
type Counter uint8

// The counters.
const (
	GenerationTokens Counter = iota // tokens generated
	PromptTokens                    // prompt tokens processed
	Requests                        // requests finished, whatever the reason
	Preemptions                     // requests preempted
	NumCounters
)

// Latency identifies one of the latency histograms a model server
// publishes, which the percentile signals come from.
type Latency uint8

// The latency histograms.
const (
	TimeToFirstToken  Latency = iota // arrival to first output token
	InterTokenLatency                // between two output tokens of a request
	QueueTime                        // waiting before the first schedule
	E2ELatency                       // arrival to last token
	NumLatencies
)

var latencyNames = [NumLatencies]string{"time_to_first_token", "inter_token_latency", "queue_time", "e2e_latency"}

// String returns the latency's name as in the signal names, e.g. "queue_time".
func (l Latency) String() string {
	if l < NumLatencies {
		return latencyNames[l]
	}
	return "unknown"
}

// NumServing is the number of gauges read from a model server's page
// (QueueSize..LoRAAdaptersWaiting); they are the first signals, so arrays
// indexed by them have this length.
const NumServing = int(LoRAAdaptersWaiting) + 1

// Aggregation says how values combine: across a page's series (engines,
// API-server processes), across the models of one pod, and across the pods
// of a workload object.
type Aggregation uint8

const (
	// Sum adds values: request counts.
	Sum Aggregation = iota
	// Max keeps the largest value: fractions of a capacity.
	Max
	// Mean averages values: GPU utilization across a pod's GPUs.
	Mean
	// Merge adds histogram bucket deltas before the quantile is taken: a
	// workload's latency percentile is its pods' merged distribution's, not
	// a combination of their percentiles. Combine does not apply to it.
	Merge
)

type info struct {
	name        string
	unit        string
	aggregation Aggregation
	help        string

	kind    kind
	counter Counter // kind rate
	latency Latency // kind quantile
	q       float64 // kind quantile: 0.5, 0.9, 0.99
}

type kind uint8

const (
	gauge kind = iota
	rate
	quantile
)

var table = [Count]info{
	QueueSize:           {name: "inference_queue_size", unit: "requests", aggregation: Sum, help: "requests waiting to be scheduled"},
	BatchSize:           {name: "inference_batch_size", unit: "requests", aggregation: Sum, help: "requests running in the current batch"},
	KVCacheUsage:        {name: "inference_kv_cache_usage", unit: "fraction 0..1", aggregation: Max, help: "fraction of KV-cache blocks in use"},
	BatchFill:           {name: "inference_batch_fill", unit: "fraction 0..1", aggregation: Max, help: "fraction of the server's maximum batch in use"},
	LoRAAdaptersRunning: {name: "inference_lora_adapters_running", unit: "adapters", aggregation: Sum, help: "LoRA adapters with requests running (vLLM lora_requests_info)"},
	LoRAAdaptersWaiting: {name: "inference_lora_adapters_waiting", unit: "adapters", aggregation: Sum, help: "LoRA adapters with requests waiting (vLLM lora_requests_info)"},
	GPUUtilization:      {name: "gpu_utilization", unit: "fraction 0..1", aggregation: Mean, help: "NVML utilization.gpu, mean over the pod's GPUs"},
	GPUSMActive:         {name: "gpu_sm_active", unit: "fraction 0..1", aggregation: Mean, help: "NVML GPM SM activity, mean over the pod's GPUs (Hopper and newer)"},
	GPUMemoryUsedBytes:  {name: "gpu_memory_used_bytes", unit: "bytes", aggregation: Sum, help: "GPU framebuffer memory used, sum over the pod's GPUs"},

	GenerationTokensPerSecond: {name: "inference_generation_tokens_per_second", unit: "tokens/s", aggregation: Sum, help: "output tokens generated per second", kind: rate, counter: GenerationTokens},
	PromptTokensPerSecond:     {name: "inference_prompt_tokens_per_second", unit: "tokens/s", aggregation: Sum, help: "prompt tokens processed per second", kind: rate, counter: PromptTokens},
	RequestsPerSecond:         {name: "inference_requests_per_second", unit: "requests/s", aggregation: Sum, help: "requests finished per second (any finish reason)", kind: rate, counter: Requests},
	PreemptionsPerSecond:      {name: "inference_preemptions_per_second", unit: "preemptions/s", aggregation: Sum, help: "requests preempted per second", kind: rate, counter: Preemptions},

	TimeToFirstTokenP50:  pct(TimeToFirstToken, 50),
	TimeToFirstTokenP90:  pct(TimeToFirstToken, 90),
	TimeToFirstTokenP99:  pct(TimeToFirstToken, 99),
	InterTokenLatencyP50: pct(InterTokenLatency, 50),
	InterTokenLatencyP90: pct(InterTokenLatency, 90),
	InterTokenLatencyP99: pct(InterTokenLatency, 99),
	QueueTimeP50:         pct(QueueTime, 50),
	QueueTimeP90:         pct(QueueTime, 90),
	QueueTimeP99:         pct(QueueTime, 99),
	E2ELatencyP50:        pct(E2ELatency, 50),
	E2ELatencyP90:        pct(E2ELatency, 90),
	E2ELatencyP99:        pct(E2ELatency, 99),
}

var latencyHelp = [NumLatencies]string{
	TimeToFirstToken:  "time to first token",
	InterTokenLatency: "inter-token latency",
	QueueTime:         "queue time",
	E2ELatency:        "end-to-end request latency",
}

// pct is the table entry of the p-th percentile of l.
func pct(l Latency, p int) info {
	return info{
		name:        fmt.Sprintf("inference_%s_p%d_seconds", l, p),
		unit:        "seconds",
		aggregation: Merge,
		help:        fmt.Sprintf("%dth percentile of the %s over the window", p, latencyHelp[l]),
		kind:        quantile,
		latency:     l,
		q:           float64(p) / 100,
	}
}

// Name returns the custom-metrics API name of s, e.g. "inference_queue_size".
func (s Signal) Name() string {
	if s >= Count {
		return "unknown"
	}
	return table[s].name
}

// String implements fmt.Stringer.
func (s Signal) String() string { return s.Name() }

// Unit returns the unit of s in words.
func (s Signal) Unit() string { return table[s].unit }

// Help returns a one-line description of s.
func (s Signal) Help() string { return table[s].help }

// Aggregation returns how values of s combine across pods of a workload
// object. Mean is used only within a pod (over its GPUs); across pods
// GPU utilization is also averaged.
func (s Signal) Aggregation() Aggregation { return table[s].aggregation }

// IsGPU reports whether s comes from the gpu-agent.
func (s Signal) IsGPU() bool { return s >= GPUUtilization && s <= GPUMemoryUsedBytes }

// Rate returns the counter whose rate s is, and whether s is a rate.
func (s Signal) Rate() (Counter, bool) {
	if s >= Count || table[s].kind != rate {
		return 0, false
	}
	return table[s].counter, true
}

// Quantile returns the latency histogram and the quantile (0.5, 0.9, 0.99)
// s is, and whether s is a percentile.
func (s Signal) Quantile() (Latency, float64, bool) {
	if s >= Count || table[s].kind != quantile {
		return 0, 0, false
	}
	return table[s].latency, table[s].q, true
}

// All returns every signal in order.
func All() []Signal {
	out := make([]Signal, 0, Count)
	for s := Signal(0); s < Count; s++ {
		out = append(out, s)
	}
	return out
}

// ByName returns the signal with the given API name.
func ByName(name string) (Signal, bool) {
	for s := Signal(0); s < Count; s++ {
		if table[s].name == name {
			return s, true
		}
	}
	return 0, false
}

// Set is a bit set of signals.
type Set uint32

// Add returns the set with s added.
func (m Set) Add(s Signal) Set { return m | 1<<s }

// Has reports whether s is in the set.
func (m Set) Has(s Signal) bool { return m&(1<<s) != 0 }

// Combine merges v into acc according to a, where n values were merged
// before (n == 0 means acc is unset). Mean keeps a running mean.
func Combine(a Aggregation, acc float64, n int, v float64) float64 {
	if n == 0 {
		return v
	}
	switch a {
	case Sum:
		return acc + v
	case Max:
		if v > acc {
			return v
		}
		return acc
	default:
		return acc + (v-acc)/float64(n+1)
	}
}
