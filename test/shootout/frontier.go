// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/svgchart"
)

// summaryOf is r without the fleet samples and the per-request records:
// what <trace>-summary.json holds.
func (r *report) summaryOf() *report {
	out := *r
	out.Runs = make([]runResult, len(r.Runs))
	for i, run := range r.Runs {
		run.Samples = nil
		run.Records = nil
		out.Runs[i] = run
	}
	return &out
}

// writeSummaries writes <trace>-summary.json and <trace>-frontier.svg.
func (r *report) writeSummaries(dir string) error {
	base := filepath.Join(dir, r.Trace)
	if err := writeJSON(base+"-summary.json", r.summaryOf()); err != nil {
		return err
	}
	return writeFile(base+"-frontier.svg", r.writeFrontier)
}

// mergeReports merges summary files by trace, in the order of the files.
// Parts of one trace must share the settings that make their runs
// comparable (SLO, warm-up, rate scale, compression, cold start, picker,
// replica bounds, profile); a policy's runs from several parts are its
// repeats, renumbered in file order.
func mergeReports(parts []*report, names []string) ([]*report, error) {
	var out []*report
	byTrace := map[string]*report{}
	for i, p := range parts {
		m, ok := byTrace[p.Trace]
		if !ok {
			c := *p.summaryOf()
			c.Runs = nil
			c.Order = nil
			c.Policies = nil
			c.Points = nil
			m = &c
			byTrace[p.Trace] = m
			out = append(out, m)
		}
		if err := sameSettings(m, p); err != nil {
			return nil, fmt.Errorf("--merge %s: trace %s: %w", names[i], p.Trace, err)
		}
		if m.Capacity == nil {
			m.Capacity = p.Capacity
		}
		for _, pol := range p.Policies {
			if !slices.ContainsFunc(m.Policies, func(q policy) bool { return q.Name == pol.Name }) {
				m.Policies = append(m.Policies, pol)
			}
		}
		for _, run := range p.summaryOf().Runs {
			n := 0
			for _, have := range m.Runs {
				if have.Policy.Name == run.Policy.Name {
					n++
				}
			}
			run.Repeat = n + 1
			m.Runs = append(m.Runs, run)
			m.Order = append(m.Order, fmt.Sprintf("%s#%d (%s)", run.Policy.Name, run.Repeat, filepath.Base(names[i])))
		}
	}
	for _, m := range out {
		m.Points = points(m.Runs)
		m.Repeats = 0
		for _, pt := range m.Points {
			m.Repeats = max(m.Repeats, pt.Repeats)
		}
	}
	return out, nil
}

// sameSettings refuses to merge parts run under different settings,
// naming the first that differs.
func sameSettings(a, b *report) error {
	for _, c := range []struct {
		name string
		x, y any
	}{
		{"profile", a.Profile, b.Profile},
		{"SLO", a.SLO, b.SLO},
		{"--warmup", a.Warmup, b.Warmup},
		{"--rate-scale", a.RateScale, b.RateScale},
		{"--compress", a.Timing.Compress, b.Timing.Compress},
		{"--cold-start", a.Timing.ColdStart, b.Timing.ColdStart},
		{"--picker", a.Picker, b.Picker},
		{"--min-replicas", a.MinReplicas, b.MinReplicas},
		{"--max-replicas", a.MaxReplicas, b.MaxReplicas},
		{"requests", a.Requests, b.Requests},
	} {
		if c.x != c.y {
			return fmt.Errorf("%s differs (%v and %v): the runs are not comparable", c.name, c.x, c.y)
		}
	}
	return nil
}

// renderMerged reads summary files, merges them by trace, writes each
// trace's merged <trace>-summary.json and <trace>-frontier.svg in dir and
// prints the tables.
func renderMerged(files []string, dir string) error {
	var parts []*report
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("--merge: %w", err)
		}
		var r report
		if err := json.Unmarshal(raw, &r); err != nil {
			return fmt.Errorf("--merge %s: %w", f, err)
		}
		if r.Trace == "" || len(r.Runs) == 0 {
			return fmt.Errorf("--merge %s: not a shootout summary (no trace or no runs)", f)
		}
		parts = append(parts, &r)
	}
	merged, err := mergeReports(parts, files)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	for _, m := range merged {
		if err := m.writeSummaries(dir); err != nil {
			return err
		}
		fmt.Println(m.markdown())
	}
	return nil
}

// familyColors are the frontier's line colours, in the order families
// first appear; fixed fleets are always grey.
var familyColors = []string{"#08519c", "#cb181d", "#238b45", "#6a51a3", "#d94801", "#0570b0", "#ae017e", "#525252", "#8c6d31", "#35978f"}

// writeFrontier draws attainment after the warm-up (%) against GPU-hours
// after the warm-up: a point per policy at its means, with its 95%
// intervals as error bars both ways, one line per signal family through
// its points in order of GPU-hours, the fixed fleets as a dashed grey
// reference line.
func (r *report) writeFrontier(w io.Writer) error {
	pts := r.Points
	if pts == nil {
		pts = points(r.Runs)
	}
	var families []string
	for _, p := range pts {
		if !slices.Contains(families, p.Family) {
			families = append(families, p.Family)
		}
	}
	// Fixed fleets last, so that the legend lists the signals first.
	slices.SortStableFunc(families, func(a, b string) int {
		switch {
		case a == "fixed" && b != "fixed":
			return 1
		case b == "fixed" && a != "fixed":
			return -1
		}
		return 0
	})
	maxX := 0.0
	for _, p := range pts {
		maxX = max(maxX, p.GPUHours.Hi, p.GPUHours.Mean)
	}
	if !(maxX > 0) {
		maxX = 1
	}
	maxX = svgchart.NiceCeil(maxX)
	panel := svgchart.Panel{
		Title: "attainment after the warm-up against GPU-hours after the warm-up",
		Note:  "a point per policy at its mean over its repeats, bars: 95% intervals (Student t); lines join a family's targets in order of GPU-hours",
		Y:     svgchart.Axis{Min: 0, Max: 100, Ticks: []float64{0, 20, 40, 60, 80, 90, 100}, Grid: true, Label: "attainment %", Format: func(v float64) string { return svgchart.FormatNumber(v) + "%" }},
	}
	colorIdx := 0
	for _, fam := range families {
		col := "#969696"
		if fam != "fixed" {
			col = familyColors[colorIdx%len(familyColors)]
			colorIdx++
		}
		line := svgchart.Series{Name: fam, Color: col, Width: 1.5, Dots: true, Dashed: fam == "fixed"}
		bars := svgchart.Series{Color: col, Width: 1}
		for _, p := range sortedByGPUHours(pts) {
			if p.Family != fam || p.Attainment.N == 0 || p.GPUHours.N == 0 {
				continue
			}
			x, y := p.GPUHours.Mean, 100*p.Attainment.Mean
			line.X, line.Y = append(line.X, x), append(line.Y, y)
			if p.Attainment.HasInterval {
				bars.X = append(bars.X, x, x, math.NaN())
				bars.Y = append(bars.Y, 100*p.Attainment.Lo, 100*p.Attainment.Hi, math.NaN())
			}
			if p.GPUHours.HasInterval {
				bars.X = append(bars.X, p.GPUHours.Lo, p.GPUHours.Hi, math.NaN())
				bars.Y = append(bars.Y, y, y, math.NaN())
			}
		}
		panel.Series = append(panel.Series, line)
		if len(bars.X) > 0 {
			panel.Series = append(panel.Series, bars)
		}
	}
	c := svgchart.Chart{
		Title: fmt.Sprintf("shootout frontier: %s, rate ×%g, warm-up %s, SLO TTFT ≤ %s / TPOT ≤ %s", r.Trace, r.RateScale, r.Warmup, r.SLO.TTFT, r.SLO.TPOT),
		Subtitle: fmt.Sprintf("%d policies, up to %d repeats each; a family above and to the left of another does better for its cost; overlapping bars are no difference",
			len(pts), r.Repeats),
		Width: 1000, PanelHeight: 420, FontSize: 11,
		X: svgchart.Axis{Min: 0, Max: maxX, Label: "GPU-hours after the warm-up", Grid: true},
	}
	c.Panels = []svgchart.Panel{panel}
	if err := c.Write(w); err != nil {
		return fmt.Errorf("frontier chart for %s: %w", r.Trace, err)
	}
	return nil
}

// burstColumns ends a table's header row with one column per burst (its
// minutes, in a merged trace the file that burst, * in the warm-up) and
// writes the separator row.
func (r *report) burstColumns(b *strings.Builder) {
	for _, s := range r.BurstSpans {
		mark := ""
		if s.Start < r.Warmup {
			mark = "*"
		}
		from := ""
		if s.Source != nil && *s.Source < len(r.Sources) {
			from = " " + r.Sources[*s.Source]
		}
		fmt.Fprintf(b, " %g–%g min%s%s |", s.Start.Minutes(), s.End.Minutes(), from, mark)
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(r.BurstSpans)) + "\n")
}

// pct is an attainment as a percentage, with its interval when it has one.
func pct(iv Interval) string {
	if iv.N == 0 {
		return "-"
	}
	if !iv.HasInterval {
		return fmt.Sprintf("%.1f%%", 100*iv.Mean)
	}
	return fmt.Sprintf("%.1f%% [%.1f, %.1f]", 100*iv.Mean, 100*iv.Lo, 100*iv.Hi)
}

// num2 is a figure with two decimals, with its interval when it has one.
func num2(iv Interval) string {
	if iv.N == 0 {
		return "-"
	}
	if !iv.HasInterval {
		return fmt.Sprintf("%.2f", iv.Mean)
	}
	return fmt.Sprintf("%.2f [%.2f, %.2f]", iv.Mean, iv.Lo, iv.Hi)
}

// differences lists the pairs of points whose attainment intervals after
// the warm-up do not overlap, the better first; the others are no
// difference shown.
func differences(pts []Point) []string {
	var out []string
	for i := range pts {
		for j := i + 1; j < len(pts); j++ {
			a, b := pts[i], pts[j]
			if !a.Attainment.Differs(b.Attainment) {
				continue
			}
			if b.Attainment.Mean > a.Attainment.Mean {
				a, b = b, a
			}
			out = append(out, fmt.Sprintf("%s > %s", a.Policy, b.Policy))
		}
	}
	return out
}

// pointsMarkdown is the table of points: per policy, mean and 95%
// interval over its repeats, after the warm-up (the headline) and over the
// whole trace; then the attainment per burst, and which differences hold.
func (r *report) pointsMarkdown(b *strings.Builder) {
	pts := r.Points
	if pts == nil {
		pts = points(r.Runs)
	}
	fmt.Fprintf(b, "\nAfter the %s warm-up (headline), mean [95%% interval] over the repeats; the whole trace beside it:\n\n", r.Warmup)
	b.WriteString("| policy | family | target | runs | SLO attainment | TTFT attainment | TPOT attainment | GPU-hours | goodput (req/s) | whole trace: attainment | whole trace: GPU-hours |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, p := range pts {
		fmt.Fprintf(b, "| %s | %s | %s | %d | %s | %s | %s | %s | %s | %s | %s |\n", p.Policy, p.Family, p.Target, p.Repeats,
			pct(p.Attainment), pct(p.TTFTAttainment), pct(p.TPOTAttainment), num2(p.GPUHours), num2(p.Goodput), pct(p.WholeAttainment), num2(p.WholeGPUHours))
	}
	if len(r.BurstSpans) > 0 {
		title := "Attainment of the requests that arrived in each burst's minutes"
		if len(r.Sources) > 1 {
			title += ", of the file that burst (each file's bursts found on its own arrivals)"
		}
		b.WriteString("\n" + title + " (mean over the repeats; * in the warm-up):\n\n| policy |")
		r.burstColumns(b)
		for _, p := range pts {
			fmt.Fprintf(b, "| %s |", p.Policy)
			for i := range r.BurstSpans {
				v := "-"
				if i < len(p.BurstAttainment) && p.BurstAttainment[i].N > 0 {
					v = fmt.Sprintf("%.0f%%", 100*p.BurstAttainment[i].Mean)
				}
				fmt.Fprintf(b, " %s |", v)
			}
			b.WriteString("\n")
		}
	}
	r.sourcesMarkdown(b, pts)
	if d := differences(pts); len(d) > 0 {
		fmt.Fprintf(b, "\nDifferences in attainment after the warm-up (95%% intervals that do not overlap): %s. Every other pair: no difference shown.\n", strings.Join(d, ", "))
	} else {
		b.WriteString("\nNo two attainment intervals after the warm-up are apart: no difference shown (a point of one run has no interval).\n")
	}
}

// sourcesMarkdown is the table of each file's attainment after the warm-up,
// per policy, for a trace merged from several files; nothing otherwise.
// A column's request count is its first run's.
func (r *report) sourcesMarkdown(b *strings.Builder, pts []Point) {
	if len(r.Sources) < 2 {
		return
	}
	b.WriteString("\nAttainment after the warm-up of each trace file's requests (mean [95% interval] over the repeats; one fleet served them all):\n\n| policy |")
	for i, name := range r.Sources {
		if len(r.Runs) > 0 && i < len(r.Runs[0].Summary.BySource) {
			fmt.Fprintf(b, " %s (%d requests) |", name, r.Runs[0].Summary.BySource[i].Requests)
		} else {
			fmt.Fprintf(b, " %s |", name)
		}
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(r.Sources)) + "\n")
	for _, p := range pts {
		fmt.Fprintf(b, "| %s |", p.Policy)
		for i := range r.Sources {
			v := "-"
			if i < len(p.SourceAttainment) {
				v = pct(p.SourceAttainment[i])
			}
			fmt.Fprintf(b, " %s |", v)
		}
		b.WriteString("\n")
	}
}
