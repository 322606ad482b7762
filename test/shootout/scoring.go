// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/loadgen"
)

// Phase is one stretch of a replay scored on its own: the requests sent in
// it, and the GPU-hours the fleet held over it.
type Phase struct {
	// From and To bound the stretch, in simulated time since the replay
	// started; a request counts when From <= Sent < To.
	From time.Duration `json:"from"`
	To   time.Duration `json:"to"`
	// Requests, Good and Failed count the requests sent in the stretch.
	Requests int `json:"requests"`
	Good     int `json:"good"`
	Failed   int `json:"failed"`
	// Attainment is Good / Requests: TTFT and TPOT both within the SLO.
	// TTFTAttainment and TPOTAttainment are the shares of requests that
	// completed with each bound met on its own (a one-token request has no
	// TPOT and meets that bound), so that the two failures are told apart.
	Attainment     float64 `json:"attainment"`
	TTFTAttainment float64 `json:"ttftAttainment"`
	TPOTAttainment float64 `json:"tpotAttainment"`
	// Goodput is Good per simulated second of the stretch.
	Goodput float64 `json:"goodput"`
	// GPUHours is the integral of the pods holding a GPU over the stretch;
	// GoodPerGPUHour is Good / GPUHours; MeanReplicas is GPUHours over the
	// stretch's length.
	GPUHours       float64 `json:"gpuHours"`
	GoodPerGPUHour float64 `json:"goodPerGPUHour"`
	MeanReplicas   float64 `json:"meanReplicas"`
}

// scorePhase scores the records sent in [from, to) and the samples over the
// same stretch, which ends at the last sample (To is then set to it): the
// fleet figures (goodput, GPU-hours) need samples.
func scorePhase(slo SLO, recs []Record, samples []Sample, from, to time.Duration) Phase {
	p := Phase{From: from, To: to}
	var ttftOK, tpotOK int
	for _, r := range recs {
		if r.Sent < from || r.Sent >= to {
			continue
		}
		p.Requests++
		if r.Failed() {
			p.Failed++
			continue
		}
		t1 := r.TTFT <= slo.TTFT
		tpot, has := r.TPOT()
		t2 := !has || tpot <= slo.TPOT
		if t1 {
			ttftOK++
		}
		if t2 {
			tpotOK++
		}
		if t1 && t2 {
			p.Good++
		}
	}
	if p.Requests > 0 {
		n := float64(p.Requests)
		p.Attainment, p.TTFTAttainment, p.TPOTAttainment = float64(p.Good)/n, float64(ttftOK)/n, float64(tpotOK)/n
	}
	if len(samples) == 0 {
		return p
	}
	end := min(to, samples[len(samples)-1].T)
	p.To = end
	if end > from {
		p.Goodput = float64(p.Good) / (end - from).Seconds()
		p.GPUHours = integrateBetween(samples, from, end, func(x Sample) int { return x.Replicas })
		p.MeanReplicas = p.GPUHours / (end - from).Hours()
	}
	if p.GPUHours > 0 {
		p.GoodPerGPUHour = float64(p.Good) / p.GPUHours
	}
	return p
}

// scoreBySource scores the records of each of n source files apart, sent
// from warmup on, without fleet figures (the fleet served them all); nil
// for fewer than two files. A record whose Source is not below n is left
// out.
func scoreBySource(slo SLO, recs []Record, n int, warmup time.Duration) []Phase {
	if n < 2 {
		return nil
	}
	by := make([][]Record, n)
	for _, r := range recs {
		if r.Source >= 0 && r.Source < n {
			by[r.Source] = append(by[r.Source], r)
		}
	}
	out := make([]Phase, n)
	for i, rs := range by {
		out[i] = scorePhase(slo, rs, nil, warmup, math.MaxInt64)
	}
	return out
}

// integrateBetween integrates a count of the samples over [from, to), in
// count-hours, as a step function: each sample's count holds until the
// next sample. Nothing is counted before the first sample or after the
// last.
func integrateBetween(samples []Sample, from, to time.Duration, count func(Sample) int) float64 {
	var total float64
	for i := 1; i < len(samples); i++ {
		a, b := max(samples[i-1].T, from), min(samples[i].T, to)
		if b > a {
			total += float64(count(samples[i-1])) * (b - a).Hours()
		}
	}
	return total
}

// burstSpan is one burst of a trace: the minutes from its start (a minute
// with at least burstFactor times the arrivals of the burstLookback
// minutes before it, and above the trace's mean) while the arrivals stay
// at least burstFactor times that same baseline, up to the next burst.
type burstSpan struct {
	Start time.Duration `json:"start"`
	End   time.Duration `json:"end"`
	// Source is, in a merged trace, the index of the file whose arrivals
	// burst (report.Sources): its score counts that file's requests only.
	// Absent for a trace of one file.
	Source *int `json:"source,omitempty"`
}

// findSourceBursts returns the bursts of each of n files of a merged trace:
// findBurstSpans of that file's arrivals on the merged trace's clock (so
// that a file's bursts are found under another file's steady base), each
// tagged with its file, sorted by start (ties in file order).
func findSourceBursts(reqs []loadgen.TraceRequest, n int) []burstSpan {
	per := make([][]time.Duration, n)
	for _, r := range reqs {
		if r.Source >= 0 && r.Source < n {
			per[r.Source] = append(per[r.Source], r.At)
		}
	}
	var out []burstSpan
	for i, arrivals := range per {
		for _, b := range findBurstSpans(arrivals) {
			b.Source = intPtr(i)
			out = append(out, b)
		}
	}
	slices.SortStableFunc(out, func(a, b burstSpan) int { return cmp.Compare(a.Start, b.Start) })
	return out
}

// findBurstSpans returns the bursts of the arrival times (sorted).
func findBurstSpans(arrivals []time.Duration) []burstSpan {
	if len(arrivals) == 0 {
		return nil
	}
	n := int(arrivals[len(arrivals)-1]/burstBin) + 1
	bins := make([]float64, n)
	for _, a := range arrivals {
		bins[int(a/burstBin)]++
	}
	mean := float64(len(arrivals)) / float64(n)
	var starts []int
	var baselines []float64
	for i := burstLookback; i < n; i++ {
		var prev float64
		for _, c := range bins[i-burstLookback : i] {
			prev += c
		}
		prev /= burstLookback
		if bins[i] > mean && bins[i] >= burstFactor*prev {
			starts = append(starts, i)
			baselines = append(baselines, prev)
		}
	}
	out := make([]burstSpan, 0, len(starts))
	for k, i := range starts {
		limit := n
		if k+1 < len(starts) {
			limit = starts[k+1]
		}
		j := i + 1
		for j < limit && bins[j] >= burstFactor*baselines[k] {
			j++
		}
		out = append(out, burstSpan{Start: time.Duration(i) * burstBin, End: time.Duration(j) * burstBin})
	}
	return out
}

// BurstScore is the attainment of the requests that arrived in one burst's
// minutes, and the fleet the burst met.
type BurstScore struct {
	Start      time.Duration `json:"start"`
	End        time.Duration `json:"end"`
	Requests   int           `json:"requests"`
	Good       int           `json:"good"`
	Attainment float64       `json:"attainment"`
	// InWarmup is true when the burst starts before the warm-up ends: it is
	// left out of the headline figures.
	InWarmup bool `json:"inWarmup,omitempty"`
	// ReadyAtStart and DesiredAtStart are the Ready and desired replicas of
	// the last sample at or before the burst's start; absent when no sample
	// is (and in a report written before they were recorded).
	ReadyAtStart   *int `json:"readyAtStart,omitempty"`
	DesiredAtStart *int `json:"desiredAtStart,omitempty"`
	// GapMinReady is the fewest Ready replicas of the samples in the gap
	// before the burst: from the previous burst's end (the trace's start for
	// the first burst) to this burst's start. Absent when the burst directly
	// follows the previous one or no sample falls in the gap.
	GapMinReady *int `json:"gapMinReady,omitempty"`
	// GapPeakRecommended is the largest RecommendedMax of the samples in
	// the same gap: the most replicas the HPA's metrics asked for there,
	// without the scale-down window. Absent when no sample there has one.
	GapPeakRecommended *int `json:"gapPeakRecommended,omitempty"`
}

// scoreBursts scores each burst that starts within the span (a merged
// trace's burst: its file's requests only), and records the fleet it met
// from the samples (sorted by time).
func scoreBursts(slo SLO, recs []Record, samples []Sample, bursts []burstSpan, warmup, span time.Duration) []BurstScore {
	var out []BurstScore
	for i, b := range bursts {
		if b.Start > span {
			continue
		}
		in := recs
		if b.Source != nil {
			in = nil
			for _, r := range recs {
				if r.Source == *b.Source {
					in = append(in, r)
				}
			}
		}
		p := scorePhase(slo, in, nil, b.Start, b.End)
		bs := BurstScore{Start: b.Start, End: b.End, Requests: p.Requests, Good: p.Good, Attainment: p.Attainment, InWarmup: b.Start < warmup}
		var gapFrom time.Duration
		if i > 0 {
			gapFrom = bursts[i-1].End
		}
		bs.fleetBefore(samples, gapFrom)
		out = append(out, bs)
	}
	return out
}

// fleetBefore sets the burst's fleet figures (ReadyAtStart, DesiredAtStart,
// GapMinReady, GapPeakRecommended) from the samples (sorted by time); the
// gap before the burst is [gapFrom, Start).
func (bs *BurstScore) fleetBefore(samples []Sample, gapFrom time.Duration) {
	for _, x := range samples {
		if x.T > bs.Start {
			break
		}
		bs.ReadyAtStart, bs.DesiredAtStart = intPtr(x.Ready), intPtr(x.Desired)
		if x.T < gapFrom || x.T >= bs.Start {
			continue
		}
		if bs.GapMinReady == nil || x.Ready < *bs.GapMinReady {
			bs.GapMinReady = intPtr(x.Ready)
		}
		if r := x.RecommendedMax; r != nil && (bs.GapPeakRecommended == nil || *r > *bs.GapPeakRecommended) {
			bs.GapPeakRecommended = intPtr(*r)
		}
	}
}

// intPtr is a pointer to a copy of v.
func intPtr(v int) *int { return &v }
