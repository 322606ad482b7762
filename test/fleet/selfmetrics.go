// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/test/e2e/framework"
)

// The adapter's self-metrics the quiet window reads.
const (
	scrapesSeries  = "inference_metrics_adapter_scrapes_total"
	failuresSeries = "inference_metrics_adapter_scrape_failures_total"
)

// scrapeCounts are the adapter's own counts of its scrapes, read from its
// /metrics: attempted, and failed by reason.
type scrapeCounts struct {
	scrapes  float64
	failures map[string]float64 // by reason
}

// scrapeCounts reads the adapter's scrape counters from its own port, as
// the admin.
func (e *env) scrapeCounts(ctx context.Context) (scrapeCounts, error) {
	c, err := e.adapter.HTTPClient(e.cp.Admin)
	if err != nil {
		return scrapeCounts{}, fmt.Errorf("self-metrics client: %w", err)
	}
	fams, err := framework.MetricFamilies(ctx, c, e.adapter.URL()+"/metrics")
	if err != nil {
		return scrapeCounts{}, fmt.Errorf("the adapter's self-metrics: %w", err)
	}
	return countsOf(fams)
}

// countsOf picks the scrape counters out of the adapter's metric families.
func countsOf(fams map[string]*dto.MetricFamily) (scrapeCounts, error) {
	s := scrapeCounts{failures: map[string]float64{}}
	f, ok := fams[scrapesSeries]
	if !ok || len(f.GetMetric()) != 1 {
		return s, fmt.Errorf("the adapter's self-metrics have no %s", scrapesSeries)
	}
	s.scrapes = f.GetMetric()[0].GetCounter().GetValue()
	for _, m := range fams[failuresSeries].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "reason" {
				s.failures[l.GetValue()] += m.GetCounter().GetValue()
			}
		}
	}
	return s, nil
}

// minus is what the adapter counted between b and s.
func (s scrapeCounts) minus(b scrapeCounts) scrapeCounts {
	out := scrapeCounts{scrapes: s.scrapes - b.scrapes, failures: map[string]float64{}}
	for r, n := range s.failures {
		if d := n - b.failures[r]; d != 0 {
			out.failures[r] = d
		}
	}
	return out
}

// failed is the failures of every reason.
func (s scrapeCounts) failed() float64 {
	var n float64
	for _, v := range s.failures {
		n += v
	}
	return n
}

// String is the counts as the report's table shows them: "12000 scrapes,
// 0 failed" or "12000 scrapes, 3 failed (timeout 2, connection 1)".
func (s scrapeCounts) String() string {
	out := fmt.Sprintf("%.0f scrapes, %.0f failed", s.scrapes, s.failed())
	if len(s.failures) == 0 {
		return out
	}
	var parts []string
	for _, r := range slices.Sorted(maps.Keys(s.failures)) {
		parts = append(parts, fmt.Sprintf("%s %.0f", r, s.failures[r]))
	}
	return out + " (" + strings.Join(parts, ", ") + ")"
}
