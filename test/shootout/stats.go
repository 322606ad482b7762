// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"math"
	"math/rand/v2"
	"slices"
)

// tTable is the two-sided 95% quantile of Student's t distribution
// (t_{0.975}) for 1 to 30 degrees of freedom.
var tTable = [...]float64{
	12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281,
	2.2010, 2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860,
	2.0796, 2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423,
}

// tQuantile975 is t_{0.975} with df degrees of freedom (df >= 1): from the
// table up to 30, above it the Cornish-Fisher expansion around the normal
// quantile 1.959964 (within 1e-4 of the exact value from 31 on).
func tQuantile975(df int) float64 {
	if df < 1 {
		return math.NaN()
	}
	if df <= len(tTable) {
		return tTable[df-1]
	}
	z := 1.959964
	n := float64(df)
	z3, z5, z7 := z*z*z, z*z*z*z*z, z*z*z*z*z*z*z
	return z + (z3+z)/(4*n) + (5*z5+16*z3+3*z)/(96*n*n) + (3*z7+19*z5+17*z3-15*z)/(384*n*n*n)
}

// Interval is the mean of n repeats of one figure and its 95% confidence
// interval, Student's t for small n: mean ± t_{0.975, n-1} × s / √n. With
// one repeat there is no interval (Lo and Hi are the mean, HasInterval
// false).
type Interval struct {
	N           int     `json:"n"`
	Mean        float64 `json:"mean"`
	SD          float64 `json:"sd"`
	Lo          float64 `json:"lo"`
	Hi          float64 `json:"hi"`
	HasInterval bool    `json:"hasInterval"`
}

// interval computes the Interval of xs (NaN values left out). Of no value
// it is the zero Interval, N 0: nothing to show (and JSON has no NaN).
func interval(xs []float64) Interval {
	var vals []float64
	for _, x := range xs {
		if !math.IsNaN(x) {
			vals = append(vals, x)
		}
	}
	iv := Interval{N: len(vals)}
	if iv.N == 0 {
		return iv
	}
	var sum float64
	for _, x := range vals {
		sum += x
	}
	iv.Mean = sum / float64(iv.N)
	iv.Lo, iv.Hi = iv.Mean, iv.Mean
	if iv.N < 2 {
		return iv
	}
	var ss float64
	for _, x := range vals {
		ss += (x - iv.Mean) * (x - iv.Mean)
	}
	iv.SD = math.Sqrt(ss / float64(iv.N-1))
	half := tQuantile975(iv.N-1) * iv.SD / math.Sqrt(float64(iv.N))
	iv.Lo, iv.Hi, iv.HasInterval = iv.Mean-half, iv.Mean+half, true
	return iv
}

// Differs reports whether a and b differ: only when both have an interval
// and the intervals do not overlap. Anything else is "no difference shown".
func (a Interval) Differs(b Interval) bool {
	return a.HasInterval && b.HasInterval && (a.Hi < b.Lo || b.Hi < a.Lo)
}

// runSlot is one replay of the plan: policy Policy's Repeat-th run (from 1).
type runSlot struct {
	Policy int `json:"policy"` // index into the run's policies
	Repeat int `json:"repeat"`
}

// runOrder is the order of repeats × policies replays: repeat by repeat
// (a block holds every policy once, so that a drift of the machine over the
// hours spreads over all policies alike), the policies of each block in an
// order drawn from seed.
func runOrder(policies, repeats int, seed uint64) []runSlot {
	rng := rand.New(rand.NewPCG(seed, 0x5eed5))
	out := make([]runSlot, 0, policies*repeats)
	for r := 1; r <= repeats; r++ {
		perm := rng.Perm(policies)
		for _, p := range perm {
			out = append(out, runSlot{Policy: p, Repeat: r})
		}
	}
	return out
}

// Point is one policy's figures over its repeats on one trace.
type Point struct {
	Policy string `json:"policy"`
	// Family is the signal family (family()), for the frontier's lines.
	Family string `json:"family"`
	// Target is the policy's target in words, e.g. "800m" or "4 replicas".
	Target string `json:"target"`
	// Repeats counts the runs.
	Repeats int `json:"repeats"`
	// After the warm-up: the headline.
	Attainment     Interval `json:"attainment"`
	TTFTAttainment Interval `json:"ttftAttainment"`
	TPOTAttainment Interval `json:"tpotAttainment"`
	GPUHours       Interval `json:"gpuHours"`
	Goodput        Interval `json:"goodput"`
	// The whole trace.
	WholeAttainment Interval `json:"wholeAttainment"`
	WholeGPUHours   Interval `json:"wholeGPUHours"`
	// BurstAttainment is the attainment of each burst's requests, by burst.
	BurstAttainment []Interval `json:"burstAttainment,omitempty"`
	// BurstReadyAtStart is the Ready replicas at each burst's start (mean
	// over the runs that recorded it), BurstGapMinReady and
	// BurstGapPeakRecommended the range over the runs of the fewest Ready
	// and the largest recommendation in the gap before it (BurstScore). All
	// three are absent when no run recorded any of them (an older report).
	BurstReadyAtStart       []Interval `json:"burstReadyAtStart,omitempty"`
	BurstGapMinReady        []Range    `json:"burstGapMinReady,omitempty"`
	BurstGapPeakRecommended []Range    `json:"burstGapPeakRecommended,omitempty"`
	// SourceAttainment is the attainment after the warm-up of each file of
	// a merged trace (Summary.BySource), by file; absent for one file.
	SourceAttainment []Interval `json:"sourceAttainment,omitempty"`
}

// Range is the least and the largest of N values; N 0 is no value.
type Range struct {
	N   int     `json:"n"`
	Min float64 `json:"min"`
	Max float64 `json:"max"`
}

// rangeOf is the Range of xs, NaN values left out.
func rangeOf(xs []float64) Range {
	var r Range
	for _, x := range xs {
		if math.IsNaN(x) {
			continue
		}
		if r.N == 0 || x < r.Min {
			r.Min = x
		}
		if r.N == 0 || x > r.Max {
			r.Max = x
		}
		r.N++
	}
	return r
}

// points aggregates runs by policy, in the order of each policy's first
// run.
func points(runs []runResult) []Point {
	var order []string
	by := map[string][]runResult{}
	for _, r := range runs {
		if _, ok := by[r.Policy.Name]; !ok {
			order = append(order, r.Policy.Name)
		}
		by[r.Policy.Name] = append(by[r.Policy.Name], r)
	}
	out := make([]Point, 0, len(order))
	for _, name := range order {
		rs := by[name]
		pick := func(f func(Summary) float64) Interval {
			xs := make([]float64, len(rs))
			for i, r := range rs {
				xs[i] = f(r.Summary)
			}
			return interval(xs)
		}
		pt := Point{Policy: name, Family: family(rs[0].Policy), Target: rs[0].Policy.targetText(), Repeats: len(rs),
			Attainment:      pick(func(s Summary) float64 { return s.AfterWarmup.Attainment }),
			TTFTAttainment:  pick(func(s Summary) float64 { return s.AfterWarmup.TTFTAttainment }),
			TPOTAttainment:  pick(func(s Summary) float64 { return s.AfterWarmup.TPOTAttainment }),
			GPUHours:        pick(func(s Summary) float64 { return s.AfterWarmup.GPUHours }),
			Goodput:         pick(func(s Summary) float64 { return s.AfterWarmup.Goodput }),
			WholeAttainment: pick(func(s Summary) float64 { return s.Attainment }),
			WholeGPUHours:   pick(func(s Summary) float64 { return s.ReplicaHours }),
		}
		pt.BurstAttainment = attainmentByIndex(rs, func(s Summary, i int) (int, int, float64) {
			if i >= len(s.BurstScores) {
				return len(s.BurstScores), 0, 0
			}
			return len(s.BurstScores), s.BurstScores[i].Requests, s.BurstScores[i].Attainment
		})
		burstFleetPoints(&pt, rs, len(pt.BurstAttainment))
		pt.SourceAttainment = attainmentByIndex(rs, func(s Summary, i int) (int, int, float64) {
			if i >= len(s.BySource) {
				return len(s.BySource), 0, 0
			}
			return len(s.BySource), s.BySource[i].Requests, s.BySource[i].Attainment
		})
		out = append(out, pt)
	}
	return out
}

// attainmentByIndex is, for each index below the longest of the runs'
// lists (a run's bursts, its files), the interval over the runs of the
// attainment at that index; at(s, i) gives the length of s's list and the
// requests and attainment of its i-th entry (0 requests beyond its end). A
// run without the entry, or without a request in it, is left out. Nil when
// every list is empty.
func attainmentByIndex(rs []runResult, at func(s Summary, i int) (n, requests int, attainment float64)) []Interval {
	n := 0
	for _, r := range rs {
		l, _, _ := at(r.Summary, 0)
		n = max(n, l)
	}
	var out []Interval
	for i := range n {
		xs := make([]float64, len(rs))
		for j, r := range rs {
			xs[j] = math.NaN()
			if _, req, a := at(r.Summary, i); req > 0 {
				xs[j] = a
			}
		}
		out = append(out, interval(xs))
	}
	return out
}

// burstFleetPoints sets pt's per-burst fleet figures over the runs rs, for
// nb bursts; none when no run's bursts carry any (an older report).
func burstFleetPoints(pt *Point, rs []runResult, nb int) {
	at := func(s Summary, b int, f func(BurstScore) *int) float64 {
		if b >= len(s.BurstScores) {
			return math.NaN()
		}
		if v := f(s.BurstScores[b]); v != nil {
			return float64(*v)
		}
		return math.NaN()
	}
	collect := func(b int, f func(BurstScore) *int) []float64 {
		xs := make([]float64, len(rs))
		for i, r := range rs {
			xs[i] = at(r.Summary, b, f)
		}
		return xs
	}
	ready := func(x BurstScore) *int { return x.ReadyAtStart }
	gapReady := func(x BurstScore) *int { return x.GapMinReady }
	gapRec := func(x BurstScore) *int { return x.GapPeakRecommended }
	var readyAt []Interval
	var minReady, peakRec []Range
	found := false
	for b := range nb {
		iv, lo, hi := interval(collect(b, ready)), rangeOf(collect(b, gapReady)), rangeOf(collect(b, gapRec))
		found = found || iv.N > 0 || lo.N > 0 || hi.N > 0
		readyAt, minReady, peakRec = append(readyAt, iv), append(minReady, lo), append(peakRec, hi)
	}
	if found {
		pt.BurstReadyAtStart, pt.BurstGapMinReady, pt.BurstGapPeakRecommended = readyAt, minReady, peakRec
	}
}

// sortedByGPUHours returns pts ordered by mean GPU-hours (then name).
func sortedByGPUHours(pts []Point) []Point {
	out := slices.Clone(pts)
	slices.SortStableFunc(out, func(a, b Point) int {
		switch {
		case a.GPUHours.Mean < b.GPUHours.Mean:
			return -1
		case a.GPUHours.Mean > b.GPUHours.Mean:
			return 1
		}
		return 0
	})
	return out
}
