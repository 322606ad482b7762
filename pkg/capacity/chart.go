package capacity

import (
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Chart geometry.
const (
	chartW      = 900
	panelH      = 340
	marginL     = 70
	marginR     = 200
	marginT     = 40
	marginB     = 50
	plotW       = chartW - marginL - marginR
	plotH       = panelH - marginT - marginB
	chartH      = 2 * panelH
	capacityCol = "#d62728"
)

// series is one line of a panel.
type series struct {
	name   string
	color  string
	dashed bool
	xs, ys []float64
}

// WriteSVG draws two panels against the offered rate: delivered throughput
// and goodput (with the offered rate as a diagonal), and the latency
// percentiles on a log scale with the SLO bounds; the capacity is a vertical
// line in both.
func (r *Report) WriteSVG(w io.Writer) error {
	var steps []Step
	for _, s := range r.Steps {
		if !s.Interrupted {
			steps = append(steps, s)
		}
	}
	slices.SortStableFunc(steps, func(a, b Step) int {
		switch {
		case a.Offered < b.Offered:
			return -1
		case a.Offered > b.Offered:
			return 1
		}
		return 0
	})
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", chartW, chartH, chartW, chartH)
	b.WriteString(`<rect width="100%" height="100%" fill="white"/>` + "\n")
	xmax := 1.0
	for _, s := range steps {
		xmax = max(xmax, s.Offered)
	}
	xmax = niceCeil(xmax * 1.05)
	capX := math.NaN()
	if r.Analysis.Found {
		capX = r.Analysis.Capacity
	}

	// Panel 1: throughput.
	var xs, offered, done, good []float64
	for _, s := range steps {
		xs = append(xs, s.Offered)
		offered = append(offered, s.Offered)
		done = append(done, s.Throughput)
		good = append(good, s.Goodput)
	}
	ymax := 1.0
	for i := range xs {
		ymax = max(ymax, offered[i], done[i])
	}
	top := []series{
		{name: "offered", color: "#999999", dashed: true, xs: xs, ys: offered},
		{name: "completed/s", color: "#1f77b4", xs: xs, ys: done},
		{name: "goodput (met all SLOs)/s", color: "#2ca02c", xs: xs, ys: good},
	}
	panel(&b, 0, "Delivered throughput (requests/s) against offered rate", xmax, 0, niceCeil(ymax*1.1), false, top, nil, capX)

	// Panel 2: latency, log scale.
	lat := []series{
		{name: "ttft p50", color: "#fdae6b", xs: xs, ys: pick(steps, func(s Step) (float64, int) { return s.TTFT.P50, s.TTFT.N })},
		{name: "ttft p90", color: "#e6550d", xs: xs, ys: pick(steps, func(s Step) (float64, int) { return s.TTFT.P90, s.TTFT.N })},
		{name: "ttft p99", color: "#a63603", xs: xs, ys: pick(steps, func(s Step) (float64, int) { return s.TTFT.P99, s.TTFT.N })},
		{name: "itl p90", color: "#756bb1", xs: xs, ys: pick(steps, func(s Step) (float64, int) { return s.ITL.P90, s.ITL.N })},
		{name: "e2e p90", color: "#636363", xs: xs, ys: pick(steps, func(s Step) (float64, int) { return s.E2E.P90, s.E2E.N })},
	}
	colors := map[string]string{KindTTFT: "#e6550d", KindITL: "#756bb1", KindE2E: "#636363"}
	var slos []sloLine
	for i, text := range r.Setup.SLOs {
		slo, err := parseSLO(text)
		if err != nil || slo.Kind == KindErrors {
			continue
		}
		slos = append(slos, sloLine{label: "SLO " + text, y: ms(slo.Max), color: colors[slo.Kind]})
		name := fmt.Sprintf("%s p%s", slo.Kind, strconv.FormatFloat(slo.Quantile*100, 'g', -1, 64))
		if !slices.ContainsFunc(lat, func(s series) bool { return s.name == name }) {
			lat = append(lat, series{name: name, color: colors[slo.Kind], dashed: true, xs: xs,
				ys: pick(steps, func(s Step) (float64, int) { return checkValue(s, i) })})
		}
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range lat {
		for _, y := range s.ys {
			if y > 0 {
				lo, hi = min(lo, y), max(hi, y)
			}
		}
	}
	for _, l := range slos {
		lo, hi = min(lo, l.y), max(hi, l.y)
	}
	if math.IsInf(lo, 0) {
		lo, hi = 1, 1000
	}
	lo, hi = math.Pow(10, math.Floor(math.Log10(lo))), math.Pow(10, math.Ceil(math.Log10(hi)))
	if hi <= lo {
		hi = lo * 10
	}
	panel(&b, panelH, "Latency (ms, log scale) against offered rate", xmax, lo, hi, true, lat, slos, capX)
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

type sloLine struct {
	label string
	y     float64
	color string
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

func panel(b *strings.Builder, y0 float64, title string, xmax, ymin, ymax float64, logY bool, ss []series, slos []sloLine, capX float64) {
	px := func(x float64) float64 { return marginL + x/xmax*plotW }
	py := func(y float64) float64 {
		f := (y - ymin) / (ymax - ymin)
		if logY {
			f = (math.Log10(y) - math.Log10(ymin)) / (math.Log10(ymax) - math.Log10(ymin))
		}
		return y0 + marginT + plotH - math.Max(0, math.Min(1, f))*plotH
	}
	fmt.Fprintf(b, `<text x="%d" y="%.0f" font-size="14" font-weight="bold">%s</text>`+"\n", marginL, y0+22, html.EscapeString(title))
	fmt.Fprintf(b, `<rect x="%d" y="%.0f" width="%d" height="%d" fill="none" stroke="#333"/>`+"\n", marginL, y0+marginT, plotW, plotH)
	for _, t := range linearTicks(xmax) {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#eee"/><text x="%.1f" y="%.0f" text-anchor="middle">%s</text>`+"\n",
			px(t), y0+marginT, px(t), y0+marginT+plotH, px(t), y0+marginT+plotH+16, fmtNum(t))
	}
	fmt.Fprintf(b, `<text x="%d" y="%.0f" text-anchor="middle">offered rate (requests/s)</text>`+"\n", marginL+plotW/2, y0+panelH-12)
	var yt []float64
	if logY {
		for d := ymin; d <= ymax*1.0001; d *= 10 {
			for _, m := range []float64{1, 2, 5} {
				if v := d * m; v <= ymax*1.0001 {
					yt = append(yt, v)
				}
			}
		}
	} else {
		yt = linearTicks(ymax)
	}
	for _, t := range yt {
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/><text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n",
			marginL, py(t), marginL+plotW, py(t), marginL-6, py(t)+4, fmtNum(t))
	}
	for _, l := range slos {
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s" stroke-width="1.5" stroke-dasharray="8 4"/><text x="%d" y="%.1f" fill="%s" text-anchor="end">%s</text>`+"\n",
			marginL, py(l.y), marginL+plotW, py(l.y), l.color, marginL+plotW-4, py(l.y)-4, l.color, html.EscapeString(l.label))
	}
	if !math.IsNaN(capX) {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="%s" stroke-width="2" stroke-dasharray="4 3"/><text x="%.1f" y="%.0f" fill="%s">capacity %s/s</text>`+"\n",
			px(capX), y0+marginT, px(capX), y0+marginT+plotH, capacityCol, px(capX)+4, y0+marginT+14, capacityCol, fmtNum(capX))
	}
	for i, s := range ss {
		var pts []string
		for j := range s.xs {
			if math.IsNaN(s.ys[j]) || (logY && s.ys[j] <= 0) {
				continue
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(s.xs[j]), py(s.ys[j])))
		}
		dash := ""
		if s.dashed {
			dash = ` stroke-dasharray="5 3"`
		}
		if len(pts) > 0 {
			fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n", strings.Join(pts, " "), s.color, dash)
			for _, p := range pts {
				x, y, _ := strings.Cut(p, ",")
				fmt.Fprintf(b, `<circle cx="%s" cy="%s" r="3" fill="%s"/>`+"\n", x, y, s.color)
			}
		}
		ly := y0 + marginT + 10 + float64(i)*18
		fmt.Fprintf(b, `<line x1="%d" y1="%.0f" x2="%d" y2="%.0f" stroke="%s" stroke-width="2"%s/><text x="%d" y="%.0f">%s</text>`+"\n",
			marginL+plotW+12, ly, marginL+plotW+36, ly, s.color, dash, marginL+plotW+42, ly+4, html.EscapeString(s.name))
	}
}

// linearTicks are about five round ticks from 0 to top.
func linearTicks(top float64) []float64 {
	step := niceStep(top / 5)
	var out []float64
	for v := 0.0; v <= top*1.0001; v += step {
		out = append(out, v)
	}
	return out
}

func niceStep(x float64) float64 {
	if x <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= x {
			return m * p
		}
	}
	return 10 * p
}

// niceCeil rounds x up to a multiple of a round step.
func niceCeil(x float64) float64 {
	s := niceStep(x / 5)
	return math.Ceil(x/s) * s
}

func fmtNum(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }
