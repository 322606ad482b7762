// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package forecast

import (
	"fmt"
	"math"
	"time"
)

// Method is an estimator of the demand within the horizon.
type Method string

// The estimators.
const (
	// Envelope is the largest demand in the last horizon.
	Envelope Method = "envelope"
	// Holt is Holt's linear method (level and per-second trend) over the
	// window, projected a horizon ahead.
	Holt Method = "holt"
	// Staffing is the demand plus a queueing headroom z·√(I·D), with I
	// the index of dispersion of the arrivals over the window.
	Staffing Method = "staffing"
	// Auto is staffing when the arrivals have been bursty over the
	// history's span (their burstiness at least Params.Bursty), holt
	// otherwise.
	Auto Method = "auto"
)

// Methods lists the estimators, in the order the docs give them.
func Methods() []Method { return []Method{Envelope, Holt, Staffing, Auto} }

// ParseMethod returns the method named s.
func ParseMethod(s string) (Method, error) {
	for _, m := range Methods() {
		if string(m) == s {
			return m, nil
		}
	}
	return "", fmt.Errorf("unknown forecast method %q: one of envelope, holt, staffing, auto", s)
}

// Defaults of the estimators' parameters.
const (
	DefaultWindow = 5 * time.Minute
	DefaultZ      = 1.645 // one-sided 95%
	DefaultAlpha  = 0.5
	DefaultBeta   = 0.3
	// DefaultBursty is auto's threshold on the arrivals' burstiness (the
	// squared coefficient of variation of their rate per sample interval):
	// a rate whose standard deviation is half its mean. Chosen between the
	// two recorded traces of docs/shootout.md: over any 15 minutes at 15 s
	// intervals the steady one measures at most 0.15, the bursty one at
	// least 1.0.
	DefaultBursty = 0.25
	// MinSamples is the fewest samples a forecast needs in its window.
	MinSamples = 3
	// MaxAutoHorizon bounds the horizon taken from the pods' start-up time.
	MaxAutoHorizon = 10 * time.Minute
	// DefaultFloorWindow is the span whose largest demand the floor is a
	// share of: longer than the HPA's default 5-minute scale-down window,
	// so that a floor outlasts a quiet gap the window alone does not.
	DefaultFloorWindow = 15 * time.Minute
	// MaxFloorWindow bounds the floor's window: a history keeps
	// MaxSamples samples spread over its window, so over 30 minutes they
	// are at least 28 s apart, and a shorter peak may fall between two.
	MaxFloorWindow = 30 * time.Minute
	// MaxRateFloor bounds the rate floor's time in system: a request of an
	// LLM server at SLO capacity is in it for seconds, not minutes.
	MaxRateFloor = time.Minute
)

// Params are an estimate's settings.
type Params struct {
	Method  Method
	Window  time.Duration // the span of history read by holt and staffing
	Horizon time.Duration // how far ahead: one model-load time
	Z       float64       // staffing's safety factor
	Alpha   float64       // holt's level smoothing, in (0, 1]
	Beta    float64       // holt's trend smoothing, in (0, 1]
	// Floor is the share, in [0, 1], of the largest demand of the last
	// FloorWindow below which the forecast does not fall; 0 is no floor.
	Floor       float64
	FloorWindow time.Duration
	// RateFloor is a time in system: the forecast does not fall below the
	// largest arrival rate of the last FloorWindow times it, the requests
	// that rate keeps in the system by Little's law; 0 is no rate floor.
	// Set to the time a request spends in a replica at SLO capacity (the
	// demand per replica at capacity ÷ its completions rate there), it
	// holds replicas for the largest recent rate of arrivals.
	RateFloor time.Duration
	// Bursty is auto's threshold on the burstiness, measured over the last
	// BurstWindow.
	Bursty      float64
	BurstWindow time.Duration
}

// Result is an estimate with what it was made from.
type Result struct {
	// Forecast is the demand, in requests, expected within the horizon.
	Forecast float64
	// Samples and Span are the history the estimate read.
	Samples int
	Span    time.Duration
	// Dispersion is staffing's index of dispersion (1 when unknown).
	Dispersion float64
	// Method is the estimator that made the forecast: Params.Method, or
	// the one auto chose.
	Method Method
	// Burstiness is what auto measured over Params.BurstWindow: the
	// squared coefficient of variation of the arrival rate per sample
	// interval, (I − 1) ÷ the mean arrivals per interval; NaN when not
	// measured or unknown.
	Burstiness float64
	// Note says why an estimate fell back (staffing without a
	// completions rate), for the logs; empty otherwise.
	Note string
	// Floor is Params.Floor times the largest demand of the history in
	// the last Params.FloorWindow (0 without a floor); Forecast is at
	// least Floor.
	Floor float64
	// PeakRate is the largest arrival rate (requests per second) of an
	// interval of the history in the last Params.FloorWindow, and
	// RateFloor Params.RateFloor times it; both 0 without a rate floor or
	// when no interval's arrivals are known. Forecast is at least
	// RateFloor.
	PeakRate, RateFloor float64
}

// ShortError is the error of a history too short to forecast from.
type ShortError struct {
	Samples, NeedSamples int
	Span, NeedSpan       time.Duration
	Window               time.Duration
}

func (e *ShortError) Error() string {
	return fmt.Sprintf("the forecast's history has %d samples spanning %s in the last %s; it needs at least %d spanning at least %s (half the shorter of the horizon and the window); the history is the adapter's own, kept from the questions asked about this workload, and starts empty when the adapter starts",
		e.Samples, e.Span.Round(time.Second), e.Window, e.NeedSamples, e.NeedSpan.Round(time.Second))
}

// NeedSpan is the shortest span of history a forecast needs: half of the
// shorter of horizon and window.
func NeedSpan(horizon, window time.Duration) time.Duration {
	return min(horizon, window) / 2
}

// Estimate forecasts from series (in time order, the last sample the
// current one) as of now. It fails with a *ShortError when the samples in
// the window are fewer than MinSamples or span less than NeedSpan, and with
// an error when the result is not a finite number.
func Estimate(series []Sample, now time.Time, p Params) (Result, error) {
	in := inWindow(series, now, p.Window)
	r := Result{Samples: len(in), Dispersion: 1, Method: p.Method, Burstiness: math.NaN()}
	if len(in) > 0 {
		r.Span = in[len(in)-1].At.Sub(in[0].At)
	}
	need := NeedSpan(p.Horizon, p.Window)
	if len(in) < MinSamples || r.Span < need {
		return r, &ShortError{Samples: len(in), NeedSamples: MinSamples, Span: r.Span, NeedSpan: need, Window: p.Window}
	}
	if p.Method == Auto {
		r.Method, r.Burstiness = choose(inWindow(series, now, max(p.Window, p.BurstWindow)), p.Bursty)
	}
	switch r.Method {
	case Envelope:
		r.Forecast = envelope(series, in, now, p.Horizon)
	case Holt:
		r.Forecast = holt(in, now, p)
	case Staffing:
		r.Forecast, r.Dispersion, r.Note = staffing(in, p.Z)
	default:
		return r, fmt.Errorf("unknown forecast method %q", p.Method)
	}
	if math.IsNaN(r.Forecast) || math.IsInf(r.Forecast, 0) {
		return r, fmt.Errorf("the %s forecast (%g) is not a finite number", r.Method, r.Forecast)
	}
	if p.Floor > 0 {
		r.Floor = p.Floor * peak(series, now, p.FloorWindow)
		r.Forecast = max(r.Forecast, r.Floor)
	}
	if p.RateFloor > 0 {
		r.PeakRate = peakRate(inWindow(series, now, p.FloorWindow))
		r.RateFloor = r.PeakRate * p.RateFloor.Seconds()
		r.Forecast = max(r.Forecast, r.RateFloor)
	}
	return r, nil
}

// peakRate is the largest arrival rate of an interval between two samples
// of in, the interval's arrivals over its length; an interval whose
// arrivals are unknown is left out, and 0 is returned when none is known.
func peakRate(in []Sample) float64 {
	var peak float64
	for i := 1; i < len(in); i++ {
		if a, dt, ok := intervalArrivals(in[i-1], in[i]); ok && dt > 0 {
			peak = max(peak, a/dt)
		}
	}
	return peak
}

// intervalArrivals is the requests that arrived between samples prev and
// cur, the completions (cur's rate × the interval) plus the change in
// demand, never below 0, and the interval in seconds; ok is false when
// cur's completions rate is unknown (a pod that just turned Ready has none
// yet).
func intervalArrivals(prev, cur Sample) (a, dt float64, ok bool) {
	dt = cur.At.Sub(prev.At).Seconds()
	if math.IsNaN(cur.Completions) {
		return 0, dt, false
	}
	return max(0, cur.Completions*dt+cur.Demand-prev.Demand), dt, true
}

// peak is the largest demand of series in the last window before now (0
// when none is in it).
func peak(series []Sample, now time.Time, window time.Duration) float64 {
	var d float64
	for _, s := range inWindow(series, now, window) {
		d = max(d, s.Demand)
	}
	return d
}

// inWindow returns the samples of series no older than window before now
// and not after now.
func inWindow(series []Sample, now time.Time, window time.Duration) []Sample {
	from := now.Add(-window)
	i := 0
	for i < len(series) && series[i].At.Before(from) {
		i++
	}
	j := len(series)
	for j > i && series[j-1].At.After(now) {
		j--
	}
	return series[i:j]
}

// envelope is the largest demand of series in the last horizon, which may
// reach past the window (the latest sample in the window always counts).
func envelope(series, in []Sample, now time.Time, horizon time.Duration) float64 {
	f := in[len(in)-1].Demand
	for _, s := range inWindow(series, now, horizon) {
		f = max(f, s.Demand)
	}
	return f
}

// holt fits Holt's linear method with a per-second trend, so that samples
// irregularly spaced weigh the trend by their spacing, and projects it from
// the last sample to now plus the horizon; never below 0.
func holt(in []Sample, now time.Time, p Params) float64 {
	level, trend := in[0].Demand, 0.0
	for i := 1; i < len(in); i++ {
		dt := in[i].At.Sub(in[i-1].At).Seconds()
		if dt <= 0 {
			continue
		}
		prev := level
		level = p.Alpha*in[i].Demand + (1-p.Alpha)*(level+trend*dt)
		trend = p.Beta*(level-prev)/dt + (1-p.Beta)*trend
	}
	ahead := now.Sub(in[len(in)-1].At) + p.Horizon
	return max(0, level+trend*ahead.Seconds())
}

// staffing is the current demand D (the number in system: by Little's law
// the arrival rate times the time in system) plus the headroom z·√(I·D).
// I is the index of dispersion of the arrivals per sample interval over the
// window: arrivals in an interval are the completions (rate × interval)
// plus the change in demand; for intervals of unequal length it is
// Pearson's statistic over n−1, Σ(a−λΔt)²/(λΔt)/(n−1) with λ = Σa/ΣΔt,
// which is the variance over the mean when the intervals are equal. I is at
// least 1 (Poisson). An interval whose completions rate is unknown (a pod
// just turned Ready, without a rate yet: every scale-up makes one) is left
// out; I is 1, with a note, when fewer than two intervals are known or no
// arrival was seen.
func staffing(in []Sample, z float64) (float64, float64, string) {
	d := in[len(in)-1].Demand
	disp, _, note := dispersion(in)
	disp = max(1, disp)
	return d + z*math.Sqrt(disp*d), disp, note
}

// choose is auto's pick over the samples in: staffing when the arrivals'
// burstiness B = (I − 1) ÷ the mean arrivals per interval is at least
// bursty, holt when it is less. For a Poisson process whose rate varies
// (a Cox process) B is the squared coefficient of variation of the rate per
// interval, which a rate scale does not change (I alone grows with the
// rate). With the dispersion unknown (too few intervals with a known
// completions rate, or no arrivals) B is NaN and staffing, whose I is then
// 1, is chosen.
func choose(in []Sample, bursty float64) (Method, float64) {
	disp, mean, note := dispersion(in)
	if note != "" || mean <= 0 {
		return Staffing, math.NaN()
	}
	b := (disp - 1) / mean
	if b >= bursty {
		return Staffing, b
	}
	return Holt, b
}

// dispersion is the index of dispersion of the arrivals in the intervals
// of in (not clamped to 1), the mean arrivals per interval, and a note when
// it is unknown (then it is 1 and the mean 0).
func dispersion(in []Sample) (float64, float64, string) {
	arrivals := make([]float64, 0, len(in))
	spans := make([]float64, 0, len(in))
	var total, seconds float64
	unknown := 0
	for i := 1; i < len(in); i++ {
		a, dt, ok := intervalArrivals(in[i-1], in[i])
		if !ok {
			// A pod that just turned Ready has no rate yet: this interval's
			// arrivals are unknown, the others still measure the burstiness.
			unknown++
			continue
		}
		arrivals = append(arrivals, a)
		spans = append(spans, dt)
		total += a
		seconds += dt
	}
	n := len(arrivals)
	if n < 2 {
		if unknown > 0 {
			return 1, 0, fmt.Sprintf("the completions rate is unknown in %d of %d intervals (a Ready pod had no inference_requests_per_second yet), too few known to measure, so the dispersion is taken as 1 (Poisson)", unknown, len(in)-1)
		}
		return 1, 0, "fewer than two intervals in the window, so the dispersion is taken as 1 (Poisson)"
	}
	if total <= 0 || seconds <= 0 {
		return 1, 0, "no arrivals in the window, so the dispersion is taken as 1 (Poisson)"
	}
	rate := total / seconds
	var chi float64
	for i, a := range arrivals {
		want := rate * spans[i]
		if want <= 0 {
			continue
		}
		chi += (a - want) * (a - want) / want
	}
	disp := chi / float64(n-1)
	if math.IsNaN(disp) || math.IsInf(disp, 0) {
		return 1, 0, "the dispersion is not a finite number, so it is taken as 1 (Poisson)"
	}
	return disp, total / float64(n), ""
}

// AutoHorizon clamps the longest start-up time of a workload's Ready pods
// to [floor, MaxAutoHorizon]; floor is one scrape interval.
func AutoHorizon(longestStartup, floor time.Duration) time.Duration {
	return min(max(longestStartup, floor), max(floor, MaxAutoHorizon))
}
