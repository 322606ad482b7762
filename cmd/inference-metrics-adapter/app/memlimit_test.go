// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"strings"
	"testing"
)

// The Go runtime's memory limit is the container's limit less the larger of
// 96 MiB and a tenth, and at least half of it: that leaves room for what the
// kernel charges besides the Go heap (the executable's pages, sockets). 90%
// of the container's limit left too little: with 10,000 pods in a 256Mi
// container the adapter thrashed.
// Was wrong: nothing told the Go runtime the container's limit, so the kernel killed the pod.
func TestMemoryLimitFromContainer(t *testing.T) {
	tests := []struct {
		name           string
		gomemlimit     string
		containerLimit string
		want           int64
		wantWhy        string
	}{
		{"chart's 512Mi", "", "536870912", 416 << 20, "MEMORY_LIMIT_BYTES=536870912 less 96 MiB"},
		{"256Mi", "", "268435456", 160 << 20, "less 96 MiB"},
		{"2Gi: a tenth", "", "2147483648", 2147483648 - 214748364, "less 204 MiB"},
		{"192Mi: exactly half", "", "201326592", 96 << 20, "less 96 MiB"},
		{"160Mi: half", "", "167772160", 80 << 20, "half of MEMORY_LIMIT_BYTES=167772160"},
		{"128Mi: half", "", "134217728", 64 << 20, "too small"},
		{"GOMEMLIMIT wins", "400MiB", "536870912", 0, "GOMEMLIMIT is set"},
		{"no container limit", "", "", 0, "MEMORY_LIMIT_BYTES is not set"},
		{"not a number", "", "512Mi", 0, "not a positive number"},
		{"zero", "", "0", 0, "not a positive number"},
		{"negative", "", "-1", 0, "not a positive number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, why := memoryLimit(tt.gomemlimit, tt.containerLimit)
			if got != tt.want || !strings.Contains(why, tt.wantWhy) {
				t.Errorf("memoryLimit(%q, %q) = %d, %q; want %d, %q", tt.gomemlimit, tt.containerLimit, got, why, tt.want, tt.wantWhy)
			}
		})
	}
}
