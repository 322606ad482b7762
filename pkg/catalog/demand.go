package catalog

// DemandPerReplica is the cold-start-aware metric served on deployments and
// statefulsets: the workload's demand (requests waiting plus running, summed
// over its pods) divided by its Ready plus starting replicas, so that
// replicas still loading their model count as capacity on the way. It is
// not a per-pod Signal: pods do not serve it (see docs/cold-starts.md).
const DemandPerReplica = "inference_demand_per_replica"

// DemandPerReplicaUnit is its unit, as docs/metrics.md gives it.
const DemandPerReplicaUnit = "requests per replica"
