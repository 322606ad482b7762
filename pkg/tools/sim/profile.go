// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"fmt"
	"slices"
	"sort"
	"time"
)

// StepPoint is one point of a calibrated step-time curve: a step that
// computes Tokens batched tokens (decode tokens plus prefill tokens) spends
// Time in the model's non-attention work (the linear layers and MLP).
type StepPoint struct {
	Tokens int
	Time   time.Duration
}

// ProfileLlama3_8BA100 is the name of the calibrated profile of
// Llama-3-8B on one A100-80GB.
const ProfileLlama3_8BA100 = "llama-3-8b-a100"

// Profile is a named model-and-GPU configuration of the simulator: its
// limits (as vLLM would set them on that GPU) and a calibrated step-time
// model. Apply writes it into a Config.
type Profile struct {
	Name                string
	Model               string
	MaxNumSeqs          int
	MaxNumBatchedTokens int
	NumGPUBlocks        int
	BlockSize           int
	MaxModelLen         int
	// Curve is the non-attention time of a step by batched tokens,
	// sorted by Tokens; see Config.StepCurve.
	Curve []StepPoint
	// KVReadPerToken is the attention time per token of context held by the
	// step's requests; see Config.KVReadPerToken.
	KVReadPerToken time.Duration
	// Source says where the figures come from, for --help and the docs.
	Source string
}

// llama3_8bA100 is Llama-3-8B (bf16, 32 layers, 8 KV heads of 128, so 128
// KiB of KV cache per token) on one A100-80GB SXM, vLLM with chunked
// prefill:
//   - non-attention step time: Microsoft Vidur's profile of the model on an
//     A100 (microsoft/vidur, data/profiling/compute/a100/meta-llama/
//     Meta-Llama-3-8B/mlp.csv, summed over the 32 layers): flat at ≈ 9.7 ms
//     up to ≈ 64 batched tokens, then ≈ 13 ms at 128, 19.5 ms at 256, 35 ms
//     at 512 and 146 ms at 2,048 tokens (≈ 15k prefill tokens/s);
//   - attention in decode is memory-bound: every step reads the KV cache of
//     every running request, 128 KiB per token of context, at ≈ 1.75 TB/s
//     (between the 1.5 and 2 TB/s the A100-80GB achieves of its 2.04 TB/s
//     peak), ≈ 75 ns per token of context per step;
//   - the KV budget: 80 GB × 0.9 (vLLM's gpu_memory_utilization) less 16 GB
//     of weights and ≈ 4 GB of activations leaves ≈ 52 GB, ≈ 396k tokens,
//     24,800 blocks of 16; max-num-seqs 256 and max-num-batched-tokens 2,048
//     are vLLM V1's defaults for online serving on an A100, max-model-len
//     8,192 is the model's context.
var llama3_8bA100 = Profile{
	Name:                ProfileLlama3_8BA100,
	Model:               "meta-llama/Meta-Llama-3-8B-Instruct",
	MaxNumSeqs:          256,
	MaxNumBatchedTokens: 2048,
	NumGPUBlocks:        24800,
	BlockSize:           16,
	MaxModelLen:         8192,
	Curve: []StepPoint{
		{Tokens: 1, Time: 9700 * time.Microsecond},
		{Tokens: 64, Time: 9700 * time.Microsecond},
		{Tokens: 128, Time: 13 * time.Millisecond},
		{Tokens: 256, Time: 19500 * time.Microsecond},
		{Tokens: 512, Time: 35 * time.Millisecond},
		{Tokens: 2048, Time: 146 * time.Millisecond},
	},
	KVReadPerToken: 75 * time.Nanosecond,
	Source:         "Vidur's A100 profile of Meta-Llama-3-8B (microsoft/vidur) and KV reads at 1.75 TB/s",
}

var profiles = map[string]Profile{ProfileLlama3_8BA100: llama3_8bA100}

// ProfileNames returns the names LookupProfile accepts, sorted.
func ProfileNames() []string {
	names := make([]string, 0, len(profiles))
	for n := range profiles {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// LookupProfile returns the named profile.
func LookupProfile(name string) (Profile, error) {
	p, ok := profiles[name]
	if !ok {
		return Profile{}, fmt.Errorf("unknown profile %q (known: %v)", name, ProfileNames())
	}
	return p, nil
}

// Apply returns c with p's model name, limits and step-time model.
func (p Profile) Apply(c Config) Config {
	c.Profile = p.Name
	c.Model = p.Model
	c.MaxNumSeqs = p.MaxNumSeqs
	c.MaxNumBatchedTokens = p.MaxNumBatchedTokens
	c.NumGPUBlocks = p.NumGPUBlocks
	c.BlockSize = p.BlockSize
	c.MaxModelLen = p.MaxModelLen
	c.DefaultMaxTokens = min(c.DefaultMaxTokens, p.MaxModelLen-1)
	c.StepCurve = slices.Clone(p.Curve)
	c.KVReadPerToken = p.KVReadPerToken
	return c
}

// curveTime interpolates curve (sorted by Tokens, at least one point)
// linearly at tokens; below the first point it is the first point's time,
// beyond the last it extends the last segment's slope.
func curveTime(curve []StepPoint, tokens float64) float64 {
	first := curve[0]
	if tokens <= float64(first.Tokens) || len(curve) == 1 {
		return first.Time.Seconds()
	}
	i := sort.Search(len(curve), func(i int) bool { return float64(curve[i].Tokens) >= tokens })
	if i == len(curve) {
		i = len(curve) - 1
	}
	a, b := curve[i-1], curve[i]
	slope := (b.Time - a.Time).Seconds() / float64(b.Tokens-a.Tokens)
	return a.Time.Seconds() + slope*(tokens-float64(a.Tokens))
}
