// Package signals names the server-agnostic signals the adapter serves and how
// each one aggregates across series, models and pods. It is the API contract of
// the project (see docs/metrics.md); every other package refers to signals by
// the Signal values defined here, never by metric-name strings.
package signals

// Signal identifies one served metric.
type Signal uint8

// The served signals. The serving signals come from a model server's own
// /metrics page; the GPU signals come from the gpu-agent on the pod's node.
const (
	QueueSize Signal = iota
	BatchSize
	KVCacheUsage
	BatchFill
	GPUUtilization
	GPUSMActive
	GPUMemoryUsedBytes

	// Count is the number of signals; arrays indexed by Signal have this length.
	Count
)

// NumServing is the number of serving signals (QueueSize..BatchFill); they are
// the first signals, so arrays indexed by serving signals have this length.
const NumServing = int(BatchFill) + 1

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
)

type info struct {
	name        string
	unit        string
	aggregation Aggregation
	help        string
}

var table = [Count]info{
	QueueSize:          {"inference_queue_size", "requests", Sum, "requests waiting to be scheduled"},
	BatchSize:          {"inference_batch_size", "requests", Sum, "requests running in the current batch"},
	KVCacheUsage:       {"inference_kv_cache_usage", "fraction 0..1", Max, "fraction of KV-cache blocks in use"},
	BatchFill:          {"inference_batch_fill", "fraction 0..1", Max, "fraction of the server's maximum batch in use"},
	GPUUtilization:     {"gpu_utilization", "fraction 0..1", Mean, "NVML utilization.gpu, mean over the pod's GPUs"},
	GPUSMActive:        {"gpu_sm_active", "fraction 0..1", Mean, "NVML GPM SM activity, mean over the pod's GPUs (Hopper and newer)"},
	GPUMemoryUsedBytes: {"gpu_memory_used_bytes", "bytes", Sum, "GPU framebuffer memory used, sum over the pod's GPUs"},
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
func (s Signal) IsGPU() bool { return s >= GPUUtilization && s < Count }

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
type Set uint16

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
