// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package loadgen

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
)

// Dist is a distribution of token lengths.
type Dist interface {
	// Sample draws one length, at least 1.
	Sample(r *rand.Rand) int
}

// Fixed always returns N.
type Fixed struct{ N int }

// Uniform returns a length in [Min, Max], uniformly.
type Uniform struct{ Min, Max int }

// Exponential returns lengths with mean Mean, capped at Max.
type Exponential struct{ Mean, Max int }

// Normal returns lengths with mean Mean and standard deviation StdDev,
// clamped to [1, Mean+4·StdDev].
type Normal struct{ Mean, StdDev int }

var (
	_ Dist = Fixed{}
	_ Dist = Uniform{}
	_ Dist = Exponential{}
	_ Dist = Normal{}
)

// Sample implements Dist.
func (d Fixed) Sample(*rand.Rand) int { return d.N }

// Sample implements Dist.
func (d Uniform) Sample(r *rand.Rand) int { return d.Min + r.IntN(d.Max-d.Min+1) }

// Sample implements Dist.
func (d Exponential) Sample(r *rand.Rand) int {
	return clamp(int(math.Round(r.ExpFloat64()*float64(d.Mean))), 1, d.Max)
}

// Sample implements Dist.
func (d Normal) Sample(r *rand.Rand) int {
	return clamp(int(math.Round(r.NormFloat64()*float64(d.StdDev)+float64(d.Mean))), 1, d.Mean+4*d.StdDev)
}

func clamp(v, lo, hi int) int { return max(lo, min(v, hi)) }

// ParseDist parses "N" or "fixed:N", "uniform:MIN:MAX", "exp:MEAN[:MAX]"
// (MAX defaults to 10×MEAN) and "normal:MEAN:STDDEV". Lengths must be at
// least 1.
func ParseDist(s string) (Dist, error) {
	parts := strings.Split(s, ":")
	kind := parts[0]
	args := parts[1:]
	if len(parts) == 1 {
		kind, args = "fixed", parts
	}
	nums := make([]int, len(args))
	for i, a := range args {
		n, err := strconv.Atoi(a)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("length distribution %q: %q is not a positive integer", s, a)
		}
		nums[i] = n
	}
	switch {
	case kind == "fixed" && len(nums) == 1:
		return Fixed{N: nums[0]}, nil
	case kind == "uniform" && len(nums) == 2 && nums[0] <= nums[1]:
		return Uniform{Min: nums[0], Max: nums[1]}, nil
	case kind == "exp" && len(nums) == 1:
		return Exponential{Mean: nums[0], Max: 10 * nums[0]}, nil
	case kind == "exp" && len(nums) == 2 && nums[0] <= nums[1]:
		return Exponential{Mean: nums[0], Max: nums[1]}, nil
	case kind == "normal" && len(nums) == 2:
		return Normal{Mean: nums[0], StdDev: nums[1]}, nil
	}
	return nil, fmt.Errorf("length distribution %q: want N, fixed:N, uniform:MIN:MAX, exp:MEAN[:MAX] or normal:MEAN:STDDEV", s)
}
