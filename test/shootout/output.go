// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/loadgen"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/svgchart"
)

// report is everything written for one trace.
type report struct {
	Trace string `json:"trace"`
	// Sources are the names of the files of a trace of several (A+B),
	// merged by their timestamps, in the order given: a Record's Source
	// indexes them. Absent for a trace of one file.
	Sources  []string `json:"sources,omitempty"`
	Profile  string   `json:"profile"`
	Requests int      `json:"requests"`
	Clipped  int      `json:"clippedPrompts"`
	Bursts   int      `json:"bursts"`
	// BurstSpans are the bursts' minutes; Warmup the stretch left out of
	// the headline figures.
	BurstSpans  []burstSpan   `json:"burstSpans,omitempty"`
	Warmup      time.Duration `json:"warmup"`
	RateScale   float64       `json:"rateScale"`
	Picker      string        `json:"picker"`
	MinReplicas int           `json:"minReplicas"`
	MaxReplicas int           `json:"maxReplicas"`
	SLO         SLO           `json:"slo"`
	Timing      timing        `json:"timing"`
	// Repeats is the runs of each policy, Seed the seed of their order and
	// Order the order they ran in (NAME#REPEAT).
	Repeats int      `json:"repeats,omitempty"`
	Seed    uint64   `json:"seed,omitempty"`
	Order   []string `json:"order,omitempty"`
	// Policies are the trace's policies, the probe-derived targets set.
	Policies []policy    `json:"policies,omitempty"`
	Runs     []runResult `json:"runs"`
	// Points are each policy's figures over its repeats.
	Points []Point `json:"points,omitempty"`
	// Capacity is the capacity probe's measurement and recommendation,
	// when the capacity policy ran.
	Capacity *probeResult `json:"capacity,omitempty"`
}

// scoring is how the report's runs are scored.
func (r *report) scoring() scoring {
	return scoring{SLO: r.SLO, Warmup: r.Warmup, Bursts: r.BurstSpans, Sources: len(r.Sources)}
}

// write writes <trace>.json (everything but the per-request records),
// <trace>-summary.json (the same without the fleet samples: small enough to
// commit, and what --render --merge reads), <trace>-frontier.svg,
// <trace>.csv (one summary row per run), <trace>-requests.csv (every
// record) and <trace>.svg (the chart).
func (r *report) write(dir string, reqs []loadgen.TraceRequest) error {
	base := filepath.Join(dir, r.Trace)
	r.Points = points(r.Runs)
	if err := writeJSON(base+".json", r); err != nil {
		return err
	}
	if err := r.writeSummaries(dir); err != nil {
		return err
	}
	if err := writeFile(base+".csv", r.writeSummaryCSV); err != nil {
		return err
	}
	if err := writeFile(base+"-requests.csv", r.writeRecordsCSV); err != nil {
		return err
	}
	return writeFile(base+".svg", func(w io.Writer) error { return r.writeSVG(w, reqs) })
}

var summaryHeader = []string{"policy", "repeat", "metric", "target", "requests", "failed", "refused", "good", "attainment", "goodput_rps",
	"ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "tpot_p50_s", "tpot_p90_s", "tpot_p99_s",
	"gpu_hours", "good_per_gpu_hour", "mean_replicas", "mean_ready", "scale_events", "max_replicas", "bursts", "burst_to_ready_p50_s", "bursts_unanswered",
	"ttft_attainment", "tpot_attainment", "warmup_s", "requests_after_warmup", "attainment_after_warmup", "ttft_attainment_after_warmup", "tpot_attainment_after_warmup",
	"goodput_after_warmup_rps", "gpu_hours_after_warmup", "good_per_gpu_hour_after_warmup", "family", "attainment_after_warmup_by_source"}

func f64(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }

func (r *report) writeSummaryCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	_ = cw.Write(summaryHeader)
	for _, run := range r.Runs {
		s, p := run.Summary, run.Policy
		a := s.AfterWarmup
		_ = cw.Write([]string{p.Name, strconv.Itoa(max(run.Repeat, 1)), p.metricText(), p.targetText(), strconv.Itoa(s.Requests), strconv.Itoa(s.Failed), strconv.Itoa(s.Refused), strconv.Itoa(s.Good),
			f64(s.Attainment), f64(s.Goodput), f64(s.TTFT.P50), f64(s.TTFT.P90), f64(s.TTFT.P99), f64(s.TPOT.P50), f64(s.TPOT.P90), f64(s.TPOT.P99),
			f64(s.ReplicaHours), f64(s.GoodPerGPUHour), f64(s.MeanReplicas), f64(s.MeanReady), strconv.Itoa(s.ScaleEvents), strconv.Itoa(s.MaxReplicas),
			strconv.Itoa(s.Bursts), f64(s.BurstToReadyP50), strconv.Itoa(s.BurstsUnanswered),
			f64(s.TTFTAttainment), f64(s.TPOTAttainment), f64(s.Warmup.Seconds()), strconv.Itoa(a.Requests), f64(a.Attainment), f64(a.TTFTAttainment), f64(a.TPOTAttainment),
			f64(a.Goodput), f64(a.GPUHours), f64(a.GoodPerGPUHour), family(p), bySourceText(s.BySource)})
	}
	cw.Flush()
	return cw.Error()
}

// bySourceText is each source file's attainment after the warm-up,
// joined by ";" in the files' order; empty for a trace of one file.
func bySourceText(ps []Phase) string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = f64(p.Attainment)
	}
	return strings.Join(out, ";")
}

func (r *report) writeRecordsCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"policy", "sent_s", "prompt_tokens", "output_tokens", "tokens", "ttft_s", "e2e_s", "tpot_s", "good", "error", "repeat", "source"})
	for _, run := range r.Runs {
		for _, rec := range run.Records {
			tpot := ""
			if d, ok := rec.TPOT(); ok {
				tpot = secondsText(d)
			}
			_ = cw.Write([]string{run.Policy.Name, secondsText(rec.Sent), strconv.Itoa(rec.PromptTokens), strconv.Itoa(rec.OutputTokens),
				strconv.Itoa(rec.Tokens), secondsText(rec.TTFT), secondsText(rec.E2E), tpot, strconv.FormatBool(r.SLO.Good(rec)), rec.Err, strconv.Itoa(max(run.Repeat, 1)),
				strconv.Itoa(rec.Source)})
		}
	}
	cw.Flush()
	return cw.Error()
}

// secondsText writes d in seconds exactly to the nanosecond, so that
// --render reads back the same times: a request sent within a rounding of
// a minute's edge stays in its burst's minute.
func secondsText(d time.Duration) string {
	sign := ""
	if d < 0 {
		sign, d = "-", -d
	}
	return fmt.Sprintf("%s%d.%09d", sign, d/time.Second, d%time.Second)
}

// markdown is the tables for docs/shootout.md: the points (mean and
// interval over the repeats, after the warm-up and over the whole trace),
// the attainment per burst and the fleet each burst met, then one row per
// run.
func (r *report) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n%s (%d requests, rate ×%g; SLO TTFT ≤ %s, TPOT ≤ %s; warm-up %s; compression ×%g; %s picker; %d repeat(s), order seed %d)\n",
		r.Trace, r.Requests, r.RateScale, r.SLO.TTFT, r.SLO.TPOT, r.Warmup, r.Timing.Compress, r.Picker, max(r.Repeats, 1), r.Seed)
	r.pointsMarkdown(&b)
	r.burstFleetMarkdown(&b)
	b.WriteString("\nEvery run (attainment and GPU-hours after the warm-up, then over the whole trace):\n\n")
	b.WriteString("| policy | repeat | attainment after warm-up | GPU-hours after warm-up | SLO attainment | TTFT / TPOT attainment | failed | goodput (req/s) | TTFT p50 / p90 / p99 (s) | TPOT p50 / p90 / p99 (ms) | GPU-hours | good req / GPU-hour | mean replicas (Ready) | scale events | max replicas | burst → new Ready p50 (s) |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, run := range r.Runs {
		s := run.Summary
		burst := "-"
		if s.Bursts > 0 && s.BurstToReadyP50 > 0 {
			burst = fmt.Sprintf("%.0f (%d of %d bursts)", s.BurstToReadyP50, s.Bursts-s.BurstsUnanswered, s.Bursts)
		} else if s.Bursts > 0 {
			burst = fmt.Sprintf("none (0 of %d bursts)", s.Bursts)
		}
		failed := fmt.Sprint(s.Failed)
		switch {
		case s.Dropped > 0:
			failed = fmt.Sprintf("%d (%d refused, %d of them dropped)", s.Failed, s.Refused, s.Dropped)
		case s.Refused > 0:
			failed = fmt.Sprintf("%d (%d refused)", s.Failed, s.Refused)
		}
		fmt.Fprintf(&b, "| %s | %d | %.1f%% | %.2f | %.1f%% | %.1f%% / %.1f%% | %s | %.2f | %.2f / %.2f / %.2f | %.0f / %.0f / %.0f | %.2f | %.0f | %.2f (%.2f) | %d | %d | %s |\n",
			run.Policy.Name, max(run.Repeat, 1), 100*s.AfterWarmup.Attainment, s.AfterWarmup.GPUHours, 100*s.Attainment, 100*s.TTFTAttainment, 100*s.TPOTAttainment,
			failed, s.Goodput, s.TTFT.P50, s.TTFT.P90, s.TTFT.P99,
			1000*s.TPOT.P50, 1000*s.TPOT.P90, 1000*s.TPOT.P99, s.ReplicaHours, s.GoodPerGPUHour, s.MeanReplicas, s.MeanReady, s.ScaleEvents, s.MaxReplicas, burst)
	}
	var held []string
	for _, run := range r.Runs {
		if h := heldText(run.Summary); h != "" {
			held = append(held, fmt.Sprintf("%s #%d %s", run.Policy.Name, max(run.Repeat, 1), h))
		}
	}
	var made []string
	for _, run := range r.Runs {
		if f := forecastsText(run.Summary.Forecasts); f != "" {
			made = append(made, fmt.Sprintf("%s #%d %s", run.Policy.Name, max(run.Repeat, 1), f))
		}
	}
	if len(made) > 0 {
		b.WriteString("\nForecasts the adapter made after the warm-up, by method/estimator (for auto, the estimator it chose): " + strings.Join(made, "; ") + ".\n")
	}
	if len(held) > 0 {
		b.WriteString("\nHeld by the scale-down window (desired above every metric's recommendation, after the warm-up): " + strings.Join(held, "; ") + ".\n")
	}
	if c := r.Capacity; c != nil && c.Recommendation != nil {
		fmt.Fprintf(&b, "\n%s: %s at %s per pod (capacity %.3g req/s per replica). %s.\n",
			policyCapacity, c.Recommendation.Metric, c.Recommendation.Quantity, c.Recommendation.Capacity, c.How)
	}
	for _, p := range r.Policies {
		if strings.HasPrefix(p.Why, "probe-derived") {
			fmt.Fprintf(&b, "\n%s: %s at %s, %s.\n", p.Name, p.metricText(), p.targetText(), p.Why)
		}
	}
	return b.String()
}

// burstFleetMarkdown is the table of the fleet each burst met, per policy:
// the Ready replicas at the burst's start (mean of the runs) and, in the
// gap before it, the fewest Ready and the largest recommendation (least
// and largest over the runs). Nothing when no point has these figures (a
// report written before they were recorded).
func (r *report) burstFleetMarkdown(b *strings.Builder) {
	pts := r.Points
	if pts == nil {
		pts = points(r.Runs)
	}
	has := false
	for _, p := range pts {
		has = has || p.BurstReadyAtStart != nil
	}
	if len(r.BurstSpans) == 0 || !has {
		return
	}
	b.WriteString("\nReady at each burst's start (mean of the runs) and, in the gap before it, the fewest Ready / the largest recommendation " +
		"(least–largest over the runs; the recommendation is what the HPA's metrics asked for, without the scale-down window; - none; * in the warm-up):\n\n| policy |")
	r.burstColumns(b)
	for _, p := range pts {
		fmt.Fprintf(b, "| %s |", p.Policy)
		for i := range r.BurstSpans {
			ready := "-"
			if i < len(p.BurstReadyAtStart) && p.BurstReadyAtStart[i].N > 0 {
				ready = oneDecimal(p.BurstReadyAtStart[i].Mean)
			}
			fmt.Fprintf(b, " %s (%s / %s) |", ready, rangeText(p.BurstGapMinReady, i), rangeText(p.BurstGapPeakRecommended, i))
		}
		b.WriteString("\n")
	}
}

// oneDecimal is v with one decimal, without it for a whole number.
func oneDecimal(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// rangeText is the i-th range in words: "3", "2–4", or "-" without a value.
func rangeText(rs []Range, i int) string {
	if i >= len(rs) || rs[i].N == 0 {
		return "-"
	}
	if rs[i].Min == rs[i].Max {
		return fmt.Sprintf("%g", rs[i].Min)
	}
	return fmt.Sprintf("%g–%g", rs[i].Min, rs[i].Max)
}

// heldText is a run's held-by-window figures in words, empty without them.
func heldText(s Summary) string {
	if s.HeldByWindow == nil {
		return ""
	}
	return fmt.Sprintf("%.0f%% of samples, %.2f replica-hours", 100**s.HeldByWindow, s.HeldReplicaHours)
}

// chartBin is the width of one point of the chart's load and TTFT series.
const chartBin = time.Minute

// writeSVG draws one panel per policy on a shared time axis: the offered
// load (requests per minute, gray, scaled to the panel), the Ready replicas
// (blue) and the replicas holding GPUs (light blue), and the p90 TTFT of the
// requests sent in each minute (red, log scale, 0.1 s to 100 s, with the
// SLO dashed). A minute without a successful request has no TTFT point.
func (r *report) writeSVG(w io.Writer, reqs []loadgen.TraceRequest) error {
	var span time.Duration
	if len(reqs) > 0 {
		span = reqs[len(reqs)-1].At
	}
	for _, run := range r.Runs {
		if n := len(run.Samples); n > 0 {
			span = max(span, run.Samples[n-1].T)
		}
	}
	if span <= 0 {
		span = time.Second
	}
	bins := int(span/chartBin) + 1
	load := make([]float64, bins)
	for _, q := range reqs {
		if b := int(q.At / chartBin); b >= 0 && b < bins {
			load[b]++
		}
	}
	maxLoad := 1.0
	for _, v := range load {
		maxLoad = max(maxLoad, v)
	}
	maxReplicas := float64(max(r.MaxReplicas, 1))
	// The load is drawn on the replicas' axis, its peak at the top.
	var loadX, loadY []float64
	for j, v := range load {
		loadX = append(loadX, (time.Duration(j) * chartBin).Seconds())
		loadY = append(loadY, maxReplicas*v/maxLoad)
	}
	loadX = append(loadX, span.Seconds())
	loadY = append(loadY, loadY[len(loadY)-1])

	c := svgchart.Chart{
		Title: fmt.Sprintf("shootout: %s, compression ×%g, SLO TTFT ≤ %s / TPOT ≤ %s, %s picker",
			r.Trace, r.Timing.Compress, r.SLO.TTFT, r.SLO.TPOT, r.Picker),
		Subtitle: fmt.Sprintf("gray: requests/min (peak %.0f); blue: Ready replicas, light blue: replicas holding a GPU (left axis, 0–%d); red: TTFT p90 per minute (right axis, log 0.1–100 s), dashed: SLO. "+
			"Under each policy (its first repeat): what its HPA read (value ÷ target per metric, dashed: 1) with the desired, recommended and Ready replicas; the pods' signals; the workload's demand (each panel's note names its lines)",
			maxLoad, r.MaxReplicas),
		Width: 1000, Left: 60, Right: 60, Top: 70, PanelHeight: 150, PanelGap: 40, Bottom: 30, FontSize: 11,
		X: svgchart.Axis{Max: span.Seconds(), Ticks: svgchart.Every(svgchart.DurationTicks(span.Seconds(), 12), span.Seconds()),
			Format: svgchart.FormatSeconds},
	}
	charted := map[string]bool{}
	for _, run := range r.Runs {
		// One run per policy: its first repeat (every run's samples are in
		// the JSON report).
		if charted[run.Policy.Name] {
			continue
		}
		charted[run.Policy.Name] = true
		var ts, replicas, ready []float64
		for _, smp := range run.Samples {
			ts = append(ts, smp.T.Seconds())
			replicas = append(replicas, float64(smp.Replicas))
			ready = append(ready, float64(smp.Ready))
		}
		byBin := map[int][]time.Duration{}
		for _, rec := range run.Records {
			if !rec.Failed() {
				byBin[int(rec.Sent/chartBin)] = append(byBin[int(rec.Sent/chartBin)], rec.TTFT)
			}
		}
		keys := slices.Sorted(maps.Keys(byBin))
		var ttftX, ttftY []float64
		for _, k := range keys {
			ttftX = append(ttftX, (time.Duration(k)*chartBin + chartBin/2).Seconds())
			ttftY = append(ttftY, percentiles(byBin[k]).P90)
		}
		s := run.Summary
		c.Panels = append(c.Panels, svgchart.Panel{
			Title: run.Policy.Name,
			Note:  fmt.Sprintf("attainment %.1f%%, %.2f GPU-hours, %d scale events", 100*s.Attainment, s.ReplicaHours, s.ScaleEvents),
			Y:     svgchart.Axis{Max: maxReplicas, Color: "#08519c"},
			Y2: &svgchart.Axis{Min: 0.1, Max: 100, Log: true, Ticks: []float64{0.1, 1, 10, 100}, Color: "#cb181d",
				Format: func(v float64) string { return svgchart.FormatNumber(v) + "s" }},
			Series: []svgchart.Series{
				{Color: "#bbb", Width: 1, Step: true, X: loadX, Y: loadY},
				{Color: "#9ecae1", Width: 1.5, Step: true, X: ts, Y: replicas},
				{Color: "#08519c", Width: 1.5, Step: true, X: ts, Y: ready},
				{Color: "#cb181d", Width: 1, OnY2: true, X: ttftX, Y: ttftY},
			},
			HLines: []svgchart.Rule{{At: r.SLO.TTFT.Seconds(), Color: "#cb181d", OnY2: true}},
		})
		c.Panels = append(c.Panels, mechanismPanels(run, maxReplicas)...)
	}
	if err := c.Write(w); err != nil {
		return fmt.Errorf("shootout chart for %s: %w", r.Trace, err)
	}
	return nil
}

// runKey names one run's records: the policy and its repeat (from 1).
type runKey struct {
	Policy string
	Repeat int
}

// metricColors are the lines of an HPA's metrics, in the spec's order.
var metricColors = []string{"#756bb1", "#e6550d", "#636363", "#3182bd", "#a63603"}

// mechanismPanels are the panels under a policy's: what its HPA read for
// each metric, as value ÷ target, with the desired replicas, the largest
// recommendation (RecommendedMax) and the Ready replicas; the mean over the
// sampled pods of their queue, batch, GPU utilization and KV-cache usage;
// and the workload's demand. Each only when the run has what it draws (a
// policy with metrics, pod samples, a sample with a demand); a value a
// sample lacks is a gap in its line.
func mechanismPanels(run runResult, maxReplicas float64) []svgchart.Panel {
	var out []svgchart.Panel
	metrics := run.Policy.metrics()
	if len(metrics) > 0 {
		var ts, desired, recommended, ready []float64
		ratios := make([][]float64, len(metrics))
		var names []string
		for _, m := range metrics {
			names = append(names, metricKey(m))
		}
		maxRatio := 2.0
		for _, smp := range run.Samples {
			ts = append(ts, smp.T.Seconds())
			desired = append(desired, float64(smp.Desired))
			ready = append(ready, float64(smp.Ready))
			rec := math.NaN()
			if smp.RecommendedMax != nil {
				rec = float64(*smp.RecommendedMax)
			}
			recommended = append(recommended, rec)
			for i, m := range metrics {
				v := math.NaN()
				for _, rd := range smp.HPA {
					if rd.Metric == names[i] && rd.Value != nil {
						if t := targetValue(m); t > 0 {
							v = *rd.Value / t
						}
					}
				}
				if !math.IsNaN(v) {
					maxRatio = max(maxRatio, v)
				}
				ratios[i] = append(ratios[i], v)
			}
		}
		p := svgchart.Panel{
			Title: run.Policy.Name + ": what the HPA read",
			Note: "value ÷ target (left): " + strings.Join(legendColors(names, metricColors), ", ") +
				"; replicas (right): desired (green), the largest recommendation, without the scale-down window (pink, dashed), Ready (grey)",
			Y:  svgchart.Axis{Min: 0, Max: math.Min(svgchart.NiceCeil(maxRatio), 20)},
			Y2: &svgchart.Axis{Min: 0, Max: maxReplicas, Color: colorDesired},
			Series: []svgchart.Series{
				{Color: colorReadyGrey, Width: 1, Step: true, OnY2: true, X: ts, Y: ready},
				{Color: colorDesired, Width: 1.5, Step: true, OnY2: true, X: ts, Y: desired},
				{Color: colorRecommended, Width: 1, Step: true, Dashed: true, OnY2: true, X: ts, Y: recommended},
			},
			HLines: []svgchart.Rule{{At: 1, Color: "#999"}},
		}
		for i := range metrics {
			p.Series = append(p.Series, svgchart.Series{Color: metricColors[i%len(metricColors)], Width: 1, X: ts, Y: ratios[i]})
		}
		out = append(out, p)
	}
	var ts, queue, batch, gpu, kv, demand []float64
	maxLeft, maxDemand, hasDemand := 1.0, 1.0, false
	for _, smp := range run.Samples {
		if len(smp.Pods) == 0 && smp.Demand == nil {
			continue
		}
		ts = append(ts, smp.T.Seconds())
		d := math.NaN()
		if smp.Demand != nil {
			d, hasDemand = *smp.Demand, true
			maxDemand = max(maxDemand, d)
		}
		demand = append(demand, d)
		mean := func(f func(PodSample) *float64) float64 {
			var sum float64
			n := 0
			for _, ps := range smp.Pods {
				if v := f(ps); v != nil {
					sum += *v
					n++
				}
			}
			if n == 0 {
				return math.NaN()
			}
			return sum / float64(n)
		}
		q, b := mean(func(p PodSample) *float64 { return p.Queue }), mean(func(p PodSample) *float64 { return p.Batch })
		queue, batch = append(queue, q), append(batch, b)
		gpu = append(gpu, mean(func(p PodSample) *float64 { return p.GPU }))
		kv = append(kv, mean(func(p PodSample) *float64 { return p.KV }))
		for _, v := range []float64{q, b} {
			if !math.IsNaN(v) {
				maxLeft = max(maxLeft, v)
			}
		}
	}
	if len(ts) > 0 {
		out = append(out, svgchart.Panel{
			Title: run.Policy.Name + ": the pods' signals",
			Note:  "mean over the pods: queue (teal) and batch (violet), left; GPU utilization (orange) and KV-cache usage (purple), right",
			Y:     svgchart.Axis{Min: 0, Max: svgchart.NiceCeil(maxLeft)},
			Y2:    &svgchart.Axis{Min: 0, Max: 1},
			Series: []svgchart.Series{
				{Color: "#1b9e77", Width: 1, X: ts, Y: queue},
				{Color: "#7570b3", Width: 1, X: ts, Y: batch},
				{Color: "#fd8d3c", Width: 1, OnY2: true, X: ts, Y: gpu},
				{Color: "#8c6bb1", Width: 1, OnY2: true, X: ts, Y: kv},
			},
		})
	}
	if hasDemand {
		out = append(out, svgchart.Panel{
			Title:  run.Policy.Name + ": the workload's demand",
			Note:   "requests waiting plus running over the fleet: the pods' queue + batch, summed (brown)",
			Y:      svgchart.Axis{Min: 0, Max: svgchart.NiceCeil(maxDemand), Color: colorDemand},
			Series: []svgchart.Series{{Color: colorDemand, Width: 1, X: ts, Y: demand}},
		})
	}
	return out
}

// The lines of the mechanism panels that are not an HPA metric's.
const (
	colorDesired     = "#31a354"
	colorRecommended = "#e7298a"
	colorReadyGrey   = "#969696"
	colorDemand      = "#a6761d"
)

// legendColors pairs names with their line colours in words, for a note.
func legendColors(names, colors []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = n + " " + colors[i%len(colors)]
	}
	return out
}

// targetValue is a metric's target as a number (Value or AverageValue), 0
// without one.
func targetValue(m autoscalingv2.MetricSpec) float64 {
	t := metricTarget(m)
	switch {
	case t == nil:
		return 0
	case t.Type == autoscalingv2.ValueMetricType && t.Value != nil:
		return t.Value.AsApproximateFloat64()
	case t.AverageValue != nil:
		return t.AverageValue.AsApproximateFloat64()
	}
	return 0
}

// readRecords reads the records of <trace>-requests.csv back, by policy
// and repeat; a file of an older shootout, without the repeat column, is
// repeat 1, and without the source column every record is source 0
// (sourced is false: no row had the column).
func readRecords(r io.Reader) (recs map[runKey][]Record, sourced bool, err error) {
	rows, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return nil, false, err
	}
	// Seconds are exact to the nanosecond (secondsText); an older file's,
	// rounded to 6 digits and maybe with an exponent, are read as a float.
	sec := func(v string) time.Duration {
		if d, err := time.ParseDuration(v + "s"); err == nil {
			return d
		}
		f, _ := strconv.ParseFloat(v, 64)
		return time.Duration(f * float64(time.Second))
	}
	out := map[runKey][]Record{}
	for i, row := range rows {
		if i == 0 {
			continue
		}
		if len(row) < 10 || len(row) > 12 {
			return nil, false, fmt.Errorf("requests CSV line %d: %d fields, want 12", i+1, len(row))
		}
		prompt, _ := strconv.Atoi(row[2])
		output, _ := strconv.Atoi(row[3])
		tokens, _ := strconv.Atoi(row[4])
		k := runKey{Policy: row[0], Repeat: 1}
		if len(row) >= 11 {
			if k.Repeat, err = strconv.Atoi(row[10]); err != nil || k.Repeat < 1 {
				return nil, false, fmt.Errorf("requests CSV line %d: repeat %q", i+1, row[10])
			}
		}
		source := 0
		if len(row) == 12 {
			sourced = true
			if source, err = strconv.Atoi(row[11]); err != nil || source < 0 {
				return nil, false, fmt.Errorf("requests CSV line %d: source %q", i+1, row[11])
			}
		}
		out[k] = append(out[k], Record{Sent: sec(row[1]), PromptTokens: prompt, OutputTokens: output, Tokens: tokens,
			TTFT: sec(row[5]), E2E: sec(row[6]), Err: row[9], Source: source})
	}
	return out, sourced, nil
}

// writeJSON writes v as indented JSON to path.
func writeJSON(path string, v any) error {
	return writeFile(path, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	})
}
