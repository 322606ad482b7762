// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"flag"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/cli"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/cli/clitest"
)

func TestConfig(t *testing.T) {
	clitest.Check(t, []clitest.Case{
		{Name: "defaults"},
		{Name: "schedule", Args: []string{"--schedule", "5:30s,20:1m", "--prompt-len", "uniform:100:200", "--output-len", "exp:50"}},
		{Name: "bad schedule", Args: []string{"--schedule", "5"}, WantErr: "want RATE:DURATION"},
		{Name: "bad length", Args: []string{"--prompt-len", "uniform:9:3"}, WantErr: "length distribution"},
		{Name: "bad url", Args: []string{"--url", "127.0.0.5:8000"}, WantErr: "url must start with http://"},
		{Name: "bad endpoint", Args: []string{"--endpoint", "embeddings"}, WantErr: "endpoint must be"},
		{Name: "zero time scale", Args: []string{"--time-scale", "0"}, WantErr: "time-scale must be positive"},
		{Name: "zero duration", Args: []string{"--duration", "0s"}, WantErr: "duration must be positive"},
		{Name: "infinite rate", Args: []string{"--rate", "inf"}, WantErr: "finite"},
		{Name: "NaN rate", Args: []string{"--rate", "NaN"}, WantErr: "finite"},
		{Name: "infinite rate in a schedule", Args: []string{"--schedule", "5:10s,inf:1s"}, WantErr: "finite"},
		{Name: "infinite time scale", Args: []string{"--time-scale", "inf"}, WantErr: "time-scale must be positive and finite"},
	}, func() (*pflag.FlagSet, func() error) {
		o := NewOptions()
		return cli.FlagSet("loadgen", o.Flags()), func() error { _, err := o.Config(); return err }
	})
}

// TestConfigListsEveryProblem: a bad schedule or length distribution hid
// the other flags' problems (url, endpoint, time-scale, ...), where a
// usage error lists every problem at once.
func TestConfigListsEveryProblem(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string
		not  []string // errors a problem must not drag in
	}{
		{"bad length and url", []string{"--prompt-len", "0", "--url", "localhost:8000"},
			[]string{"prompt-len", "url must start with http://"}, []string{"distributions are required"}},
		{"bad schedule and endpoint", []string{"--schedule", "5", "--endpoint", "embeddings", "--max-in-flight", "0"},
			[]string{"want RATE:DURATION", "endpoint must be", "max-in-flight must be at least 1"}, []string{"at least one phase"}},
		{"bad rate and output length", []string{"--rate", "-1", "--output-len", "x", "--request-timeout", "0s"},
			[]string{"rate must not be negative", "output-len", "request-timeout must be positive"}, []string{"distributions are required"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOptions()
			if err := cli.FlagSet("loadgen", o.Flags()).Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			_, err := o.Config()
			if err == nil {
				t.Fatalf("Config() accepted %q", tc.args)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Config() = %v, want it to list %q", err, w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(err.Error(), n) {
					t.Errorf("Config() = %v, want no %q", err, n)
				}
			}
		})
	}
}

var update = flag.Bool("update", false, "rewrite the docs' flag block from --help")

// TestDocsListTheFlags fails when the docs page's loadgen flag block differs
// from --help; go test ./cmd/loadgen/app -update rewrites it.
func TestDocsListTheFlags(t *testing.T) {
	if *update {
		if err := clitest.WriteSections("../../../docs/inference-sim.md", "loadgen", NewOptions().Flags()); err != nil {
			t.Fatal(err)
		}
	}
	clitest.DocsListSections(t, "../../../docs/inference-sim.md", "loadgen", NewOptions().Flags())
}
