// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"encoding/csv"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/loadgen"
)

const ms = time.Millisecond

func TestRecordGood(t *testing.T) {
	slo := SLO{TTFT: 2 * time.Second, TPOT: 100 * ms}
	tests := []struct {
		name     string
		r        Record
		good     bool
		failed   bool
		tpot     time.Duration
		tpotSeen bool
	}{
		{"within both", Record{OutputTokens: 11, Tokens: 11, TTFT: time.Second, E2E: 2 * time.Second}, true, false, 100 * ms, true},
		{"TTFT too slow", Record{OutputTokens: 2, Tokens: 2, TTFT: 2001 * ms, E2E: 2100 * ms}, false, false, 99 * ms, true},
		{"TPOT too slow", Record{OutputTokens: 3, Tokens: 3, TTFT: 100 * ms, E2E: 400 * ms}, false, false, 150 * ms, true},
		{"one token: TTFT alone decides", Record{OutputTokens: 1, Tokens: 1, TTFT: 1500 * ms, E2E: 1500 * ms}, true, false, 0, false},
		{"failed", Record{OutputTokens: 5, Tokens: 0, Err: "status 503"}, false, true, 0, false},
		{"cut short", Record{OutputTokens: 5, Tokens: 3, TTFT: 100 * ms, E2E: 300 * ms}, false, true, 100 * ms, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := slo.Good(tc.r); got != tc.good {
				t.Errorf("Good = %v, want %v", got, tc.good)
			}
			if got := tc.r.Failed(); got != tc.failed {
				t.Errorf("Failed = %v, want %v", got, tc.failed)
			}
			tpot, ok := tc.r.TPOT()
			if ok != tc.tpotSeen || tpot != tc.tpot {
				t.Errorf("TPOT = %s, %v; want %s, %v", tpot, ok, tc.tpot, tc.tpotSeen)
			}
		})
	}
}

func TestPercentiles(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i)*time.Second)
	}
	ds[0], ds[99] = ds[99], ds[0] // order does not matter
	got := percentiles(ds)
	if got != (Percentiles{P50: 50, P90: 90, P99: 99, N: 100}) {
		t.Errorf("percentiles = %+v", got)
	}
	if got := percentiles(nil); got != (Percentiles{}) {
		t.Errorf("percentiles of nothing = %+v, want zero with N 0", got)
	}
}

// TestSummarize checks every figure of a Summary on hand-made records and
// samples: 4 requests (2 good, 1 slow, 1 failed) over 2 hours in which the
// fleet holds 1 replica for an hour and 3 for the next.
func TestSummarize(t *testing.T) {
	slo := SLO{TTFT: 2 * time.Second, TPOT: 100 * ms}
	recs := []Record{
		{Sent: 0, OutputTokens: 11, Tokens: 11, TTFT: time.Second, E2E: 2 * time.Second},
		{Sent: time.Minute, OutputTokens: 1, Tokens: 1, TTFT: 500 * ms, E2E: 500 * ms},
		{Sent: 2 * time.Minute, OutputTokens: 11, Tokens: 11, TTFT: 3 * time.Second, E2E: 4 * time.Second},
		{Sent: 3 * time.Minute, OutputTokens: 11, Err: "status 503"},
	}
	one := 0.5
	samples := []Sample{
		{T: 0, Replicas: 1, Ready: 1, Desired: 1},
		{T: 30 * time.Minute, Replicas: 1, Ready: 1, Desired: 3, Metric: &one},
		{T: time.Hour, Replicas: 3, Ready: 1, Desired: 3},
		{T: time.Hour + 2*time.Minute, Replicas: 3, Ready: 3, Desired: 3},
		{T: 2 * time.Hour, Replicas: 3, Ready: 3, Desired: 2},
	}
	bursts := []burstSpan{{Start: time.Hour, End: time.Hour + time.Minute}, {Start: 90 * time.Minute, End: 91 * time.Minute}, {Start: 3 * time.Hour, End: 3*time.Hour + time.Minute}}
	s := summarize("p", "tr", scoring{SLO: slo, Bursts: bursts}, recs, samples)
	check := func(name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if s.Requests != 4 || s.Failed != 1 || s.Refused != 1 || s.Good != 2 {
		t.Errorf("requests %d failed %d (refused %d) good %d, want 4, 1 (1), 2", s.Requests, s.Failed, s.Refused, s.Good)
	}
	check("attainment", s.Attainment, 0.5)
	check("span (h)", s.Span.Hours(), 2)
	check("goodput", s.Goodput, 2.0/7200)
	check("replica-hours", s.ReplicaHours, 1*1+3*1)
	check("good per GPU-hour", s.GoodPerGPUHour, 0.5)
	check("mean replicas", s.MeanReplicas, 2)
	check("mean Ready", s.MeanReady, (1*62+3*58)/120.0)
	check("TTFT p50", s.TTFT.P50, 1)
	check("TTFT p99", s.TTFT.P99, 3)
	check("TPOT p50", s.TPOT.P50, 0.1)
	if s.TTFT.N != 3 || s.TPOT.N != 2 {
		t.Errorf("TTFT over %d, TPOT over %d requests; want 3 and 2", s.TTFT.N, s.TPOT.N)
	}
	if s.ScaleEvents != 2 || s.MaxReplicas != 3 || !s.MetricRead {
		t.Errorf("scale events %d, max replicas %d, metric read %v; want 2, 3, true", s.ScaleEvents, s.MaxReplicas, s.MetricRead)
	}
	// The burst at 1 h is answered 2 minutes later; the one at 1.5 h never
	// (no more Ready replicas); the one at 3 h is past the span.
	if s.Bursts != 2 || s.BurstsUnanswered != 1 {
		t.Errorf("bursts %d, unanswered %d; want 2 and 1", s.Bursts, s.BurstsUnanswered)
	}
	check("burst to Ready p50", s.BurstToReadyP50, 120)
}

// TestSummarizeFailures checks how failed requests are told apart: refused
// (no token at all) or cut during the stream.
func TestSummarizeFailures(t *testing.T) {
	slo := SLO{TTFT: 2 * time.Second, TPOT: 100 * ms}
	for _, tc := range []struct {
		name                         string
		rec                          Record
		wantFailed, refused, dropped int
	}{
		{name: "completed", rec: Record{OutputTokens: 3, Tokens: 3, TTFT: ms, E2E: 3 * ms}},
		{name: "refused by a stopping pod", rec: Record{OutputTokens: 3, Err: "status 502: front end: read: connection reset by peer"}, wantFailed: 1, refused: 1},
		{name: "no Ready pod", rec: Record{OutputTokens: 3, Err: "status 503: front end: no Ready endpoints"}, wantFailed: 1, refused: 1},
		{name: "cut during the stream", rec: Record{OutputTokens: 3, Tokens: 2, TTFT: ms, E2E: 2 * ms, Err: "reading stream: unexpected EOF"}, wantFailed: 1},
		{name: "short without an error", rec: Record{OutputTokens: 3, Tokens: 2, TTFT: ms, E2E: 2 * ms}, wantFailed: 1},
		{name: "dropped at the in-flight cap", rec: Record{OutputTokens: 3, Err: errDropped}, wantFailed: 1, refused: 1, dropped: 1},
		{name: "dropped, in a report before --max-in-flight", rec: Record{OutputTokens: 3, Err: "dropped: too many requests in flight"}, wantFailed: 1, refused: 1, dropped: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := summarize("p", "tr", scoring{SLO: slo}, []Record{tc.rec}, nil)
			if s.Failed != tc.wantFailed || s.Refused != tc.refused || s.Dropped != tc.dropped {
				t.Errorf("failed %d, refused %d, dropped %d; want %d, %d and %d", s.Failed, s.Refused, s.Dropped, tc.wantFailed, tc.refused, tc.dropped)
			}
		})
	}
}

// TestRecordsScoreDropsWhereTheyArrived: an arrival dropped at the
// in-flight cap becomes a failed record at the time it was due, with its
// lengths, among the requests sent; so a drop after the warm-up counts
// against the headline attainment, not the warm-up's.
func TestRecordsScoreDropsWhereTheyArrived(t *testing.T) {
	rep := &loadgen.Report{
		Results: []loadgen.Result{
			{Sent: time.Minute, PromptTokens: 100, MaxTokens: 2, Tokens: 2, TTFT: 100 * ms, E2E: 150 * ms},
			{Sent: 20 * time.Minute, PromptTokens: 200, MaxTokens: 2, Tokens: 2, TTFT: 100 * ms, E2E: 150 * ms},
		},
		Drops: []loadgen.Drop{{At: 15 * time.Minute, PromptTokens: 300, MaxTokens: 4}},
	}
	got := records(rep)
	want := []Record{
		{Sent: time.Minute, PromptTokens: 100, OutputTokens: 2, Tokens: 2, TTFT: 100 * ms, E2E: 150 * ms},
		{Sent: 15 * time.Minute, PromptTokens: 300, OutputTokens: 4, Err: errDropped},
		{Sent: 20 * time.Minute, PromptTokens: 200, OutputTokens: 2, Tokens: 2, TTFT: 100 * ms, E2E: 150 * ms},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("records (-want +got):\n%s", diff)
	}
	s := summarize("p", "tr", scoring{SLO: SLO{TTFT: 2 * time.Second, TPOT: 100 * ms}, Warmup: 10 * time.Minute}, got, nil)
	if s.Dropped != 1 || s.AfterWarmup.Requests != 2 || s.AfterWarmup.Good != 1 {
		t.Errorf("dropped %d, after the warm-up %d requests and %d good; want 1, 2 and 1", s.Dropped, s.AfterWarmup.Requests, s.AfterWarmup.Good)
	}
}

func TestSummarizeNothing(t *testing.T) {
	s := summarize("p", "tr", scoring{SLO: SLO{TTFT: time.Second, TPOT: time.Second}}, nil, nil)
	if s.Attainment != 0 || s.ReplicaHours != 0 || s.GoodPerGPUHour != 0 || s.MetricRead {
		t.Errorf("summary of nothing: %+v", s)
	}
}

func TestFindBursts(t *testing.T) {
	var arrivals []time.Duration
	add := func(minute, n int) {
		for i := range n {
			arrivals = append(arrivals, time.Duration(minute)*time.Minute+time.Duration(i)*time.Second/time.Duration(n+1))
		}
	}
	for m := range 20 {
		n := 10
		switch m {
		case 8:
			n = 40 // a burst
		case 9:
			n = 30 // still high, but not 2x the mean of the 5 minutes before (16, with minute 8)
		case 15:
			n = 0
		}
		add(m, n)
	}
	got := findBursts(arrivals)
	if len(got) != 1 || got[0] != 8*time.Minute {
		t.Errorf("bursts at %v, want [8m]", got)
	}
}

func TestPickLeast(t *testing.T) {
	eps := []string{"a", "b", "c"}
	tests := []struct {
		inFlight map[string]int
		want     string
	}{
		{map[string]int{}, "a"},
		{map[string]int{"a": 2, "b": 1, "c": 1}, "b"},
		{map[string]int{"a": 1, "b": 1, "c": 0}, "c"},
	}
	for _, tc := range tests {
		if got := pickLeast(eps, tc.inFlight); got != tc.want {
			t.Errorf("pickLeast(%v) = %s, want %s", tc.inFlight, got, tc.want)
		}
	}
}

func TestTimingCompressesEverything(t *testing.T) {
	tm := newTiming(15, 60*time.Second)
	h := hpa(policy{Name: "q", Metric: metricQueue, Target: "3"}, "model", 1, 8, tm)
	b := h.Spec.Behavior
	if got := b.ScaleUp.Policies[0].PeriodSeconds; got != 1 {
		t.Errorf("scale-up period %ds, want 15s/15 = 1s", got)
	}
	if got := *b.ScaleDown.StabilizationWindowSeconds; got != 20 {
		t.Errorf("scale-down window %ds, want 300s/15 = 20s", got)
	}
	if got := tm.wall(tm.HPASync); got != time.Second {
		t.Errorf("HPA sync %s, want 1s", got)
	}
	if got := tm.wall(tm.ColdStart); got != 4*time.Second {
		t.Errorf("cold start %s, want 4s", got)
	}
	if got := tm.wall(tm.ScrapeInterval); got.Round(ms) != 333*ms {
		t.Errorf("scrape interval %s, want 333ms", got)
	}
}

func TestPrepareTrace(t *testing.T) {
	cfg := config{rateScale: 2, duration: 30 * time.Minute, maxModelLen: 8192}
	tr, err := prepareTrace("../../testdata/traces/azure-llm-2023-code.csv.gz", cfg)
	if err != nil {
		t.Fatal(err)
	}
	last := tr.reqs[len(tr.reqs)-1]
	if last.At > 30*time.Minute || last.At < 25*time.Minute {
		t.Errorf("last request at %s, want near the end of the 30 minutes asked (the trace at twice the rate)", last.At)
	}
	for _, r := range tr.reqs {
		if r.PromptTokens+r.OutputTokens > cfg.maxModelLen {
			t.Fatalf("request of %d+%d tokens exceeds max-model-len", r.PromptTokens, r.OutputTokens)
		}
	}
}

// TestPrepareMergedTrace: files joined by + are one trace, named after both,
// holding both files' requests.
func TestPrepareMergedTrace(t *testing.T) {
	const dir = "../../testdata/traces/"
	cfg := config{rateScale: 1, maxModelLen: 8192}
	tr, err := prepareTrace(dir+"azure-llm-2023-code.csv.gz+"+dir+"azure-llm-2023-conv.csv.gz", cfg)
	if err != nil {
		t.Fatal(err)
	}
	if want := "azure-llm-2023-code+azure-llm-2023-conv"; tr.name != want {
		t.Errorf("name %q, want %q", tr.name, want)
	}
	if len(tr.reqs) != 8819+19366 {
		t.Errorf("%d requests, want both traces' %d", len(tr.reqs), 8819+19366)
	}
	if want := []string{"azure-llm-2023-code", "azure-llm-2023-conv"}; !slices.Equal(tr.sources, want) {
		t.Errorf("sources %q, want %q", tr.sources, want)
	}
	per := map[int]int{}
	for _, r := range tr.reqs {
		per[r.Source]++
	}
	if per[0] != 8819 || per[1] != 19366 || len(per) != 2 {
		t.Errorf("requests per source %v, want 8819 from the code trace (0) and 19366 from the conv trace (1)", per)
	}
	if one, err := prepareTrace(dir+"azure-llm-2023-code.csv.gz", cfg); err != nil || one.sources != nil {
		t.Errorf("one file: sources %q (%v), want none", one.sources, err)
	}
	if _, err := prepareTrace(dir+"azure-llm-2023-code.csv.gz+"+dir+"none.csv", cfg); err == nil || !strings.Contains(err.Error(), "none.csv") {
		t.Errorf("a missing second file: %v, want an error naming it", err)
	}
}

// TestReportFiles writes the summary CSV, the records CSV, the Markdown
// and the SVG of a small report and checks what they hold.
func TestReportFiles(t *testing.T) {
	slo := SLO{TTFT: 2 * time.Second, TPOT: 100 * ms}
	// The second record is sent a nanosecond before a minute's edge: read
	// back, it must not move into the next minute.
	recs := []Record{{Sent: 0, OutputTokens: 1, Tokens: 1, TTFT: time.Second, E2E: time.Second}, {Sent: 36*time.Minute - 1, OutputTokens: 3, TTFT: 1234567891 * time.Nanosecond, Err: "boom"}}
	samples := []Sample{{T: 0, Replicas: 1, Ready: 1, Desired: 1}, {T: time.Hour, Replicas: 2, Ready: 2, Desired: 2}}
	p := policy{Name: "queue-3", Metric: metricQueue, Target: "3"}
	r := report{Trace: "tr", SLO: slo, Timing: newTiming(15, time.Minute), MaxReplicas: 8, Picker: pickLeastLoaded,
		Runs: []runResult{{Policy: p, Repeat: 2, Records: recs, Samples: samples, Summary: summarize(p.Name, "tr", scoring{SLO: slo}, recs, samples)}}}
	var sum, rows, svg bytes.Buffer
	if err := r.writeSummaryCSV(&sum); err != nil {
		t.Fatal(err)
	}
	got, err := csv.NewReader(&sum).ReadAll()
	if err != nil || len(got) != 2 {
		t.Fatalf("summary CSV %v (%v), want a header and one row", got, err)
	}
	row := map[string]string{}
	for i, col := range got[0] {
		row[col] = got[1][i]
	}
	for col, want := range map[string]string{"policy": "queue-3", "repeat": "2", "family": "queue", "attainment_after_warmup": "0.5", "gpu_hours_after_warmup": "1", "ttft_attainment": "0.5", "failed": "1", "refused": "1", "attainment": "0.5", "gpu_hours": "1", "mean_replicas": "1", "mean_ready": "1"} {
		if row[col] != want {
			t.Errorf("summary CSV column %s = %q, want %q (row %v)", col, row[col], want, row)
		}
	}
	if err := r.writeRecordsCSV(&rows); err != nil {
		t.Fatal(err)
	}
	raw := rows.String()
	if got, _ := csv.NewReader(strings.NewReader(raw)).ReadAll(); len(got) != 3 || got[1][8] != "true" || got[2][9] != "boom" {
		t.Errorf("records CSV %v", got)
	}
	back, sourced, err := readRecords(strings.NewReader(raw))
	k := runKey{Policy: "queue-3", Repeat: 2}
	if err != nil || !sourced || len(back[k]) != 2 || back[k][0] != recs[0] || back[k][1] != recs[1] {
		t.Errorf("records read back: %+v (sourced %v, %v), want %+v", back, sourced, err, recs)
	}
	// An older file, without the repeat column, is repeat 1; without the
	// source column, it is not sourced.
	old := "policy,sent_s,prompt_tokens,output_tokens,tokens,ttft_s,e2e_s,tpot_s,good,error\nq,1,2,3,3,0.5,1,0.25,true,\n"
	if back, sourced, err := readRecords(strings.NewReader(old)); err != nil || sourced || len(back[runKey{Policy: "q", Repeat: 1}]) != 1 {
		t.Errorf("older records CSV read back: %+v (sourced %v, %v)", back, sourced, err)
	}
	md := r.markdown()
	for _, want := range []string{"| queue-3 | 2 | 50.0% | 1.00 | 50.0% | 50.0% / 50.0% | 1 (1 refused) |", "| queue-3 | queue | 3 | 1 | 50.0% | 50.0% | 50.0% | 1.00 |"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if err := r.writeSVG(&svg, []loadgen.TraceRequest{{At: 0}, {At: time.Hour}}); err != nil || !strings.Contains(svg.String(), "queue-3") || !strings.HasSuffix(svg.String(), "</svg>\n") {
		t.Errorf("SVG (%v):\n%s", err, svg.String())
	}
}

// TestBurstFleetMarkdown: the table of the fleet each burst met, per
// policy (Ready at the start: mean of the runs; the gap's fewest Ready and
// largest recommendation: least–largest over the runs); none for a report
// whose bursts lack these figures.
func TestBurstFleetMarkdown(t *testing.T) {
	n := intPtr
	spans := []burstSpan{{Start: 5 * time.Minute, End: 8 * time.Minute}, {Start: 20 * time.Minute, End: 21 * time.Minute}}
	run := func(name string, repeat int, bursts ...BurstScore) runResult {
		return runResult{Policy: policy{Name: name, Metric: metricQueue, Target: "3"}, Repeat: repeat, Summary: Summary{BurstScores: bursts}}
	}
	const title = "Ready at each burst's start (mean of the runs)"
	for _, tc := range []struct {
		name string
		runs []runResult
		want []string // rows of the table; none: no table
	}{
		{name: "two runs of one policy, one of another",
			runs: []runResult{
				run("q", 1, BurstScore{ReadyAtStart: n(1), GapMinReady: n(1), GapPeakRecommended: n(3)}, BurstScore{ReadyAtStart: n(2), GapMinReady: n(1)}),
				run("f", 1, BurstScore{ReadyAtStart: n(2), GapMinReady: n(2)}, BurstScore{ReadyAtStart: n(2)}),
				run("q", 2, BurstScore{ReadyAtStart: n(2), GapMinReady: n(1), GapPeakRecommended: n(5)}, BurstScore{ReadyAtStart: n(2), GapMinReady: n(2)}),
			},
			want: []string{"| policy | 5–8 min* | 20–21 min |", "| q | 1.5 (1 / 3–5) | 2 (1–2 / -) |", "| f | 2 (2 / -) | 2 (- / -) |"}},
		{name: "an older report, without the figures",
			runs: []runResult{run("q", 1, BurstScore{Requests: 3, Attainment: 1}, BurstScore{Requests: 2, Attainment: 0.5})}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := report{Trace: "tr", Warmup: 10 * time.Minute, BurstSpans: spans, Runs: tc.runs}
			md := r.markdown()
			if len(tc.want) == 0 {
				if strings.Contains(md, title) {
					t.Errorf("markdown has the burst fleet table without its figures:\n%s", md)
				}
				return
			}
			if !strings.Contains(md, title) {
				t.Errorf("markdown lacks the burst fleet table:\n%s", md)
			}
			for _, want := range tc.want {
				if !strings.Contains(md, want) {
					t.Errorf("markdown lacks %q:\n%s", want, md)
				}
			}
		})
	}
}

// TestReportBySource: a trace of several files scores each file's requests
// apart after the warm-up (Summary.BySource, Point.SourceAttainment), in
// the Markdown, the summary CSV and the records CSV; a trace of one file
// has none of it, and records naming a file the trace lacks are refused.
func TestReportBySource(t *testing.T) {
	slo := SLO{TTFT: 2 * time.Second, TPOT: 100 * ms}
	good := func(at time.Duration, src int) Record {
		return Record{Sent: at, OutputTokens: 1, Tokens: 1, TTFT: time.Second, E2E: time.Second, Source: src}
	}
	slow := func(at time.Duration, src int) Record {
		return Record{Sent: at, OutputTokens: 1, Tokens: 1, TTFT: 3 * time.Second, E2E: 3 * time.Second, Source: src}
	}
	samples := []Sample{{T: 0, Replicas: 1, Ready: 1, Desired: 1}, {T: time.Hour, Replicas: 1, Ready: 1, Desired: 1}}
	p := policy{Name: "queue-3", Metric: metricQueue, Target: "3"}
	// Run 1: file a 2 of 2 good, file b 1 of 4; the slow request of file a
	// at 1 min is in the warm-up. Run 2: a 1 of 2, b 2 of 4.
	runs := [][]Record{
		{slow(time.Minute, 0), good(10*time.Minute, 0), good(11*time.Minute, 1), slow(12*time.Minute, 1), good(20*time.Minute, 0), slow(21*time.Minute, 1), slow(22*time.Minute, 1)},
		{good(10*time.Minute, 0), good(11*time.Minute, 1), good(12*time.Minute, 1), slow(20*time.Minute, 0), slow(21*time.Minute, 1), slow(22*time.Minute, 1)},
	}
	for _, tc := range []struct {
		name    string
		sources []string
		want    [][]float64 // per run, per source
	}{
		{"two files", []string{"a", "b"}, [][]float64{{1, 0.25}, {0.5, 0.5}}},
		{"one file", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := report{Trace: "tr", Sources: tc.sources, SLO: slo, Warmup: 5 * time.Minute, Timing: newTiming(15, time.Minute), MaxReplicas: 8}
			for i, recs := range runs {
				r.Runs = append(r.Runs, runResult{Policy: p, Repeat: i + 1, Records: recs, Samples: samples, Summary: summarize(p.Name, "tr", r.scoring(), recs, samples)})
			}
			for i, run := range r.Runs {
				var got []float64
				for _, ph := range run.Summary.BySource {
					got = append(got, ph.Attainment)
				}
				var want []float64
				if tc.want != nil {
					want = tc.want[i]
				}
				if !slices.Equal(got, want) {
					t.Errorf("run %d: attainment by source %v, want %v", i+1, got, want)
				}
				if ph := run.Summary.BySource; len(ph) > 0 && ph[0].GPUHours != 0 {
					t.Errorf("run %d: a source's phase has GPU-hours %g; the fleet is shared", i+1, ph[0].GPUHours)
				}
			}
			pts := points(r.Runs)
			md := r.markdown()
			var sum bytes.Buffer
			if err := r.writeSummaryCSV(&sum); err != nil {
				t.Fatal(err)
			}
			rows, err := csv.NewReader(&sum).ReadAll()
			if err != nil {
				t.Fatal(err)
			}
			col := slices.Index(rows[0], "attainment_after_warmup_by_source")
			if col < 0 {
				t.Fatalf("summary CSV header %v lacks attainment_after_warmup_by_source", rows[0])
			}
			if tc.sources == nil {
				if len(pts[0].SourceAttainment) != 0 || strings.Contains(md, "each trace file") || rows[1][col] != "" {
					t.Errorf("one file: source attainment %v, CSV %q, markdown:\n%s", pts[0].SourceAttainment, rows[1][col], md)
				}
				return
			}
			if sa := pts[0].SourceAttainment; len(sa) != 2 || sa[0].Mean != 0.75 || sa[1].Mean != 0.375 || sa[0].N != 2 {
				t.Errorf("point's source attainment %+v, want means 0.75 and 0.375 over 2 runs", sa)
			}
			for _, want := range []string{"| policy | a (2 requests) | b (4 requests) |", "| queue-3 | " + pct(pts[0].SourceAttainment[0]) + " | " + pct(pts[0].SourceAttainment[1]) + " |"} {
				if !strings.Contains(md, want) {
					t.Errorf("markdown lacks %q:\n%s", want, md)
				}
			}
			if rows[1][col] != "1;0.25" {
				t.Errorf("summary CSV by source %q, want \"1;0.25\"", rows[1][col])
			}
			var out bytes.Buffer
			if err := r.writeRecordsCSV(&out); err != nil {
				t.Fatal(err)
			}
			back, sourced, err := readRecords(&out)
			if err != nil || !sourced {
				t.Fatalf("records read back: sourced %v, %v", sourced, err)
			}
			if got := back[runKey{Policy: p.Name, Repeat: 1}]; !slices.Equal(got, runs[0]) {
				t.Errorf("records read back %+v, want %+v", got, runs[0])
			}
			if err := checkSources(back, 2); err != nil {
				t.Errorf("checkSources of the trace's own records: %v", err)
			}
			if err := checkSources(back, 1); err == nil || !strings.Contains(err.Error(), "trace file 1, but the trace has 1 file") {
				t.Errorf("checkSources against one file: %v, want an error", err)
			}
		})
	}
}

// TestSourceBursts: in a merged trace each file's bursts are found on its
// own arrivals, so that a burst under another file's steady base, which the
// merged arrivals hide, is found and tagged with its file; its score counts
// that file's requests only, and the tables name the file.
func TestSourceBursts(t *testing.T) {
	var reqs []loadgen.TraceRequest
	var arrivals []time.Duration
	for m := range 20 {
		// File 1: a steady 40 a minute. File 0: 1 a minute, 31 in minute 12.
		for i := range 40 {
			reqs = append(reqs, loadgen.TraceRequest{At: time.Duration(m)*time.Minute + time.Duration(i)*time.Second, Source: 1})
		}
		n := 1
		if m == 12 {
			n = 31
		}
		for i := range n {
			reqs = append(reqs, loadgen.TraceRequest{At: time.Duration(m)*time.Minute + time.Duration(i)*time.Second + time.Millisecond})
		}
	}
	slices.SortStableFunc(reqs, func(a, b loadgen.TraceRequest) int { return int(a.At - b.At) })
	for _, r := range reqs {
		arrivals = append(arrivals, r.At)
	}
	if got := findBurstSpans(arrivals); len(got) != 0 {
		t.Fatalf("the merged arrivals have bursts %+v; the test wants them hidden by the base", got)
	}
	got := findSourceBursts(reqs, 2)
	if len(got) != 1 || got[0].Start != 12*time.Minute || got[0].End != 13*time.Minute || got[0].Source == nil || *got[0].Source != 0 {
		t.Fatalf("bursts %+v, want minute 12 of file 0", got)
	}
	slo := SLO{TTFT: 2 * time.Second, TPOT: 100 * ms}
	rec := func(at time.Duration, src int, ttft time.Duration) Record {
		return Record{Sent: at, OutputTokens: 1, Tokens: 1, TTFT: ttft, E2E: ttft, Source: src}
	}
	recs := []Record{
		rec(12*time.Minute, 0, time.Second), rec(12*time.Minute+time.Second, 0, 3*time.Second),
		rec(12*time.Minute+2*time.Second, 1, time.Second), rec(12*time.Minute+3*time.Second, 1, time.Second), rec(12*time.Minute+4*time.Second, 1, time.Second),
	}
	bs := scoreBursts(slo, recs, nil, got, time.Minute, time.Hour)
	if len(bs) != 1 || bs[0].Requests != 2 || bs[0].Attainment != 0.5 {
		t.Errorf("burst scores %+v, want file 0's 2 requests, 1 good", bs)
	}
	if all := scoreBursts(slo, recs, nil, untagged(got), time.Minute, time.Hour); len(all) != 1 || all[0].Requests != 5 || got[0].Source == nil {
		t.Errorf("untagged burst scores %+v, want all 5 requests of its minute (and the tagged bursts unchanged)", all)
	}
	r := report{Sources: []string{"code", "conv"}, BurstSpans: got, Warmup: time.Minute}
	var b strings.Builder
	r.burstColumns(&b)
	if !strings.Contains(b.String(), " 12–13 min code |") {
		t.Errorf("burst columns %q, want the file named", b.String())
	}
}
