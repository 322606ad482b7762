// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package gpuagent

import (
	"github.com/prometheus/client_golang/prometheus"
)

// The page contract. Names and labels here are parsed by pkg/adapter/agentpage and
// documented in docs/gpu-agent.md; change all three together.
const (
	MetricUp                = "gpu_agent_up"
	MetricPodResourcesUp    = "gpu_agent_pod_resources_up"
	MetricGPUs              = "gpu_agent_gpus"
	MetricGPUUtilization    = "gpu_agent_gpu_utilization_ratio"
	MetricGPUSMActive       = "gpu_agent_gpu_sm_active_ratio"
	MetricGPUMemoryUsed     = "gpu_agent_gpu_memory_used_bytes"
	MetricGPUMemoryTotal    = "gpu_agent_gpu_memory_total_bytes"
	MetricPodGPUs           = "gpu_agent_pod_gpus"
	MetricCollectDuration   = "gpu_agent_collect_duration_seconds"
	MetricLastCollectUnixTS = "gpu_agent_last_collect_timestamp_seconds"
)

// reasonStale is gpu_agent_up's reason when the last collection is older
// than the loop's limit (Healthy): the loop is stuck, and the last values
// are left off the page rather than served as current.
const reasonStale = "stale"

// gpuLabels are the labels of every per-GPU series. namespace, pod and
// container are empty for a GPU no container holds.
var gpuLabels = []string{"namespace", "pod", "container", "gpu_uuid", "gpu_model"}

// descs are the descriptors of the page; one set per Agent.
type descs struct {
	up, podsUp, gpus, util, sm, memUsed, memTotal, podGPUs, took, at *prometheus.Desc
}

func newDescs() descs {
	return descs{
		up: prometheus.NewDesc(MetricUp,
			"1 when the last GPU read succeeded, else 0; reason says why (ok, library_not_found, driver_not_loaded, no_permission, no_gpus, init_failed, read_failed, starting, stale: the collection loop is stuck and GPU values are left out). backend is nvml, or testing-fake-nvml/<profile> for a FAKE backend.",
			[]string{"backend", "reason"}, nil),
		podsUp: prometheus.NewDesc(MetricPodResourcesUp,
			"1 when the last List of the kubelet pod-resources API succeeded, else 0 (GPUs are then served without pod labels).",
			nil, nil),
		gpus: prometheus.NewDesc(MetricGPUs,
			"Number of GPUs and MIG devices the last read returned.",
			nil, nil),
		util: prometheus.NewDesc(MetricGPUUtilization,
			"NVML utilization.gpu as 0..1: fraction of the last sample period in which a kernel ran. Absent where the device does not report it (MIG devices).",
			gpuLabels, nil),
		sm: prometheus.NewDesc(MetricGPUSMActive,
			"NVML GPM SM activity as 0..1 between the last two reads. Present only on GPUs with GPM (Hopper and newer).",
			gpuLabels, nil),
		memUsed: prometheus.NewDesc(MetricGPUMemoryUsed,
			"GPU framebuffer memory used, in bytes (NVML memory info v2).",
			gpuLabels, nil),
		memTotal: prometheus.NewDesc(MetricGPUMemoryTotal,
			"GPU framebuffer memory total, in bytes.",
			gpuLabels, nil),
		podGPUs: prometheus.NewDesc(MetricPodGPUs,
			"Number of distinct GPUs or MIG devices the kubelet allocated to the pod, over all its containers.",
			[]string{"namespace", "pod"}, nil),
		took: prometheus.NewDesc(MetricCollectDuration,
			"Seconds the last collection (GPU read and pod-resources List) took.",
			nil, nil),
		at: prometheus.NewDesc(MetricLastCollectUnixTS,
			"Unix time the last collection started.",
			nil, nil),
	}
}

var _ prometheus.Collector = (*Agent)(nil)

// Describe implements prometheus.Collector.
func (a *Agent) Describe(ch chan<- *prometheus.Desc) {
	d := &a.descs
	for _, x := range []*prometheus.Desc{d.up, d.podsUp, d.gpus, d.util, d.sm, d.memUsed, d.memTotal, d.podGPUs, d.took, d.at} {
		ch <- x
	}
}

// Collect implements prometheus.Collector: it renders the last snapshot.
func (a *Agent) Collect(ch chan<- prometheus.Metric) {
	a.mu.RLock()
	s := a.snap
	a.mu.RUnlock()
	d := &a.descs

	// A collection older than the loop's limit is not served as current:
	// the adapter would stamp its values with the time it scraped them.
	stale := !s.at.IsZero() && a.cfg.Now().Sub(s.at) > a.staleAfter()
	up, reason := s.gpus.up, s.gpus.reason
	if stale {
		up, reason = false, reasonStale
	}
	ch <- prometheus.MustNewConstMetric(d.up, prometheus.GaugeValue, b2f(up), a.cfg.Backend, reason)
	ch <- prometheus.MustNewConstMetric(d.podsUp, prometheus.GaugeValue, b2f(s.podsUp))
	ch <- prometheus.MustNewConstMetric(d.gpus, prometheus.GaugeValue, float64(len(s.gpus.gpus)))
	if !s.at.IsZero() {
		ch <- prometheus.MustNewConstMetric(d.took, prometheus.GaugeValue, s.took.Seconds())
		ch <- prometheus.MustNewConstMetric(d.at, prometheus.GaugeValue, float64(s.at.UnixNano())/1e9)
	}
	if stale {
		return
	}

	unheld := []attachment{{}}
	for i := range s.gpus.gpus {
		g := &s.gpus.gpus[i]
		if g.UUID == "" {
			continue // a device NVML could not name cannot be labelled
		}
		holders := s.attached[g.UUID]
		if len(holders) == 0 {
			holders = unheld
		}
		for _, h := range holders {
			lv := []string{h.namespace, h.pod, h.container, g.UUID, g.Model}
			if g.HasUtilization {
				ch <- prometheus.MustNewConstMetric(d.util, prometheus.GaugeValue, g.Utilization, lv...)
			}
			if g.HasSMActive {
				ch <- prometheus.MustNewConstMetric(d.sm, prometheus.GaugeValue, g.SMActive, lv...)
			}
			if g.HasMemory {
				ch <- prometheus.MustNewConstMetric(d.memUsed, prometheus.GaugeValue, float64(g.MemoryUsed), lv...)
				ch <- prometheus.MustNewConstMetric(d.memTotal, prometheus.GaugeValue, float64(g.MemoryTotal), lv...)
			}
		}
	}
	for k, n := range s.podGPUs {
		ch <- prometheus.MustNewConstMetric(d.podGPUs, prometheus.GaugeValue, float64(n), k.namespace, k.pod)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
