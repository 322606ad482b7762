package main

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/cli"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string // empty: valid
	}{
		{"defaults", nil, ""},
		{"many instances on loopback", []string{"--listen", "127.0.0.5:8000", "--time-scale", "10"}, ""},
		{"bad listen", []string{"--listen", "127.0.0.5"}, "listen"},
		{"zero batch", []string{"--max-num-seqs", "0"}, "max-num-seqs must be at least 1"},
		{"budget below batch", []string{"--max-num-seqs", "64", "--max-num-batched-tokens", "32"}, "max-num-batched-tokens (32) must be at least max-num-seqs (64)"},
		{"model longer than the KV cache", []string{"--num-gpu-blocks", "10", "--max-model-len", "1000", "--default-max-tokens", "10"}, "must fit in the KV cache"},
		{"negative time scale", []string{"--time-scale", "-1"}, "time-scale must be a positive number"},
		{"unknown format", []string{"--metrics-format", "triton"}, `metrics-format must be one of [vllm-v1 vllm-v0 tgi sglang], got "triton"`},
		{"zero step", []string{"--decode-time-base", "0s"}, "decode-time-base must be positive"},
		{"two models in sglang", []string{"--model", "a,b", "--metrics-format", "sglang"}, ""},
		{"two models in vllm-v1", []string{"--model", "a,b"}, ""},
		{"two models in tgi", []string{"--model", "a,b", "--metrics-format", "tgi"}, `metrics-format tgi serves one model, got 2 ("a,b"): several models need vllm-v1 or sglang`},
		{"two models in vllm-v0", []string{"--model", "a,b", "--metrics-format", "vllm-v0"}, "metrics-format vllm-v0 serves one model"},
		{"empty model in the list", []string{"--model", "a,,b"}, "each comma-separated name must be non-empty"},
		{"space around a model", []string{"--model", "a, b"}, "without surrounding spaces"},
		{"model twice", []string{"--model", "a,b,a"}, `names "a" twice`},
		{"front door", []string{"--front-door-backend", "http://127.0.0.1:9000"}, ""},
		{"front door without a URL", []string{"--front-door-backend", "my-model:8000"}, "want an http(s) URL"},
		{"front door never holding", []string{"--front-door-backend", "http://127.0.0.1:9000", "--front-door-max-hold", "0s"}, "max hold must be positive"},
		{"hold ignored without a front door", []string{"--front-door-max-hold", "0s"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := newOptions()
			if err := o.flags().Parse(tc.args); err != nil {
				t.Fatalf("parse: %v", err)
			}
			err := o.validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestRunRejectsBadFlagsBeforeListening(t *testing.T) {
	var out strings.Builder
	err := run(context.Background(), []string{"--max-num-seqs", "0", "--listen", "127.0.0.1:1"}, &out)
	if err == nil || !strings.Contains(err.Error(), "max-num-seqs") {
		t.Errorf("run = %v, want the validation error", err)
	}
	if code := cli.ExitCode(err); code != 2 {
		t.Errorf("exit status %d for a bad flag value, want 2", code)
	}
	if err := run(context.Background(), []string{"--nope"}, &out); cli.ExitCode(err) != 2 {
		t.Errorf("run --nope = %v: exit status %d, want 2", err, cli.ExitCode(err))
	}
}

// TestDocsListTheFlags fails when docs/inference-sim.md's flag block
// differs from --help.
func TestDocsListTheFlags(t *testing.T) {
	doc, err := os.ReadFile("../../docs/inference-sim.md")
	if err != nil {
		t.Fatalf("reading docs: %v", err)
	}
	_, after, ok := strings.Cut(string(doc), "<!-- inference-sim flags -->\n```\n")
	if !ok {
		t.Fatalf("docs have no inference-sim flags block")
	}
	block, _, _ := strings.Cut(after, "```")
	if want := newOptions().flags().FlagUsages(); block != want {
		t.Errorf("docs flag block differs from --help; want:\n%s\ngot:\n%s", want, block)
	}
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
			o, done, err := parse(tc.args, &out)
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
			if err := o.validate(); err != nil {
				t.Errorf("validate: %v", err)
			}
		})
	}
}
