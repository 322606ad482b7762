// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package catalog

import "testing"

// TestDemandPerReplicaDocumented fails when docs/metrics.md's section on
// workload-only metrics has no row for DemandPerReplica with its unit.
func TestDemandPerReplicaDocumented(t *testing.T) {
	checkDocumentedUnit(t, "Served on workloads only: demand per replica", DemandPerReplica, DemandPerReplicaUnit)
}

// TestDemandPerReplicaIsNoPodSignal: the workload metric's name is not also
// a pod signal's, which would make it served on pods.
func TestDemandPerReplicaIsNoPodSignal(t *testing.T) {
	if _, dup := ByName(DemandPerReplica); dup {
		t.Errorf("%s is also a pod signal", DemandPerReplica)
	}
}

// TestDemandForecastPerReplicaDocumented fails when docs/metrics.md's
// section on workload-only metrics has no row for DemandForecastPerReplica
// with its unit.
func TestDemandForecastPerReplicaDocumented(t *testing.T) {
	checkDocumentedUnit(t, "Served on workloads only: demand per replica", DemandForecastPerReplica, DemandForecastPerReplicaUnit)
}

// TestDemandForecastPerReplicaIsNoPodSignal: the forecast's name is not
// also a pod signal's.
func TestDemandForecastPerReplicaIsNoPodSignal(t *testing.T) {
	if _, dup := ByName(DemandForecastPerReplica); dup {
		t.Errorf("%s is also a pod signal", DemandForecastPerReplica)
	}
}
