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
	"strconv"
	"strings"
	"time"
)

// SLO kinds.
const (
	KindTTFT   = "ttft"
	KindITL    = "itl"
	KindE2E    = "e2e"
	KindErrors = "errors"
)

// SLO is one service-level objective: a latency percentile at most Max, or
// an error rate at most MaxErrorRate.
type SLO struct {
	// Kind is one of KindTTFT, KindITL, KindE2E, KindErrors.
	Kind string `json:"kind"`
	// Quantile is the latency percentile as a fraction (0.9 for p90); 0 for errors.
	Quantile float64 `json:"quantile,omitempty"`
	// Max is the latency bound, in the target's time.
	Max time.Duration `json:"maxNanoseconds,omitempty"`
	// MaxErrorRate is the error-rate bound as a fraction (0.001 for 0.1%).
	MaxErrorRate float64 `json:"maxErrorRate,omitempty"`
}

// String writes s the way ParseSLOs reads it, e.g. "ttft:p90<=500ms".
func (s SLO) String() string {
	if s.Kind == KindErrors {
		return fmt.Sprintf("errors<=%s%%", strconv.FormatFloat(s.MaxErrorRate*100, 'g', -1, 64))
	}
	return fmt.Sprintf("%s:p%s<=%s", s.Kind, strconv.FormatFloat(s.Quantile*100, 'g', -1, 64), s.Max)
}

// ParseSLOs parses a comma-separated list of objectives:
//
//	ttft:p90<=500ms   time to first token, 90th percentile, at most 500 ms
//	itl:p90<=50ms     inter-token latency (every gap between tokens)
//	e2e:p99<=20s      end-to-end latency
//	errors<=0.1%      failed (or dropped) requests as a share of those sent
//
// Percentiles are p50, p90 or p99 (any pNN with 0 < NN < 100 is accepted).
// At least one objective is required, and each kind may appear once.
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
	return out, nil
}

func parseSLO(part string) (SLO, error) {
	lhs, rhs, ok := strings.Cut(part, "<=")
	if !ok {
		return SLO{}, fmt.Errorf("slo %q: want KIND:pNN<=DURATION or errors<=PERCENT%%", part)
	}
	lhs, rhs = strings.TrimSpace(lhs), strings.TrimSpace(rhs)
	if lhs == KindErrors {
		num, ok := strings.CutSuffix(rhs, "%")
		v, err := strconv.ParseFloat(num, 64)
		if !ok || err != nil || v < 0 || v > 100 {
			return SLO{}, fmt.Errorf("slo %q: error bound must be a percentage 0..100 like 0.1%%", part)
		}
		return SLO{Kind: KindErrors, MaxErrorRate: v / 100}, nil
	}
	kind, pct, ok := strings.Cut(lhs, ":")
	if !ok || (kind != KindTTFT && kind != KindITL && kind != KindE2E) {
		return SLO{}, fmt.Errorf("slo %q: kind must be ttft, itl, e2e or errors", part)
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
