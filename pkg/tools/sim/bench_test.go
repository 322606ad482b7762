// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package sim_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/sim"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/sim/simtest"
)

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkStreams measures the CPU one instance needs per concurrent
// stream, at real time (time-scale 1) with 10 ms decode steps, i.e. 100
// tokens per second per stream. The clients run in the same process and
// only read the bytes, so the figure is the server's cost plus a light
// client's. streams/core = concurrent streams one fully used core sustains.
func BenchmarkStreams(b *testing.B) {
	for _, n := range []int{16, 64, 256} {
		b.Run(fmt.Sprintf("streams=%d", n), func(b *testing.B) {
			cfg := sim.DefaultConfig()
			cfg.MaxNumSeqs = n
			cfg.MaxModelLen = 4096
			cfg.StepBase = 10 * time.Millisecond
			cfg.StepPerSeq = 0
			cfg.PrefillPerToken = 0
			base := simtest.Start(b, cfg)
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n, DisableCompression: true}}
			defer client.CloseIdleConnections()
			body := `{"prompt":"` + strings.Repeat("abc ", 16) + `","max_tokens":100,"stream":true}`
			var left atomic.Int64
			left.Store(int64(b.N))
			var failed atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			startCPU, start := cpuTime(b), time.Now()
			for range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for left.Add(-1) >= 0 {
						resp, err := client.Post(base+"/v1/completions", "application/json", strings.NewReader(body))
						if err != nil {
							failed.Add(1)
							continue
						}
						_, _ = io.Copy(io.Discard, resp.Body)
						_ = resp.Body.Close()
					}
				}()
			}
			wg.Wait()
			wall, cpu := time.Since(start), cpuTime(b)-startCPU
			b.StopTimer()
			if failed.Load() > 0 {
				b.Fatalf("%d requests failed", failed.Load())
			}
			streamSeconds := float64(min(n, b.N)) * wall.Seconds()
			b.ReportMetric(cpu.Seconds()*1000/streamSeconds, "cpu-ms/stream-s")
			b.ReportMetric(streamSeconds/cpu.Seconds(), "streams/core")
		})
	}
}
