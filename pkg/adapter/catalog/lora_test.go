// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package catalog

import (
	"strings"
	"testing"
)

// TestLoRAAdapterMetricsDocumented fails when docs/metrics.md's "Served per
// LoRA adapter" section lacks a row, with its unit, for a per-adapter metric.
func TestLoRAAdapterMetricsDocumented(t *testing.T) {
	section, units := docSection(t, "Served per LoRA adapter")
	for _, name := range LoRAAdapterMetrics() {
		unit, ok := units[name]
		switch {
		case !ok:
			t.Errorf("docs/metrics.md's \"Served per LoRA adapter\" section has no row for %s", name)
		case unit != LoRAAdapterUnit:
			t.Errorf("docs/metrics.md gives %s the unit %q, want %q", name, unit, LoRAAdapterUnit)
		}
	}
	if !strings.Contains(section, "`"+LoRANameLabel+"=") {
		t.Errorf("docs/metrics.md's \"Served per LoRA adapter\" section does not show the %s selector", LoRANameLabel)
	}
}

// TestLoRAAdapterMetricsAreNoSignals: a per-adapter metric's name is not
// also a signal's, which would serve it without its selector.
func TestLoRAAdapterMetricsAreNoSignals(t *testing.T) {
	for _, name := range LoRAAdapterMetrics() {
		if _, dup := ByName(name); dup {
			t.Errorf("%s is also a signal", name)
		}
	}
}
