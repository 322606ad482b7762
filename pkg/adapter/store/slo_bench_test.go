// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package store

import (
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/parse"
)

// BenchmarkHeapPer1000TargetsSLO is BenchmarkHeapPer1000Targets with the
// real vLLM V1 page (counters and four latency histograms, 87 buckets) and
// windows full: 13 scrapes 5 s apart, so each histogram holds its most
// snapshots (WindowAnchors+1 at the default window). Compare the two
// benchmarks' MB/1000-targets for what the rates and percentiles add.
func BenchmarkHeapPer1000TargetsSLO(b *testing.B) {
	body, err := os.ReadFile("../parse/testdata/vllm-v1.prom")
	if err != nil {
		b.Fatal(err)
	}
	p := parse.NewParser()
	page, err := p.Parse(body)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		s := New()
		for step := range 13 {
			at := time.Unix(1000, 0).Add(time.Duration(step) * 5 * time.Second)
			for i := range 1000 {
				s.Record(types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("llm-%d", i)}, at, page, nil)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/1e6, "MB/1000-targets")
		runtime.KeepAlive(s)
	}
}
