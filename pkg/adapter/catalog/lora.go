// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package catalog

// The per-adapter LoRA metrics, served on pods, deployments and
// statefulsets for one adapter (or the adapters) a metric selector on
// LoRANameLabel picks. Per pod: 1 when a picked adapter is in the running
// (or waiting) list of the latest vllm:lora_requests_info line of the pod's
// page, 0 when the line names every adapter vLLM knows of and none picked
// is there, absent otherwise (no such line). Over a workload: the number of
// its pods where that holds. They are not Signals: they need a selector,
// and vLLM publishes no number for them, only the names in a label.
const (
	LoRAAdapterRunning = "inference_lora_adapter_running"
	LoRAAdapterWaiting = "inference_lora_adapter_waiting"
)

// LoRAAdapterUnit is their unit, as docs/metrics.md gives it: per pod 0 or
// 1, over a workload a count of its pods.
const LoRAAdapterUnit = "pods"

// LoRANameLabel is the metric-selector key that picks adapters by name
// (vLLM's own term: --lora-modules name=path, LoRARequest.lora_name). It
// is not model_name, which on every other metric picks the page's model
// label: vLLM labels its series with the base model, never an adapter.
const LoRANameLabel = "lora_name"

// LoRAAdapterMetrics lists the per-adapter metrics.
func LoRAAdapterMetrics() []string { return []string{LoRAAdapterRunning, LoRAAdapterWaiting} }
