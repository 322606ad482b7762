// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"strings"
	"testing"
	"time"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/cli"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		change  func(o *Options)
		wantErr []string // substrings; none means valid
	}{
		{"defaults", func(*Options) {}, nil},
		{"fake backend", func(o *Options) { o.TestingFakeNVML = "h100-busy" }, nil},
		{"MIG prefix", func(o *Options) { o.ResourceNames = []string{"nvidia.com/gpu", "nvidia.com/mig-*"} }, nil},
		{"bad listen address", func(o *Options) { o.ListenAddress = "9410" }, []string{"--listen-address"}},
		{"interval too short", func(o *Options) { o.Interval = 100 * time.Millisecond }, []string{"--interval 100ms"}},
		{"interval too long", func(o *Options) { o.Interval = time.Hour; o.NVMLMaxRetryInterval = 2 * time.Hour }, []string{"--interval 1h0m0s"}},
		{"no connections", func(o *Options) { o.MaxConnections = 0 }, []string{"--max-connections 0"}},
		{"relative socket", func(o *Options) { o.PodResourcesSocket = "kubelet.sock" }, []string{"--pod-resources-socket"}},
		{"zero timeout", func(o *Options) { o.PodResourcesTimeout = 0 }, []string{"--pod-resources-timeout"}},
		{"no resources", func(o *Options) { o.ResourceNames = nil }, []string{"at least one resource"}},
		{"bare star", func(o *Options) { o.ResourceNames = []string{"*"} }, []string{`--resource-names "*"`}},
		{"inner star", func(o *Options) { o.ResourceNames = []string{"nvidia.com/*-gpu"} }, []string{`--resource-names "nvidia.com/*-gpu"`}},
		{"retry below interval", func(o *Options) { o.NVMLMaxRetryInterval = time.Second }, []string{"--nvml-max-retry-interval 1s"}},
		{"unknown fake", func(o *Options) { o.TestingFakeNVML = "dgx-z" }, []string{`--testing-fake-nvml "dgx-z"`}},
		{"fake and library", func(o *Options) { o.TestingFakeNVML = "dgxa100"; o.NVMLLibraryPath = "/x.so" }, []string{"exclude each other"}},
		{"two errors at once", func(o *Options) { o.Interval = 0; o.ResourceNames = nil }, []string{"--interval", "--resource-names"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := NewOptions()
			tt.change(o)
			err := o.Validate()
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestFlagsParse(t *testing.T) {
	o := NewOptions()
	fs := cli.FlagSet("gpu-agent", o.Flags())
	err := fs.Parse([]string{"--listen-address=127.0.0.1:1", "--interval=2s", "--resource-names=a,b/*", "--testing-fake-nvml=dgxh100", "-v=3"})
	if err != nil {
		t.Fatal(err)
	}
	if o.ListenAddress != "127.0.0.1:1" || o.Interval != 2*time.Second || len(o.ResourceNames) != 2 || o.ResourceNames[1] != "b/*" || o.TestingFakeNVML != "dgxh100" {
		t.Errorf("parsed %+v", o)
	}
}
