// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package options

import (
	"strings"
	"testing"
)

// TestKEDAScalerLimitFlags: --keda-scaler-max-connections and
// --keda-scaler-max-streams are checked and reach the server's config.
func TestKEDAScalerLimitFlags(t *testing.T) {
	cases := []struct {
		name              string
		args              []string
		wantErr           string
		wantConns, wantSt int
	}{
		{name: "defaults", wantConns: 64, wantSt: 256},
		{name: "set", args: []string{"--keda-scaler-max-connections=8", "--keda-scaler-max-streams=32"}, wantConns: 8, wantSt: 32},
		{name: "no connection", args: []string{"--keda-scaler-max-connections=0"}, wantErr: "--keda-scaler-max-connections must be between 1 and 65536, got 0"},
		{name: "too many streams", args: []string{"--keda-scaler-max-streams=65537"}, wantErr: "--keda-scaler-max-streams must be between 1 and 65536, got 65537"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o, _ := parsed(t, tc.args)
			errs := o.validateKEDAScalerLimits()
			if tc.wantErr != "" {
				if len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.wantErr) {
					t.Fatalf("errors %v, want one containing %q", errs, tc.wantErr)
				}
				return
			}
			if len(errs) > 0 {
				t.Fatalf("errors %v", errs)
			}
			cfg, err := o.Config()
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.KEDAScaler; got.MaxConnections != tc.wantConns || got.MaxStreams != tc.wantSt {
				t.Errorf("config has %d connections, %d streams; want %d, %d", got.MaxConnections, got.MaxStreams, tc.wantConns, tc.wantSt)
			}
		})
	}
}

// TestMemoryBudgetCountsTheKEDAPort: with the KEDA port on, its worst case
// (128 KiB per connection and per call or stream) counts in the start-up
// memory budget beside the page buffers; off, it does not.
func TestMemoryBudgetCountsTheKEDAPort(t *testing.T) {
	const chartGoLimit = (512 - 96) << 20 // the chart's 512Mi less the 96 MiB reserve
	cases := []struct {
		name    string
		args    []string
		limit   int64
		wantErr string
	}{
		{name: "defaults under the chart's Go limit", args: []string{"--keda-scaler-address=:9443"}, limit: chartGoLimit},
		// Pages and the forecast's 10000 x 1600 bytes of histories at
		// half, no kept TLS connection.
		{name: "pages at half, port off", args: []string{"--scrape-concurrency=60", "--max-body-size=3944304", "--scrape-max-kept-tls-connections=0"}, limit: 512 << 20},
		{name: "pages at half, port on", args: []string{"--scrape-concurrency=60", "--max-body-size=3944304", "--scrape-max-kept-tls-connections=0", "--keda-scaler-address=:9443"}, limit: 512 << 20,
			wantErr: "= 252435456 bytes of page buffers at worst, plus 41943040 bytes for the KEDA port's connections and calls at worst (--keda-scaler-max-connections 64, --keda-scaler-max-streams 256), plus 16000000 bytes for the forecast's demand histories at most (--forecast-max-workloads 10000 x 1600 bytes), more than half of the memory limit of 536870912 bytes"},
		{name: "streams past the limit", args: []string{"--keda-scaler-address=:9443", "--keda-scaler-max-streams=65536"}, limit: chartGoLimit,
			wantErr: "plus 8598323200 bytes for the KEDA port"},
		{name: "streams past the limit, port off", args: []string{"--keda-scaler-max-streams=65536"}, limit: chartGoLimit},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o, _ := parsed(t, tc.args)
			err := o.validateMemoryBudget(tc.limit)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}
