package app

import (
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"k8s.io/klog/v2"
)

// memoryLimitEnv names the environment variable that carries the
// container's memory limit in bytes; the chart sets it from the downward
// API (resourceFieldRef limits.memory).
const memoryLimitEnv = "MEMORY_LIMIT_BYTES"

// memoryLimitShare is the part of the container's memory limit the Go
// runtime aims to stay under; the rest is for what the runtime does not
// count (thread stacks, cgo, fragmentation).
const memoryLimitShare = 0.9

// memoryLimit decides the Go memory limit from the values of GOMEMLIMIT and
// MEMORY_LIMIT_BYTES: 90% of the container's limit, or 0 (leave the runtime
// as it is) with the reason why.
func memoryLimit(gomemlimit, containerLimit string) (int64, string) {
	if strings.TrimSpace(gomemlimit) != "" {
		return 0, "GOMEMLIMIT is set"
	}
	containerLimit = strings.TrimSpace(containerLimit)
	if containerLimit == "" {
		return 0, memoryLimitEnv + " is not set"
	}
	n, err := strconv.ParseInt(containerLimit, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Sprintf("%s=%q is not a positive number of bytes", memoryLimitEnv, containerLimit)
	}
	return int64(float64(n) * memoryLimitShare), fmt.Sprintf("%.0f%% of %s=%d", memoryLimitShare*100, memoryLimitEnv, n)
}

// setMemoryLimit sets the Go memory limit from the environment (see
// memoryLimit) and returns a function that logs the limit in force: the
// limit must be set before the flags are validated against it, and logged
// once logging is configured.
func setMemoryLimit() (logLimit func()) {
	limit, why := memoryLimit(os.Getenv("GOMEMLIMIT"), os.Getenv(memoryLimitEnv))
	if limit > 0 {
		debug.SetMemoryLimit(limit)
	}
	return func() {
		klog.InfoS("Go memory limit", "bytes", debug.SetMemoryLimit(-1), "source", why)
	}
}
