// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package svgchart

import (
	"bytes"
	"encoding/xml"
	"errors"
	"flag"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.svg from the current output")

// element is one SVG element: its name, attributes and direct text.
type element struct {
	name  string
	attrs map[string]string
	text  string
}

// parse decodes an SVG document strictly and returns its elements in order.
func parse(t *testing.T, svg string) []element {
	t.Helper()
	dec := xml.NewDecoder(strings.NewReader(svg))
	var out []element
	var open []int // indexes into out of the elements being read
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, svg)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			e := element{name: tok.Name.Local, attrs: map[string]string{}}
			for _, a := range tok.Attr {
				e.attrs[a.Name.Local] = a.Value
			}
			out = append(out, e)
			open = append(open, len(out)-1)
		case xml.EndElement:
			open = open[:len(open)-1]
		case xml.CharData:
			if len(open) > 0 {
				out[open[len(open)-1]].text += string(tok)
			}
		}
	}
	return out
}

// texts is the text of every text and tspan element.
func texts(els []element) []string {
	var out []string
	for _, e := range els {
		if (e.name == "text" || e.name == "tspan") && e.text != "" {
			out = append(out, e.text)
		}
	}
	return out
}

// point is a plotted position.
type point struct{ x, y float64 }

// plotted is every point of the polylines and circles of one colour: lines
// is the number of polylines, points their vertices and the dots.
func plotted(t *testing.T, els []element, color string) (lines int, points []point) {
	t.Helper()
	f := func(s string) float64 {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("coordinate %q: %v", s, err)
		}
		return v
	}
	for _, e := range els {
		switch {
		case e.name == "polyline" && e.attrs["stroke"] == color:
			lines++
			for _, p := range strings.Fields(e.attrs["points"]) {
				x, y, _ := strings.Cut(p, ",")
				points = append(points, point{f(x), f(y)})
			}
		case e.name == "circle" && e.attrs["fill"] == color:
			points = append(points, point{f(e.attrs["cx"]), f(e.attrs["cy"])})
		}
	}
	return lines, points
}

func render(t *testing.T, c Chart) string {
	t.Helper()
	svg, err := c.Render()
	if err != nil {
		t.Fatal(err)
	}
	return svg
}

// onePanel is a chart of one 100-unit-high plot from x=0 to x=100 at
// left 100, width 100, so that a point's position is easy to write.
func onePanel(y Axis, s ...Series) Chart {
	return Chart{Width: 300, Left: 100, Right: 100, Top: 50, PanelHeight: 100,
		X: Axis{Min: 0, Max: 100}, Panels: []Panel{{Title: "p", Y: y, Series: s}}}
}

// TestSeriesPoints: where points land, and which are not drawn: NaN and
// infinite values and values <= 0 on a log axis break the line and are
// never drawn as 0; a point alone is a dot; a step series holds its value.
func TestSeriesPoints(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	tests := []struct {
		name      string
		y         Axis
		s         Series
		wantLines int
		want      []point
	}{
		{name: "empty series", y: Axis{Max: 10}, s: Series{Color: "c"}, wantLines: 0, want: nil},
		{name: "one point is a dot", y: Axis{Max: 10}, s: Series{Color: "c", X: []float64{50}, Y: []float64{5}}, wantLines: 0, want: []point{{150, 100}}},
		{name: "linear", y: Axis{Max: 10}, s: Series{Color: "c", X: []float64{0, 50, 100}, Y: []float64{0, 5, 10}}, wantLines: 1, want: []point{{100, 150}, {150, 100}, {200, 50}}},
		{name: "NaN breaks the line", y: Axis{Max: 10}, s: Series{Color: "c", X: []float64{0, 25, 50, 75, 100}, Y: []float64{2, 4, nan, 6, 8}},
			wantLines: 2, want: []point{{100, 130}, {125, 110}, {175, 90}, {200, 70}}},
		{name: "infinite values and x are skipped", y: Axis{Max: 10}, s: Series{Color: "c", X: []float64{0, 50, inf, 100}, Y: []float64{inf, 5, 5, -inf}},
			wantLines: 0, want: []point{{150, 100}}},
		{name: "all NaN draws nothing", y: Axis{Max: 10}, s: Series{Color: "c", X: []float64{0, 100}, Y: []float64{nan, nan}}, wantLines: 0, want: nil},
		{name: "log axis", y: Axis{Min: 1, Max: 100, Log: true}, s: Series{Color: "c", X: []float64{0, 50, 100}, Y: []float64{1, 10, 100}},
			wantLines: 1, want: []point{{100, 150}, {150, 100}, {200, 50}}},
		{name: "log axis skips zero and negatives", y: Axis{Min: 1, Max: 100, Log: true}, s: Series{Color: "c", X: []float64{0, 25, 50, 100}, Y: []float64{10, 0, -1, 100}},
			wantLines: 0, want: []point{{100, 100}, {200, 50}}},
		{name: "out of range is clamped to the plot", y: Axis{Max: 10}, s: Series{Color: "c", X: []float64{0, 100}, Y: []float64{-5, 50}},
			wantLines: 1, want: []point{{100, 150}, {200, 50}}},
		{name: "dots", y: Axis{Max: 10}, s: Series{Color: "c", Dots: true, X: []float64{0, 100}, Y: []float64{0, 10}},
			wantLines: 1, want: []point{{100, 150}, {200, 50}, {100, 150}, {200, 50}}},
		{name: "step holds each value and drops repeats", y: Axis{Max: 10}, s: Series{Color: "c", Step: true, X: []float64{0, 25, 50, 100}, Y: []float64{2, 2, 6, 6}},
			wantLines: 1, want: []point{{100, 130}, {150, 130}, {150, 90}, {200, 90}, {200, 90}}},
		{name: "auto range", y: Axis{}, s: Series{Color: "c", X: []float64{0, 100}, Y: []float64{0, 18}},
			wantLines: 1, want: []point{{100, 150}, {200, 60}}}, // 0 to 20
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			els := parse(t, render(t, onePanel(tc.y, tc.s)))
			lines, got := plotted(t, els, "c")
			if lines != tc.wantLines || !slices.Equal(got, tc.want) {
				t.Errorf("%d lines through %v, want %d through %v", lines, got, tc.wantLines, tc.want)
			}
		})
	}
}

// TestHostileLabels: every text a caller passes in is escaped, so that the
// document stays well-formed and the text reads back unchanged.
func TestHostileLabels(t *testing.T) {
	hostile := []string{
		`</text><script>alert(1)</script>`,
		`a"b' onload="x`,
		"&amp; &lt; ]]> <!-- -->",
		"nul\x00 esc\x1b bad\xffutf8",
	}
	for _, h := range hostile {
		t.Run(strconv.Quote(h), func(t *testing.T) {
			c := Chart{Title: h, Subtitle: h, X: Axis{Label: h, Format: func(float64) string { return h }, Color: h},
				Panels: []Panel{{Title: h, Note: h, Y: Axis{Label: h, Color: h}, Y2: &Axis{Label: h, Format: func(float64) string { return h }},
					Series: []Series{{Name: h, Color: h, X: []float64{0, 1}, Y: []float64{0, 1}}},
					HLines: []Rule{{At: 0.5, Label: h, Color: h}}, VLines: []Rule{{At: 0.5, Label: h, Color: h}}}}}
			els := parse(t, render(t, c))
			clean := strings.Map(func(r rune) rune {
				if r < 0x20 {
					return '\uFFFD'
				}
				return r
			}, strings.ToValidUTF8(h, "\uFFFD"))
			n := 0
			for _, e := range els {
				if e.name == "script" {
					t.Fatalf("a label made a script element")
				}
				for k, v := range e.attrs {
					if k == "onload" {
						t.Fatalf("a label made an attribute %s=%q", k, v)
					}
				}
			}
			for _, text := range texts(els) {
				if strings.Contains(text, clean) {
					n++
				}
			}
			// Title, subtitle, panel title and note, x tick labels and
			// label, y and y2 labels, y2 tick labels, both rules' labels,
			// the legend: at least 11 texts carry the label.
			if n < 11 {
				t.Errorf("%d texts read back %q, want at least 11: %q", n, clean, texts(els))
			}
		})
	}
}

func TestRenderErrors(t *testing.T) {
	tests := []struct {
		name string
		p    Panel
		want string
	}{
		{"lengths differ", Panel{Series: []Series{{Name: "s", X: []float64{1, 2}, Y: []float64{1}}}}, "2 x values and 1 y values"},
		{"no Y2", Panel{Series: []Series{{Name: "s", OnY2: true}}}, "does not have"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := Chart{Panels: []Panel{tc.p}}
			if _, err := c.Render(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestEmptyChart: no panels, or a panel with nothing in it, still makes a
// well-formed document with a frame.
func TestEmptyChart(t *testing.T) {
	for _, c := range []Chart{{}, {Panels: []Panel{{}}}, {Panels: []Panel{{Y: Axis{Log: true}}}}} {
		els := parse(t, render(t, c))
		if els[0].name != "svg" {
			t.Errorf("first element %q, want svg", els[0].name)
		}
		rects := 0
		for _, e := range els {
			if e.name == "rect" {
				rects++
			}
		}
		if rects != 1+len(c.Panels) {
			t.Errorf("%d rects, want the background and %d frames", rects, len(c.Panels))
		}
	}
}

func TestTicks(t *testing.T) {
	tests := []struct {
		name string
		got  []float64
		want []float64
	}{
		{"linear 0-15", LinearTicks(0, 15), []float64{0, 5, 10, 15}},
		{"linear 0-1", LinearTicks(0, 1), []float64{0, 0.2, 0.4, 0.6000000000000001, 0.8, 1}},
		{"linear 0-8", LinearTicks(0, 8), []float64{0, 2, 4, 6, 8}},
		{"linear 3-17", LinearTicks(3, 17), []float64{5, 10, 15}},
		{"linear empty range", LinearTicks(5, 5), nil},
		{"linear NaN", LinearTicks(0, math.NaN()), nil},
		{"log 10-10000", LogTicks(10, 10000), []float64{10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000}},
		{"log 0.1-1", LogTicks(0.1, 1), []float64{0.1, 0.2, 0.5, 1}},
		{"log 30-100", LogTicks(30, 100), []float64{50, 100}},
		{"log bad", LogTicks(0, 10), nil},
		{"every 2 to 7", Every(2, 7), []float64{0, 2, 4, 6}},
		{"every 0", Every(0, 7), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !slices.Equal(tc.got, tc.want) {
				t.Errorf("got %v, want %v", tc.got, tc.want)
			}
		})
	}
}

func TestScaling(t *testing.T) {
	tests := []struct {
		name      string
		got, want float64
	}{
		{"nice step 3.6", NiceStep(3.6), 5},
		{"nice step 0.03", NiceStep(0.03), 0.05},
		{"nice step 0", NiceStep(0), 1},
		{"nice ceil 12.6", NiceCeil(12.6), 15},
		{"nice ceil 18", NiceCeil(18), 20},
		{"nice ceil 0.7", NiceCeil(0.7), 0.8},
		{"nice ceil 0", NiceCeil(0), 1},
		{"nice ceil NaN", NiceCeil(math.NaN()), 1},
		{"duration 240 s, 8 ticks", DurationTicks(240, 8), 30},
		{"duration 50 s, 8 ticks", DurationTicks(50, 8), 10},
		{"duration 4 h, 12 ticks", DurationTicks(4*3600, 12), 1800},
		{"duration 10 min, 12 ticks", DurationTicks(600, 12), 60},
		{"duration 30 days, 10 ticks", DurationTicks(30*86400, 10), 3 * 86400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("got %v, want %v", tc.got, tc.want)
			}
		})
	}
	lo, hi := LogRange([]float64{0, -3, 45, 1200, math.NaN(), math.Inf(1)})
	if lo != 10 || hi != 10000 {
		t.Errorf("LogRange = %v, %v, want 10, 10000", lo, hi)
	}
	if lo, hi := LogRange(nil); lo != 1 || hi != 1000 {
		t.Errorf("LogRange(nil) = %v, %v, want 1, 1000", lo, hi)
	}
}

func TestFormat(t *testing.T) {
	tests := []struct{ got, want string }{
		{FormatNumber(10000), "10000"},
		{FormatNumber(0.5), "0.5"},
		{FormatNumber(2.0 / 3), "0.6667"},
		{FormatNumber(1e12), "1e+12"},
		{FormatSeconds(0), "0"},
		{FormatSeconds(45), "45s"},
		{FormatSeconds(60), "1m"},
		{FormatSeconds(90), "1m30s"},
		{FormatSeconds(7200), "2h"},
		{FormatSeconds(3900), "1h5m"},
		{FormatSeconds(3601), "1h0m1s"},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

// TestGolden: a chart with every feature renders byte for byte as in
// testdata/golden.svg (go test ./pkg/tools/svgchart -update rewrites it; look at
// the picture before committing).
func TestGolden(t *testing.T) {
	nan := math.NaN()
	c := Chart{
		Title: "golden <chart>", Subtitle: "every feature once", Right: 220,
		X: Axis{Max: 300, Ticks: Every(DurationTicks(300, 8), 300), Format: FormatSeconds, Label: "time", Grid: true},
		Panels: []Panel{{
			Title: "linear", Note: "with a note", Y: Axis{Label: "req/s", Grid: true},
			Series: []Series{
				{Name: "offered", Color: "#1f77b4", X: []float64{0, 60, 120, 180, 240, 300}, Y: []float64{1, 4, 9, 12, 8, 3}},
				{Name: "served", Color: "#2ca02c", Dashed: true, Dots: true, X: []float64{0, 60, 120, 180, 240, 300}, Y: []float64{1, 4, nan, 10, 8, 3}},
				{Name: "alone", Color: "#9467bd", X: []float64{0, 150, 300}, Y: []float64{nan, 6, nan}},
			},
			HLines: []Rule{{At: 10, Label: "target 10", Color: "#7f7f7f"}},
			VLines: []Rule{{At: 200, Label: "capacity", Color: "#d62728"}},
		}, {
			Title: "two axes", Y: Axis{Max: 8, Color: "#08519c"}, Y2: &Axis{Min: 0.1, Max: 100, Log: true, Ticks: []float64{0.1, 1, 10, 100}, Color: "#cb181d",
				Format: func(v float64) string { return FormatNumber(v) + "s" }},
			Series: []Series{
				{Color: "#08519c", Step: true, Width: 1.5, X: []float64{0, 30, 60, 90, 200, 300}, Y: []float64{1, 1, 2, 4, 4, 3}},
				{Color: "#cb181d", OnY2: true, Width: 1, X: []float64{30, 90, 150, 210, 270}, Y: []float64{0.3, 2, 40, 0, 500}},
			},
			HLines: []Rule{{At: 2, Color: "#cb181d", OnY2: true}},
		}},
	}
	got := render(t, c)
	parse(t, got)
	path := filepath.Join("testdata", "golden.svg")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./pkg/tools/svgchart -update writes it)", err)
	}
	if !bytes.Equal([]byte(got), want) {
		t.Errorf("the chart differs from %s (go test ./pkg/tools/svgchart -update rewrites it):\n%s", path, got)
	}
}
