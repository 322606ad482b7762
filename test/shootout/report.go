// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"math"
	"sort"
	"strings"
	"time"
)

// Record is what one replayed request saw, in simulated time (the
// compression already undone).
type Record struct {
	// Sent is when the request was sent, since the replay started.
	Sent         time.Duration `json:"sent"`
	PromptTokens int           `json:"promptTokens"`
	OutputTokens int           `json:"outputTokens"`
	// Tokens is how many output tokens arrived.
	Tokens int           `json:"tokens"`
	TTFT   time.Duration `json:"ttft"`
	E2E    time.Duration `json:"e2e"`
	// Err is set when the request failed (refused, cut off, no [DONE]).
	Err string `json:"err,omitempty"`
	// Source is the index of the trace file the request came from, in a
	// trace of several files (report.Sources); 0 otherwise.
	Source int `json:"source,omitempty"`
}

// errDropped is the error of an arrival the replay did not send because
// --max-in-flight requests were open; reports before that flag have
// "dropped: too many requests in flight".
const errDropped = "dropped: --max-in-flight requests were open"

// Dropped reports whether the replay did not send the request because
// too many were open.
func (r Record) Dropped() bool { return strings.HasPrefix(r.Err, "dropped: ") }

// Failed reports whether the request did not complete.
func (r Record) Failed() bool { return r.Err != "" || r.Tokens < r.OutputTokens }

// TPOT is the mean time per output token after the first, and false when
// the request produced fewer than two tokens (TTFT is then all there is).
func (r Record) TPOT() (time.Duration, bool) {
	if r.Tokens < 2 {
		return 0, false
	}
	return (r.E2E - r.TTFT) / time.Duration(r.Tokens-1), true
}

// SLO is the latency objective one request must meet to count as good.
type SLO struct {
	TTFT time.Duration `json:"ttft"`
	TPOT time.Duration `json:"tpot"`
}

// Good reports whether r completed with TTFT and mean TPOT within s.
func (s SLO) Good(r Record) bool {
	if r.Failed() || r.TTFT > s.TTFT {
		return false
	}
	tpot, ok := r.TPOT()
	return !ok || tpot <= s.TPOT
}

// Sample is the fleet at one instant of the replay, in simulated time.
type Sample struct {
	T time.Duration `json:"t"`
	// Replicas is the pods that exist (each holds its GPU from creation,
	// loading or not); Ready those that serve; Desired the Deployment's
	// spec.replicas (what the HPA asked for).
	Replicas int `json:"replicas"`
	Ready    int `json:"ready"`
	Desired  int `json:"desired"`
	// Metric is the HPA's current value of its first metric, when it has
	// one (absent before the HPA first reads it, and for the fixed fleet).
	Metric *float64 `json:"metric,omitempty"`
	// HPA is what the HPA's status said it read for each of its metrics
	// (currentMetrics), at the sample.
	HPA []HPARead `json:"hpa,omitempty"`
	// Pods is each pod's own signals, as the adapter serves them, sampled
	// once per HPA sync period (absent from the samples in between).
	Pods []PodSample `json:"pods,omitempty"`
	// RecommendedMax is the largest of the HPA metrics' Recommended: the
	// replicas the HPA would set with no scale-down window (nor tolerance
	// or rate policies); absent unless every metric was read.
	RecommendedMax *int `json:"recommendedMax,omitempty"`
	// Demand is the workload's requests waiting plus running: the sum of
	// queue + batch over Pods (sampledDemand), so only on the samples with
	// pods, and absent when a Ready pod lacks either value.
	Demand *float64 `json:"demand,omitempty"`
	// Dispersion is the index of dispersion the staffing forecast's read
	// implies against Demand, ((F − D)/(z·√D))² with F the forecast per
	// replica times the non-terminating pods (impliedDispersion); only for
	// an HPA on the staffing forecast, on samples with a Demand above 0.
	// The forecast is the HPA's last read, up to a sync period older than
	// the demand: one sample's value is noisy, their median is the figure.
	Dispersion *float64 `json:"dispersion,omitempty"`
	// Forecasts is how many forecasts the adapter made since the previous
	// sample with pods, by "METHOD/ESTIMATOR" (its counter
	// inference_metrics_adapter_forecasts_total; for method auto the
	// estimator is the one it chose), the series that grew only: so only
	// on samples with pods after the first, in HPA runs not side by side
	// (the counter is over every workload). Absent when none was made or
	// the counter was not read.
	Forecasts map[string]int `json:"forecasts,omitempty"`
}

// HPARead is one metric's value as the HPA's status reports it.
type HPARead struct {
	// Metric is "KIND/NAME": pods/, object/ or external/ and the metric.
	Metric string `json:"metric"`
	// Value is the current value (AverageValue for a Pods metric, Value or
	// AverageValue as the target's type for Object and External); absent
	// while the HPA cannot read it. Rates are per simulated second.
	Value *float64 `json:"value,omitempty"`
	// Recommended is the replica count this metric alone asks for at
	// Value, by the HPA's rule without tolerance and stabilization
	// (recommend), clamped to the HPA's minReplicas and maxReplicas;
	// absent with Value.
	Recommended *int `json:"recommended,omitempty"`
}

// PodSample is one pod's signals at one instant; a signal the adapter
// could not answer for the pod is absent.
type PodSample struct {
	Name  string `json:"name"`
	Ready bool   `json:"ready"`
	// Terminating is true for a pod being deleted (it still holds its
	// GPU; the adapter no longer counts its demand).
	Terminating bool     `json:"terminating,omitempty"`
	Queue       *float64 `json:"queue,omitempty"`
	Batch       *float64 `json:"batch,omitempty"`
	KV          *float64 `json:"kv,omitempty"`
	GPU         *float64 `json:"gpu,omitempty"`
}

// Percentiles are p50, p90 and p99 of a set of durations, in seconds.
type Percentiles struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	N   int     `json:"n"`
}

// percentiles uses the nearest-rank method; none of an empty set.
func percentiles(ds []time.Duration) Percentiles {
	if len(ds) == 0 {
		return Percentiles{}
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	at := func(q float64) float64 {
		i := int(math.Ceil(q*float64(len(s)))) - 1
		return s[max(i, 0)].Seconds()
	}
	return Percentiles{P50: at(0.50), P90: at(0.90), P99: at(0.99), N: len(s)}
}

// Summary is one policy's result on one trace.
type Summary struct {
	Policy string `json:"policy"`
	Trace  string `json:"trace"`
	// Span is the simulated length of the replay: from its start to the
	// last sample.
	Span     time.Duration `json:"span"`
	Requests int           `json:"requests"`
	Failed   int           `json:"failed"`
	// Refused counts the failed requests that got no token at all: an
	// error status or a broken connection before the stream started (a
	// request sent to a pod that a scale-down is stopping, or with no Ready
	// pod); the others were cut during their stream.
	Refused int `json:"refused"`
	// Dropped counts the refused requests the replay did not send because
	// --max-in-flight requests were open.
	Dropped int `json:"dropped,omitempty"`
	Good    int `json:"good"`
	// Attainment is Good / Requests.
	Attainment float64 `json:"attainment"`
	// Goodput is good requests per simulated second of the span.
	Goodput float64     `json:"goodput"`
	TTFT    Percentiles `json:"ttft"`
	TPOT    Percentiles `json:"tpot"`
	// ReplicaHours is the integral of Replicas over the span, in hours:
	// GPU-hours with one GPU per replica.
	ReplicaHours float64 `json:"replicaHours"`
	// GoodPerGPUHour is Good / ReplicaHours.
	GoodPerGPUHour float64 `json:"goodPerGPUHour"`
	// MeanReplicas and MeanReady are the time averages of Replicas (pods
	// holding a GPU) and Ready (pods serving) over the span.
	MeanReplicas float64 `json:"meanReplicas"`
	MeanReady    float64 `json:"meanReady"`
	// ScaleEvents counts changes of the desired replicas.
	ScaleEvents int `json:"scaleEvents"`
	MaxReplicas int `json:"maxReplicas"`
	// Bursts is how many bursts the trace has in the span; BurstToReady
	// the time from each burst's start to the first new Ready replica
	// after it (median and max over the bursts that got one);
	// BurstsUnanswered those that got none within burstHorizon.
	Bursts           int     `json:"bursts"`
	BurstToReadyP50  float64 `json:"burstToReadyP50,omitempty"`
	BurstToReadyMax  float64 `json:"burstToReadyMax,omitempty"`
	BurstsUnanswered int     `json:"burstsUnanswered"`
	// MetricRead says whether the HPA ever reported its metric's value
	// (with several metrics: at least one); MetricsRead names the metrics
	// it reported a value of.
	MetricRead  bool     `json:"metricRead"`
	MetricsRead []string `json:"metricsRead,omitempty"`
	// TTFTAttainment and TPOTAttainment are the whole trace's shares of
	// requests that completed with each bound met on its own (Attainment
	// needs both).
	TTFTAttainment float64 `json:"ttftAttainment"`
	TPOTAttainment float64 `json:"tpotAttainment"`
	// Warmup is the stretch at the start of the replay left out of the
	// headline figures; AfterWarmup is the headline: attainment, goodput
	// and GPU-hours of the requests sent after it and of the fleet over the
	// same stretch. The whole-trace figures above stay beside it.
	Warmup      time.Duration `json:"warmup"`
	AfterWarmup Phase         `json:"afterWarmup"`
	// BurstScores is the attainment of the requests of each burst's minutes.
	BurstScores []BurstScore `json:"burstScores,omitempty"`
	// HeldByWindow is the share of the samples after the warm-up (of those
	// with a RecommendedMax) whose desired replicas exceed every metric's
	// recommendation: the scale-down window (or the tolerance, or a
	// scale-down rate policy) holds replicas the metrics no longer ask
	// for. HeldReplicaHours is the integral of Desired − RecommendedMax
	// where positive over the same stretch, in replica-hours (GPU-hours).
	// Both absent without recommendations (a fixed fleet, an older report).
	HeldByWindow     *float64 `json:"heldByWindow,omitempty"`
	HeldReplicaHours float64  `json:"heldReplicaHours,omitempty"`
	// BySource is AfterWarmup's request figures of each file of a merged
	// trace (report.Sources, in order): its users' attainment apart. The
	// fleet is shared, so these phases have no GPU-hours. Absent for a
	// trace of one file.
	BySource []Phase `json:"bySource,omitempty"`
	// Forecasts is Sample.Forecasts summed over the samples after the
	// warm-up: the forecasts the adapter made for this run, by
	// "METHOD/ESTIMATOR" (e.g. auto/holt, auto/staffing: how often auto
	// chose each). Absent when none was counted.
	Forecasts map[string]int `json:"forecasts,omitempty"`
}

// scoring is how runs are scored: the SLO, the warm-up left out of the
// headline figures, the trace's bursts, and how many files the trace
// merges (0 or 1: one file).
type scoring struct {
	SLO     SLO
	Warmup  time.Duration
	Bursts  []burstSpan
	Sources int
}

// summarize computes a Summary from per-request records and fleet samples
// (sorted by time), scored as sc says.
func summarize(policy, trace string, sc scoring, recs []Record, samples []Sample) Summary {
	slo := sc.SLO
	s := Summary{Policy: policy, Trace: trace, Requests: len(recs), Warmup: sc.Warmup}
	var ttft, tpot []time.Duration
	for _, r := range recs {
		if r.Failed() {
			s.Failed++
			if r.Tokens == 0 {
				s.Refused++
			}
			if r.Dropped() {
				s.Dropped++
			}
			continue
		}
		ttft = append(ttft, r.TTFT)
		if d, ok := r.TPOT(); ok {
			tpot = append(tpot, d)
		}
		if slo.Good(r) {
			s.Good++
		}
	}
	s.TTFT, s.TPOT = percentiles(ttft), percentiles(tpot)
	if s.Requests > 0 {
		s.Attainment = float64(s.Good) / float64(s.Requests)
	}
	if len(samples) > 0 {
		s.Span = samples[len(samples)-1].T
	}
	if s.Span > 0 {
		s.Goodput = float64(s.Good) / s.Span.Seconds()
	}
	s.ReplicaHours = integrate(samples, func(x Sample) int { return x.Replicas })
	if s.ReplicaHours > 0 {
		s.GoodPerGPUHour = float64(s.Good) / s.ReplicaHours
	}
	if h := s.Span.Hours(); h > 0 {
		s.MeanReplicas = s.ReplicaHours / h
		s.MeanReady = integrate(samples, func(x Sample) int { return x.Ready }) / h
	}
	read := map[string]bool{}
	for i, x := range samples {
		s.MaxReplicas = max(s.MaxReplicas, x.Replicas)
		if i > 0 && x.Desired != samples[i-1].Desired {
			s.ScaleEvents++
		}
		for _, m := range x.HPA {
			if m.Value != nil && !read[m.Metric] {
				read[m.Metric] = true
				s.MetricsRead = append(s.MetricsRead, m.Metric)
			}
		}
		s.MetricRead = s.MetricRead || x.Metric != nil || len(read) > 0
	}
	// Requests sent after the last sample still count; the fleet's figures
	// end at the last sample.
	whole := scorePhase(slo, recs, nil, math.MinInt64, math.MaxInt64)
	s.TTFTAttainment, s.TPOTAttainment = whole.TTFTAttainment, whole.TPOTAttainment
	s.AfterWarmup = scorePhase(slo, recs, samples, sc.Warmup, math.MaxInt64)
	s.BurstScores = scoreBursts(slo, recs, samples, sc.Bursts, sc.Warmup, s.Span)
	s.HeldByWindow, s.HeldReplicaHours = heldByWindow(samples, sc.Warmup)
	s.BySource = scoreBySource(slo, recs, sc.Sources, sc.Warmup)
	s.Forecasts = forecastsAfter(samples, sc.Warmup)
	var reactions []time.Duration
	for _, bs := range sc.Bursts {
		b := bs.Start
		if b > s.Span {
			continue
		}
		s.Bursts++
		if d, ok := timeToNewReady(samples, b); ok {
			reactions = append(reactions, d)
		} else {
			s.BurstsUnanswered++
		}
	}
	if len(reactions) > 0 {
		p := percentiles(reactions)
		s.BurstToReadyP50 = p.P50
		sort.Slice(reactions, func(i, j int) bool { return reactions[i] < reactions[j] })
		s.BurstToReadyMax = reactions[len(reactions)-1].Seconds()
	}
	return s
}

// integrate integrates a count of the samples over time, in count-hours, as
// a step function: each sample's count holds until the next sample.
func integrate(samples []Sample, count func(Sample) int) float64 {
	var total float64
	for i := 1; i < len(samples); i++ {
		total += float64(count(samples[i-1])) * (samples[i].T - samples[i-1].T).Hours()
	}
	return total
}

// burstHorizon is how long after a burst's start a new Ready replica still
// counts as the answer to it.
const burstHorizon = 10 * time.Minute

// timeToNewReady is the time from at to the first sample after it whose
// Ready count exceeds the count at at.
func timeToNewReady(samples []Sample, at time.Duration) (time.Duration, bool) {
	base := -1
	for _, x := range samples {
		if x.T <= at {
			base = x.Ready
			continue
		}
		if base < 0 {
			base = x.Ready
			continue
		}
		if x.T-at > burstHorizon {
			return 0, false
		}
		if x.Ready > base {
			return x.T - at, true
		}
	}
	return 0, false
}

// Burst detection on the trace: arrivals are counted per burstBin; a bin
// starts a burst when its count is at least burstFactor times the mean of
// the burstLookback bins before it and above the trace's mean per bin.
const (
	burstBin      = time.Minute
	burstLookback = 5
	burstFactor   = 2.0
)

// findBursts returns the start of every burst in the arrival times (sorted).
func findBursts(arrivals []time.Duration) []time.Duration {
	var out []time.Duration
	for _, b := range findBurstSpans(arrivals) {
		out = append(out, b.Start)
	}
	return out
}
