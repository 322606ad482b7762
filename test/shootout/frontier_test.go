// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// svgParts reads an SVG back: its texts, and its polylines' and circles'
// counts by stroke or fill colour.
func svgParts(t *testing.T, svg string) (texts string, lines, dots map[string]int) {
	t.Helper()
	lines, dots = map[string]int{}, map[string]int{}
	var text []string
	dec := xml.NewDecoder(strings.NewReader(svg))
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, svg)
		}
		switch tok := tok.(type) {
		case xml.CharData:
			text = append(text, string(tok))
		case xml.StartElement:
			attrs := map[string]string{}
			for _, a := range tok.Attr {
				attrs[a.Name.Local] = a.Value
			}
			switch tok.Name.Local {
			case "polyline":
				lines[attrs["stroke"]]++
			case "circle":
				dots[attrs["fill"]]++
			}
		}
	}
	return strings.Join(text, "|"), lines, dots
}

// TestMechanismChart: under each policy's panel, what its HPA read (value
// ÷ target per metric, the desired replicas) and the pods' signals; one
// chart per policy (its first repeat); a fixed fleet has no HPA panel.
func TestMechanismChart(t *testing.T) {
	slo := SLO{TTFT: 2 * time.Second, TPOT: 100 * ms}
	p, err := userPolicy("demand-gpu", "inference_demand_per_replica:3+gpu_utilization:0.8", 8)
	if err != nil {
		t.Fatal(err)
	}
	f := func(v float64) *float64 { return &v }
	samples := []Sample{
		{T: 0, Replicas: 1, Ready: 1, Desired: 1, HPA: []HPARead{{Metric: "object/inference_demand_per_replica"}, {Metric: "pods/gpu_utilization"}}},
		{T: time.Minute, Replicas: 1, Ready: 1, Desired: 3, HPA: []HPARead{{Metric: "object/inference_demand_per_replica", Value: f(9)}, {Metric: "pods/gpu_utilization", Value: f(1)}},
			Pods: []PodSample{{Name: "a", Ready: true, Queue: f(6), Batch: f(3), KV: f(0.2), GPU: f(1)}}},
		{T: 2 * time.Minute, Replicas: 3, Ready: 1, Desired: 3, HPA: []HPARead{{Metric: "object/inference_demand_per_replica", Value: f(3)}, {Metric: "pods/gpu_utilization", Value: f(0.8)}},
			Pods: []PodSample{{Name: "a", Ready: true, Queue: f(2), Batch: f(3), KV: f(0.2), GPU: f(1)}, {Name: "b"}, {Name: "c"}}},
	}
	fixed := policy{Name: "fixed-2", Fixed: 2}
	r := report{Trace: "tr", SLO: slo, Timing: newTiming(15, time.Minute), MaxReplicas: 8, Picker: pickLeastLoaded, Runs: []runResult{
		{Policy: p, Repeat: 1, Samples: samples},
		{Policy: p, Repeat: 2, Samples: samples},
		{Policy: fixed, Repeat: 1, Samples: []Sample{{T: 0, Replicas: 2, Ready: 2, Desired: 2}, {T: 2 * time.Minute, Replicas: 2, Ready: 2, Desired: 2}}},
	}}
	var b strings.Builder
	if err := r.writeSVG(&b, nil); err != nil {
		t.Fatal(err)
	}
	texts, lines, _ := svgParts(t, b.String())
	for _, want := range []string{"demand-gpu: what the HPA read", "object/inference_demand_per_replica #756bb1, pods/gpu_utilization #e6550d", "demand-gpu: the pods' signals"} {
		if !strings.Contains(texts, want) {
			t.Errorf("chart lacks %q: %s", want, texts)
		}
	}
	if strings.Contains(texts, "fixed-2: what the HPA read") || strings.Count(texts, "demand-gpu: what the HPA read") != 1 {
		t.Errorf("want one HPA panel, for demand-gpu's first repeat only: %s", texts)
	}
	// Each metric's ratio is a line over the two samples with a value (the
	// first has none: not drawn as 0); the desired replicas and the four
	// pod signals a line each.
	for col, want := range map[string]int{"#756bb1": 1, "#e6550d": 1, "#31a354": 1, "#1b9e77": 1, "#7570b3": 1, "#fd8d3c": 1, "#8c6bb1": 1, "#08519c": 2} {
		if lines[col] != want {
			t.Errorf("%d lines of colour %s, want %d (all: %v)", lines[col], col, want, lines)
		}
	}
}

// TestFrontierChart: a line per family through its points, the fixed
// fleets' dashed, error bars for the points with an interval, names
// escaped.
func TestFrontierChart(t *testing.T) {
	mk := func(fam string, att, lo, hi, hours float64, n int) Point {
		iv := Interval{N: n, Mean: att, Lo: lo, Hi: hi, HasInterval: n > 1}
		return Point{Policy: fam + "-x", Family: fam, Repeats: n, Attainment: iv, GPUHours: Interval{N: n, Mean: hours, Lo: hours - 0.1, Hi: hours + 0.1, HasInterval: n > 1}}
	}
	r := report{Trace: `t<r>`, Repeats: 3, Warmup: 10 * time.Minute, RateScale: 2, SLO: SLO{TTFT: 2 * time.Second, TPOT: 100 * ms}, Points: []Point{
		mk("gpu", 0.8, 0.78, 0.82, 4, 3), mk("gpu", 0.9, 0.88, 0.92, 6, 3),
		mk("q<ueue>", 0.7, 0.6, 0.8, 4.5, 3),
		mk("fixed", 0.5, 0.5, 0.5, 1, 1), mk("fixed", 0.99, 0.99, 0.99, 8, 1),
	}}
	var b strings.Builder
	if err := r.writeFrontier(&b); err != nil {
		t.Fatal(err)
	}
	texts, lines, dots := svgParts(t, b.String())
	for _, want := range []string{"t<r>", "gpu", "q<ueue>", "fixed", "GPU-hours after the warm-up"} {
		if !strings.Contains(texts, want) {
			t.Errorf("frontier lacks %q: %s", want, texts)
		}
	}
	// gpu: its line (1) and 2 points × 2 bars; q<ueue>: one point, drawn
	// as a dot, and 2 bars; fixed: a line, no bars (one run each).
	if lines["#08519c"] != 1+4 || lines["#cb181d"] != 2 || lines["#969696"] != 1 {
		t.Errorf("polylines by colour %v", lines)
	}
	if dots["#08519c"] != 2 || dots["#cb181d"] != 1 || dots["#969696"] != 2 {
		t.Errorf("dots by colour %v", dots)
	}
	if !strings.Contains(b.String(), `stroke="#969696" stroke-width="1.5" stroke-dasharray`) {
		t.Error("the fixed fleets' line is not dashed")
	}
}

// TestMergeSummaries merges two parts of one trace run on different days:
// a policy's runs from both are its repeats, in file order; a part run
// with another warm-up is refused, naming the file and the setting.
func TestMergeSummaries(t *testing.T) {
	dir := t.TempDir()
	slo := SLO{TTFT: 2 * time.Second, TPOT: 100 * ms}
	part := func(warmup time.Duration, runs ...runResult) *report {
		return &report{Trace: "code", Requests: 100, RateScale: 1, SLO: slo, Warmup: warmup, Timing: newTiming(15, time.Minute), Picker: pickLeastLoaded,
			MinReplicas: 1, MaxReplicas: 8, Runs: runs}
	}
	run := func(name string, repeat int, att float64) runResult {
		return runResult{Policy: policy{Name: name, Metric: metricQueue, Target: "3"}, Repeat: repeat,
			Samples: []Sample{{T: 0}}, Summary: Summary{AfterWarmup: Phase{Attainment: att, GPUHours: 4}}}
	}
	a := part(10*time.Minute, run("q", 1, 0.70), run("g", 1, 0.90), run("q", 2, 0.72))
	b := part(10*time.Minute, run("q", 1, 0.74), run("g", 1, 0.91), run("g", 2, 0.92))
	var files []string
	for i, p := range []*report{a, b, part(5*time.Minute, run("q", 1, 0.5))} {
		path := filepath.Join(dir, "part"+string(rune('a'+i)), "code-summary.json")
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := writeJSON(path, p.summaryOf()); err != nil {
			t.Fatal(err)
		}
		files = append(files, path)
	}
	raw, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), `"t": 0`) {
		t.Error("the summary file holds the fleet samples")
	}
	out := filepath.Join(dir, "merged")
	if err := renderMerged(files[:2], out); err != nil {
		t.Fatal(err)
	}
	raw, err = os.ReadFile(filepath.Join(out, "code-summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m report
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Runs) != 6 || len(m.Points) != 2 || m.Points[0].Policy != "q" || m.Points[0].Repeats != 3 || m.Points[1].Repeats != 3 || m.Repeats != 3 {
		t.Fatalf("merged: %d runs, points %+v", len(m.Runs), m.Points)
	}
	var qRepeats []int
	for _, r := range m.Runs {
		if r.Policy.Name == "q" {
			qRepeats = append(qRepeats, r.Repeat)
		}
	}
	if len(qRepeats) != 3 || qRepeats[0] != 1 || qRepeats[1] != 2 || qRepeats[2] != 3 {
		t.Errorf("q's repeats %v, want 1 2 3", qRepeats)
	}
	if got := m.Points[0].Attainment.Mean; got < 0.7199 || got > 0.7201 {
		t.Errorf("q's attainment %v, want the mean of 0.70, 0.72, 0.74", got)
	}
	if !m.Points[0].Attainment.Differs(m.Points[1].Attainment) {
		t.Errorf("q %+v and g %+v: want a difference", m.Points[0].Attainment, m.Points[1].Attainment)
	}
	if _, err := os.Stat(filepath.Join(out, "code-frontier.svg")); err != nil {
		t.Error(err)
	}
	err = renderMerged(files, filepath.Join(dir, "bad"))
	if err == nil || !strings.Contains(err.Error(), files[2]) || !strings.Contains(err.Error(), "--warmup differs") {
		t.Errorf("merging a part with another warm-up: %v", err)
	}
	if err := renderMerged([]string{filepath.Join(dir, "none.json")}, out); err == nil {
		t.Error("merging a missing file: no error")
	}
}

// TestRenderRescores: --render reads a run's report and requests back,
// each repeat's records to its own run, and scores them with the warm-up
// it is given.
func TestRenderRescores(t *testing.T) {
	dir := t.TempDir()
	trace := "../../testdata/traces/azure-llm-2023-code.csv.gz"
	cfg := config{rateScale: 1, duration: 10 * time.Minute, warmup: time.Minute, maxModelLen: 8192, out: dir, traces: []string{trace}}
	tr, err := prepareTrace(trace, cfg)
	if err != nil {
		t.Fatal(err)
	}
	slo := SLO{TTFT: 2 * time.Second, TPOT: 100 * ms}
	rec := func(at time.Duration, good bool) Record {
		r := Record{Sent: at, OutputTokens: 1, Tokens: 1, TTFT: time.Second, E2E: time.Second}
		if !good {
			r.TTFT, r.E2E = 3*time.Second, 3*time.Second
		}
		return r
	}
	samples := []Sample{{T: 0, Replicas: 1}, {T: 10 * time.Minute, Replicas: 1}}
	p := policy{Name: "queue-3", Metric: metricQueue, Target: "3"}
	rep := report{Trace: tr.name, SLO: slo, Warmup: time.Minute, Timing: newTiming(15, time.Minute), MaxReplicas: 8, Picker: pickLeastLoaded, Repeats: 2}
	// Repeat 1: a bad request at minute 2, good ones at 6 and 8; repeat 2:
	// all good.
	for i, recs := range [][]Record{{rec(2*time.Minute, false), rec(6*time.Minute, true), rec(8*time.Minute, true)}, {rec(2*time.Minute, true), rec(6*time.Minute, true)}} {
		rep.Runs = append(rep.Runs, runResult{Policy: p, Repeat: i + 1, Records: recs, Samples: samples, Summary: summarize(p.Name, tr.name, rep.scoring(), recs, samples)})
	}
	if err := rep.write(dir, tr.reqs); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		warmup time.Duration
		want   [2]float64 // attainment after the warm-up of each repeat
	}{
		{time.Minute, [2]float64{2.0 / 3, 1}},
		{5 * time.Minute, [2]float64{1, 1}},
	} {
		cfg.warmup = tc.warmup
		if err := render(cfg); err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(filepath.Join(dir, tr.name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var back report
		if err := json.Unmarshal(raw, &back); err != nil {
			t.Fatal(err)
		}
		if back.Warmup != tc.warmup || len(back.Runs) != 2 {
			t.Fatalf("warm-up %s, %d runs", back.Warmup, len(back.Runs))
		}
		for i, run := range back.Runs {
			if got := run.Summary.AfterWarmup.Attainment; run.Summary.Requests != 3-i || got != tc.want[i] {
				t.Errorf("warm-up %s, repeat %d: %d requests, attainment after the warm-up %v; want %d and %v", tc.warmup, run.Repeat, run.Summary.Requests, got, 3-i, tc.want[i])
			}
		}
		if len(back.Points) != 1 || back.Points[0].Repeats != 2 {
			t.Errorf("points %+v, want one of 2 repeats", back.Points)
		}
	}
}
