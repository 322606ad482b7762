// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package store

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/parse"
)

// BenchmarkRecord is the store's share of one scrape: copying a parsed page in.
func BenchmarkRecord(b *testing.B) {
	s := New()
	pg := &parse.Page{Server: parse.VLLMV1, Models: []parse.Model{mdl("meta-llama/Llama-3.1-8B-Instruct", 3, 0.42)}}
	pods := make([]types.NamespacedName, 1000)
	for i := range pods {
		pods[i] = types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("llm-%d", i)}
	}
	at := time.Unix(1000, 0)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		s.Record(pods[i%len(pods)], at.Add(time.Duration(i)), pg, nil)
	}
}

// BenchmarkGet1000 is one answer for 1,000 pods: the per-query work of the
// provider besides the informer's list.
func BenchmarkGet1000(b *testing.B) {
	s := New()
	at := time.Unix(1000, 0)
	pods := make([]types.NamespacedName, 1000)
	for i := range pods {
		pods[i] = types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("llm-%d", i)}
		s.Record(pods[i], at, &parse.Page{Models: []parse.Model{mdl("m", float64(i), 0.5)}}, nil)
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, p := range pods {
			if s.Get(p, catalog.QueueSize, nil, at, time.Minute).Status != OK {
				b.Fatal("missing")
			}
		}
	}
}

// BenchmarkHeapPer1000Targets reports the store's heap for 1,000 pods of
// one model each, as the custom metric MB/1000-targets.
func BenchmarkHeapPer1000Targets(b *testing.B) {
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		s := New()
		for i := range 1000 {
			s.Record(types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("llm-%d", i)}, time.Unix(1000, 0), &parse.Page{Models: []parse.Model{mdl("meta-llama/Llama-3.1-8B-Instruct", 3, 0.42)}}, nil)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/1e6, "MB/1000-targets")
		runtime.KeepAlive(s)
	}
}
