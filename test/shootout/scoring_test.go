// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
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
	got := scoreBursts(slo, recs, bursts, 10*time.Minute, 30*time.Minute)
	want := []BurstScore{
		{Start: 5 * time.Minute, End: 7 * time.Minute, Requests: 3, Good: 1, Attainment: 1.0 / 3, InWarmup: true},
		{Start: 20 * time.Minute, End: 21 * time.Minute, Requests: 1, Good: 1, Attainment: 1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("burst scores (-want +got):\n%s", diff)
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
