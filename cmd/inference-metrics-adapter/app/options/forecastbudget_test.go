// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package options

import (
	"strings"
	"testing"
)

// TestMemoryBudgetCountsTheForecastHistories: the forecast's demand
// histories, --forecast-max-workloads × forecast.MaxBytesPerHistory, count
// in the start-up memory budget beside the page buffers and the KEDA port,
// and the refusal names the flag.
// Was wrong: the histories (16 MB at the default 10,000) were left out, so
// a limit the pages filled passed.
func TestMemoryBudgetCountsTheForecastHistories(t *testing.T) {
	const (
		limit        = 512 << 20 // half: 268435456 bytes
		chartGoLimit = (512 - 96) << 20
	)
	// (60 + 4) x 4000000 = 256000000 bytes of page buffers and no kept TLS
	// connection: 12435456 bytes left under half, room for 7772 histories
	// of 1600 bytes.
	pages := []string{"--scrape-concurrency=60", "--max-body-size=4000000", "--scrape-max-kept-tls-connections=0"}
	cases := []struct {
		name    string
		args    []string
		limit   int64
		wantErr string
	}{
		{name: "one history fits", args: append([]string{"--forecast-max-workloads=1"}, pages...), limit: limit},
		{name: "as many histories as fit", args: append([]string{"--forecast-max-workloads=7772"}, pages...), limit: limit},
		{name: "one history more", args: append([]string{"--forecast-max-workloads=7773"}, pages...), limit: limit,
			wantErr: "= 256000000 bytes of page buffers at worst, plus 12436800 bytes for the forecast's demand histories at most (--forecast-max-workloads 7773 x 1600 bytes), more than half of the memory limit of 536870912 bytes"},
		{name: "default histories", args: pages, limit: limit,
			wantErr: "plus 16000000 bytes for the forecast's demand histories at most (--forecast-max-workloads 10000 x 1600 bytes)"},
		{name: "defaults with the KEDA port under the chart's Go limit", args: []string{"--keda-scaler-address=:9443"}, limit: chartGoLimit},
		{name: "histories alone past half", args: []string{"--forecast-max-workloads=200000"}, limit: chartGoLimit,
			wantErr: "plus 320000000 bytes for the forecast's demand histories at most (--forecast-max-workloads 200000 x 1600 bytes)"},
		{name: "a count that would overflow", args: []string{"--forecast-max-workloads=4611686018427387904"}, limit: chartGoLimit,
			wantErr: "(--forecast-max-workloads 4611686018427387904 x 1600 bytes)"},
		// The container limits docs/operations.md gives (Go limit: the
		// container's less 96 MiB at these sizes), with the default 100
		// kept TLS connections (8,192,000 bytes) and, for plain HTTP
		// fleets, none.
		{name: "defaults in 431Mi", limit: (431 - 96) << 20},
		{name: "defaults in 430Mi", limit: (430 - 96) << 20, wantErr: "plus 8192000 bytes for kept TLS scrape connections at most (--scrape-max-kept-tls-connections 100 x 81920 bytes)"},
		{name: "defaults, no TLS kept, in 415Mi", args: []string{"--scrape-max-kept-tls-connections=0"}, limit: (415 - 96) << 20},
		{name: "defaults, no TLS kept, in 414Mi", args: []string{"--scrape-max-kept-tls-connections=0"}, limit: (414 - 96) << 20, wantErr: "more than half of the memory limit"},
		{name: "1 MiB pages in 215Mi", args: []string{"--max-body-size=1048576"}, limit: (215 - 96) << 20},
		{name: "1 MiB pages in 214Mi", args: []string{"--max-body-size=1048576"}, limit: (214 - 96) << 20, wantErr: "--scrape-max-kept-tls-connections 100"},
		{name: "1 MiB pages, no TLS kept, in 200Mi", args: []string{"--max-body-size=1048576", "--scrape-max-kept-tls-connections=0"}, limit: (200 - 96) << 20},
		{name: "2 MiB pages in 287Mi", args: []string{"--max-body-size=2097152"}, limit: (287 - 96) << 20},
		{name: "2 MiB pages in 286Mi", args: []string{"--max-body-size=2097152"}, limit: (286 - 96) << 20, wantErr: "--scrape-max-kept-tls-connections 100"},
		{name: "2 MiB pages, no TLS kept, in 272Mi", args: []string{"--max-body-size=2097152", "--scrape-max-kept-tls-connections=0"}, limit: (272 - 96) << 20},
		{name: "2 MiB pages, no TLS kept, in 256Mi", args: []string{"--max-body-size=2097152", "--scrape-max-kept-tls-connections=0"}, limit: (256 - 96) << 20, wantErr: "--forecast-max-workloads 10000"},
		{name: "2 MiB pages, 5000 histories, no TLS kept, in 256Mi", args: []string{"--max-body-size=2097152", "--forecast-max-workloads=5000", "--scrape-max-kept-tls-connections=0"}, limit: (256 - 96) << 20},
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
