// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"
	"testing"
	"time"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/capacity"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/loadgen"
)

func TestProbeMix(t *testing.T) {
	trace := func(n int) []loadgen.TraceRequest {
		out := make([]loadgen.TraceRequest, n)
		for i := range out {
			out[i] = loadgen.TraceRequest{PromptTokens: 100 + i%3, OutputTokens: 10 + i%5}
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		requests int
		wantMix  int
	}{
		{name: "short trace: every request", requests: 7, wantMix: 7},
		{name: "exactly the bound", requests: probeMixSize, wantMix: probeMixSize},
		{name: "long trace: every k-th", requests: 2*probeMixSize + 1, wantMix: 667}, // every 3rd of 2001
	} {
		t.Run(tc.name, func(t *testing.T) {
			reqs := trace(tc.requests)
			mix := probeMix(reqs)
			if len(mix) != tc.wantMix {
				t.Fatalf("%d prompts, want %d", len(mix), tc.wantMix)
			}
			for i, m := range mix[:3] {
				step := max(1, (tc.requests+probeMixSize-1)/probeMixSize)
				r := reqs[i*step]
				if len(m.Text) != 4*r.PromptTokens || m.MaxTokens != r.OutputTokens {
					t.Errorf("prompt %d: %d bytes and max_tokens %d, want %d bytes (4 per token) and %d", i, len(m.Text), m.MaxTokens, 4*r.PromptTokens, r.OutputTokens)
				}
			}
		})
	}
}

func TestMeanLengths(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		mix                    []loadgen.Prompt
		wantPrompt, wantOutput int
	}{
		{name: "empty", mix: nil},
		{name: "two", mix: []loadgen.Prompt{{Text: loadgen.PromptText(100), MaxTokens: 10}, {Text: loadgen.PromptText(300), MaxTokens: 30}}, wantPrompt: 200, wantOutput: 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, o := meanLengths(tc.mix)
			if p != tc.wantPrompt || o != tc.wantOutput {
				t.Errorf("mean prompt %d, output %d; want %d and %d", p, o, tc.wantPrompt, tc.wantOutput)
			}
		})
	}
}

func TestCapacitySLOFlag(t *testing.T) {
	getenv := func(string) string { return "/bin" }
	for _, tc := range []struct {
		name    string
		args    []string
		want    string
		wantErr string
	}{
		{name: "default follows the shootout's SLO", args: []string{"--slo-ttft", "1s", "--slo-tpot", "50ms"}, want: "ttft:p90<=1s,itl:p90<=50ms,errors<=0.1%"},
		{name: "given", args: []string{"--capacity-slo", "ttft:p99<=2s"}, want: "ttft:p99<=2s"},
		{name: "invalid", args: []string{"--capacity-slo", "ttft<=2s"}, wantErr: "--capacity-slo"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := parseArgs(tc.args, getenv)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one about %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.capacitySLO != tc.want {
				t.Errorf("capacity SLO %q, want %q", cfg.capacitySLO, tc.want)
			}
		})
	}
	if got := defaultCapacitySLO(SLO{TTFT: 2 * time.Second, TPOT: 100 * time.Millisecond}); got != "ttft:p90<=2s,itl:p90<=100ms,errors<=0.1%" {
		t.Errorf("defaultCapacitySLO = %q", got)
	}
}

func TestDefaultPoliciesIncludeCapacity(t *testing.T) {
	pols, err := selectPolicies(defaultPolicies(8), "capacity,fixed-peak", 8)
	if err != nil {
		t.Fatal(err)
	}
	if len(pols) != 2 || pols[0].Name != policyCapacity || pols[0].Metric != "" {
		t.Errorf("policies %+v, want capacity (its metric set only by the probe) then fixed-peak", pols)
	}
}

func TestStepVerdict(t *testing.T) {
	tests := []struct {
		name string
		step capacity.Step
		want string
	}{
		{"pass", capacity.Step{Pass: true, KeepsUp: true}, "pass"},
		{"checks missed", capacity.Step{KeepsUp: true, Checks: []capacity.Check{
			{SLO: "ttft:p90<=2s", Value: 812, Met: true},
			{SLO: "tpot:p90<=100ms", Value: 134.4, Met: false},
			{SLO: "errors<=0.1%", Value: 0.004, Met: false},
			{SLO: "good>=97%", Value: 0.9012, Met: false},
		}}, "fail: tpot:p90<=100ms at 134 ms, errors<=0.1% at 0.4%, good>=97% at 90.1%"},
		{"no successful request", capacity.Step{KeepsUp: false, Checks: []capacity.Check{
			{SLO: "ttft:p90<=2s", Note: "no successful requests"},
		}}, "fail: ttft:p90<=2s (no successful requests), fell behind (fewer than 90% of the requests sent completed in the window)"},
		{"interrupted", capacity.Step{KeepsUp: true, Interrupted: true}, "fail: interrupted"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := stepVerdict(tc.step); got != tc.want {
				t.Errorf("stepVerdict = %q, want %q", got, tc.want)
			}
		})
	}
}
