// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package catalog

// DemandPerReplica is the cold-start-aware metric served on deployments and
// statefulsets: the workload's demand (requests waiting plus running, summed
// over its pods) divided by its Ready plus starting replicas, so that
// replicas still loading their model count as capacity on the way. It is
// not a per-pod Signal: pods do not serve it (see docs/cold-starts.md).
const DemandPerReplica = "inference_demand_per_replica"

// DemandPerReplicaUnit is its unit, as docs/metrics.md gives it.
const DemandPerReplicaUnit = "requests per replica"

// DemandForecastPerReplica is the anticipating companion of
// DemandPerReplica, served on deployments and statefulsets: the demand the
// workload is forecast to have within one model-load time (from the
// adapter's own history of its demand, package forecast), divided by its
// Ready plus starting replicas. A metric selector label ForecastMethodLabel picks
// the estimator.
const DemandForecastPerReplica = "inference_demand_forecast_per_replica"

// DemandForecastPerReplicaUnit is its unit, as docs/metrics.md gives it.
const DemandForecastPerReplicaUnit = "requests per replica"

// ForecastMethodLabel is the metric selector label that picks the forecast's
// estimator (envelope, holt, staffing or auto).
const ForecastMethodLabel = "method"

// ForecastZLabel is the metric selector label that sets staffing's (and
// auto's) safety factor z for one question (a decimal from 0 to 10), in place of the
// adapter's --forecast-z.
const ForecastZLabel = "z"

// ForecastWindowLabel is the metric selector label that sets the span of
// history holt fits and staffing measures its dispersion over for one
// question (a Go duration such as 2m, above 0 and at most the adapter's
// --forecast-window), in place of --forecast-window.
const ForecastWindowLabel = "window"

// ForecastFloorLabel is the metric selector label that sets the forecast's
// floor for one question (a decimal from 0 to 1, the share of the largest
// demand in the adapter's --forecast-floor-window below which the forecast
// does not fall), in place of --forecast-floor.
const ForecastFloorLabel = "floor"

// ForecastRateFloorLabel is the metric selector label that sets the
// forecast's rate floor for one question (a Go duration from 0 to 1m, the
// time in system the largest arrival rate in the adapter's
// --forecast-floor-window is multiplied by), in place of
// --forecast-rate-floor.
const ForecastRateFloorLabel = "ratefloor"
