// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package loadgen

import (
	"fmt"
	"io"
	"slices"
	"time"
)

// Latency holds percentiles of one latency, in the target's time.
type Latency struct {
	P50, P90, P99, Max time.Duration
}

// Summary condenses a report.
type Summary struct {
	Sent, Completed, Failed, Dropped int
	// FirstError is the first failure seen, if any.
	FirstError error
	// Tokens is the number of token events received.
	Tokens         int
	TTFT, ITL, E2E Latency
}

// Summarize computes percentiles over the completed requests of rep.
func Summarize(rep *Report) Summary {
	s := Summary{Sent: len(rep.Results), Dropped: len(rep.Drops)}
	var ttft, itl, e2e []time.Duration
	for _, r := range rep.Results {
		s.Tokens += r.Tokens
		if r.Err != nil {
			s.Failed++
			if s.FirstError == nil {
				s.FirstError = r.Err
			}
			continue
		}
		s.Completed++
		ttft = append(ttft, r.TTFT)
		e2e = append(e2e, r.E2E)
		itl = append(itl, r.ITL...)
	}
	s.TTFT, s.ITL, s.E2E = percentiles(ttft), percentiles(itl), percentiles(e2e)
	return s
}

// Percentile returns the q-quantile (0..1) of ds, nearest rank; 0 if empty.
func Percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	sorted := slices.Clone(ds)
	slices.Sort(sorted)
	return nearestRank(sorted, q)
}

func nearestRank(sorted []time.Duration, q float64) time.Duration {
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func percentiles(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	slices.Sort(ds)
	return Latency{P50: nearestRank(ds, 0.5), P90: nearestRank(ds, 0.9), P99: nearestRank(ds, 0.99), Max: ds[len(ds)-1]}
}

// Write prints s as a small table.
func (s Summary) Write(w io.Writer) error {
	_, err := fmt.Fprintf(w, "requests: sent %d, completed %d, failed %d, dropped %d; tokens %d\n"+
		"%-5s %12s %12s %12s %12s\n"+
		"%-5s %12s %12s %12s %12s\n"+
		"%-5s %12s %12s %12s %12s\n"+
		"%-5s %12s %12s %12s %12s\n",
		s.Sent, s.Completed, s.Failed, s.Dropped, s.Tokens,
		"", "p50", "p90", "p99", "max",
		"ttft", r(s.TTFT.P50), r(s.TTFT.P90), r(s.TTFT.P99), r(s.TTFT.Max),
		"itl", r(s.ITL.P50), r(s.ITL.P90), r(s.ITL.P99), r(s.ITL.Max),
		"e2e", r(s.E2E.P50), r(s.E2E.P90), r(s.E2E.P99), r(s.E2E.Max))
	if err == nil && s.FirstError != nil {
		_, err = fmt.Fprintf(w, "first error: %v\n", s.FirstError)
	}
	return err
}

func r(d time.Duration) string { return d.Round(100 * time.Microsecond).String() }
