// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestScoreWarmup scores hand-made records and samples with and without a
// warm-up: 6 requests, 3 sent in the first 10 minutes (1 good, 1 slow TTFT,
// 1 failed) and 3 after (2 good, 1 slow TPOT); the fleet holds 1 replica
// for the first 10 minutes and 4 for the next 20.
func TestScoreWarmup(t *testing.T) {
	slo := SLO{TTFT: 2 * time.Second, TPOT: 100 * ms}
	recs := []Record{
		{Sent: time.Minute, OutputTokens: 11, Tokens: 11, TTFT: time.Second, E2E: 2 * time.Second},
		{Sent: 2 * time.Minute, OutputTokens: 11, Tokens: 11, TTFT: 5 * time.Second, E2E: 6 * time.Second},
		{Sent: 9 * time.Minute, OutputTokens: 11, Err: "status 503"},
		{Sent: 10 * time.Minute, OutputTokens: 1, Tokens: 1, TTFT: time.Second, E2E: time.Second},
		{Sent: 20 * time.Minute, OutputTokens: 11, Tokens: 11, TTFT: time.Second, E2E: 3 * time.Second}, // TPOT 200 ms
		{Sent: 29 * time.Minute, OutputTokens: 11, Tokens: 11, TTFT: 500 * ms, E2E: 1500 * ms},
	}
	samples := []Sample{
		{T: 0, Replicas: 1},
		{T: 10 * time.Minute, Replicas: 4},
		{T: 30 * time.Minute, Replicas: 4},
	}
	for _, tc := range []struct {
		name                              string
		warmup                            time.Duration
		want                              Phase
		wholeAttainment, ttftAtt, tpotAtt float64
	}{
		{name: "no warm-up", warmup: 0, want: Phase{From: 0, To: 30 * time.Minute, Requests: 6, Good: 3, Failed: 1,
			Attainment: 3.0 / 6, TTFTAttainment: 4.0 / 6, TPOTAttainment: 4.0 / 6, Goodput: 3.0 / 1800,
			GPUHours: 1.0/6 + 4.0/3, GoodPerGPUHour: 3 / (1.0/6 + 4.0/3), MeanReplicas: 3}},
		{name: "10-minute warm-up", warmup: 10 * time.Minute, want: Phase{From: 10 * time.Minute, To: 30 * time.Minute, Requests: 3, Good: 2,
			Attainment: 2.0 / 3, TTFTAttainment: 1, TPOTAttainment: 2.0 / 3, Goodput: 2.0 / 1200,
			GPUHours: 4.0 / 3, GoodPerGPUHour: 1.5, MeanReplicas: 4}},
		{name: "warm-up inside a sample's step", warmup: 5 * time.Minute, want: Phase{From: 5 * time.Minute, To: 30 * time.Minute, Requests: 4, Good: 2, Failed: 1,
			Attainment: 2.0 / 4, TTFTAttainment: 3.0 / 4, TPOTAttainment: 2.0 / 4, Goodput: 2.0 / 1500,
			GPUHours: 1.0/12 + 4.0/3, GoodPerGPUHour: 2 / (1.0/12 + 4.0/3), MeanReplicas: (1.0/12 + 4.0/3) / (25.0 / 60)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := summarize("p", "tr", scoring{SLO: slo, Warmup: tc.warmup}, recs, samples)
			opt := cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) < 1e-9 })
			if diff := cmp.Diff(tc.want, s.AfterWarmup, opt); diff != "" {
				t.Errorf("after warm-up (-want +got):\n%s", diff)
			}
			// The whole-trace figures do not depend on the warm-up.
			if s.Requests != 6 || s.Good != 3 || math.Abs(s.ReplicaHours-(1.0/6+4.0/3)) > 1e-9 ||
				math.Abs(s.TTFTAttainment-4.0/6) > 1e-9 || math.Abs(s.TPOTAttainment-4.0/6) > 1e-9 {
				t.Errorf("whole trace: %d requests, %d good, %v GPU-hours, TTFT %v, TPOT %v attainment", s.Requests, s.Good, s.ReplicaHours, s.TTFTAttainment, s.TPOTAttainment)
			}
			if s.Warmup != tc.warmup {
				t.Errorf("warm-up %s, want %s", s.Warmup, tc.warmup)
			}
		})
	}
}

// TestScoreBursts scores requests by the burst whose minutes they arrived in.
func TestScoreBursts(t *testing.T) {
	slo := SLO{TTFT: 2 * time.Second, TPOT: 100 * ms}
	good := func(at time.Duration) Record {
		return Record{Sent: at, OutputTokens: 1, Tokens: 1, TTFT: time.Second, E2E: time.Second}
	}
	slow := func(at time.Duration) Record {
		return Record{Sent: at, OutputTokens: 1, Tokens: 1, TTFT: 3 * time.Second, E2E: 3 * time.Second}
	}
	recs := []Record{good(time.Minute), slow(5 * time.Minute), slow(5*time.Minute + 30*time.Second), good(6*time.Minute + 59*time.Second),
		good(7 * time.Minute), good(20 * time.Minute), slow(21 * time.Minute)}
	bursts := []burstSpan{{Start: 5 * time.Minute, End: 7 * time.Minute}, {Start: 20 * time.Minute, End: 21 * time.Minute}, {Start: 40 * time.Minute, End: 42 * time.Minute}}
	got := scoreBursts(slo, recs, nil, bursts, 10*time.Minute, 30*time.Minute)
	want := []BurstScore{
		{Start: 5 * time.Minute, End: 7 * time.Minute, Requests: 3, Good: 1, Attainment: 1.0 / 3, InWarmup: true},
		{Start: 20 * time.Minute, End: 21 * time.Minute, Requests: 1, Good: 1, Attainment: 1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("burst scores (-want +got):\n%s", diff)
	}
}

// TestBurstFleet: each burst's Ready and desired replicas at its start,
// and the fewest Ready and the largest recommendation in the gap before it
// (from the previous burst's end, or the trace's start).
func TestBurstFleet(t *testing.T) {
	n := intPtr
	at := func(m int, ready, desired int, rec *int) Sample {
		return Sample{T: time.Duration(m) * time.Minute, Replicas: desired, Ready: ready, Desired: desired, RecommendedMax: rec}
	}
	type fleet struct{ ready, desired, gapMin, gapRec *int }
	for _, tc := range []struct {
		name    string
		samples []Sample
		bursts  []burstSpan
		want    []fleet
	}{
		{name: "a burst after a gap",
			// The gap before the burst at 10 is [4, 10): the samples at 4, 6
			// and 8; the one at 2 is in the first burst, the one at 10 is the
			// burst's start (its Ready is at the start, not in the gap).
			samples: []Sample{at(0, 1, 1, n(1)), at(2, 1, 3, n(3)), at(4, 3, 3, n(2)), at(6, 2, 2, n(1)), at(8, 1, 1, n(1)), at(10, 1, 4, n(4)), at(12, 4, 4, n(4))},
			bursts:  []burstSpan{{Start: time.Minute, End: 4 * time.Minute}, {Start: 10 * time.Minute, End: 12 * time.Minute}},
			want: []fleet{
				{ready: n(1), desired: n(1), gapMin: n(1), gapRec: n(1)},
				{ready: n(1), desired: n(4), gapMin: n(1), gapRec: n(2)},
			}},
		{name: "two contiguous bursts",
			// The second starts where the first ends: no gap, no gap figures.
			samples: []Sample{at(0, 2, 2, n(2)), at(3, 2, 5, n(5)), at(6, 5, 5, n(5))},
			bursts:  []burstSpan{{Start: 2 * time.Minute, End: 5 * time.Minute}, {Start: 5 * time.Minute, End: 7 * time.Minute}},
			want: []fleet{
				{ready: n(2), desired: n(2), gapMin: n(2), gapRec: n(2)},
				{ready: n(2), desired: n(5)},
			}},
		{name: "a burst before any sample",
			samples: []Sample{at(2, 1, 1, n(1)), at(4, 1, 2, n(2))},
			bursts:  []burstSpan{{Start: time.Minute, End: 2 * time.Minute}, {Start: 5 * time.Minute, End: 6 * time.Minute}},
			want: []fleet{
				{},
				{ready: n(1), desired: n(2), gapMin: n(1), gapRec: n(2)},
			}},
		{name: "samples without RecommendedMax",
			// A fixed fleet, or a report from before it was recorded: the
			// replicas but no recommendation.
			samples: []Sample{at(0, 2, 2, nil), at(5, 3, 3, nil), at(10, 3, 3, nil)},
			bursts:  []burstSpan{{Start: 6 * time.Minute, End: 8 * time.Minute}},
			want:    []fleet{{ready: n(3), desired: n(3), gapMin: n(2)}},
		},
		{name: "no samples",
			bursts: []burstSpan{{Start: 6 * time.Minute, End: 8 * time.Minute}},
			want:   []fleet{{}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := scoreBursts(SLO{}, nil, tc.samples, tc.bursts, 0, time.Hour)
			var gotFleet []fleet
			for _, b := range got {
				gotFleet = append(gotFleet, fleet{b.ReadyAtStart, b.DesiredAtStart, b.GapMinReady, b.GapPeakRecommended})
			}
			if diff := cmp.Diff(tc.want, gotFleet, cmp.AllowUnexported(fleet{})); diff != "" {
				t.Errorf("burst fleet (-want +got):\n%s", diff)
			}
		})
	}
}

// TestBurstFleetSummary: summarize gives the bursts their fleet figures;
// a report's summary without them (an older one) reads back without them
// and writes them nowhere.
func TestBurstFleetSummary(t *testing.T) {
	samples := []Sample{{T: 0, Ready: 1, Desired: 1, RecommendedMax: intPtr(2)}, {T: 10 * time.Minute, Ready: 2, Desired: 2}}
	s := summarize("p", "tr", scoring{Bursts: []burstSpan{{Start: 5 * time.Minute, End: 6 * time.Minute}}}, nil, samples)
	if len(s.BurstScores) != 1 {
		t.Fatalf("burst scores %+v, want one", s.BurstScores)
	}
	b := s.BurstScores[0]
	if b.ReadyAtStart == nil || *b.ReadyAtStart != 1 || b.GapMinReady == nil || *b.GapMinReady != 1 || b.GapPeakRecommended == nil || *b.GapPeakRecommended != 2 {
		t.Errorf("burst %+v, want 1 Ready at its start, 1 the fewest and 2 the largest recommendation before it", b)
	}
	raw, err := json.Marshal(BurstScore{Start: time.Minute, End: 2 * time.Minute, Requests: 3, Good: 2, Attainment: 2.0 / 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{"readyAtStart", "desiredAtStart", "gapMinReady", "gapPeakRecommended"} {
		if strings.Contains(string(raw), field) {
			t.Errorf("a burst without fleet figures writes %s: %s", field, raw)
		}
	}
	var back BurstScore
	if err := json.Unmarshal([]byte(`{"start":60000000000,"end":120000000000,"requests":3,"good":2,"attainment":0.5}`), &back); err != nil ||
		back.ReadyAtStart != nil || back.DesiredAtStart != nil || back.GapMinReady != nil || back.GapPeakRecommended != nil || back.Requests != 3 {
		t.Errorf("older burst score read back as %+v (%v)", back, err)
	}
}

// TestFindBurstSpans: a burst lasts while the arrivals stay at least twice
// the baseline of the five minutes before its start, and ends at the next
// burst's start.
func TestFindBurstSpans(t *testing.T) {
	var arrivals []time.Duration
	counts := []int{10, 10, 10, 10, 10, 40, 30, 20, 19, 10, 10, 10, 10, 10, 10, 60, 25, 10, 10, 10}
	for m, n := range counts {
		for i := range n {
			arrivals = append(arrivals, time.Duration(m)*time.Minute+time.Duration(i)*time.Second/time.Duration(n+1))
		}
	}
	got := findBurstSpans(arrivals)
	want := []burstSpan{
		{Start: 5 * time.Minute, End: 8 * time.Minute},   // 40, 30, 20 ≥ 2 × 10; 19 is not
		{Start: 15 * time.Minute, End: 17 * time.Minute}, // 60, 25 ≥ 2 × 10
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("bursts (-want +got):\n%s", diff)
	}
	if got := findBursts(arrivals); !cmp.Equal(got, []time.Duration{5 * time.Minute, 15 * time.Minute}) {
		t.Errorf("burst starts %v", got)
	}
}

func TestWarmupFlag(t *testing.T) {
	getenv := func(string) string { return "/bin" }
	for _, tc := range []struct {
		args    []string
		want    time.Duration
		wantErr string
	}{
		{args: nil, want: 10 * time.Minute},
		{args: []string{"--warmup", "0"}, want: 0},
		{args: []string{"--warmup", "2m", "--duration", "10m"}, want: 2 * time.Minute},
		{args: []string{"--warmup", "-1s"}, wantErr: "--warmup"},
		{args: []string{"--warmup", "10m", "--duration", "10m"}, wantErr: "--warmup"},
	} {
		cfg, err := parseArgs(tc.args, getenv)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%v: error %v, want one naming %s", tc.args, err, tc.wantErr)
			}
			continue
		}
		if err != nil || cfg.warmup != tc.want {
			t.Errorf("%v: warm-up %s (%v), want %s", tc.args, cfg.warmup, err, tc.want)
		}
	}
	// A warm-up as long as the trace leaves nothing to score.
	if _, err := prepareTrace("../../testdata/traces/azure-llm-2023-code.csv.gz", config{rateScale: 1, duration: 5 * time.Minute, warmup: 5 * time.Minute, maxModelLen: 8192}); err == nil || !strings.Contains(err.Error(), "--warmup") {
		t.Errorf("prepareTrace with the warm-up past the last request: %v, want an error naming -warmup", err)
	}
}
