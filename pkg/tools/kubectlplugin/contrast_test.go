// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package kubectlplugin

import (
	"bytes"
	"strings"
	"testing"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
)

func TestReading(t *testing.T) {
	v := func(kv ...float64) map[catalog.Signal]float64 {
		m := map[catalog.Signal]float64{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[catalog.Signal(kv[i])] = kv[i+1]
		}
		return m
	}
	const (
		Q, B, KV, F, U = float64(catalog.QueueSize), float64(catalog.BatchSize), float64(catalog.KVCacheUsage), float64(catalog.BatchFill), float64(catalog.GPUUtilization)
	)
	cases := []struct {
		name string
		vals map[catalog.Signal]float64
		want string
	}{
		{"busy GPU with batch room", v(Q, 0, B, 6, F, 0.3, U, 0.98), "GPU busy (98%), batch at 30% of its running maximum, no queue: headroom"},
		{"busy GPU, no fill known", v(Q, 0, B, 6, U, 0.97), "GPU busy (97%) but no queue: headroom, do not scale on GPU utilization"},
		{"queue with full KV", v(Q, 12, B, 40, KV, 0.95, U, 0.99), "queue 12 waiting, KV cache 95% full: saturated (memory-bound), add replicas"},
		{"queue with idle GPU", v(Q, 4, B, 8, U, 0.2), "queue 4 waiting while the GPU reads 20% busy: a server limit (max running requests) binds, not the GPU"},
		{"queue only", v(Q, 3, B, 24), "queue 3 waiting: saturated, add replicas"},
		{"nearly full batch", v(Q, 0, B, 28, F, 0.9), "batch at 90% of its maximum, no queue yet: near saturation"},
		{"idle", v(Q, 0, B, 1), "no queue: headroom"},
		{"nothing measured", v(U, 0.5), "no serving signals: the server's page was not scraped or lacks the series"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Reading(Row{Values: tc.vals}); got != tc.want {
				t.Fatalf("Reading = %q\nwant      %q", got, tc.want)
			}
		})
	}
}

func TestWriteShowsMissingAsDash(t *testing.T) {
	var buf bytes.Buffer
	rows := []Row{
		{Pod: "llm-0", GPUs: 1, Values: map[catalog.Signal]float64{catalog.QueueSize: 0, catalog.BatchSize: 6, catalog.GPUUtilization: 0.98}},
		{Pod: "llm-1", Values: map[catalog.Signal]float64{}},
	}
	if err := Write(&buf, rows); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("table:\n%s", buf.String())
	}
	if f := strings.Fields(lines[1]); f[0] != "llm-0" || f[1] != "1" || f[2] != "98%" || f[3] != "-" || f[4] != "6" || f[5] != "0" {
		t.Errorf("row %q", lines[1])
	}
	if f := strings.Fields(lines[2]); f[1] != "-" || f[2] != "-" || f[5] != "-" {
		t.Errorf("missing values must show as -, not 0: %q", lines[2])
	}
}
