package main

import (
	"testing"

	"github.com/spf13/pflag"

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
	}, func() (*pflag.FlagSet, func() error) {
		o := newOptions()
		return o.flags(), func() error { _, err := o.config(); return err }
	})
}

func TestDocsListTheFlags(t *testing.T) {
	clitest.DocsListFlags(t, "../../docs/inference-sim.md", "loadgen", newOptions().flags())
}
