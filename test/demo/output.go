// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/svgchart"
)

func nan() float64 { return math.NaN() }

// csvHeader names the CSV's columns; empty cells are values nobody measured.
var csvHeader = []string{
	"t_s", "offered_rps", "served_rps", "hpa_desired", "hpa_current", "ready_pods",
	"hpa_queue_per_pod", "pods_reporting", "queue_mean", "queue_max", "batch_mean", "kv_mean",
	"ttft_p90_ms", "ttft_requests",
}

// writeCSV writes one line per row.
func writeCSV(w io.Writer, rows []row) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader); err != nil {
		return err
	}
	for _, r := range rows {
		qMean, qMax, n := stats(r.pods, func(p podValues) float64 { return p.queue })
		bMean, _, _ := stats(r.pods, func(p podValues) float64 { return p.batch })
		kvMean, _, _ := stats(r.pods, func(p podValues) float64 { return p.kv })
		ttft := ""
		if r.ttftCount > 0 {
			ttft = strconv.FormatInt(r.ttftP90.Milliseconds(), 10)
		}
		rec := []string{
			f(r.t.Seconds()), f(r.offered), f(r.served),
			strconv.Itoa(int(r.desired)), strconv.Itoa(int(r.current)), strconv.Itoa(int(r.ready)),
			f(r.hpaQueue), strconv.Itoa(n), f(qMean), f(qMax), f(bMean), f(kvMean),
			ttft, strconv.Itoa(r.ttftCount),
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// f formats a value for the CSV; NaN (not measured) is an empty cell.
func f(v float64) string {
	if math.IsNaN(v) {
		return ""
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// panels turns rows into the chart's four panels over time (in seconds).
func panels(rows []row) []svgchart.Panel {
	col := func(v func(row) float64) []float64 {
		out := make([]float64, len(rows))
		for i, r := range rows {
			out[i] = v(r)
		}
		return out
	}
	ts := col(func(r row) float64 { return r.t.Seconds() })
	queueMean := func(r row) float64 { m, _, _ := stats(r.pods, func(p podValues) float64 { return p.queue }); return m }
	queueMax := func(r row) float64 { _, m, _ := stats(r.pods, func(p podValues) float64 { return p.queue }); return m }
	ttft := func(r row) float64 {
		if r.ttftCount == 0 {
			return nan()
		}
		return float64(r.ttftP90.Milliseconds())
	}
	return []svgchart.Panel{{
		Title: "load", Y: svgchart.Axis{Label: "req/s", Grid: true},
		Series: []svgchart.Series{
			{Name: "offered", Color: "#1f77b4", X: ts, Y: col(func(r row) float64 { return r.offered })},
			{Name: "served", Color: "#2ca02c", X: ts, Y: col(func(r row) float64 { return r.served })},
		},
	}, {
		Title: "replicas", Y: svgchart.Axis{Label: "pods", Grid: true},
		Series: []svgchart.Series{
			{Name: "ready pods", Color: "#ff7f0e", X: ts, Y: col(func(r row) float64 { return float64(r.ready) })},
			{Name: "HPA desired", Color: "#d62728", Dashed: true, X: ts, Y: col(func(r row) float64 { return float64(r.desired) })},
		},
	}, {
		Title: "queue (" + queueMetric + ")", Y: svgchart.Axis{Label: "requests", Grid: true},
		Series: []svgchart.Series{
			{Name: "mean per pod", Color: "#9467bd", X: ts, Y: col(queueMean)},
			{Name: "max over pods", Color: "#8c564b", Dashed: true, X: ts, Y: col(queueMax)},
			{Name: fmt.Sprintf("HPA target (%d)", queueTarget), Color: "#7f7f7f", Dashed: true, X: ts, Y: col(func(row) float64 { return queueTarget })},
		},
	}, {
		Title: "time to first token, p90", Y: svgchart.Axis{Label: "ms", Grid: true},
		Series: []svgchart.Series{
			{Name: fmt.Sprintf("p90 over %s", ttftWindow), Color: "#e377c2", X: ts, Y: col(ttft)},
		},
	}}
}

// writeSVG draws the rows as a stack of line charts over time; a value
// nobody measured breaks its line.
func writeSVG(w io.Writer, rows []row, title string) error {
	var tMax float64
	for _, r := range rows {
		tMax = math.Max(tMax, r.t.Seconds())
	}
	if tMax <= 0 {
		tMax = 1
	}
	c := svgchart.Chart{
		Title: title, Width: 960, Left: 70, Right: 200, Top: 50, PanelHeight: 150, PanelGap: 40, Bottom: 30,
		X:      svgchart.Axis{Max: tMax, Ticks: svgchart.Every(svgchart.DurationTicks(tMax, 8), tMax), Format: svgchart.FormatSeconds},
		Panels: panels(rows),
	}
	if err := c.Write(w); err != nil {
		return fmt.Errorf("demo chart: %w", err)
	}
	return nil
}
