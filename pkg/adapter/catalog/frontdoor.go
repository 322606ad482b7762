// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package catalog

// FrontDoorPendingRequests is the metric served on a Service (described
// object kind Service): the requests its front door (a router or gateway
// pod annotated inference-metrics-adapter/front-door-for=<service>) holds
// and has not yet sent to a model server, summed over the front door's
// Ready pods. It exists while the workload behind the Service has zero
// replicas, which is what lets an HPA scale that workload from zero. It is
// not a per-pod Signal: pods, deployments and statefulsets do not serve it.
const FrontDoorPendingRequests = "inference_front_door_pending_requests"

// FrontDoorPendingRequestsUnit is its unit, as docs/metrics.md gives it.
const FrontDoorPendingRequestsUnit = "requests"

// FrontDoorRunningRequests is served beside FrontDoorPendingRequests, on a
// Service or an InferencePool: the requests its front door has dispatched
// to a model server and not yet seen finish (the endpoint picker's running
// requests), summed over the front door's Ready pods.
const FrontDoorRunningRequests = "inference_front_door_running_requests"

// FrontDoorRunningRequestsUnit is its unit, as docs/metrics.md gives it.
const FrontDoorRunningRequestsUnit = "requests"

// FrontDoorPoolSaturation is served beside FrontDoorPendingRequests: the
// saturation of the pool behind the front door as its endpoint picker
// computes it (flow control's pool saturation: 0 idle, 1 saturated, above 1
// oversubscribed in llm-d's newer detector), the largest over the front
// door's Ready pods. It is the pool's, not a model's.
const FrontDoorPoolSaturation = "inference_front_door_pool_saturation"

// FrontDoorPoolSaturationUnit is its unit, as docs/metrics.md gives it.
const FrontDoorPoolSaturationUnit = "ratio (1 = saturated)"

// FrontDoorMetrics returns the metrics served on a front door's Service or
// InferencePool, the held requests first.
func FrontDoorMetrics() []string {
	return []string{FrontDoorPendingRequests, FrontDoorRunningRequests, FrontDoorPoolSaturation}
}

// IsFrontDoorMetric reports whether name is one of FrontDoorMetrics.
func IsFrontDoorMetric(name string) bool {
	return name == FrontDoorPendingRequests || name == FrontDoorRunningRequests || name == FrontDoorPoolSaturation
}
