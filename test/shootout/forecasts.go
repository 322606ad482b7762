// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/test/e2e/framework"
)

// forecastCounter is the adapter's count of the forecasts it made, by the
// method asked and the estimator that made each (auto's choice).
const forecastCounter = "inference_metrics_adapter_forecasts_total"

// forecastReader reads the adapter's forecastCounter, by "METHOD/ESTIMATOR".
type forecastReader func(ctx context.Context) (map[string]float64, error)

// adapterForecasts reads forecastCounter from the adapter's /metrics as
// the control plane's admin.
func adapterForecasts(e *env) (forecastReader, error) {
	c, err := e.adapter.HTTPClient(e.cp.Admin)
	if err != nil {
		return nil, fmt.Errorf("adapter client: %w", err)
	}
	url := e.adapter.URL() + "/metrics"
	return func(ctx context.Context) (map[string]float64, error) {
		page, err := framework.GetPage(ctx, c, url)
		if err != nil {
			return nil, err
		}
		return parseForecastCounts(page)
	}, nil
}

// parseForecastCounts is forecastCounter's series on a text page, by
// "METHOD/ESTIMATOR". Only its own lines are parsed (the adapter's page
// also holds the API server's many series); a page without it is an error
// (an adapter older than the counter).
func parseForecastCounts(page []byte) (map[string]float64, error) {
	var own bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(page))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, forecastCounter+"{") || line == "# TYPE "+forecastCounter+" counter" {
			own.WriteString(line + "\n")
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read the adapter's page: %w", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(&own)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", forecastCounter, err)
	}
	fam, ok := fams[forecastCounter]
	if !ok {
		return nil, fmt.Errorf("the adapter's page has no %s", forecastCounter)
	}
	out := map[string]float64{}
	for _, m := range fam.GetMetric() {
		var method, estimator string
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "method":
				method = l.GetValue()
			case "estimator":
				estimator = l.GetValue()
			}
		}
		out[method+"/"+estimator] = m.GetCounter().GetValue()
	}
	return out, nil
}

// countsSince is how much each series grew from before to now, the series
// that grew only; a series that fell (the adapter restarted) counts from 0.
func countsSince(now, before map[string]float64) map[string]int {
	var out map[string]int
	for _, k := range slices.Sorted(maps.Keys(now)) {
		d := now[k] - before[k]
		if d < 0 {
			d = now[k]
		}
		if d > 0 {
			if out == nil {
				out = map[string]int{}
			}
			out[k] = int(d + 0.5)
		}
	}
	return out
}

// forecastsAfter sums the samples' Forecasts from warmup on; nil when none.
func forecastsAfter(samples []Sample, warmup time.Duration) map[string]int {
	var out map[string]int
	for _, s := range samples {
		if s.T < warmup {
			continue
		}
		for k, n := range s.Forecasts {
			if out == nil {
				out = map[string]int{}
			}
			out[k] += n
		}
	}
	return out
}

// forecastsText is a run's forecasts in words, e.g. "auto/holt 61%,
// auto/staffing 39% of 120"; empty without any.
func forecastsText(m map[string]int) string {
	total := 0
	for _, n := range m {
		total += n
	}
	if total == 0 {
		return ""
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %.0f%%", k, 100*float64(m[k])/float64(total)))
	}
	return fmt.Sprintf("%s of %d", strings.Join(parts, ", "), total)
}
