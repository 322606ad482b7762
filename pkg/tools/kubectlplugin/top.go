// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package kubectlplugin

import (
	"context"
	"fmt"
	"math"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
)

// SLO is a latency objective each request should meet; a zero bound is not
// part of it. The share of requests meeting it is bounded from the
// Deployment's latency percentiles (see Summarize).
type SLO struct {
	TimeToFirstToken time.Duration // arrival to first output token
	E2ELatency       time.Duration // arrival to last token
}

// IsSet reports whether the SLO has a bound.
func (s SLO) IsSet() bool { return s.TimeToFirstToken > 0 || s.E2ELatency > 0 }

// PodGPU is one Running pod of a Deployment: the GPUs it holds and what the
// gpu-agent measured of them (nil: not measured).
type PodGPU struct {
	Name     string
	GPUs     int64
	Util, SM *float64
}

// Workload is what the API answered about one Deployment: its Running pods
// and the Object-metric values of the Deployment (absent: not answered;
// Missing holds the API's reason).
type Workload struct {
	Name    string
	Pods    []PodGPU
	Values  map[catalog.Signal]float64
	Missing map[string]string
}

// objectSignals are the Deployment's Object metrics `top` reads.
var objectSignals = []catalog.Signal{
	catalog.GenerationTokensPerSecond, catalog.RequestsPerSecond,
	catalog.TimeToFirstTokenP50, catalog.TimeToFirstTokenP90, catalog.TimeToFirstTokenP99,
	catalog.E2ELatencyP50, catalog.E2ELatencyP90, catalog.E2ELatencyP99,
}

// Deployments reads, for each Deployment in namespace whose labels match
// selector (empty: all), its Running pods (by the Deployment's own
// selector, as the adapter aggregates Object metrics), their GPU activity as
// a Pods metric and the Deployment's rates and latency percentiles as
// Object metrics — the questions an HPA asks.
func (c *Client) Deployments(ctx context.Context, namespace, selector string) ([]Workload, error) {
	deps, err := c.Kube.AppsV1().Deployments(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("listing deployments matching %q in %s: %w", selector, namespace, err)
	}
	sort.Slice(deps.Items, func(i, j int) bool { return deps.Items[i].Name < deps.Items[j].Name })
	out := make([]Workload, 0, len(deps.Items))
	for i := range deps.Items {
		d := &deps.Items[i]
		w := Workload{Name: d.Name, Values: map[catalog.Signal]float64{}, Missing: map[string]string{}}
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil || sel.Empty() {
			w.Missing["pods"] = fmt.Sprintf("deployment %s has no usable selector (%v)", d.Name, err)
			out = append(out, w)
			continue
		}
		if err := c.readWorkload(ctx, namespace, sel, &w); err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, nil
}

func (c *Client) readWorkload(ctx context.Context, namespace string, sel labels.Selector, w *Workload) error {
	pods, err := c.Kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return fmt.Errorf("listing pods of deployment %s/%s: %w", namespace, w.Name, err)
	}
	byName := map[string]*PodGPU{}
	for i := range pods.Items {
		if p := &pods.Items[i]; running(p) {
			w.Pods = append(w.Pods, PodGPU{Name: p.Name, GPUs: PodGPUs(p)})
		}
	}
	if len(w.Pods) == 0 {
		w.Missing["pods"] = fmt.Sprintf("no Running pods match %q", sel)
		return nil
	}
	sort.Slice(w.Pods, func(i, j int) bool { return w.Pods[i].Name < w.Pods[j].Name })
	for i := range w.Pods {
		byName[w.Pods[i].Name] = &w.Pods[i]
	}
	for _, s := range []catalog.Signal{catalog.GPUUtilization, catalog.GPUSMActive} {
		vals, why, err := c.podValues(ctx, namespace, sel, s)
		if err != nil {
			return err
		}
		if why != "" {
			w.Missing[s.Name()] = why
		}
		for name, v := range vals {
			if p := byName[name]; p != nil {
				if s == catalog.GPUUtilization {
					p.Util = &v
				} else {
					p.SM = &v
				}
			}
		}
	}
	for _, s := range objectSignals {
		v, ok, why, err := c.objectValue(ctx, namespace, w.Name, s)
		if err != nil {
			return err
		}
		if ok {
			w.Values[s] = v
		} else {
			w.Missing[s.Name()] = why
		}
	}
	return nil
}

// Range bounds a value: Min <= value <= Max; a nil bound is unbounded.
type Range struct {
	Min *float64 `json:"min"`
	Max *float64 `json:"max"`
}

// Percentiles are a latency's p50, p90 and p99 in seconds (nil: missing).
type Percentiles struct {
	P50 *float64 `json:"p50"`
	P90 *float64 `json:"p90"`
	P99 *float64 `json:"p99"`
}

// Summary is one Deployment's row of `top`: allocated, busy, useful and the
// figures derived from them. Every pointer is nil (null in JSON, "-" in the
// table) when it was not measured or cannot be derived; never 0 for that.
type Summary struct {
	Deployment string `json:"deployment"`
	// Pods is the number of Running pods.
	Pods int `json:"pods"`
	// GPUsAllocated is the sum of the Running pods' nvidia.com/gpu requests.
	GPUsAllocated int64 `json:"gpusAllocated"`
	// GPUBusyShare is NVML utilization.gpu averaged over every allocated GPU
	// (each pod's value weighted by its GPUs): the share of allocated GPU
	// time in which a kernel ran. Nil unless every GPU-holding pod has a value.
	GPUBusyShare *float64 `json:"gpuBusyShare"`
	// GPUSMActiveShare is the same for NVML GPM SM activity: the share of
	// allocated SM time that was busy (Hopper and newer only).
	GPUSMActiveShare *float64 `json:"gpuSMActiveShare"`

	GenerationTokensPerSecond *float64    `json:"generationTokensPerSecond"`
	RequestsPerSecond         *float64    `json:"requestsPerSecond"`
	TimeToFirstToken          Percentiles `json:"timeToFirstTokenSeconds"`
	E2ELatency                Percentiles `json:"e2eLatencySeconds"`

	// TokensPerGPUSecond is generated tokens per allocated GPU-second.
	TokensPerGPUSecond *float64 `json:"tokensPerGPUSecond"`
	// SLOMetShare bounds the share of requests meeting the SLO, from the
	// percentiles (nil without an SLO or without the percentiles).
	SLOMetShare *Range `json:"sloMetShare"`
	// SLOMetRequestsPerSecond is SLOMetShare times RequestsPerSecond.
	SLOMetRequestsPerSecond *Range `json:"sloMetRequestsPerSecond"`
	// CostPer1000SLOMetRequests is the Deployment's cost (its allocated GPUs
	// at the given GPU-hour price, or its cost from OpenCost) per 1,000
	// SLO-meeting requests.
	CostPer1000SLOMetRequests *Range `json:"costPer1000SLOMetRequests"`

	// Missing says, per metric the API did not answer, why (its 404 reason).
	Missing map[string]string `json:"missing,omitempty"`
}

// Summarize computes a Deployment's row. gpuHourPrice is the price of one
// GPU for one hour (0: no cost figures).
func Summarize(w Workload, slo SLO, gpuHourPrice float64) Summary {
	s := Summary{Deployment: w.Name, Pods: len(w.Pods), Missing: w.Missing}
	for _, p := range w.Pods {
		s.GPUsAllocated += p.GPUs
	}
	s.GPUBusyShare = gpuWeighted(w.Pods, func(p PodGPU) *float64 { return p.Util })
	s.GPUSMActiveShare = gpuWeighted(w.Pods, func(p PodGPU) *float64 { return p.SM })

	val := func(sig catalog.Signal) *float64 {
		if v, ok := w.Values[sig]; ok {
			return &v
		}
		return nil
	}
	s.GenerationTokensPerSecond = val(catalog.GenerationTokensPerSecond)
	s.RequestsPerSecond = val(catalog.RequestsPerSecond)
	s.TimeToFirstToken = Percentiles{val(catalog.TimeToFirstTokenP50), val(catalog.TimeToFirstTokenP90), val(catalog.TimeToFirstTokenP99)}
	s.E2ELatency = Percentiles{val(catalog.E2ELatencyP50), val(catalog.E2ELatencyP90), val(catalog.E2ELatencyP99)}

	if s.GenerationTokensPerSecond != nil && s.GPUsAllocated > 0 {
		s.TokensPerGPUSecond = ptr(*s.GenerationTokensPerSecond / float64(s.GPUsAllocated))
	}
	s.SLOMetShare = sloShare(slo, s.TimeToFirstToken, s.E2ELatency)
	if s.SLOMetShare != nil && s.RequestsPerSecond != nil {
		rps := *s.RequestsPerSecond
		s.SLOMetRequestsPerSecond = &Range{Min: ptr(*s.SLOMetShare.Min * rps), Max: ptr(*s.SLOMetShare.Max * rps)}
	}
	if gpuHourPrice > 0 && s.GPUsAllocated > 0 {
		s.PriceAt(gpuHourPrice * float64(s.GPUsAllocated) / 3600)
	}
	return s
}

// PriceAt sets the cost per 1,000 SLO-meeting requests of a Deployment that
// costs perSecond (its GPUs at a GPU-hour price, or its measured cost from
// OpenCost); it stays nil without SLO-meeting requests per second.
func (s *Summary) PriceAt(perSecond float64) {
	if s.SLOMetRequestsPerSecond == nil {
		return
	}
	s.CostPer1000SLOMetRequests = &Range{
		Min: per1000(perSecond, *s.SLOMetRequestsPerSecond.Max),
		Max: per1000(perSecond, *s.SLOMetRequestsPerSecond.Min),
	}
}

// per1000 is the cost of 1,000 requests at perSecond cost and rps requests
// per second; nil (unbounded) when no request is served.
func per1000(perSecond, rps float64) *float64 {
	if rps <= 0 {
		return nil
	}
	return ptr(perSecond / rps * 1000)
}

// gpuWeighted averages a per-pod GPU value over every GPU the pods hold,
// each pod weighted by its GPUs; nil when no pod holds a GPU or when a pod
// that holds one has no value (a partial figure would misstate the share).
func gpuWeighted(pods []PodGPU, get func(PodGPU) *float64) *float64 {
	var sum float64
	var gpus int64
	for _, p := range pods {
		if p.GPUs == 0 {
			continue
		}
		v := get(p)
		if v == nil {
			return nil
		}
		sum += *v * float64(p.GPUs)
		gpus += p.GPUs
	}
	if gpus == 0 {
		return nil
	}
	return ptr(sum / float64(gpus))
}

// shareBelow bounds the share of requests whose latency is at most bound
// from the percentiles: p_q <= bound means at least q of them are within
// it; p_q > bound means at most q are. Nil without any percentile.
func shareBelow(bound time.Duration, p Percentiles) (lo, hi float64, ok bool) {
	lo, hi = 0, 1
	b := bound.Seconds()
	for _, qv := range []struct {
		q float64
		v *float64
	}{{0.5, p.P50}, {0.9, p.P90}, {0.99, p.P99}} {
		if qv.v == nil {
			continue
		}
		ok = true
		if *qv.v <= b {
			lo = math.Max(lo, qv.q)
		} else {
			hi = math.Min(hi, qv.q)
		}
	}
	return lo, hi, ok
}

// sloShare bounds the share of requests meeting every bound of slo. With
// two bounds, at least lo1+lo2-1 of the requests meet both (the misses of
// each may fall on different requests) and at most the smaller hi.
func sloShare(slo SLO, ttft, e2e Percentiles) *Range {
	if !slo.IsSet() {
		return nil
	}
	lo, hi := 1.0, 1.0
	for _, b := range []struct {
		bound time.Duration
		p     Percentiles
	}{{slo.TimeToFirstToken, ttft}, {slo.E2ELatency, e2e}} {
		if b.bound <= 0 {
			continue
		}
		l, h, ok := shareBelow(b.bound, b.p)
		if !ok {
			return nil
		}
		lo = math.Max(0, lo+l-1)
		hi = math.Min(hi, h)
	}
	return &Range{Min: ptr(lo), Max: ptr(hi)}
}

func ptr(v float64) *float64 { return &v }
