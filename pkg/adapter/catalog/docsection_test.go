// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package catalog

import (
	"os"
	"strings"
	"testing"
)

// docSection returns the text of docs/metrics.md's section under the
// heading "## heading", up to the next section, and the unit its table
// gives each metric (first column the name, second the unit). The test
// fails when the section is missing.
func docSection(t *testing.T, heading string) (section string, units map[string]string) {
	t.Helper()
	doc, err := os.ReadFile("../../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## "+heading+"\n")
	if !ok {
		t.Fatalf("docs/metrics.md has no %q section", "## "+heading)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	units = map[string]string{}
	for _, line := range strings.Split(section, "\n") {
		if cells := strings.Split(line, "|"); len(cells) >= 4 {
			units[strings.Trim(strings.TrimSpace(cells[1]), "`")] = strings.TrimSpace(cells[2])
		}
	}
	return section, units
}

// checkDocumentedUnit fails unless the section under heading has a row for
// name with unit.
func checkDocumentedUnit(t *testing.T, heading, name, unit string) {
	t.Helper()
	_, units := docSection(t, heading)
	got, ok := units[name]
	switch {
	case !ok:
		t.Errorf("docs/metrics.md's %q section has no row for %s", heading, name)
	case got != unit:
		t.Errorf("docs/metrics.md gives %s the unit %q, want %q", name, got, unit)
	}
}
