// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestSelectPolicies(t *testing.T) {
	all := defaultPolicies(8)
	tests := []struct {
		names   string
		want    []policy
		wantErr string
	}{
		{names: "gpu-80", want: all[:1]},
		{names: "queue-1=inference_queue_size:1, fixed-4=fixed:4", want: []policy{
			{Name: "queue-1", Metric: metricQueue, Target: "1", Why: "inference_queue_size at 1 per pod, defined by the user"},
			{Name: "fixed-4", Fixed: 4, Why: "a fixed fleet of 4 replicas, defined by the user"},
		}},
		{names: "gpu-50=gpu_utilization:0.5", want: []policy{{Name: "gpu-50", Metric: metricGPU, Target: "500m", Why: "gpu_utilization at 500m per pod, defined by the user"}}},
		{names: "nope", wantErr: `unknown policy "nope"`},
		{names: "q=inference_queue_size", wantErr: "no ':'"},
		{names: "q=tokens_per_second:1", wantErr: `pods do not serve "tokens_per_second"`},
		{names: "q=inference_queue_size:0", wantErr: "positive quantity"},
		{names: "q=inference_queue_size:lots", wantErr: "positive quantity"},
		{names: "f=fixed:9", wantErr: "1 to 8 replicas"},
		{names: "Big_Name=fixed:1", wantErr: "lower-case"},
		{names: "capacity=fixed:1", wantErr: "lower-case"},
		{names: "gpu-80,gpu-80=fixed:2", wantErr: "named twice"},
		{names: "o=oracle:3.25", want: []policy{{Name: "o", Oracle: &oracle{Capacity: 3.25}, Why: oracleWhy(&oracle{Capacity: 3.25})}}},
		{names: "o=oracle:0.5@lag=75s", want: []policy{{Name: "o", Oracle: &oracle{Capacity: 0.5, Lag: 75 * time.Second}, Why: oracleWhy(&oracle{Capacity: 0.5, Lag: 75 * time.Second})}}},
		{names: "o=oracle:0", wantErr: `policy "o=oracle:0": an oracle needs a capacity above 0`},
		{names: "o=oracle:1@lag=soon", wantErr: `oracle option "lag=soon"`},
	}
	for _, tt := range tests {
		t.Run(tt.names, func(t *testing.T) {
			got, err := selectPolicies(all, tt.names, 8)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(policy{})); diff != "" {
				t.Errorf("policies (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTimingInexact(t *testing.T) {
	tests := []struct {
		compress float64
		want     []string
	}{
		{15, nil},
		{5, nil},
		{1, nil},
		{30, []string{"scale-up period 15s becomes 30s", "scale-down period 15s becomes 30s"}},
		{20, []string{"scale-up period 15s becomes 20s", "scale-down period 15s becomes 20s"}},
		{7, []string{"scale-up period 15s becomes 14s", "scale-down window 5m0s becomes 5m1s", "scale-down period 15s becomes 14s"}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, newTiming(tt.compress, time.Minute).inexact()); diff != "" {
			t.Errorf("compression %g (-want +got):\n%s", tt.compress, diff)
		}
	}
}

func TestParseFlagsSelectsPolicies(t *testing.T) {
	getenv := func(string) string { return "/bin" }
	cfg, err := parseArgs([]string{"--policies", "gpu-80,q1=inference_queue_size:1"}, getenv)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range cfg.pols {
		names = append(names, p.Name)
	}
	if diff := cmp.Diff([]string{"gpu-80", "q1"}, names); diff != "" {
		t.Errorf("policies (-want +got):\n%s", diff)
	}
	if cfg, err = parseArgs(nil, getenv); err != nil || len(cfg.pols) != len(defaultPolicies(8)) {
		t.Errorf("default policies: %d (%v), want every policy", len(cfg.pols), err)
	}
}
