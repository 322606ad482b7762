package main

import (
	"encoding/csv"
	"fmt"
	"html"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
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

// series is one line of a chart panel; NaN values break the line.
type series struct {
	label  string
	color  string
	dashed bool
	values []float64
}

// panel is one chart of the stack, sharing the time axis.
type panel struct {
	title  string
	unit   string
	series []series
}

// Chart geometry, in SVG user units.
const (
	chartWidth  = 960
	panelHeight = 150
	panelGap    = 40
	marginLeft  = 70
	marginRight = 200
	marginTop   = 50
)

// panels turns rows into the chart's four panels.
func panels(rows []row) []panel {
	col := func(v func(row) float64) []float64 {
		out := make([]float64, len(rows))
		for i, r := range rows {
			out[i] = v(r)
		}
		return out
	}
	queueMean := func(r row) float64 { m, _, _ := stats(r.pods, func(p podValues) float64 { return p.queue }); return m }
	queueMax := func(r row) float64 { _, m, _ := stats(r.pods, func(p podValues) float64 { return p.queue }); return m }
	ttft := func(r row) float64 {
		if r.ttftCount == 0 {
			return nan()
		}
		return float64(r.ttftP90.Milliseconds())
	}
	return []panel{{
		title: "load", unit: "req/s",
		series: []series{
			{label: "offered", color: "#1f77b4", values: col(func(r row) float64 { return r.offered })},
			{label: "served", color: "#2ca02c", values: col(func(r row) float64 { return r.served })},
		},
	}, {
		title: "replicas", unit: "pods",
		series: []series{
			{label: "ready pods", color: "#ff7f0e", values: col(func(r row) float64 { return float64(r.ready) })},
			{label: "HPA desired", color: "#d62728", dashed: true, values: col(func(r row) float64 { return float64(r.desired) })},
		},
	}, {
		title: "queue (" + queueMetric + ")", unit: "requests",
		series: []series{
			{label: "mean per pod", color: "#9467bd", values: col(queueMean)},
			{label: "max over pods", color: "#8c564b", dashed: true, values: col(queueMax)},
			{label: fmt.Sprintf("HPA target (%d)", queueTarget), color: "#7f7f7f", dashed: true, values: col(func(row) float64 { return queueTarget })},
		},
	}, {
		title: "time to first token, p90", unit: "ms",
		series: []series{
			{label: fmt.Sprintf("p90 over %s", ttftWindow), color: "#e377c2", values: col(ttft)},
		},
	}}
}

// writeSVG draws the rows as a stack of line charts over time.
func writeSVG(w io.Writer, rows []row, title string) error {
	ps := panels(rows)
	var tMax float64
	for _, r := range rows {
		tMax = math.Max(tMax, r.t.Seconds())
	}
	if tMax <= 0 {
		tMax = 1
	}
	plotW := float64(chartWidth - marginLeft - marginRight)
	height := marginTop + len(ps)*(panelHeight+panelGap) + 10
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		chartWidth, height, chartWidth, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="16" font-weight="bold">%s</text>`+"\n", marginLeft, html.EscapeString(title))
	for i, p := range ps {
		top := float64(marginTop + i*(panelHeight+panelGap))
		yMax := niceMax(p)
		x := func(t float64) float64 { return marginLeft + plotW*t/tMax }
		y := func(v float64) float64 { return top + panelHeight - panelHeight*v/yMax }
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" font-weight="bold">%s</text>`+"\n", marginLeft, top-6, html.EscapeString(p.title))
		fmt.Fprintf(&b, `<rect x="%d" y="%.1f" width="%.1f" height="%d" fill="none" stroke="#999"/>`+"\n", marginLeft, top, plotW, panelHeight)
		for _, frac := range []float64{0.5, 1} {
			fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", marginLeft, y(yMax*frac), marginLeft+plotW, y(yMax*frac))
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", marginLeft-6, y(yMax*frac)+4, strconv.FormatFloat(yMax*frac, 'g', 4, 64))
		}
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">0</text>`+"\n", marginLeft-6, top+panelHeight+4)
		fmt.Fprintf(&b, `<text x="14" y="%.1f" transform="rotate(-90 14 %.1f)" text-anchor="middle">%s</text>`+"\n",
			top+panelHeight/2, top+panelHeight/2, html.EscapeString(p.unit))
		for j, s := range p.series {
			for _, seg := range segments(rows, s.values) {
				var pts []string
				for _, k := range seg {
					pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(rows[k].t.Seconds()), y(s.values[k])))
				}
				dash := ""
				if s.dashed {
					dash = ` stroke-dasharray="6 4"`
				}
				fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", s.color, dash, strings.Join(pts, " "))
			}
			ly := top + 14 + float64(j)*18
			lx := marginLeft + plotW + 14
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"/>`+"\n", lx, ly-4, lx+22, ly-4, s.color)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", lx+28, ly, html.EscapeString(s.label))
		}
		// Time axis labels under every panel.
		step := timeStep(tMax)
		for t := 0.0; t <= tMax+1e-9; t += step {
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#555">%s</text>`+"\n",
				x(t), top+panelHeight+15, (time.Duration(t) * time.Second).String())
		}
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// segments splits the indexes of values into runs without NaN.
func segments(rows []row, values []float64) [][]int {
	var out [][]int
	var cur []int
	for k := range rows {
		if math.IsNaN(values[k]) {
			if len(cur) > 0 {
				out = append(out, cur)
			}
			cur = nil
			continue
		}
		cur = append(cur, k)
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// niceMax is a round upper bound over a panel's values (at least 1).
func niceMax(p panel) float64 {
	m := 0.0
	for _, s := range p.series {
		for _, v := range s.values {
			if !math.IsNaN(v) {
				m = math.Max(m, v)
			}
		}
	}
	if m <= 1 {
		return 1
	}
	mag := math.Pow(10, math.Floor(math.Log10(m)))
	for _, k := range []float64{1, 2, 2.5, 5, 10} {
		if k*mag >= m {
			return k * mag
		}
	}
	return 10 * mag
}

// timeStep is the spacing of time labels: about 8 over the axis.
func timeStep(tMax float64) float64 {
	for _, s := range []float64{5, 10, 15, 30, 60, 120, 300, 600} {
		if tMax/s <= 8 {
			return s
		}
	}
	return 1200
}
