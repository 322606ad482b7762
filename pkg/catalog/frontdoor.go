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
