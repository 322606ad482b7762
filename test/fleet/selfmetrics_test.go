// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func families(t *testing.T, page string) map[string]*dto.MetricFamily {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// TestScrapeCounts: the quiet window's counts are the difference of the
// adapter's counters, failures by reason, and the table says them.
func TestScrapeCounts(t *testing.T) {
	before := families(t, `# TYPE inference_metrics_adapter_scrapes_total counter
inference_metrics_adapter_scrapes_total 1000
# TYPE inference_metrics_adapter_scrape_failures_total counter
inference_metrics_adapter_scrape_failures_total{reason="timeout"} 2
inference_metrics_adapter_scrape_failures_total{reason="connection"} 0
`)
	for _, tc := range []struct {
		name, after, want string
	}{
		{"no failure", `# TYPE inference_metrics_adapter_scrapes_total counter
inference_metrics_adapter_scrapes_total 21000
# TYPE inference_metrics_adapter_scrape_failures_total counter
inference_metrics_adapter_scrape_failures_total{reason="timeout"} 2
inference_metrics_adapter_scrape_failures_total{reason="connection"} 0
`, "20000 scrapes, 0 failed"},
		{"failures by reason", `# TYPE inference_metrics_adapter_scrapes_total counter
inference_metrics_adapter_scrapes_total 1500
# TYPE inference_metrics_adapter_scrape_failures_total counter
inference_metrics_adapter_scrape_failures_total{reason="timeout"} 5
inference_metrics_adapter_scrape_failures_total{reason="connection"} 1
`, "500 scrapes, 4 failed (connection 1, timeout 3)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := countsOf(before)
			if err != nil {
				t.Fatal(err)
			}
			b, err := countsOf(families(t, tc.after))
			if err != nil {
				t.Fatal(err)
			}
			if got := b.minus(a).String(); got != tc.want {
				t.Errorf("counts %q, want %q", got, tc.want)
			}
		})
	}
	if _, err := countsOf(families(t, "# TYPE other counter\nother 1\n")); err == nil {
		t.Error("countsOf accepted a page without scrapes_total")
	}
}
