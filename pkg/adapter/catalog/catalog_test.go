// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package catalog

import (
	"os"
	"strings"
	"testing"
)

// TestMetricsDocMatchesCatalogue fails when the "Served metrics" table of
// docs/metrics.md and this catalogue disagree: a signal without its row, a
// row's unit that is not the signal's, or a row for no signal.
func TestMetricsDocMatchesCatalogue(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Served metrics\n")
	if !ok {
		t.Fatal("docs/metrics.md has no \"## Served metrics\" section")
	}
	section, _, _ = strings.Cut(section, "\n## ")

	units := map[string]string{} // metric name -> unit, as the table says
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue // not a metric row
		}
		name := strings.Trim(strings.TrimSpace(cells[1]), "`")
		units[name] = strings.TrimSpace(cells[2])
	}
	for _, s := range All() {
		unit, ok := units[s.Name()]
		if !ok {
			t.Errorf("docs/metrics.md has no row for %s", s.Name())
			continue
		}
		if unit != s.Unit() {
			t.Errorf("docs/metrics.md gives %s the unit %q, the catalogue %q", s.Name(), unit, s.Unit())
		}
		delete(units, s.Name())
	}
	for name := range units {
		t.Errorf("docs/metrics.md has a row for %s, which the adapter does not serve", name)
	}
}
