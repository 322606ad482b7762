package main

import (
	"os"
	"strings"
	"testing"
)

func TestConfig(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"defaults", nil, ""},
		{"schedule", []string{"--schedule", "5:30s,20:1m", "--prompt-len", "uniform:100:200", "--output-len", "exp:50"}, ""},
		{"bad schedule", []string{"--schedule", "5"}, "want RATE:DURATION"},
		{"bad length", []string{"--prompt-len", "uniform:9:3"}, "length distribution"},
		{"bad url", []string{"--url", "127.0.0.5:8000"}, "url must start with http://"},
		{"bad endpoint", []string{"--endpoint", "embeddings"}, "endpoint must be"},
		{"zero time scale", []string{"--time-scale", "0"}, "time-scale must be positive"},
		{"zero duration", []string{"--duration", "0s"}, "duration must be positive"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := newOptions()
			if err := o.flags().Parse(tc.args); err != nil {
				t.Fatalf("parse: %v", err)
			}
			_, err := o.config()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestDocsListTheFlags(t *testing.T) {
	doc, err := os.ReadFile("../../docs/inference-sim.md")
	if err != nil {
		t.Fatalf("reading docs: %v", err)
	}
	_, after, ok := strings.Cut(string(doc), "<!-- loadgen flags -->\n```\n")
	if !ok {
		t.Fatalf("docs have no loadgen flags block")
	}
	block, _, _ := strings.Cut(after, "```")
	if want := newOptions().flags().FlagUsages(); block != want {
		t.Errorf("docs flag block differs from --help; want:\n%s\ngot:\n%s", want, block)
	}
}
