// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"math"
	"strconv"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/forecast"
)

// fleetCounts are the replica counts the HPA's rule multiplies by, at one
// sample.
type fleetCounts struct {
	// Ready is the Deployment's Ready replicas: the pods a Pods metric is
	// averaged over and the ready pods an Object or External Value is
	// scaled by.
	Ready int
	// Current is the Deployment's status.replicas (the scale
	// subresource's status.replicas): what an Object or External
	// AverageValue is divided by.
	Current int
}

// ceilEpsilon keeps a product that floating point puts a hair above a
// whole number (3.0000000000004) from being rounded up to the next one.
const ceilEpsilon = 1e-9

// recommend is the replica count one metric alone asks for at value (in
// the target's units), by the HPA controller's rule without its tolerance
// and stabilization (k8s pkg/controller/podautoscaler/replica_calculator.go):
//
//   - Pods, AverageValue: ceil(value × Ready / target). The controller
//     multiplies by the pods that have a value; the Deployment's Ready
//     count stands in for them, and its treatment of pods without a value
//     (taken at the target on a scale-down, at 0 on a scale-up) is left out.
//   - Object and External, AverageValue: ceil(value × Current / target);
//     the controller divides the total by status.replicas to report the
//     average (rounded up to a milli-unit), so this is ceil(total / target)
//     to within that rounding.
//   - Object and External, Value: ceil(value / target × Ready), the ready
//     pods of the scale target (getUsageRatioReplicaCount).
//
// ok is false for a metric the shootout does not run (Resource,
// ContainerResource, a Utilization target) or a target that is not
// positive. The count is not clamped (clampReplicas).
func recommend(m autoscalingv2.MetricSpec, value float64, n fleetCounts) (int, bool) {
	t := metricTarget(m)
	target := targetValue(m)
	if t == nil || target <= 0 || math.IsNaN(value) || math.IsInf(value, 0) {
		return 0, false
	}
	var x float64
	switch {
	case m.Pods != nil && t.Type == autoscalingv2.AverageValueMetricType:
		x = value * float64(n.Ready) / target
	case (m.Object != nil || m.External != nil) && t.Type == autoscalingv2.AverageValueMetricType:
		x = value * float64(n.Current) / target
	case (m.Object != nil || m.External != nil) && t.Type == autoscalingv2.ValueMetricType:
		x = value / target * float64(n.Ready)
	default:
		return 0, false
	}
	return int(math.Ceil(x - ceilEpsilon)), true
}

// clampReplicas is n within [lo, hi], as the HPA bounds its proposal by
// minReplicas and maxReplicas.
func clampReplicas(n, lo, hi int) int { return min(max(n, lo), hi) }

// hpaBounds are an HPA's minReplicas (1 when unset) and maxReplicas.
func hpaBounds(h *autoscalingv2.HorizontalPodAutoscaler) (lo, hi int) {
	lo = 1
	if h.Spec.MinReplicas != nil {
		lo = int(*h.Spec.MinReplicas)
	}
	return lo, int(h.Spec.MaxReplicas)
}

// recommendedMax is the largest of the reads' recommendations: the count
// the HPA would set with no scale-down window (and no tolerance or rate
// policies), nil unless every metric has one.
func recommendedMax(reads []HPARead) *int {
	if len(reads) == 0 {
		return nil
	}
	best := 0
	for _, r := range reads {
		if r.Recommended == nil {
			return nil
		}
		best = max(best, *r.Recommended)
	}
	return &best
}

// sampledDemand is the workload's demand, requests waiting plus running,
// as the adapter counts it for inference_demand_per_replica: the sum of
// queue + batch over the sampled pods that are not terminating; a
// starting pod without values adds nothing. It is taken from the pod
// samples (exact, and it asks the adapter nothing more: asking for the
// demand metric would add to the forecast's history), so it is there only
// on the samples that have pods. ok is false when a Ready pod lacks
// either value (a partial sum would understate the demand, as the adapter
// refuses it) or no pod is Ready. replicas is the pods the adapter divides
// by: Ready plus starting, the terminating left out.
func sampledDemand(pods []PodSample) (demand float64, replicas int, ok bool) {
	ready, missing := 0, false
	for _, p := range pods {
		if p.Terminating {
			continue
		}
		replicas++
		if p.Ready {
			ready++
		}
		if p.Queue == nil || p.Batch == nil {
			missing = missing || p.Ready
			continue
		}
		demand += *p.Queue + *p.Batch
	}
	if missing || ready == 0 {
		return 0, replicas, false
	}
	return demand, replicas, true
}

// staffingZ is the safety factor z of a metric that may be the staffing
// forecast (an Object inference_demand_forecast_per_replica at a Value
// whose selector's method is staffing or auto, or names none: the
// adapter's --forecast-method default, auto, which the shootout leaves set;
// auto is staffing only while the arrivals have been bursty, so its
// implied dispersion means the headroom only then): the
// selector's z, else the adapter's default (forecast.DefaultZ, the
// shootout not setting --forecast-z). ok is false for any other metric
// and for a z label that is not a number.
func staffingZ(m autoscalingv2.MetricSpec) (float64, bool) {
	if m.Object == nil || m.Object.Metric.Name != catalog.DemandForecastPerReplica || m.Object.Target.Type != autoscalingv2.ValueMetricType {
		return 0, false
	}
	var sel map[string]string
	if s := m.Object.Metric.Selector; s != nil {
		sel = s.MatchLabels
	}
	if method, set := sel[catalog.ForecastMethodLabel]; set && method != string(forecast.Staffing) && method != string(forecast.Auto) {
		return 0, false
	}
	zs, set := sel[catalog.ForecastZLabel]
	if !set {
		return forecast.DefaultZ, true
	}
	z, err := strconv.ParseFloat(zs, 64)
	if err != nil || z <= 0 {
		return 0, false
	}
	return z, true
}

// impliedDispersion is the index of dispersion I the staffing forecast
// F = D + z·√(I·D) implies: I = ((F − D)/(z·√D))², F the forecast per
// replica times the replicas the adapter divides by. ok is false without
// demand (D ≤ 0) or when F < D (the forecast, read by the HPA up to a
// sync period before the demand was sampled, is then of another moment).
func impliedDispersion(perReplica float64, replicas int, demand, z float64) (float64, bool) {
	if demand <= 0 || z <= 0 || replicas <= 0 {
		return 0, false
	}
	f := perReplica * float64(replicas)
	if f < demand {
		return 0, false
	}
	r := (f - demand) / (z * math.Sqrt(demand))
	return r * r, true
}

// sampleDispersion is the dispersion the sample's read of the HPA's first
// staffing forecast metric implies against the sample's demand; nil
// without such a metric, a read of it, or a demand.
func sampleDispersion(metrics []autoscalingv2.MetricSpec, s Sample) *float64 {
	if s.Demand == nil {
		return nil
	}
	_, replicas, _ := sampledDemand(s.Pods)
	for _, m := range metrics {
		z, ok := staffingZ(m)
		if !ok {
			continue
		}
		key := metricKey(m)
		for _, r := range s.HPA {
			if r.Metric == key && r.Value != nil {
				if d, ok := impliedDispersion(*r.Value, replicas, *s.Demand, z); ok {
					return &d
				}
			}
		}
		return nil
	}
	return nil
}

// heldByWindow is how much of [from, the last sample] the desired
// replicas stood above every metric's recommendation (Desired >
// RecommendedMax): the share of the samples there that have a
// RecommendedMax, and the replica-hours of the excess, integrated as the
// GPU-hours are (a step function; a sample without RecommendedMax counts
// nothing). share is nil when no sample there has a RecommendedMax (a
// fixed fleet, a report from before the field).
func heldByWindow(samples []Sample, from time.Duration) (share *float64, hours float64) {
	n, held := 0, 0
	for _, x := range samples {
		if x.T < from || x.RecommendedMax == nil {
			continue
		}
		n++
		if x.Desired > *x.RecommendedMax {
			held++
		}
	}
	if n == 0 {
		return nil, 0
	}
	v := float64(held) / float64(n)
	end := samples[len(samples)-1].T
	hours = integrateBetween(samples, from, end, func(x Sample) int {
		if x.RecommendedMax == nil {
			return 0
		}
		return max(0, x.Desired-*x.RecommendedMax)
	})
	return &v, hours
}
