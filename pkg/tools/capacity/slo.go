// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Package capacity owns the capacity probe: it offers open-loop Poisson load
// at a rising sequence of arrival rates to one OpenAI-compatible replica,
// measures what each step delivered (throughput, errors, latency
// percentiles, goodput under the user's SLOs, cost per useful request) next
// to the server's own /metrics signals, finds the sustainable capacity (the
// highest rate at which every SLO holds), and derives an HPA recommendation
// from the signals observed there. It renders the result as a table, JSON and
// an SVG chart. The method is documented in docs/capacity.md.
package capacity

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// SLO kinds.
const (
	KindTTFT   = "ttft"
	KindITL    = "itl"
	KindTPOT   = "tpot"
	KindE2E    = "e2e"
	KindErrors = "errors"
	KindGood   = "good"
)

// SLO is one service-level objective: a latency percentile at most Max, an
// error rate at most MaxErrorRate, or an attainment of at least
// MinAttainment.
type SLO struct {
	// Kind is one of KindTTFT, KindITL, KindTPOT, KindE2E, KindErrors,
	// KindGood.
	Kind string `json:"kind"`
	// Quantile is the latency percentile as a fraction (0.9 for p90); 0 for errors.
	Quantile float64 `json:"quantile,omitempty"`
	// Max is the latency bound, in the target's time.
	Max time.Duration `json:"maxNanoseconds,omitempty"`
	// MaxErrorRate is the error-rate bound as a fraction (0.001 for 0.1%).
	MaxErrorRate float64 `json:"maxErrorRate,omitempty"`
	// MinAttainment is the share of requests that must meet every latency
	// objective on their own, as a fraction (0.97 for 97%).
	MinAttainment float64 `json:"minAttainment,omitempty"`
}

// String writes s the way ParseSLOs reads it, e.g. "ttft:p90<=500ms".
func (s SLO) String() string {
	switch s.Kind {
	case KindErrors:
		return fmt.Sprintf("errors<=%s%%", strconv.FormatFloat(s.MaxErrorRate*100, 'g', -1, 64))
	case KindGood:
		return fmt.Sprintf("good>=%s%%", strconv.FormatFloat(s.MinAttainment*100, 'g', -1, 64))
	}
	return fmt.Sprintf("%s:p%s<=%s", s.Kind, strconv.FormatFloat(s.Quantile*100, 'g', -1, 64), s.Max)
}

// ParseSLOs parses a comma-separated list of objectives:
//
//	ttft:p90<=500ms   time to first token, 90th percentile, at most 500 ms
//	itl:p90<=50ms     inter-token latency (every gap between tokens)
//	tpot:p90<=100ms   time per output token of each request: its mean gap
//	                  after the first token, (e2e - ttft) / (tokens - 1)
//	e2e:p99<=20s      end-to-end latency
//	errors<=0.1%      failed (or dropped) requests as a share of those sent
//	good>=97%         attainment: requests that succeeded and met every
//	                  latency objective above on their own, as a share of
//	                  those sent (and dropped)
//
// Percentiles are p50, p90 or p99 (any pNN with 0 < NN < 100 is accepted).
// At least one objective is required, each kind may appear once, and good
// needs a latency objective to judge requests by.
func ParseSLOs(s string) ([]SLO, error) {
	var out []SLO
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		slo, err := parseSLO(part)
		if err != nil {
			return nil, err
		}
		if seen[slo.Kind] {
			return nil, fmt.Errorf("slo %q: %s is given twice", part, slo.Kind)
		}
		seen[slo.Kind] = true
		out = append(out, slo)
	}
	if len(out) == 0 {
		return nil, errors.New("at least one SLO is required, e.g. ttft:p90<=500ms,errors<=0.1%")
	}
	if seen[KindGood] && !seen[KindTTFT] && !seen[KindITL] && !seen[KindTPOT] && !seen[KindE2E] {
		return nil, errors.New("good>=… needs a latency objective (ttft, itl, tpot or e2e) that each request is judged by, e.g. ttft:p90<=2s,tpot:p90<=100ms,good>=97%")
	}
	return out, nil
}

func parseSLO(part string) (SLO, error) {
	if lhs, rhs, ok := strings.Cut(part, ">="); ok {
		if strings.TrimSpace(lhs) != KindGood {
			return SLO{}, fmt.Errorf("slo %q: only good takes >= (good>=PERCENT%%); latencies and errors take <=", part)
		}
		v, err := parsePercent(strings.TrimSpace(rhs))
		if err != nil || v <= 0 {
			return SLO{}, fmt.Errorf("slo %q: attainment must be a percentage above 0 and at most 100 like 97%%", part)
		}
		return SLO{Kind: KindGood, MinAttainment: v}, nil
	}
	lhs, rhs, ok := strings.Cut(part, "<=")
	if !ok {
		return SLO{}, fmt.Errorf("slo %q: want KIND:pNN<=DURATION, errors<=PERCENT%% or good>=PERCENT%%", part)
	}
	lhs, rhs = strings.TrimSpace(lhs), strings.TrimSpace(rhs)
	if lhs == KindErrors {
		v, err := parsePercent(rhs)
		if err != nil {
			return SLO{}, fmt.Errorf("slo %q: error bound must be a percentage 0..100 like 0.1%%", part)
		}
		return SLO{Kind: KindErrors, MaxErrorRate: v}, nil
	}
	kind, pct, ok := strings.Cut(lhs, ":")
	if !ok || (kind != KindTTFT && kind != KindITL && kind != KindTPOT && kind != KindE2E) {
		return SLO{}, fmt.Errorf("slo %q: kind must be ttft, itl, tpot, e2e, errors or good", part)
	}
	num, ok := strings.CutPrefix(pct, "p")
	q, err := strconv.ParseFloat(num, 64)
	if !ok || err != nil || q <= 0 || q >= 100 {
		return SLO{}, fmt.Errorf("slo %q: percentile must be pNN with 0 < NN < 100, like p90", part)
	}
	d, err := time.ParseDuration(rhs)
	if err != nil || d <= 0 {
		return SLO{}, fmt.Errorf("slo %q: bound must be a positive duration like 500ms", part)
	}
	return SLO{Kind: kind, Quantile: q / 100, Max: d}, nil
}

// parsePercent reads "N%" with 0 <= N <= 100 as a fraction.
func parsePercent(s string) (float64, error) {
	num, ok := strings.CutSuffix(s, "%")
	if !ok {
		return 0, fmt.Errorf("%q has no %% sign", s)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(v) || v < 0 || v > 100 {
		return 0, fmt.Errorf("%q is not a percentage from 0 to 100", s)
	}
	return v / 100, nil
}
