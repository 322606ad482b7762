package app

import (
	"strings"
	"testing"
)

// Defect 2: nothing told the Go runtime about the container's memory limit,
// so the heap grew towards the limit without the collector working harder
// and the kernel killed the pod. The limit is now 90% of the container's.
func TestDefect2_MemoryLimitFromContainer(t *testing.T) {
	tests := []struct {
		name           string
		gomemlimit     string
		containerLimit string
		want           int64
		wantWhy        string
	}{
		{"chart's 512Mi", "", "536870912", 483183820, "90% of MEMORY_LIMIT_BYTES=536870912"},
		{"1Gi", "", "1073741824", 966367641, "90%"},
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
