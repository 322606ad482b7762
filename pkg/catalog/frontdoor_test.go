package catalog

import (
	"os"
	"strings"
	"testing"
)

// TestFrontDoorMetricDocumented fails when docs/metrics.md's "Served on
// Services" section has no row for the front-door metric with its unit.
func TestFrontDoorMetricDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Served on Services\n")
	if !ok {
		t.Fatal("docs/metrics.md has no \"## Served on Services\" section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || strings.Trim(strings.TrimSpace(cells[1]), "`") != FrontDoorPendingRequests {
			continue
		}
		if unit := strings.TrimSpace(cells[2]); unit != FrontDoorPendingRequestsUnit {
			t.Errorf("docs/metrics.md gives %s the unit %q, want %q", FrontDoorPendingRequests, unit, FrontDoorPendingRequestsUnit)
		}
		return
	}
	t.Errorf("docs/metrics.md's \"Served on Services\" section has no row for %s", FrontDoorPendingRequests)
}

// TestFrontDoorMetricIsNoPodSignal: the Service metric's name is not also a
// pod signal's, which would make it served on pods and workloads.
func TestFrontDoorMetricIsNoPodSignal(t *testing.T) {
	if _, dup := ByName(FrontDoorPendingRequests); dup {
		t.Errorf("%s is also a pod signal", FrontDoorPendingRequests)
	}
}
