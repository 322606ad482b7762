// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package catalog

import "testing"

// TestFrontDoorMetricDocumented fails when docs/metrics.md's "Served on
// Services" section has no row for a front-door metric with its unit.
func TestFrontDoorMetricDocumented(t *testing.T) {
	for name, unit := range map[string]string{
		FrontDoorPendingRequests: FrontDoorPendingRequestsUnit,
		FrontDoorRunningRequests: FrontDoorRunningRequestsUnit,
		FrontDoorPoolSaturation:  FrontDoorPoolSaturationUnit,
	} {
		checkDocumentedUnit(t, "Served on Services", name, unit)
	}
}

// TestFrontDoorMetricIsNoPodSignal: no front-door metric's name is also a
// pod signal's, which would make it served on pods and workloads, and each
// is one IsFrontDoorMetric knows.
func TestFrontDoorMetricIsNoPodSignal(t *testing.T) {
	for _, name := range FrontDoorMetrics() {
		if _, dup := ByName(name); dup {
			t.Errorf("%s is also a pod signal", name)
		}
		if !IsFrontDoorMetric(name) {
			t.Errorf("IsFrontDoorMetric(%s) is false", name)
		}
	}
	if IsFrontDoorMetric(QueueSize.Name()) {
		t.Errorf("IsFrontDoorMetric(%s) is true", QueueSize.Name())
	}
}
