// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package capacity

import (
	"fmt"
	"slices"
	"strings"
)

// Cost is the price of one replica.
type Cost struct {
	// PricePerGPUHour is in any currency; 0 means no cost figures.
	PricePerGPUHour float64 `json:"pricePerGPUHour"`
	GPUsPerReplica  int     `json:"gpusPerReplica"`
}

// perSecond is what one replica costs per second of the target's time.
func (c Cost) perSecond() float64 {
	return c.PricePerGPUHour * float64(c.GPUsPerReplica) / 3600
}

// Analysis is the verdict over all steps.
type Analysis struct {
	// Found is true when some step met every SLO below the first failing one.
	Found bool `json:"found"`
	// Capacity is the offered rate of the capacity step (requests/s), and
	// CapacityStep its index in Steps; -1 when not found.
	Capacity     float64 `json:"capacity"`
	CapacityStep int     `json:"capacityStep"`
	// Goodput at the capacity step (requests/s that met every SLO).
	Goodput float64 `json:"goodput"`
	// BestStep is the step closest to meeting the SLOs when none did
	// (most checks met, then highest goodput); -1 when Found.
	BestStep int `json:"bestStep"`
	// CheapestPerGood is the step with the lowest cost per 1,000 good
	// requests; -1 without a price.
	CheapestPerGood int `json:"cheapestPerGoodStep"`
	// Notes explain the verdict: non-monotonic steps, unstable steps, why
	// no step met the SLOs.
	Notes []string `json:"notes,omitempty"`
}

// Analyze finds the sustainable capacity over steps and fills in each
// step's cost. The capacity is the highest offered rate R such that every
// completed (not interrupted) step at a rate up to R passed: a step that
// passes above a failing one is noise or an artefact, and is reported but
// not counted. Steps are taken in order of offered rate.
func Analyze(steps []Step, cost Cost) Analysis {
	a := Analysis{CapacityStep: -1, BestStep: -1, CheapestPerGood: -1}
	for i := range steps {
		fillCost(&steps[i], cost)
	}
	order := make([]int, 0, len(steps))
	for i, s := range steps {
		if !s.Interrupted {
			order = append(order, i)
		}
	}
	slices.SortStableFunc(order, func(x, y int) int {
		switch {
		case steps[x].Offered < steps[y].Offered:
			return -1
		case steps[x].Offered > steps[y].Offered:
			return 1
		}
		return 0
	})
	failedAt := -1
	for _, i := range order {
		s := steps[i]
		if failedAt < 0 {
			if s.Pass {
				a.Found, a.CapacityStep, a.Capacity, a.Goodput = true, i, s.Offered, s.Goodput
			} else {
				failedAt = i
			}
			continue
		}
		if s.Pass {
			a.Notes = append(a.Notes, fmt.Sprintf("step %d (%.4g req/s) met the SLOs although step %d (%.4g req/s) below it did not; "+
				"it is not counted (capacity is the highest rate with every step up to it passing)", s.Index, s.Offered, steps[failedAt].Index, steps[failedAt].Offered))
		}
	}
	if a.Found && !steps[a.CapacityStep].Stable {
		a.Notes = append(a.Notes, fmt.Sprintf("the capacity step is not stable: %s", steps[a.CapacityStep].StableNote))
	}
	if !a.Found && len(order) > 0 {
		a.BestStep = bestStep(steps, order)
		b := steps[a.BestStep]
		a.Notes = append(a.Notes, fmt.Sprintf("no step met every SLO; the best was step %d at %.4g req/s: %s",
			b.Index, b.Offered, strings.Join(failures(b), "; ")))
		if order[0] == a.BestStep || steps[order[0]].Offered == b.Offered {
			a.Notes = append(a.Notes, "the lowest rate already misses the SLOs: start the plan lower, or loosen the SLOs")
		}
	}
	best := -1.0
	for _, i := range order {
		if c := steps[i].CostPer1kGood; c != nil && (best < 0 || *c < best) {
			best, a.CheapestPerGood = *c, i
		}
	}
	return a
}

// bestStep is the step with most checks met, then the highest goodput.
func bestStep(steps []Step, order []int) int {
	best, bestMet := -1, -1
	for _, i := range order {
		met := 0
		for _, c := range steps[i].Checks {
			if c.Met {
				met++
			}
		}
		if steps[i].KeepsUp {
			met++
		}
		if met > bestMet || (met == bestMet && steps[i].Goodput > steps[best].Goodput) {
			best, bestMet = i, met
		}
	}
	return best
}

// failures lists why s did not pass.
func failures(s Step) []string {
	var out []string
	for _, c := range s.Checks {
		switch {
		case c.Met:
		case c.Note != "":
			out = append(out, c.SLO+": "+c.Note)
		case strings.HasPrefix(c.SLO, KindErrors):
			out = append(out, fmt.Sprintf("%s: measured %.3g%%", c.SLO, c.Value*100))
		default:
			out = append(out, fmt.Sprintf("%s: measured %.0fms", c.SLO, c.Value))
		}
	}
	if !s.KeepsUp {
		out = append(out, fmt.Sprintf("falling behind: %d of %d requests sent in the window completed in it", s.Completed, s.Sent))
	}
	return out
}

func fillCost(s *Step, c Cost) {
	s.CostPer1kGood, s.CostPer1kCompleted = nil, nil
	per := c.perSecond()
	if per <= 0 {
		return
	}
	if s.Goodput > 0 {
		s.CostPer1kGood = new(per / s.Goodput * 1000)
	}
	if s.Throughput > 0 {
		s.CostPer1kCompleted = new(per / s.Throughput * 1000)
	}
}
