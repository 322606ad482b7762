// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"math"
	"slices"
	"testing"
)

// TestTQuantile975 checks t_{0.975} against published values: the table
// and, past it, the expansion.
func TestTQuantile975(t *testing.T) {
	for _, tc := range []struct {
		df   int
		want float64
	}{
		{1, 12.7062}, {2, 4.3027}, {3, 3.1824}, {4, 2.7764}, {9, 2.2622}, {30, 2.0423},
		{40, 2.0211}, {60, 2.0003}, {120, 1.9799}, {1000, 1.9623},
	} {
		if got := tQuantile975(tc.df); math.Abs(got-tc.want) > 2e-4 {
			t.Errorf("t(0.975, %d) = %.5f, want %.4f", tc.df, got, tc.want)
		}
	}
	if !math.IsNaN(tQuantile975(0)) {
		t.Error("t with 0 degrees of freedom is a number")
	}
}

// TestInterval checks the interval against values worked by hand: for
// {80, 82, 84} the mean is 82, s = 2, half-width = 4.3027 × 2 / √3.
func TestInterval(t *testing.T) {
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	iv := interval([]float64{80, 84, 82})
	half := 4.3027 * 2 / math.Sqrt(3)
	if iv.N != 3 || !near(iv.Mean, 82) || !near(iv.SD, 2) || !near(iv.Lo, 82-half) || !near(iv.Hi, 82+half) || !iv.HasInterval {
		t.Errorf("interval of 80, 82, 84 = %+v, want 82 ± %.4f", iv, half)
	}
	// Five repeats: 0.90 0.92 0.91 0.93 0.89: mean 0.91, s = 0.0158114.
	iv = interval([]float64{0.90, 0.92, 0.91, 0.93, 0.89})
	half = 2.7764 * math.Sqrt(0.00025) / math.Sqrt(5)
	if !near(iv.Mean, 0.91) || math.Abs(iv.Hi-iv.Lo-2*half) > 1e-9 {
		t.Errorf("interval of five = %+v, want 0.91 ± %.5f", iv, half)
	}
	one := interval([]float64{0.7})
	if one.HasInterval || one.Mean != 0.7 || one.Lo != 0.7 || one.Hi != 0.7 {
		t.Errorf("interval of one run = %+v, want the value and no interval", one)
	}
	if nan := interval([]float64{math.NaN(), 3, 5}); nan.N != 2 || nan.Mean != 4 {
		t.Errorf("NaN values are left out: %+v", nan)
	}
	if none := interval([]float64{math.NaN()}); none != (Interval{}) {
		t.Errorf("interval of nothing = %+v", none)
	}
}

func TestIntervalDiffers(t *testing.T) {
	a := Interval{N: 3, Mean: 0.8, Lo: 0.78, Hi: 0.82, HasInterval: true}
	for _, tc := range []struct {
		name string
		b    Interval
		want bool
	}{
		{"apart, above", Interval{N: 3, Mean: 0.9, Lo: 0.85, Hi: 0.95, HasInterval: true}, true},
		{"apart, below", Interval{N: 3, Mean: 0.7, Lo: 0.6, Hi: 0.77, HasInterval: true}, true},
		{"overlapping", Interval{N: 3, Mean: 0.84, Lo: 0.81, Hi: 0.87, HasInterval: true}, false},
		{"touching", Interval{N: 3, Mean: 0.84, Lo: 0.82, Hi: 0.86, HasInterval: true}, false},
		{"one run: no interval", Interval{N: 1, Mean: 0.99, Lo: 0.99, Hi: 0.99}, false},
	} {
		if got := a.Differs(tc.b); got != tc.want || tc.b.Differs(a) != tc.want {
			t.Errorf("%s: differs %v, want %v (both ways)", tc.name, got, tc.want)
		}
	}
}

// TestRunOrder: every repeat is a block holding every policy once; the
// order is the seed's, the same for the same seed, and not the same for
// every seed.
func TestRunOrder(t *testing.T) {
	const policies, repeats = 7, 3
	got := runOrder(policies, repeats, 42)
	if len(got) != policies*repeats {
		t.Fatalf("%d runs, want %d", len(got), policies*repeats)
	}
	for r := range repeats {
		var seen []int
		for _, s := range got[r*policies : (r+1)*policies] {
			if s.Repeat != r+1 {
				t.Errorf("block %d holds repeat %d", r+1, s.Repeat)
			}
			seen = append(seen, s.Policy)
		}
		slices.Sort(seen)
		if !slices.Equal(seen, []int{0, 1, 2, 3, 4, 5, 6}) {
			t.Errorf("block %d: policies %v, want each once", r+1, seen)
		}
	}
	if again := runOrder(policies, repeats, 42); !slices.Equal(got, again) {
		t.Error("the same seed gave another order")
	}
	identity := 0
	for seed := uint64(1); seed <= 20; seed++ {
		o := runOrder(policies, 1, seed)
		if slices.IsSortedFunc(o, func(a, b runSlot) int { return a.Policy - b.Policy }) {
			identity++
		}
	}
	if identity > 1 {
		t.Errorf("%d of 20 seeds ran the policies in their given order", identity)
	}
}

// TestPoints aggregates three runs of one policy and one of another.
func TestPoints(t *testing.T) {
	run := func(name string, repeat int, att, hours float64, bursts ...float64) runResult {
		s := Summary{Attainment: att - 0.1, ReplicaHours: hours + 1, AfterWarmup: Phase{Attainment: att, GPUHours: hours, Requests: 10}}
		for _, b := range bursts {
			s.BurstScores = append(s.BurstScores, BurstScore{Requests: 5, Attainment: b})
		}
		return runResult{Policy: policy{Name: name, Metric: metricQueue, Target: "3"}, Repeat: repeat, Summary: s}
	}
	pts := points([]runResult{run("q", 1, 0.80, 4, 0.5), run("f", 1, 0.99, 7.5, 1), run("q", 2, 0.84, 5, 0.7), run("q", 3, 0.82, 6, 0.6)})
	if len(pts) != 2 || pts[0].Policy != "q" || pts[1].Policy != "f" {
		t.Fatalf("points %+v, want q then f", pts)
	}
	q := pts[0]
	if q.Repeats != 3 || math.Abs(q.Attainment.Mean-0.82) > 1e-9 || math.Abs(q.GPUHours.Mean-5) > 1e-9 || math.Abs(q.WholeGPUHours.Mean-6) > 1e-9 ||
		math.Abs(q.WholeAttainment.Mean-0.72) > 1e-9 || len(q.BurstAttainment) != 1 || math.Abs(q.BurstAttainment[0].Mean-0.6) > 1e-9 || q.Family != "queue" {
		t.Errorf("point q = %+v", q)
	}
	if half := q.GPUHours.Hi - 5; math.Abs(half-4.3027/math.Sqrt(3)) > 1e-9 {
		t.Errorf("GPU-hours half-width %v, want t × 1 / √3", half)
	}
	if pts[1].Attainment.HasInterval {
		t.Error("a point of one run has an interval")
	}
	if d := differences(pts); len(d) != 0 {
		t.Errorf("differences %v with a one-run point", d)
	}
}

// TestPointsBurstFleet: per burst, the mean over the runs of the Ready
// replicas at its start and the least and largest over the runs of the
// gap's fewest Ready and largest recommendation; runs without them (an
// older report) give no such figures.
func TestPointsBurstFleet(t *testing.T) {
	n := intPtr
	run := func(repeat int, bursts ...BurstScore) runResult {
		return runResult{Policy: policy{Name: "q", Metric: metricQueue, Target: "3"}, Repeat: repeat, Summary: Summary{BurstScores: bursts}}
	}
	pts := points([]runResult{
		run(1, BurstScore{ReadyAtStart: n(1), GapMinReady: n(1), GapPeakRecommended: n(3)}, BurstScore{ReadyAtStart: n(4)}),
		run(2, BurstScore{ReadyAtStart: n(2), GapMinReady: n(2), GapPeakRecommended: n(5)}, BurstScore{ReadyAtStart: n(4)}),
		run(3, BurstScore{ReadyAtStart: n(3), GapMinReady: n(1)}),
	})
	q := pts[0]
	if len(q.BurstReadyAtStart) != 2 || q.BurstReadyAtStart[0].N != 3 || math.Abs(q.BurstReadyAtStart[0].Mean-2) > 1e-9 ||
		q.BurstReadyAtStart[1].N != 2 || q.BurstReadyAtStart[1].Mean != 4 {
		t.Errorf("Ready at the bursts' starts %+v, want 2 over 3 runs, then 4 over 2", q.BurstReadyAtStart)
	}
	wantMin := []Range{{N: 3, Min: 1, Max: 2}, {}}
	wantRec := []Range{{N: 2, Min: 3, Max: 5}, {}}
	if !slices.Equal(q.BurstGapMinReady, wantMin) || !slices.Equal(q.BurstGapPeakRecommended, wantRec) {
		t.Errorf("gap ranges %+v and %+v, want %+v and %+v", q.BurstGapMinReady, q.BurstGapPeakRecommended, wantMin, wantRec)
	}
	old := points([]runResult{run(1, BurstScore{Requests: 3, Attainment: 1})})[0]
	if old.BurstReadyAtStart != nil || old.BurstGapMinReady != nil || old.BurstGapPeakRecommended != nil || len(old.BurstAttainment) != 1 {
		t.Errorf("a run without fleet figures: %+v, want none of them", old)
	}
}

func TestRangeOf(t *testing.T) {
	for _, tc := range []struct {
		xs   []float64
		want Range
	}{
		{nil, Range{}},
		{[]float64{math.NaN()}, Range{}},
		{[]float64{3}, Range{N: 1, Min: 3, Max: 3}},
		{[]float64{4, math.NaN(), 2, 7}, Range{N: 3, Min: 2, Max: 7}},
	} {
		if got := rangeOf(tc.xs); got != tc.want {
			t.Errorf("rangeOf(%v) = %+v, want %+v", tc.xs, got, tc.want)
		}
	}
}
