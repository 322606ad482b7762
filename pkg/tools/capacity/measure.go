// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package capacity

import (
	"fmt"
	"slices"
	"time"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/loadgen"
)

// keepUpRatio is the share of the requests sent in a step's window that must
// also complete in it for the step to count as sustained: below it the server
// is falling behind the offered load, whatever the latencies say.
const keepUpRatio = 0.9

// Percentiles of one latency in milliseconds of the target's time, over N values.
type Percentiles struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50Ms"`
	P90 float64 `json:"p90Ms"`
	P99 float64 `json:"p99Ms"`
}

// Signals is what the server's own /metrics said during a step's window: the
// mean and max of the sampled gauges and the counter's increase. A nil field
// was not measured (no page, or the page lacks the series): missing is not
// zero.
type Signals struct {
	Samples     int      `json:"samples"`
	Failures    int      `json:"failures"`
	Queue       *float64 `json:"queueMean"`
	QueueMax    *float64 `json:"queueMax"`
	Batch       *float64 `json:"batchMean"`
	BatchMax    *float64 `json:"batchMax"`
	KV          *float64 `json:"kvCacheUsageMean"`
	KVMax       *float64 `json:"kvCacheUsageMax"`
	Preemptions *float64 `json:"preemptions"`
}

// Check is one SLO evaluated on one step.
type Check struct {
	SLO string `json:"slo"`
	// Value is the measured percentile in ms, or the error rate or the
	// attainment as a fraction.
	Value float64 `json:"value"`
	Met   bool    `json:"met"`
	// Note says why the check could not be made (no successful requests).
	Note string `json:"note,omitempty"`
}

// Step is what one step of the plan delivered. Rates are per second of the
// target's time, counted over the measurement window (warm-up excluded).
type Step struct {
	Index int `json:"index"`
	// Offered is the Poisson arrival rate, requests/s.
	Offered float64 `json:"offeredRate"`
	// Warmup and Window are the excluded start and the measured part.
	Warmup time.Duration `json:"warmupNanoseconds"`
	Window time.Duration `json:"windowNanoseconds"`
	// Sent counts requests sent in the window; Failed those of them that
	// failed; Dropped arrivals the in-flight cap refused over the whole step.
	Sent    int `json:"sent"`
	Failed  int `json:"failed"`
	Dropped int `json:"dropped"`
	// Completed counts successful requests that finished in the window.
	Completed int `json:"completed"`
	// Throughput is Completed per second; OutputTokens the tokens of those requests per second.
	Throughput   float64 `json:"throughput"`
	OutputTokens float64 `json:"outputTokensPerSecond"`
	// ErrorRate is (Failed + Dropped) / (Sent + Dropped).
	ErrorRate float64     `json:"errorRate"`
	TTFT      Percentiles `json:"ttft"`
	ITL       Percentiles `json:"itl"`
	// TPOT is over requests: each one's time per output token, its mean gap
	// after the first token (requests of two tokens or more).
	TPOT Percentiles `json:"tpot"`
	E2E  Percentiles `json:"e2e"`
	// Attainment is the share of the requests sent in the window (and the
	// arrivals dropped) that succeeded and met every latency SLO on their
	// own; nil when none was sent, and in runs recorded before it existed.
	Attainment *float64 `json:"attainment,omitempty"`
	// Good counts requests finished in the window that met every latency SLO
	// on their own; Goodput is Good per second.
	Good    int     `json:"good"`
	Goodput float64 `json:"goodput"`
	Server  Signals `json:"server"`
	Checks  []Check `json:"checks"`
	// KeepsUp is Completed ≥ 90% of Sent: the server is not falling behind.
	KeepsUp bool `json:"keepsUp"`
	// Pass is KeepsUp and every check met.
	Pass bool `json:"pass"`
	// Stable: enough successful requests, and the two halves of the window
	// give the same verdict as the whole.
	Stable     bool   `json:"stable"`
	StableNote string `json:"stableNote,omitempty"`
	// CostPer1kGood and CostPer1kCompleted are in the price's currency; nil
	// without a price or when nothing qualified.
	CostPer1kGood      *float64 `json:"costPer1kGood,omitempty"`
	CostPer1kCompleted *float64 `json:"costPer1kCompleted,omitempty"`
	// Interrupted steps (Ctrl-C) are reported but not used for the capacity.
	Interrupted bool `json:"interrupted,omitempty"`
}

// StepInput is the raw record of one step: the load generator's results
// (Sent offsets from the step's start, in the target's time) and the
// server's signals.
type StepInput struct {
	Index       int
	Offered     float64
	Warmup      time.Duration
	Window      time.Duration
	Results     []loadgen.Result
	Dropped     int
	Server      Signals
	Interrupted bool
}

// Measure computes a Step from its raw record, judged against slos.
// minRequests is the number of successful requests in the window below which
// the percentiles are not considered stable.
func Measure(in StepInput, slos []SLO, minRequests int) Step {
	st := Step{Index: in.Index, Offered: in.Offered, Warmup: in.Warmup, Window: in.Window,
		Dropped: in.Dropped, Server: in.Server, Interrupted: in.Interrupted}
	end := in.Warmup + in.Window
	var sent []loadgen.Result
	var tokens int
	for _, r := range in.Results {
		if r.Sent >= in.Warmup && r.Sent < end {
			sent = append(sent, r)
		}
		if done := r.Sent + r.E2E; r.Err == nil && done >= in.Warmup && done < end {
			st.Completed++
			tokens += r.Tokens
			if meetsLatencySLOs(r, slos) {
				st.Good++
			}
		}
	}
	secs := in.Window.Seconds()
	if secs > 0 {
		st.Throughput = float64(st.Completed) / secs
		st.OutputTokens = float64(tokens) / secs
		st.Goodput = float64(st.Good) / secs
	}
	whole := judge(sent, in.Dropped, slos)
	st.Sent, st.Failed, st.ErrorRate = whole.sent, whole.failed, whole.errorRate
	st.TTFT, st.ITL, st.TPOT, st.E2E, st.Checks = whole.ttft, whole.itl, whole.tpot, whole.e2e, whole.checks
	if whole.sent+in.Dropped > 0 {
		st.Attainment = new(whole.attainment)
	}
	st.KeepsUp = st.Sent > 0 && float64(st.Completed) >= keepUpRatio*float64(st.Sent)
	st.Pass = st.KeepsUp && whole.met && !st.Interrupted

	// Stability: the verdict of each half of the window (by send time)
	// must agree with the whole, and the window must hold enough requests.
	half := in.Warmup + in.Window/2
	var first, second []loadgen.Result
	for _, r := range sent {
		if r.Sent < half {
			first = append(first, r)
		} else {
			second = append(second, r)
		}
	}
	a, b := judge(first, in.Dropped/2, slos), judge(second, in.Dropped-in.Dropped/2, slos)
	switch {
	case whole.ok < minRequests:
		st.StableNote = fmt.Sprintf("%d successful requests in the window, fewer than %d: lengthen the window", whole.ok, minRequests)
	case a.met != whole.met || b.met != whole.met:
		st.StableNote = fmt.Sprintf("the window's halves disagree (first half %s, second half %s): the SLO is at its edge here, or the window is too short", verdict(a.met), verdict(b.met))
	default:
		st.Stable = true
	}
	return st
}

func verdict(met bool) string {
	if met {
		return "meets the SLOs"
	}
	return "misses them"
}

// judgement is a set of requests judged against the SLOs.
type judgement struct {
	sent, failed, ok, good int
	errorRate, attainment  float64
	ttft, itl, tpot, e2e   Percentiles
	checks                 []Check
	met                    bool
}

func judge(sent []loadgen.Result, dropped int, slos []SLO) judgement {
	j := judgement{sent: len(sent), met: true}
	var ttft, itl, tpot, e2e []time.Duration
	for _, r := range sent {
		if r.Err != nil {
			j.failed++
			continue
		}
		j.ok++
		ttft = append(ttft, r.TTFT)
		e2e = append(e2e, r.E2E)
		itl = append(itl, r.ITL...)
		if t, ok := requestTPOT(r); ok {
			tpot = append(tpot, t)
		}
		if meetsLatencySLOs(r, slos) {
			j.good++
		}
	}
	if n := j.sent + dropped; n > 0 {
		j.errorRate = float64(j.failed+dropped) / float64(n)
		j.attainment = float64(j.good) / float64(n)
	}
	slices.Sort(ttft)
	slices.Sort(itl)
	slices.Sort(tpot)
	slices.Sort(e2e)
	j.ttft, j.itl, j.tpot, j.e2e = percentiles(ttft), percentiles(itl), percentiles(tpot), percentiles(e2e)
	for _, s := range slos {
		c := Check{SLO: s.String()}
		switch s.Kind {
		case KindErrors:
			c.Value, c.Met = j.errorRate, j.errorRate <= s.MaxErrorRate
			if j.sent+dropped == 0 {
				c.Met, c.Note = false, "no requests sent"
			}
		case KindGood:
			c.Value, c.Met = j.attainment, j.attainment >= s.MinAttainment
			if j.sent+dropped == 0 {
				c.Met, c.Note = false, "no requests sent"
			}
		default:
			ds := map[string][]time.Duration{KindTTFT: ttft, KindITL: itl, KindTPOT: tpot, KindE2E: e2e}[s.Kind]
			if len(ds) == 0 {
				c.Note = "no successful requests"
				break
			}
			v := quantile(ds, s.Quantile)
			c.Value, c.Met = ms(v), v <= s.Max
		}
		j.met = j.met && c.Met
		j.checks = append(j.checks, c)
	}
	return j
}

// meetsLatencySLOs reports whether one request met every latency SLO on its
// own: its TTFT, time per output token and end-to-end latency within the
// bounds, and the SLO's percentile of its own inter-token gaps within the
// ITL bound.
func meetsLatencySLOs(r loadgen.Result, slos []SLO) bool {
	for _, s := range slos {
		switch s.Kind {
		case KindTTFT:
			if r.TTFT > s.Max {
				return false
			}
		case KindE2E:
			if r.E2E > s.Max {
				return false
			}
		case KindITL:
			if len(r.ITL) > 0 && loadgen.Percentile(r.ITL, s.Quantile) > s.Max {
				return false
			}
		case KindTPOT:
			if t, ok := requestTPOT(r); ok && t > s.Max {
				return false
			}
		}
	}
	return true
}

// requestTPOT is a request's time per output token: its mean gap after the
// first token, (e2e - ttft) / (tokens - 1); false below two tokens.
func requestTPOT(r loadgen.Result) (time.Duration, bool) {
	if r.Tokens < 2 {
		return 0, false
	}
	return (r.E2E - r.TTFT) / time.Duration(r.Tokens-1), true
}

// quantile is the nearest-rank q-quantile of sorted ds, as loadgen computes it.
func quantile(sorted []time.Duration, q float64) time.Duration {
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func percentiles(sorted []time.Duration) Percentiles {
	if len(sorted) == 0 {
		return Percentiles{}
	}
	return Percentiles{N: len(sorted), P50: ms(quantile(sorted, 0.5)), P90: ms(quantile(sorted, 0.9)), P99: ms(quantile(sorted, 0.99))}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
