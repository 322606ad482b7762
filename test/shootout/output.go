package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/loadgen"
)

// report is everything written for one trace.
type report struct {
	Trace       string      `json:"trace"`
	Profile     string      `json:"profile"`
	Requests    int         `json:"requests"`
	Clipped     int         `json:"clippedPrompts"`
	Bursts      int         `json:"bursts"`
	RateScale   float64     `json:"rateScale"`
	Picker      string      `json:"picker"`
	MinReplicas int         `json:"minReplicas"`
	MaxReplicas int         `json:"maxReplicas"`
	SLO         SLO         `json:"slo"`
	Timing      timing      `json:"timing"`
	Runs        []runResult `json:"runs"`
}

// write writes <trace>.json (everything but the per-request records),
// <trace>.csv (one summary row per policy), <trace>-requests.csv (every
// record) and <trace>.svg (the chart).
func (r *report) write(dir string, reqs []loadgen.TraceRequest) error {
	base := filepath.Join(dir, r.Trace)
	if err := writeFile(base+".json", func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}); err != nil {
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

var summaryHeader = []string{"policy", "metric", "target", "requests", "failed", "good", "attainment", "goodput_rps",
	"ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "tpot_p50_s", "tpot_p90_s", "tpot_p99_s",
	"gpu_hours", "good_per_gpu_hour", "scale_events", "max_replicas", "bursts", "burst_to_ready_p50_s", "bursts_unanswered"}

func f64(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }

func (r *report) writeSummaryCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	_ = cw.Write(summaryHeader)
	for _, run := range r.Runs {
		s, p := run.Summary, run.Policy
		target := p.Target
		if p.Metric == "" {
			target = strconv.Itoa(p.Fixed) + " replicas"
		}
		_ = cw.Write([]string{p.Name, p.Metric, target, strconv.Itoa(s.Requests), strconv.Itoa(s.Failed), strconv.Itoa(s.Good),
			f64(s.Attainment), f64(s.Goodput), f64(s.TTFT.P50), f64(s.TTFT.P90), f64(s.TTFT.P99), f64(s.TPOT.P50), f64(s.TPOT.P90), f64(s.TPOT.P99),
			f64(s.ReplicaHours), f64(s.GoodPerGPUHour), strconv.Itoa(s.ScaleEvents), strconv.Itoa(s.MaxReplicas),
			strconv.Itoa(s.Bursts), f64(s.BurstToReadyP50), strconv.Itoa(s.BurstsUnanswered)})
	}
	cw.Flush()
	return cw.Error()
}

func (r *report) writeRecordsCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"policy", "sent_s", "prompt_tokens", "output_tokens", "tokens", "ttft_s", "e2e_s", "tpot_s", "good", "error"})
	for _, run := range r.Runs {
		for _, rec := range run.Records {
			tpot := ""
			if d, ok := rec.TPOT(); ok {
				tpot = f64(d.Seconds())
			}
			_ = cw.Write([]string{run.Policy.Name, f64(rec.Sent.Seconds()), strconv.Itoa(rec.PromptTokens), strconv.Itoa(rec.OutputTokens),
				strconv.Itoa(rec.Tokens), f64(rec.TTFT.Seconds()), f64(rec.E2E.Seconds()), tpot, strconv.FormatBool(r.SLO.Good(rec)), rec.Err})
		}
	}
	cw.Flush()
	return cw.Error()
}

// markdown is the summary table for docs/shootout.md.
func (r *report) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n%s (%d requests; SLO TTFT ≤ %s, TPOT ≤ %s; compression ×%g; %s picker)\n\n", r.Trace, r.Requests, r.SLO.TTFT, r.SLO.TPOT, r.Timing.Compress, r.Picker)
	b.WriteString("| policy | SLO attainment | failed | goodput (req/s) | TTFT p50 / p90 / p99 (s) | TPOT p50 / p90 / p99 (ms) | GPU-hours | good req / GPU-hour | scale events | max replicas | burst → new Ready p50 (s) |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, run := range r.Runs {
		s := run.Summary
		burst := "-"
		if s.Bursts > 0 && s.BurstToReadyP50 > 0 {
			burst = fmt.Sprintf("%.0f (%d of %d bursts)", s.BurstToReadyP50, s.Bursts-s.BurstsUnanswered, s.Bursts)
		} else if s.Bursts > 0 {
			burst = fmt.Sprintf("none (0 of %d bursts)", s.Bursts)
		}
		fmt.Fprintf(&b, "| %s | %.1f%% | %d | %.2f | %.2f / %.2f / %.2f | %.0f / %.0f / %.0f | %.2f | %.0f | %d | %d | %s |\n",
			run.Policy.Name, 100*s.Attainment, s.Failed, s.Goodput, s.TTFT.P50, s.TTFT.P90, s.TTFT.P99,
			1000*s.TPOT.P50, 1000*s.TPOT.P90, 1000*s.TPOT.P99, s.ReplicaHours, s.GoodPerGPUHour, s.ScaleEvents, s.MaxReplicas, burst)
	}
	return b.String()
}

// chartBin is the width of one point of the chart's load and TTFT series.
const chartBin = time.Minute

// writeSVG draws one panel per policy on a shared time axis: the offered
// load (requests per minute, gray, scaled to the panel), the Ready replicas
// (blue) and the replicas holding GPUs (light blue), and the p90 TTFT of the
// requests sent in each minute (red, log scale, 0.1 s to 100 s, with the
// SLO dashed).
func (r *report) writeSVG(w io.Writer, reqs []loadgen.TraceRequest) error {
	const (
		width, left, right = 1000.0, 60.0, 60.0
		panelH, gap, top   = 150.0, 40.0, 50.0
	)
	span := reqs[len(reqs)-1].At
	for _, run := range r.Runs {
		if n := len(run.Samples); n > 0 {
			span = max(span, run.Samples[n-1].T)
		}
	}
	if span <= 0 {
		span = time.Second
	}
	height := top + float64(len(r.Runs))*(panelH+gap) + 20
	plotW := width - left - right
	x := func(t time.Duration) float64 { return left + plotW*float64(t)/float64(span) }
	bins := int(span/chartBin) + 1
	load := make([]float64, bins)
	for _, q := range reqs {
		load[int(q.At/chartBin)]++
	}
	maxLoad := 1.0
	for _, v := range load {
		maxLoad = max(maxLoad, v)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="11">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/><text x="%.0f" y="20" font-size="14">shootout: %s, compression ×%g, SLO TTFT ≤ %s / TPOT ≤ %s, %s picker</text>`+"\n",
		left, r.Trace, r.Timing.Compress, r.SLO.TTFT, r.SLO.TPOT, r.Picker)
	fmt.Fprintf(&b, `<text x="%.0f" y="36" fill="#555">gray: requests/min (peak %.0f); blue: Ready replicas, light blue: replicas holding a GPU (left axis, 0–%d); red: TTFT p90 per minute (right axis, log 0.1–100 s), dashed: SLO</text>`+"\n",
		left, maxLoad, r.MaxReplicas)
	for i, run := range r.Runs {
		y0 := top + float64(i)*(panelH+gap) + gap/2
		yB := y0 + panelH
		s := run.Summary
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-weight="bold">%s</text><text x="%.0f" y="%.0f" fill="#555">attainment %.1f%%, %.2f GPU-hours, %d scale events</text>`+"\n",
			left, y0-4, run.Policy.Name, left+120, y0-4, 100*s.Attainment, s.ReplicaHours, s.ScaleEvents)
		fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="%.0f" height="%.0f" fill="none" stroke="#ccc"/>`+"\n", left, y0, plotW, panelH)
		// Load.
		var pts []string
		for j, v := range load {
			t := time.Duration(j) * chartBin
			pts = append(pts, fmt.Sprintf("%.1f,%.1f %.1f,%.1f", x(t), yB-panelH*v/maxLoad, x(min(t+chartBin, span)), yB-panelH*v/maxLoad))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="#bbb" points="%s"/>`+"\n", strings.Join(pts, " "))
		// Replicas.
		yR := func(n int) float64 { return yB - panelH*float64(n)/float64(max(r.MaxReplicas, 1)) }
		for _, series := range []struct {
			color string
			get   func(Sample) int
		}{{"#9ecae1", func(s Sample) int { return s.Replicas }}, {"#08519c", func(s Sample) int { return s.Ready }}} {
			pts = pts[:0]
			for k, smp := range run.Samples {
				last := k == len(run.Samples)-1
				if k > 0 && series.get(smp) == series.get(run.Samples[k-1]) && !last {
					continue // a step series: only its changes are drawn
				}
				if k > 0 {
					pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(smp.T), yR(series.get(run.Samples[k-1]))))
				}
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(smp.T), yR(series.get(smp))))
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`+"\n", series.color, strings.Join(pts, " "))
		}
		for n := 0; n <= r.MaxReplicas; n += max(1, r.MaxReplicas/4) {
			fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="end" fill="#08519c">%d</text>`+"\n", left-4, yR(n)+4, n)
		}
		// TTFT p90 per minute, log scale.
		yT := func(sec float64) float64 {
			v := math.Log10(min(max(sec, 0.1), 100))
			return yB - panelH*(v+1)/3
		}
		byBin := map[int][]time.Duration{}
		for _, rec := range run.Records {
			if !rec.Failed() {
				byBin[int(rec.Sent/chartBin)] = append(byBin[int(rec.Sent/chartBin)], rec.TTFT)
			}
		}
		keys := make([]int, 0, len(byBin))
		for k := range byBin {
			keys = append(keys, k)
		}
		sort.Ints(keys)
		pts = pts[:0]
		for _, k := range keys {
			p := percentiles(byBin[k])
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(time.Duration(k)*chartBin+chartBin/2), yT(p.P90)))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="#cb181d" points="%s"/>`+"\n", strings.Join(pts, " "))
		fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#cb181d" stroke-dasharray="4 3"/>`+"\n", left, left+plotW, yT(r.SLO.TTFT.Seconds()), yT(r.SLO.TTFT.Seconds()))
		for _, sec := range []float64{0.1, 1, 10, 100} {
			fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" fill="#cb181d">%gs</text>`+"\n", left+plotW+4, yT(sec)+4, sec)
		}
	}
	// Time axis.
	yAxis := height - 12
	for m := time.Duration(0); m <= span; m += axisStep(span) {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle" fill="#555">%s</text>`+"\n", x(m), yAxis, shortDuration(m))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// axisStep is a round tick interval giving about ten ticks over span.
func axisStep(span time.Duration) time.Duration {
	for _, s := range []time.Duration{time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute} {
		if span/s <= 12 {
			return s
		}
	}
	return time.Hour
}

func shortDuration(d time.Duration) string {
	return strconv.Itoa(int(d.Minutes())) + "m"
}

// readRecords reads the records of <trace>-requests.csv back, by policy.
func readRecords(r io.Reader) (map[string][]Record, error) {
	rows, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return nil, err
	}
	sec := func(v string) time.Duration {
		f, _ := strconv.ParseFloat(v, 64)
		return time.Duration(f * float64(time.Second))
	}
	out := map[string][]Record{}
	for i, row := range rows {
		if i == 0 {
			continue
		}
		if len(row) != 10 {
			return nil, fmt.Errorf("requests CSV line %d: %d fields, want 10", i+1, len(row))
		}
		prompt, _ := strconv.Atoi(row[2])
		output, _ := strconv.Atoi(row[3])
		tokens, _ := strconv.Atoi(row[4])
		out[row[0]] = append(out[row[0]], Record{Sent: sec(row[1]), PromptTokens: prompt, OutputTokens: output, Tokens: tokens,
			TTFT: sec(row[5]), E2E: sec(row[6]), Err: row[9]})
	}
	return out, nil
}
