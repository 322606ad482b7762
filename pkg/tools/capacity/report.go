// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package capacity

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Report is everything a run produced; it is what --json writes.
type Report struct {
	// Setup describes the run in words: endpoint, model, mix, plan, SLOs.
	Setup          Setup           `json:"setup"`
	Steps          []Step          `json:"steps"`
	Analysis       Analysis        `json:"analysis"`
	Recommendation *Recommendation `json:"recommendation,omitempty"`
	// NoRecommendation says why there is none.
	NoRecommendation string `json:"noRecommendation,omitempty"`
	// Recipe is the whole HPA (the forecast, a guard, bounds and behavior);
	// NoRecipe says why there is none.
	Recipe   *Recipe `json:"recipe,omitempty"`
	NoRecipe string  `json:"noRecipe,omitempty"`
	// Interrupted is true when the run was stopped before its plan ended.
	Interrupted bool `json:"interrupted,omitempty"`
}

// Setup is the fixed part of a run, for the record.
type Setup struct {
	URL       string    `json:"url"`
	Model     string    `json:"model"`
	Endpoint  string    `json:"endpoint"`
	Mix       string    `json:"mix"`
	Rates     []float64 `json:"rates"`
	Warmup    string    `json:"warmup"`
	Window    string    `json:"window"`
	SLOs      []string  `json:"slos"`
	TimeScale float64   `json:"timeScale"`
	Cost      Cost      `json:"cost"`
}

// NewReport analyses steps and derives the single-metric recommendation
// and the recipe.
func NewReport(setup Setup, steps []Step, cost Cost, hpa HPAOptions, interrupted bool) *Report {
	r := &Report{Setup: setup, Steps: steps, Interrupted: interrupted}
	r.Analysis = Analyze(r.Steps, cost)
	rec, err := Recommend(r.Steps, r.Analysis, hpa)
	if err != nil {
		r.NoRecommendation = err.Error()
	}
	r.Recommendation = rec
	recipe, err := NewRecipe(r.Steps, r.Analysis, hpa)
	if err != nil {
		r.NoRecipe = err.Error()
	}
	r.Recipe = recipe
	return r
}

// WriteJSON writes r as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("encoding the report: %w", err)
	}
	return nil
}

// WriteProgress writes one line about a finished step.
func WriteProgress(w io.Writer, s Step, total int) error {
	state := "PASS"
	if !s.Pass {
		state = "fail"
	}
	if s.Interrupted {
		state = "interrupted"
	}
	_, err := fmt.Fprintf(w, "step %d/%d  offered %.4g req/s  delivered %.4g req/s  goodput %.4g req/s  good %s%%  ttft p90 %s  itl p90 %s  tpot p90 %s  errors %.2f%%  queue %s  batch %s  %s%s\n",
		s.Index+1, total, s.Offered, s.Throughput, s.Goodput, pctStr(s.Attainment), msStr(s.TTFT.P90, s.TTFT.N), msStr(s.ITL.P90, s.ITL.N),
		msStr(s.TPOT.P90, s.TPOT.N), s.ErrorRate*100, opt(s.Server.Queue, 2), opt(s.Server.Batch, 2), state, unstable(s))
	return err
}

func unstable(s Step) string {
	if s.Stable {
		return ""
	}
	return " (unstable: " + s.StableNote + ")"
}

// WriteTable writes the steps, the verdict and the recommendation for a terminal.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "step\toffered/s\tdone/s\ttok/s\terr%\tttft p50\tp90\tp99\titl p50\tp90\tp99\ttpot p90\te2e p50\tp90\tp99\tgood%\tgood/s\tqueue\tbatch\tkv\tpreempt\t$/1k done\t$/1k good\tverdict\t")
	for _, s := range r.Steps {
		v := "pass"
		if !s.Pass {
			v = "FAIL"
		}
		if s.Interrupted {
			v = "interrupted"
		}
		if i := s.Index; r.Analysis.Found && i == r.Steps[r.Analysis.CapacityStep].Index {
			v = "CAPACITY"
		}
		if !s.Stable {
			v += "*"
		}
		fmt.Fprintf(tw, "%d\t%.4g\t%.4g\t%.0f\t%.2f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.4g\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
			s.Index, s.Offered, s.Throughput, s.OutputTokens, s.ErrorRate*100,
			msStr(s.TTFT.P50, s.TTFT.N), msStr(s.TTFT.P90, s.TTFT.N), msStr(s.TTFT.P99, s.TTFT.N),
			msStr(s.ITL.P50, s.ITL.N), msStr(s.ITL.P90, s.ITL.N), msStr(s.ITL.P99, s.ITL.N), msStr(s.TPOT.P90, s.TPOT.N),
			msStr(s.E2E.P50, s.E2E.N), msStr(s.E2E.P90, s.E2E.N), msStr(s.E2E.P99, s.E2E.N),
			pctStr(s.Attainment), s.Goodput, opt(s.Server.Queue, 2), opt(s.Server.Batch, 2), opt(s.Server.KV, 3), opt(s.Server.Preemptions, 0),
			opt(s.CostPer1kCompleted, 4), opt(s.CostPer1kGood, 4), v)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("latencies in ms of the server's time; rates per second; queue, batch, kv: means over the window; * not stable (see the JSON)\n")
	fmt.Fprintf(&b, "SLOs: %s\n", strings.Join(r.Setup.SLOs, ", "))
	if a := r.Analysis; a.Found {
		s := r.Steps[a.CapacityStep]
		fmt.Fprintf(&b, "capacity: %.4g req/s per replica (step %d), goodput %.4g req/s, %.0f output tokens/s\n", a.Capacity, s.Index, a.Goodput, s.OutputTokens)
	} else {
		b.WriteString("capacity: not found\n")
	}
	if a := r.Analysis; a.CheapestPerGood >= 0 {
		s := r.Steps[a.CheapestPerGood]
		fmt.Fprintf(&b, "cheapest per 1,000 good requests: %.4g at %.4g req/s (step %d)\n", *s.CostPer1kGood, s.Offered, s.Index)
	}
	for _, n := range r.Analysis.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	if rc := r.Recipe; rc != nil {
		fmt.Fprintf(&b, "\nrecommended HPA (the recipe): %s Value %s per replica on the %s, guard %s %s per pod, replicas %d to %d, scale-down window %d s\n",
			rc.ForecastMetric, rc.ForecastQuantity, rc.Kind, rc.GuardMetric, rc.GuardQuantity, rc.MinReplicas, rc.MaxReplicas, rc.ScaleDownWindowSeconds)
		for _, e := range rc.Reasons {
			fmt.Fprintf(&b, "  - %s\n", e)
		}
	} else if r.NoRecipe != "" {
		fmt.Fprintf(&b, "\n%s\n", r.NoRecipe)
	}
	if rec := r.Recommendation; rec != nil {
		fmt.Fprintf(&b, "single-metric HPA (--output single-metric): %s, target %s per pod\n", rec.Metric, rec.Quantity)
		if r.Recipe == nil {
			for _, e := range rec.Explanation {
				fmt.Fprintf(&b, "  - %s\n", e)
			}
		}
	} else if r.NoRecommendation != "" && r.NoRecommendation != r.NoRecipe {
		fmt.Fprintf(&b, "%s\n", r.NoRecommendation)
	}
	if r.Interrupted {
		b.WriteString("the run was interrupted: these are partial results\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func msStr(v float64, n int) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", v)
}

// pctStr is a fraction in percent with one decimal, "-" when absent.
func pctStr(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f", *v*100)
}

func opt(v *float64, prec int) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.*f", prec, *v)
}
