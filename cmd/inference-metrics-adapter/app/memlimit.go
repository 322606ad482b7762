// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

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

// memoryReserve is the part of the container's memory limit left outside
// the Go memory limit: what the kernel charges to the container and the Go
// runtime does not count. Measured with 10,000 scraped pods (make fleet
// -enforce-memory-limit): the executable's pages in the page cache (55 MB
// of them mapped) and kernel memory, mostly the scrape connections' sockets
// (about 4 KB each, 40 MB), besides the Go runtime's own 150-185 MB. With
// the Go limit at 90% of a tight container limit, the heap grew into the
// room those need, the kernel evicted the executable's pages, and the
// adapter thrashed (scrapes timed out, the API server unreachable for
// 54 s) instead of collecting sooner.
const memoryReserve = 96 << 20

// memoryLimit decides the Go memory limit from the values of GOMEMLIMIT and
// MEMORY_LIMIT_BYTES: the container's limit less the larger of
// memoryReserve and a tenth of it, but at least half of it; or 0 (leave the
// runtime as it is), with the reason why.
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
	reserve := max(n/10, memoryReserve)
	if reserve > n/2 {
		return n - n/2, fmt.Sprintf("half of %s=%d (too small to leave %d MiB for the executable's pages and the kernel)", memoryLimitEnv, n, memoryReserve>>20)
	}
	return n - reserve, fmt.Sprintf("%s=%d less %d MiB for the executable's pages and the kernel", memoryLimitEnv, n, reserve>>20)
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
