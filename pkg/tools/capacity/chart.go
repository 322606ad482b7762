// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package capacity

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/svgchart"
)

// capacityColor is the capacity line's.
const capacityColor = "#d62728"

// WriteSVG draws two panels against the offered rate: delivered throughput
// and goodput (with the offered rate as a diagonal), and the latency
// percentiles on a log scale with the SLO bounds; the capacity is a vertical
// line in both. A percentile a step did not measure is not drawn.
func (r *Report) WriteSVG(w io.Writer) error {
	var steps []Step
	for _, s := range r.Steps {
		if !s.Interrupted {
			steps = append(steps, s)
		}
	}
	slices.SortStableFunc(steps, func(a, b Step) int { return cmp.Compare(a.Offered, b.Offered) })
	xmax := 1.0
	var xs, offered, done, good []float64
	for _, s := range steps {
		xmax = max(xmax, s.Offered)
		xs = append(xs, s.Offered)
		offered = append(offered, s.Offered)
		done = append(done, s.Throughput)
		good = append(good, s.Goodput)
	}
	xmax = svgchart.NiceCeil(xmax * 1.05)
	var capacity []svgchart.Rule
	if r.Analysis.Found {
		capacity = []svgchart.Rule{{At: r.Analysis.Capacity, Label: "capacity " + svgchart.FormatNumber(r.Analysis.Capacity) + "/s", Color: capacityColor}}
	}

	// Panel 1: throughput.
	ymax := 1.0
	for i := range xs {
		ymax = max(ymax, offered[i], done[i])
	}
	top := svgchart.Panel{
		Title: "Delivered throughput (requests/s) against offered rate",
		Y:     svgchart.Axis{Max: svgchart.NiceCeil(ymax * 1.1), Grid: true},
		Series: []svgchart.Series{
			{Name: "offered", Color: "#999999", Dashed: true, Dots: true, X: xs, Y: offered},
			{Name: "completed/s", Color: "#1f77b4", Dots: true, X: xs, Y: done},
			{Name: "goodput (met all SLOs)/s", Color: "#2ca02c", Dots: true, X: xs, Y: good},
		},
		VLines: capacity,
	}

	// Panel 2: latency, log scale.
	lat := []svgchart.Series{
		{Name: "ttft p50", Color: "#fdae6b", X: xs, Y: pick(steps, func(s Step) (float64, int) { return s.TTFT.P50, s.TTFT.N })},
		{Name: "ttft p90", Color: "#e6550d", X: xs, Y: pick(steps, func(s Step) (float64, int) { return s.TTFT.P90, s.TTFT.N })},
		{Name: "ttft p99", Color: "#a63603", X: xs, Y: pick(steps, func(s Step) (float64, int) { return s.TTFT.P99, s.TTFT.N })},
		{Name: "itl p90", Color: "#756bb1", X: xs, Y: pick(steps, func(s Step) (float64, int) { return s.ITL.P90, s.ITL.N })},
		{Name: "e2e p90", Color: "#636363", X: xs, Y: pick(steps, func(s Step) (float64, int) { return s.E2E.P90, s.E2E.N })},
	}
	colors := map[string]string{KindTTFT: "#e6550d", KindITL: "#756bb1", KindTPOT: "#31a354", KindE2E: "#636363"}
	var slos []svgchart.Rule
	for i, text := range r.Setup.SLOs {
		slo, err := parseSLO(text)
		if err != nil || slo.Kind == KindErrors || slo.Kind == KindGood {
			continue
		}
		slos = append(slos, svgchart.Rule{Label: "SLO " + text, At: ms(slo.Max), Color: colors[slo.Kind]})
		name := fmt.Sprintf("%s p%s", slo.Kind, strconv.FormatFloat(slo.Quantile*100, 'g', -1, 64))
		if !slices.ContainsFunc(lat, func(s svgchart.Series) bool { return s.Name == name }) {
			lat = append(lat, svgchart.Series{Name: name, Color: colors[slo.Kind], Dashed: true, X: xs,
				Y: pick(steps, func(s Step) (float64, int) { return checkValue(s, i) })})
		}
	}
	for i := range lat {
		lat[i].Dots = true
	}
	bottom := svgchart.Panel{
		Title:  "Latency (ms, log scale) against offered rate",
		Y:      svgchart.Axis{Log: true, Grid: true}, // from the powers of ten around the data and the SLOs
		Series: lat, HLines: slos, VLines: capacity,
	}

	c := svgchart.Chart{
		Width: 900, Left: 70, Right: 200, Top: 40, PanelHeight: 250, PanelGap: 90, Bottom: 50,
		X:      svgchart.Axis{Max: xmax, Label: "offered rate (requests/s)", Grid: true},
		Panels: []svgchart.Panel{top, bottom},
	}
	if err := c.Write(w); err != nil {
		return fmt.Errorf("capacity chart: %w", err)
	}
	return nil
}

// pick returns f's value per step, NaN where it has no data (n == 0).
func pick(steps []Step, f func(Step) (float64, int)) []float64 {
	out := make([]float64, len(steps))
	for i, s := range steps {
		v, n := f(s)
		out[i] = v
		if n == 0 {
			out[i] = math.NaN()
		}
	}
	return out
}

func checkValue(s Step, i int) (float64, int) {
	if i >= len(s.Checks) || s.Checks[i].Note != "" {
		return 0, 0
	}
	return s.Checks[i].Value, 1
}
