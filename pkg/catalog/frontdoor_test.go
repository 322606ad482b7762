package catalog

import "testing"

// TestFrontDoorMetricDocumented fails when docs/metrics.md's "Served on
// Services" section has no row for the front-door metric with its unit.
func TestFrontDoorMetricDocumented(t *testing.T) {
	checkDocumentedUnit(t, "Served on Services", FrontDoorPendingRequests, FrontDoorPendingRequestsUnit)
}

// TestFrontDoorMetricIsNoPodSignal: the Service metric's name is not also a
// pod signal's, which would make it served on pods and workloads.
func TestFrontDoorMetricIsNoPodSignal(t *testing.T) {
	if _, dup := ByName(FrontDoorPendingRequests); dup {
		t.Errorf("%s is also a pod signal", FrontDoorPendingRequests)
	}
}
