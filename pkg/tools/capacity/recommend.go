// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package capacity

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// HPA metric names the recommendation can target (the adapter's signals).
const (
	MetricQueue = "inference_queue_size"
	MetricBatch = "inference_batch_size"
	// MetricAuto lets the recommendation choose.
	MetricAuto = "auto"
)

// minQueueForQueueMetric is the mean queue per pod at the capacity point
// below which the recommendation targets the batch instead: a queue that
// small means the SLOs broke as soon as requests had to wait, so an HPA
// must act before a queue forms.
const minQueueForQueueMetric = 1.0

// HPAOptions shape the recommended HorizontalPodAutoscaler.
type HPAOptions struct {
	// Metric is MetricAuto, MetricQueue or MetricBatch.
	Metric string
	// Margin is the safety margin, a fraction in [0, 1): the target is the
	// value observed at the capacity point times (1 - Margin).
	Margin float64
	// Name and Namespace of the HPA and of the Deployment it scales.
	Name, Namespace string
	MinReplicas     int
	MaxReplicas     int
	// PeakRate, when positive, is the expected peak arrival rate for the
	// whole Deployment (requests/s); MaxReplicas is then derived from it.
	PeakRate float64

	// The recipe's own options (NewRecipe); zero values take the defaults.
	// Kind is the workload scaled: KindDeployment (default) or KindStatefulSet.
	Kind string
	// ModelLoadTime is the time from a pod's creation to Ready, as the
	// user measured it (DefaultModelLoadTime when 0).
	ModelLoadTime time.Duration
	// Method picks the forecast method (one of ForecastMethods); empty
	// leaves it to the adapter's default.
	Method string
	// ScalerAddress is the adapter's KEDA scaler port, HOST:PORT
	// (DefaultScalerAddress when empty).
	ScalerAddress string
}

// Recommendation is the HPA derived from a measurement.
type Recommendation struct {
	Metric string `json:"metric"`
	// Target is the per-pod averageValue; Quantity the same as a Kubernetes quantity.
	Target   float64 `json:"target"`
	Quantity string  `json:"quantity"`
	// Observed values per pod at the capacity point (means over the step).
	ObservedQueue float64 `json:"observedQueue"`
	ObservedBatch float64 `json:"observedBatch"`
	Margin        float64 `json:"margin"`
	// Capacity is requests/s per replica; Planned = Capacity × (1 - Margin).
	Capacity    float64  `json:"capacity"`
	Planned     float64  `json:"plannedRatePerReplica"`
	MinReplicas int      `json:"minReplicas"`
	MaxReplicas int      `json:"maxReplicas"`
	Explanation []string `json:"explanation"`
	// Manifest is a ready autoscaling/v2 HorizontalPodAutoscaler in YAML.
	Manifest string `json:"manifest"`
}

// Recommend derives the HPA from the capacity step. It fails when there is
// no capacity or the server's signals were not measured there.
func Recommend(steps []Step, a Analysis, o HPAOptions) (*Recommendation, error) {
	if !a.Found {
		return nil, fmt.Errorf("no recommendation: no step met the SLOs")
	}
	s := steps[a.CapacityStep]
	if s.Server.Queue == nil || s.Server.Batch == nil {
		return nil, fmt.Errorf("no recommendation: the server's queue and batch size were not measured at the capacity step (is --metrics-url right?)")
	}
	r := &Recommendation{ObservedQueue: *s.Server.Queue, ObservedBatch: *s.Server.Batch, Margin: o.Margin,
		Capacity: s.Offered, Planned: s.Offered * (1 - o.Margin), MinReplicas: o.MinReplicas, MaxReplicas: o.MaxReplicas}
	metric := o.Metric
	var why string
	switch {
	case metric == MetricQueue || metric == MetricBatch:
		why = "chosen with --hpa-metric"
	case r.ObservedQueue >= minQueueForQueueMetric:
		metric = MetricQueue
		why = fmt.Sprintf("at capacity each pod had %.2f requests waiting on average (at least %.0f), so the SLOs tolerate a queue; "+
			"scaling on it keeps each replica's batch full (throughput at a latency bound)", r.ObservedQueue, minQueueForQueueMetric)
	default:
		metric = MetricBatch
		why = fmt.Sprintf("at capacity each pod had only %.2f requests waiting on average (under %.0f): the SLOs break as soon as requests queue, "+
			"so the HPA must act on the running batch, which grows with load before any queue forms", r.ObservedQueue, minQueueForQueueMetric)
	}
	r.Metric = metric
	observed := r.ObservedBatch
	if metric == MetricQueue {
		observed = r.ObservedQueue
	}
	milli := int64(math.Floor(observed * (1 - o.Margin) * 1000))
	if milli < 1 {
		return nil, fmt.Errorf("no recommendation: %s at the capacity step was %.3g, too small for a target (run with a plan that reaches higher rates, or pick the other metric)", metric, observed)
	}
	r.Target = float64(milli) / 1000
	r.Quantity = quantity(milli)
	if o.PeakRate > 0 && r.Planned > 0 {
		// maxReplicas is an int32: cap the count there before converting.
		r.MaxReplicas = max(o.MinReplicas, int(min(math.Ceil(o.PeakRate/r.Planned), math.MaxInt32)))
	}
	r.Explanation = []string{
		fmt.Sprintf("capacity: %.4g req/s per replica, the highest offered rate at which every step up to it met the SLOs (step %d)", s.Offered, s.Index),
		fmt.Sprintf("metric: %s, %s", metric, why),
		fmt.Sprintf("target: %s per pod = %.3g observed at capacity (mean over the step's window) × (1 - margin %.2g)", r.Quantity, observed, o.Margin),
		fmt.Sprintf("planning rate: %.4g req/s per replica = capacity × (1 - margin); for %s the margin is a margin on load, for %s it is a larger one, since the queue grows faster than the load near capacity",
			r.Planned, MetricBatch, MetricQueue),
	}
	if o.PeakRate > 0 {
		r.Explanation = append(r.Explanation, fmt.Sprintf("maxReplicas: %d = ceil(peak %.4g req/s ÷ planning rate %.4g req/s)", r.MaxReplicas, o.PeakRate, r.Planned))
	} else {
		r.Explanation = append(r.Explanation, fmt.Sprintf("maxReplicas: %d as given; with --peak-rate it is derived from the planning rate", r.MaxReplicas))
	}
	r.Explanation = append(r.Explanation,
		"behavior: scale up at once (no stabilization; double, or add 4 pods, per 15 s, whichever is more), because a queue that builds costs TTFT right away; "+
			"scale down slowly (5 min stabilization, at most 50% per minute), because the signals drop to 0 as soon as a pod has headroom")
	r.Manifest = manifest(r, o)
	return r, nil
}

// quantity writes milli-units as a Kubernetes quantity ("3", "2500m").
func quantity(milli int64) string {
	if milli%1000 == 0 {
		return strconv.FormatInt(milli/1000, 10)
	}
	return strconv.FormatInt(milli, 10) + "m"
}

func manifest(r *Recommendation, o HPAOptions) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Recommended by `capacity`: %s target %s per pod\n", r.Metric, r.Quantity)
	for _, e := range r.Explanation {
		fmt.Fprintf(&b, "# - %s\n", e)
	}
	b.WriteString("apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata:\n")
	fmt.Fprintf(&b, "  name: %s\n", strconv.Quote(o.Name))
	if o.Namespace != "" {
		fmt.Fprintf(&b, "  namespace: %s\n", strconv.Quote(o.Namespace))
	}
	fmt.Fprintf(&b, `spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: %s
  minReplicas: %d
  maxReplicas: %d
  metrics:
  - type: Pods
    pods:
      metric:
        name: %s
      target:
        type: AverageValue
        averageValue: %s
  behavior:
    scaleUp:
      stabilizationWindowSeconds: 0
      selectPolicy: Max
      policies:
      - type: Percent
        value: 100
        periodSeconds: 15
      - type: Pods
        value: 4
        periodSeconds: 15
    scaleDown:
      stabilizationWindowSeconds: 300
      selectPolicy: Max
      policies:
      - type: Percent
        value: 50
        periodSeconds: 60
`, strconv.Quote(o.Name), r.MinReplicas, r.MaxReplicas, r.Metric, strconv.Quote(r.Quantity))
	return b.String()
}
