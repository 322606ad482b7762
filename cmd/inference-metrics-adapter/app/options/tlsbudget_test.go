// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package options

import (
	"strings"
	"testing"
)

// TestScrapeMaxKeptTLSConnectionsFlag: --scrape-max-kept-tls-connections
// is checked and reaches the scraper's config.
func TestScrapeMaxKeptTLSConnectionsFlag(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		want    int
		wantErr string
	}{
		{name: "default", want: 100},
		{name: "set", args: []string{"--scrape-max-kept-tls-connections=1000"}, want: 1000},
		{name: "none kept", args: []string{"--scrape-max-kept-tls-connections=0"}, want: 0},
		{name: "negative", args: []string{"--scrape-max-kept-tls-connections=-1"}, wantErr: "--scrape-max-kept-tls-connections must not be negative, got -1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o, _ := parsed(t, tc.args)
			errs := o.ScrapeTLS.validate()
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
			if got := cfg.Scrape.MaxKeptTLSConnections; got != tc.want {
				t.Errorf("scrape config keeps %d TLS connections, want %d", got, tc.want)
			}
			if err := cfg.Scrape.Validate(); err != nil {
				t.Errorf("scrape config: %v", err)
			}
		})
	}
}

// TestMemoryBudgetCountsKeptTLSConnections: the kept HTTPS scrape
// connections, --scrape-max-kept-tls-connections × 80 KiB, count in the
// start-up memory budget beside the page buffers, the KEDA port and the
// forecast's histories, and the refusal names the flag; the default fits
// the chart's limit with the KEDA port on.
// Was wrong: they were left out, and 1,000 pods over https took 80 MB more
// than the check allowed for.
func TestMemoryBudgetCountsKeptTLSConnections(t *testing.T) {
	const (
		limit        = 512 << 20 // half: 268435456 bytes
		chartGoLimit = (512 - 96) << 20
	)
	// (60 + 4) x 3800000 = 243200000 bytes of page buffers and 16000000 of
	// forecast histories: 9235456 bytes left under half, room for 112 kept
	// TLS connections of 81920 bytes.
	pages := []string{"--scrape-concurrency=60", "--max-body-size=3800000"}
	cases := []struct {
		name    string
		args    []string
		limit   int64
		wantErr string
	}{
		{name: "none kept", args: append([]string{"--scrape-max-kept-tls-connections=0"}, pages...), limit: limit},
		{name: "the default", args: pages, limit: limit},
		{name: "as many as fit", args: append([]string{"--scrape-max-kept-tls-connections=112"}, pages...), limit: limit},
		{name: "one more", args: append([]string{"--scrape-max-kept-tls-connections=113"}, pages...), limit: limit,
			wantErr: "= 243200000 bytes of page buffers at worst, plus 16000000 bytes for the forecast's demand histories at most (--forecast-max-workloads 10000 x 1600 bytes), plus 9256960 bytes for kept TLS scrape connections at most (--scrape-max-kept-tls-connections 113 x 81920 bytes), more than half of the memory limit of 536870912 bytes"},
		{name: "defaults with the KEDA port under the chart's Go limit", args: []string{"--keda-scaler-address=:9443"}, limit: chartGoLimit},
		{name: "112 kept, past the room the KEDA port leaves", args: []string{"--keda-scaler-address=:9443", "--scrape-max-kept-tls-connections=112"}, limit: chartGoLimit,
			wantErr: "(--scrape-max-kept-tls-connections 112 x 81920 bytes)"},
		// 1,000 pods over https, every connection kept (the make fleet
		// run of docs/performance.md): 81920000 bytes.
		{name: "1000 kept in 571Mi", args: []string{"--scrape-max-kept-tls-connections=1000"}, limit: (571 - 96) << 20},
		{name: "1000 kept in 570Mi", args: []string{"--scrape-max-kept-tls-connections=1000"}, limit: (570 - 96) << 20,
			wantErr: "plus 81920000 bytes for kept TLS scrape connections at most"},
		{name: "1000 kept in the chart's limit", args: []string{"--scrape-max-kept-tls-connections=1000"}, limit: chartGoLimit,
			wantErr: "(--scrape-max-kept-tls-connections 1000 x 81920 bytes)"},
		{name: "a count that would overflow", args: []string{"--scrape-max-kept-tls-connections=9223372036854775807"}, limit: chartGoLimit,
			wantErr: "(--scrape-max-kept-tls-connections 9223372036854775807 x 81920 bytes)"},
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
