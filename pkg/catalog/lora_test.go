package catalog

import (
	"os"
	"strings"
	"testing"
)

// TestLoRAAdapterMetricsDocumented fails when docs/metrics.md's "Served per
// LoRA adapter" section lacks a row, with its unit, for a per-adapter metric.
func TestLoRAAdapterMetricsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Served per LoRA adapter\n")
	if !ok {
		t.Fatal("docs/metrics.md has no \"## Served per LoRA adapter\" section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	units := map[string]string{}
	for _, line := range strings.Split(section, "\n") {
		if cells := strings.Split(line, "|"); len(cells) >= 4 {
			units[strings.Trim(strings.TrimSpace(cells[1]), "`")] = strings.TrimSpace(cells[2])
		}
	}
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
