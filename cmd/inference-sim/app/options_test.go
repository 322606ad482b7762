// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"flag"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/cli"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/cli/clitest"
)

func TestValidate(t *testing.T) {
	clitest.Check(t, []clitest.Case{
		{Name: "defaults"},
		{Name: "many instances on loopback", Args: []string{"--listen", "127.0.0.5:8000", "--time-scale", "10"}},
		{Name: "bad listen", Args: []string{"--listen", "127.0.0.5"}, WantErr: "listen"},
		{Name: "zero batch", Args: []string{"--max-num-seqs", "0"}, WantErr: "max-num-seqs must be at least 1"},
		{Name: "budget below batch", Args: []string{"--max-num-seqs", "64", "--max-num-batched-tokens", "32"}, WantErr: "max-num-batched-tokens (32) must be at least max-num-seqs (64)"},
		{Name: "model longer than the KV cache", Args: []string{"--num-gpu-blocks", "10", "--max-model-len", "1000", "--default-max-tokens", "10"}, WantErr: "must fit in the KV cache"},
		{Name: "negative time scale", Args: []string{"--time-scale", "-1"}, WantErr: "time-scale must be a positive number"},
		{Name: "unknown format", Args: []string{"--metrics-format", "triton"}, WantErr: `metrics-format must be one of [vllm-v1 vllm-v0 tgi sglang], got "triton"`},
		{Name: "zero step", Args: []string{"--decode-time-base", "0s"}, WantErr: "decode-time-base must be positive"},
		{Name: "two models in sglang", Args: []string{"--model", "a,b", "--metrics-format", "sglang"}},
		{Name: "two models in vllm-v1", Args: []string{"--model", "a,b"}},
		{Name: "two models in tgi", Args: []string{"--model", "a,b", "--metrics-format", "tgi"}, WantErr: `metrics-format tgi serves one model, got 2 ("a,b"): several models need vllm-v1 or sglang`},
		{Name: "two models in vllm-v0", Args: []string{"--model", "a,b", "--metrics-format", "vllm-v0"}, WantErr: "metrics-format vllm-v0 serves one model"},
		{Name: "empty model in the list", Args: []string{"--model", "a,,b"}, WantErr: "each comma-separated name must be non-empty"},
		{Name: "space around a model", Args: []string{"--model", "a, b"}, WantErr: "without surrounding spaces"},
		{Name: "model twice", Args: []string{"--model", "a,b,a"}, WantErr: `names "a" twice`},
		{Name: "lora adapters", Args: []string{"--lora-adapters", "a,b", "--max-loras", "2"}},
		{Name: "lora adapters in another format", Args: []string{"--lora-adapters", "a", "--metrics-format", "tgi"}},
		{Name: "zero max loras", Args: []string{"--max-loras", "0"}, WantErr: "max-loras must be at least 1, got 0"},
		{Name: "empty adapter name", Args: []string{"--lora-adapters", "a,,b"}, WantErr: `lora-adapters "a,,b": each comma-separated name must be non-empty`},
		{Name: "space around an adapter", Args: []string{"--lora-adapters", "a, b"}, WantErr: "without surrounding spaces"},
		{Name: "adapter twice", Args: []string{"--lora-adapters", "a,b,a"}, WantErr: `lora-adapters "a,b,a" names "a" twice`},
		{Name: "adapter named like the base model", Args: []string{"--model", "m", "--lora-adapters", "a,m"}, WantErr: `adapter "m" has the name of the base model`},
		{Name: "adapters on several models", Args: []string{"--model", "m1,m2", "--lora-adapters", "a"}, WantErr: "lora-adapters need a single base model"},
		{Name: "front door", Args: []string{"--front-door-backend", "http://127.0.0.1:9000"}},
		{Name: "front door without a URL", Args: []string{"--front-door-backend", "my-model:8000"}, WantErr: "want an http(s) URL"},
		{Name: "front door never holding", Args: []string{"--front-door-backend", "http://127.0.0.1:9000", "--front-door-max-hold", "0s"}, WantErr: "max hold must be positive"},
		{Name: "hold ignored without a front door", Args: []string{"--front-door-max-hold", "0s"}},
	}, func() (*pflag.FlagSet, func() error) {
		o := NewOptions()
		return cli.FlagSet("inference-sim", o.Flags()), o.Validate
	})
}

func TestRunRejectsBadFlagsBeforeListening(t *testing.T) {
	var out strings.Builder
	err := run(context.Background(), []string{"--max-num-seqs", "0", "--listen", "127.0.0.1:1"}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "max-num-seqs") {
		t.Errorf("run = %v, want the validation error", err)
	}
	if code := cli.ExitCode(err); code != 2 {
		t.Errorf("exit status %d for a bad flag value, want 2", code)
	}
	if err := run(context.Background(), []string{"--nope"}, &out, &out); cli.ExitCode(err) != 2 {
		t.Errorf("run --nope = %v: exit status %d, want 2", err, cli.ExitCode(err))
	}
}

var update = flag.Bool("update", false, "rewrite the docs' flag block from --help")

// TestDocsListTheFlags fails when the docs page's inference-sim flag block differs
// from --help; go test ./cmd/inference-sim/app -update rewrites it.
func TestDocsListTheFlags(t *testing.T) {
	if *update {
		if err := clitest.WriteSections("../../../docs/inference-sim.md", "inference-sim", NewOptions().Flags()); err != nil {
			t.Fatal(err)
		}
	}
	clitest.DocsListSections(t, "../../../docs/inference-sim.md", "inference-sim", NewOptions().Flags())
}

func TestParseProfile(t *testing.T) {
	tests := []struct {
		name        string
		args        []string
		wantSeqs    int
		wantCurve   bool
		wantErr     string
		wantProfile string
	}{
		{name: "no profile: the linear model", args: nil, wantSeqs: 256},
		{name: "profile sets the limits and the curve", args: []string{"--profile", "llama-3-8b-a100"}, wantSeqs: 256, wantCurve: true, wantProfile: "llama-3-8b-a100"},
		{name: "an explicit flag overrides the profile", args: []string{"--max-num-seqs", "32", "--profile", "llama-3-8b-a100"}, wantSeqs: 32, wantCurve: true, wantProfile: "llama-3-8b-a100"},
		{name: "unknown profile", args: []string{"--profile", "gpt-5-tpu"}, wantErr: `unknown profile "gpt-5-tpu"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			o, done, err := parse(tc.args, &out, &out)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parse = %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || done {
				t.Fatalf("parse = done %v, %v", done, err)
			}
			if o.sim.MaxNumSeqs != tc.wantSeqs || (len(o.sim.StepCurve) > 0) != tc.wantCurve || o.sim.Profile != tc.wantProfile {
				t.Errorf("max-num-seqs %d, curve %v, profile %q; want %d, %v, %q", o.sim.MaxNumSeqs, len(o.sim.StepCurve) > 0, o.sim.Profile, tc.wantSeqs, tc.wantCurve, tc.wantProfile)
			}
			if err := o.Validate(); err != nil {
				t.Errorf("validate: %v", err)
			}
		})
	}
}
