// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Package svgchart draws the project's line charts as standalone SVG: the
// demo's run over time, the capacity probe's steps against the offered rate
// and the shootout's policies on a shared time axis.
//
// A Chart is a stack of panels that share one x axis. A panel has a y axis
// on the left, optionally a second one on the right, line series, and
// dashed reference lines across (Panel.HLines) or along (Panel.VLines) it.
// Every label is escaped: pod, Deployment and model names are tenant input.
// A value that is NaN or infinite was not measured: it is never plotted (as
// 0 or otherwise); it breaks its series' line. The output depends only on
// the Chart, so that it can be compared byte for byte.
package svgchart

import (
	"fmt"
	"html"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Chart is a stack of panels sharing the x axis. Zero geometry fields take
// the defaults noted.
type Chart struct {
	// Title (bold) and Subtitle (grey) are drawn above the first panel.
	Title, Subtitle string
	// Width is the whole chart's (default 960); Left and Right are the
	// margins beside the plots (default 70 and 200: the legend sits in the
	// right one); Top is the space above the first panel's plot (default
	// 50, 70 with a Subtitle), Bottom the space below the last (default 40,
	// 50 with an X.Label); PanelHeight is each plot's height (default 150)
	// and PanelGap the space between two plots (default 40, 60 with an
	// X.Label).
	Width, Left, Right, Top, Bottom, PanelHeight, PanelGap float64
	// FontSize is the text's size (default 12).
	FontSize float64
	// X is the shared x axis; its tick labels are written under every panel.
	X Axis
	// Panels are drawn top to bottom.
	Panels []Panel
}

// Axis is a scale with its ticks. When Min and Max are both zero the range
// is taken from the data: a linear axis from 0 to NiceCeil of the largest
// value, a log axis from the power of ten below its smallest positive value
// to the one above its largest.
type Axis struct {
	Min, Max float64
	// Log makes the scale logarithmic; values <= 0 are then not plotted.
	Log bool
	// Ticks are where tick labels (and grid lines, with Grid) go; nil picks
	// about five round ones (LinearTicks, LogTicks).
	Ticks []float64
	// Format writes a tick label; nil is FormatNumber.
	Format func(float64) string
	// Label names the axis: under the plot for the x axis, beside it for a
	// y axis.
	Label string
	// Color is the tick labels' (default: the text's).
	Color string
	// Grid draws a light line across the plot at every tick.
	Grid bool
}

// Panel is one plot of the stack.
type Panel struct {
	// Title (bold) and Note (grey) are written above the plot.
	Title, Note string
	// Y is the left axis; Y2, when set, the right one.
	Y  Axis
	Y2 *Axis
	// Series are drawn in order; those with a Name are listed in the legend
	// beside the plot.
	Series []Series
	// HLines are dashed lines across the plot at a y value, VLines along it
	// at an x value.
	HLines, VLines []Rule
}

// Series is one line. X and Y have the same length.
type Series struct {
	Name  string
	Color string
	// Width is the line's (default 2).
	Width float64
	// Dashed dashes the line; Dots marks every point.
	Dashed, Dots bool
	// Step draws a step function: each value holds until the next point.
	Step bool
	// OnY2 plots the series against the panel's Y2.
	OnY2 bool
	X, Y []float64
}

// Rule is a dashed reference line with an optional label.
type Rule struct {
	At    float64
	Label string
	Color string
	// OnY2 puts a horizontal rule on the panel's Y2.
	OnY2 bool
}

// Write writes the chart as one SVG document.
func (c *Chart) Write(w io.Writer) error {
	svg, err := c.Render()
	if err != nil {
		return err
	}
	if _, err := io.WriteString(w, svg); err != nil {
		return fmt.Errorf("writing the chart: %w", err)
	}
	return nil
}

// Render returns the chart as one SVG document.
func (c *Chart) Render() (string, error) {
	for i, p := range c.Panels {
		for _, s := range p.Series {
			if len(s.X) != len(s.Y) {
				return "", fmt.Errorf("panel %d (%q), series %q: %d x values and %d y values", i, p.Title, s.Name, len(s.X), len(s.Y))
			}
			if s.OnY2 && p.Y2 == nil {
				return "", fmt.Errorf("panel %d (%q), series %q: on Y2, which the panel does not have", i, p.Title, s.Name)
			}
		}
	}
	g := c.geometry()
	var xs []float64
	for _, p := range c.Panels {
		for _, s := range p.Series {
			xs = append(xs, s.X...)
		}
		for _, r := range p.VLines {
			xs = append(xs, r.At)
		}
	}
	x := resolve(c.X, xs)
	height := g.top + float64(len(c.Panels))*g.panelH + float64(max(len(c.Panels)-1, 0))*g.gap + g.bottom

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%s" height="%s" viewBox="0 0 %s %s" font-family="sans-serif" font-size="%s">`+"\n",
		num(g.width), num(height), num(g.width), num(height), num(g.font))
	b.WriteString(`<rect width="100%" height="100%" fill="white"/>` + "\n")
	if c.Title != "" {
		fmt.Fprintf(&b, `<text x="%s" y="%s" font-size="%s" font-weight="bold">%s</text>`+"\n", num(g.left), num(g.font+10), num(g.font+3), Escape(c.Title))
	}
	if c.Subtitle != "" {
		fmt.Fprintf(&b, `<text x="%s" y="%s" fill="#555">%s</text>`+"\n", num(g.left), num(2*g.font+14), Escape(c.Subtitle))
	}
	for i, p := range c.Panels {
		g.panel(&b, p, x, g.top+float64(i)*(g.panelH+g.gap))
	}
	b.WriteString("</svg>\n")
	return b.String(), nil
}

// geometry is a chart's layout with the defaults filled in.
type geometry struct {
	width, left, right, top, bottom, panelH, gap, font, plotW float64
}

func (c *Chart) geometry() geometry {
	or := func(v, def float64) float64 {
		if v > 0 {
			return v
		}
		return def
	}
	top, bottom, gap := 50.0, 40.0, 40.0
	if c.Subtitle != "" {
		top = 70
	}
	if c.X.Label != "" {
		bottom, gap = 50, 60
	}
	g := geometry{
		width: or(c.Width, 960), left: or(c.Left, 70), right: or(c.Right, 200), top: or(c.Top, top),
		bottom: or(c.Bottom, bottom), panelH: or(c.PanelHeight, 150), gap: or(c.PanelGap, gap), font: or(c.FontSize, 12),
	}
	g.plotW = max(g.width-g.left-g.right, 10)
	return g
}

// scale is an axis with its range settled.
type scale struct {
	Axis
}

// resolve settles an axis's range (from values when it has none) and ticks.
func resolve(a Axis, values []float64) scale {
	if a.Min == 0 && a.Max == 0 {
		if a.Log {
			a.Min, a.Max = LogRange(values)
		} else {
			top := 0.0
			for _, v := range values {
				if finite(v) {
					top = max(top, v)
				}
			}
			a.Max = NiceCeil(top)
		}
	}
	if a.Log && a.Min <= 0 {
		a.Min = a.Max / 1000
	}
	if !(a.Max > a.Min) || !finite(a.Min) || !finite(a.Max) {
		a.Min, a.Max = 0, 1
		if a.Log {
			a.Min, a.Max = 1, 10
		}
	}
	if a.Ticks == nil {
		if a.Log {
			a.Ticks = LogTicks(a.Min, a.Max)
		} else {
			a.Ticks = LinearTicks(a.Min, a.Max)
		}
	}
	if a.Format == nil {
		a.Format = FormatNumber
	}
	return scale{a}
}

// frac is where v falls on the axis, 0 at Min and 1 at Max, clamped to
// [0, 1]; ok is false for a value the axis cannot show (not finite, or <= 0
// on a log axis).
func (s scale) frac(v float64) (f float64, ok bool) {
	if !finite(v) || (s.Log && v <= 0) {
		return 0, false
	}
	f = (v - s.Min) / (s.Max - s.Min)
	if s.Log {
		f = math.Log10(v/s.Min) / math.Log10(s.Max/s.Min)
	}
	return min(max(f, 0), 1), true
}

func (g geometry) panel(b *strings.Builder, p Panel, x scale, top float64) {
	d := &panelDraw{g: g, b: b, p: p, x: x, top: top, bottom: top + g.panelH, right: g.left + g.plotW}
	d.resolveY()
	d.frame()
	d.xAxis()
	d.yAxis(d.y, g.left-6, "end", 14)
	if p.Y2 != nil {
		d.yAxis(d.y2, d.right+4, "start", g.width-10)
	}
	d.refLines()
	d.series()
}

// panelDraw is one panel being drawn: where it is and its scales.
type panelDraw struct {
	g                  geometry
	b                  *strings.Builder
	p                  Panel
	x, y, y2           scale
	top, bottom, right float64
}

// resolveY fits the panel's y scales to the values drawn against them.
func (d *panelDraw) resolveY() {
	var leftVals, rightVals []float64
	for _, s := range d.p.Series {
		if s.OnY2 {
			rightVals = append(rightVals, s.Y...)
		} else {
			leftVals = append(leftVals, s.Y...)
		}
	}
	for _, r := range d.p.HLines {
		if r.OnY2 {
			rightVals = append(rightVals, r.At)
		} else {
			leftVals = append(leftVals, r.At)
		}
	}
	d.y = resolve(d.p.Y, leftVals)
	if d.p.Y2 != nil {
		d.y2 = resolve(*d.p.Y2, rightVals)
	}
}

// yScale is the scale a series or line is drawn against.
func (d *panelDraw) yScale(onY2 bool) scale {
	if onY2 {
		return d.y2
	}
	return d.y
}

func (d *panelDraw) px(v float64) (float64, bool) {
	f, ok := d.x.frac(v)
	return d.g.left + f*d.g.plotW, ok
}

func (d *panelDraw) py(s scale, v float64) (float64, bool) {
	f, ok := s.frac(v)
	return d.bottom - f*d.g.panelH, ok
}

// frame draws the title, the note and the plot's border.
func (d *panelDraw) frame() {
	g, b, p := d.g, d.b, d.p
	if p.Title != "" || p.Note != "" {
		fmt.Fprintf(b, `<text x="%s" y="%s"><tspan font-weight="bold">%s</tspan>`, num(g.left), num(d.top-6), Escape(p.Title))
		if p.Note != "" {
			fmt.Fprintf(b, `<tspan dx="10" fill="#555">%s</tspan>`, Escape(p.Note))
		}
		b.WriteString("</text>\n")
	}
	fmt.Fprintf(b, `<rect x="%s" y="%s" width="%s" height="%s" fill="none" stroke="#999"/>`+"\n", num(g.left), num(d.top), num(g.plotW), num(g.panelH))
}

// xAxis draws the ticks under the plot and the label under them.
func (d *panelDraw) xAxis() {
	g, b, x := d.g, d.b, d.x
	for _, t := range x.Ticks {
		tx, ok := d.px(t)
		if !ok {
			continue
		}
		if x.Grid {
			fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#eee"/>`+"\n", num(tx), num(d.top), num(tx), num(d.bottom))
		}
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle"%s>%s</text>`+"\n", num(tx), num(d.bottom+g.font+3), fill(x.Color, "#555"), Escape(x.Format(t)))
	}
	if x.Label != "" {
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle">%s</text>`+"\n", num(g.left+g.plotW/2), num(d.bottom+2*g.font+8), Escape(x.Label))
	}
}

// yAxis draws s's ticks beside the plot and its label turned along it.
func (d *panelDraw) yAxis(s scale, tickX float64, anchor string, labelX float64) {
	g, b := d.g, d.b
	for _, t := range s.Ticks {
		ty, ok := d.py(s, t)
		if !ok {
			continue
		}
		if s.Grid {
			fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#eee"/>`+"\n", num(g.left), num(ty), num(d.right), num(ty))
		}
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="%s"%s>%s</text>`+"\n", num(tickX), num(ty+4), anchor, fill(s.Color, ""), Escape(s.Format(t)))
	}
	if s.Label != "" {
		mid := d.top + g.panelH/2
		fmt.Fprintf(b, `<text x="%s" y="%s" transform="rotate(-90 %s %s)" text-anchor="middle"%s>%s</text>`+"\n",
			num(labelX), num(mid), num(labelX), num(mid), fill(s.Color, ""), Escape(s.Label))
	}
}

// refLines draws the dashed reference lines across and along the panel.
func (d *panelDraw) refLines() {
	g, b := d.g, d.b
	for _, r := range d.p.HLines {
		ry, ok := d.py(d.yScale(r.OnY2), r.At)
		if !ok {
			continue
		}
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="1.5" stroke-dasharray="8 4"/>`+"\n",
			num(g.left), num(ry), num(d.right), num(ry), color(r.Color))
		if r.Label != "" {
			fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="end" fill="%s">%s</text>`+"\n", num(d.right-4), num(ry-4), color(r.Color), Escape(r.Label))
		}
	}
	for _, r := range d.p.VLines {
		rx, ok := d.px(r.At)
		if !ok {
			continue
		}
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="2" stroke-dasharray="4 3"/>`+"\n",
			num(rx), num(d.top), num(rx), num(d.bottom), color(r.Color))
		if r.Label != "" {
			fmt.Fprintf(b, `<text x="%s" y="%s" fill="%s">%s</text>`+"\n", num(rx+4), num(d.top+14), color(r.Color), Escape(r.Label))
		}
	}
}

// series draws each series, broken at its gaps, and its legend entry.
func (d *panelDraw) series() {
	b := d.b
	legend := 0
	for _, s := range d.p.Series {
		ys := d.yScale(s.OnY2)
		width := s.Width
		if width <= 0 {
			width = 2
		}
		dash := ""
		if s.Dashed {
			dash = ` stroke-dasharray="6 4"`
		}
		for _, seg := range segments(s, d.x, ys) {
			var pts []string
			for k, i := range seg {
				sx, _ := d.px(s.X[i])
				sy, _ := d.py(ys, s.Y[i])
				if s.Step && k > 0 {
					prevY, _ := d.py(ys, s.Y[seg[k-1]])
					pts = append(pts, num(sx)+","+num(prevY))
				}
				pts = append(pts, num(sx)+","+num(sy))
			}
			if len(seg) > 1 {
				fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="%s"%s/>`+"\n", strings.Join(pts, " "), color(s.Color), num(width), dash)
			}
			if s.Dots || len(seg) == 1 {
				// A point alone would be an invisible line: it is drawn as a dot.
				for _, i := range seg {
					sx, _ := d.px(s.X[i])
					sy, _ := d.py(ys, s.Y[i])
					fmt.Fprintf(b, `<circle cx="%s" cy="%s" r="3" fill="%s"/>`+"\n", num(sx), num(sy), color(s.Color))
				}
			}
		}
		if s.Name == "" {
			continue
		}
		ly := d.top + 14 + float64(legend)*18
		lx := d.right + 14
		legend++
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="2"%s/><text x="%s" y="%s">%s</text>`+"\n",
			num(lx), num(ly-4), num(lx+22), num(ly-4), color(s.Color), dash, num(lx+28), num(ly), Escape(s.Name))
	}
}

// segments are the runs of a series' point indexes that can be drawn: a
// point either axis cannot show (NaN, infinite, <= 0 on a log axis) ends a
// run. In a step series a point that repeats the previous value (and is not
// the run's last) is left out: the line through it is the same.
func segments(s Series, x, y scale) [][]int {
	var out [][]int
	var cur []int
	for i := range s.X {
		_, okX := x.frac(s.X[i])
		_, okY := y.frac(s.Y[i])
		if !okX || !okY {
			if len(cur) > 0 {
				out = append(out, cur)
			}
			cur = nil
			continue
		}
		cur = append(cur, i)
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	if !s.Step {
		return out
	}
	for n, seg := range out {
		kept := seg[:1]
		for k := 1; k < len(seg); k++ {
			if s.Y[seg[k]] != s.Y[kept[len(kept)-1]] || k == len(seg)-1 {
				kept = append(kept, seg[k])
			}
		}
		out[n] = kept
	}
	return out
}

// Escape makes text safe inside an SVG element or attribute: invalid UTF-8
// and characters XML does not allow become U+FFFD, and <, >, &, ' and " are
// escaped.
func Escape(s string) string {
	s = strings.ToValidUTF8(s, string(utf8.RuneError))
	s = strings.Map(func(r rune) rune {
		if r == '\t' || r == '\n' || r == '\r' || (r >= 0x20 && r <= 0xD7FF) || (r >= 0xE000 && r <= 0xFFFD) || r >= 0x10000 {
			return r
		}
		return utf8.RuneError
	}, s)
	return html.EscapeString(s)
}

// color is an escaped colour, black when empty.
func color(c string) string {
	if c == "" {
		return "black"
	}
	return Escape(c)
}

// fill is a fill attribute for c, or for def when c is empty, or nothing.
func fill(c, def string) string {
	if c == "" {
		c = def
	}
	if c == "" {
		return ""
	}
	return ` fill="` + Escape(c) + `"`
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// num writes a coordinate with one decimal at most.
func num(v float64) string { return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64) }

// FormatNumber is the default tick label: whole numbers in full (up to a
// billion), others with four significant digits.
func FormatNumber(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e9 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// FormatSeconds labels a time axis in seconds as a short duration: 0, 45s,
// 1m, 1m30s, 2h, 1h5m.
func FormatSeconds(v float64) string {
	d := time.Duration(math.Round(v)) * time.Second
	if d == 0 {
		return "0"
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// NiceStep is the smallest of 1, 2 and 5 times a power of ten that is at
// least x (1 for x <= 0).
func NiceStep(x float64) float64 {
	if !(x > 0) || !finite(x) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5} {
		if m*p >= x {
			return m * p
		}
	}
	return 10 * p
}

// NiceCeil rounds x up to a multiple of a round step (about a fifth of x);
// it is 1 for x <= 0.
func NiceCeil(x float64) float64 {
	if !(x > 0) || !finite(x) {
		return 1
	}
	s := NiceStep(x / 5)
	return math.Ceil(x/s) * s
}

// LinearTicks are about five round ticks from lo to hi: the multiples of
// NiceStep((hi-lo)/5) between them.
func LinearTicks(lo, hi float64) []float64 {
	if !(hi > lo) || !finite(lo) || !finite(hi) {
		return nil
	}
	step := NiceStep((hi - lo) / 5)
	var out []float64
	for i := math.Ceil(lo / step); i*step <= hi+step*1e-9 && len(out) < 100; i++ {
		out = append(out, i*step)
	}
	return out
}

// LogTicks are 1, 2 and 5 times each power of ten from lo to hi (lo > 0).
func LogTicks(lo, hi float64) []float64 {
	if !(lo > 0) || !(hi > lo) || !finite(hi) {
		return nil
	}
	var out []float64
	for d := math.Pow(10, math.Floor(math.Log10(lo))); d <= hi*1.0001 && len(out) < 100; d *= 10 {
		for _, m := range []float64{1, 2, 5} {
			if v := d * m; v >= lo*0.9999 && v <= hi*1.0001 {
				out = append(out, v)
			}
		}
	}
	return out
}

// LogRange is the powers of ten around the positive, finite values (1 to
// 1000 when there are none).
func LogRange(values []float64) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, v := range values {
		if v > 0 && finite(v) {
			lo, hi = min(lo, v), max(hi, v)
		}
	}
	if math.IsInf(lo, 0) {
		return 1, 1000
	}
	lo, hi = math.Pow(10, math.Floor(math.Log10(lo))), math.Pow(10, math.Ceil(math.Log10(hi)))
	if hi <= lo {
		hi = lo * 10
	}
	return lo, hi
}

// DurationTicks is a round spacing, in seconds, giving at most maxTicks
// intervals over span seconds: 1, 2, 5, 10, 15 or 30 seconds or minutes, or
// whole hours.
func DurationTicks(span float64, maxTicks int) float64 {
	maxTicks = max(maxTicks, 1)
	for _, s := range []float64{1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400} {
		if span/s <= float64(maxTicks) {
			return s
		}
	}
	return math.Ceil(span/float64(maxTicks)/86400) * 86400
}

// Every is the multiples of step from 0 to top, for Axis.Ticks.
func Every(step, top float64) []float64 {
	if !(step > 0) || !finite(top) {
		return nil
	}
	var out []float64
	for i := 0.0; i*step <= top+step*1e-9 && len(out) < 1000; i++ {
		out = append(out, i*step)
	}
	return out
}
