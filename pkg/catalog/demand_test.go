package catalog

import (
	"os"
	"strings"
	"testing"
)

// TestDemandPerReplicaDocumented fails when docs/metrics.md's section on
// workload-only metrics has no row for DemandPerReplica with its unit.
func TestDemandPerReplicaDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Served on workloads only: demand per replica\n")
	if !ok {
		t.Fatal(`docs/metrics.md has no "## Served on workloads only: demand per replica" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || strings.Trim(strings.TrimSpace(cells[1]), "`") != DemandPerReplica {
			continue
		}
		if unit := strings.TrimSpace(cells[2]); unit != DemandPerReplicaUnit {
			t.Errorf("docs/metrics.md gives %s the unit %q, want %q", DemandPerReplica, unit, DemandPerReplicaUnit)
		}
		return
	}
	t.Errorf("docs/metrics.md's workload-only section has no row for %s", DemandPerReplica)
}

// TestDemandPerReplicaIsNoPodSignal: the workload metric's name is not also
// a pod signal's, which would make it served on pods.
func TestDemandPerReplicaIsNoPodSignal(t *testing.T) {
	if _, dup := ByName(DemandPerReplica); dup {
		t.Errorf("%s is also a pod signal", DemandPerReplica)
	}
}
