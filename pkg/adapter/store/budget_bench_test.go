// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package store

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/parse"
)

// BenchmarkRecordTenantPage is the whole of Record (what runs under the
// store's lock and what runs outside it) for 200 pods each scraped every
// 5 s, of the real vLLM V1 page, of a tenant's page of 256 models with
// 1 KiB names each (the parser's bounds before the store's budget), and of
// the largest page the budget keeps (MaxModels models, MaxModelNameBytes of
// names, full windows, parse.MaxAdapters adapters). Compare the
// sub-benchmarks' ns/op as ratios. Under the store's lock, Record only
// swaps the record it built in: that part does not grow with the page.
func BenchmarkRecordTenantPage(b *testing.B) {
	for _, bc := range []struct {
		name string
		page *parse.Page
	}{
		{"vllm-v1", realPage(b)},
		{"256-models-1KiB-names", tenantPage("t", 256, 1024, 0, 0, 1)},
		{"largest-within-budget", largestPage("t", parse.MaxBuckets, 1)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			const pods = 200
			s := New()
			at := time.Unix(1000, 0)
			names := make([]types.NamespacedName, pods)
			for i := range names {
				names[i] = podN(i)
				s.Record(names[i], at, bc.page, nil) // every pod has a previous page
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				s.Record(names[i%pods], at.Add(time.Duration(i+pods)*25*time.Millisecond), bc.page, nil)
			}
		})
	}
}

// BenchmarkGetWhileRecording is one Get of a victim pod while another
// goroutine records, without pause, the page of each sub-benchmark for
// 200 other pods: how long Records keep readers waiting on the store's
// lock. Compare the sub-benchmarks' ns/op as ratios.
func BenchmarkGetWhileRecording(b *testing.B) {
	for _, bc := range []struct {
		name string
		page *parse.Page
	}{
		{"vllm-v1", realPage(b)},
		{"256-models-1KiB-names", tenantPage("t", 256, 1024, 0, 0, 1)},
		{"largest-within-budget", largestPage("t", parse.MaxBuckets, 1)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			const pods = 200
			s := New()
			at := time.Unix(1000, 0)
			victim := types.NamespacedName{Namespace: "victim", Name: "llm"}
			s.Record(victim, at, realPage(b), nil)
			names := make([]types.NamespacedName, pods)
			for i := range names {
				names[i] = podN(i)
			}
			stop, done := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(done)
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					s.Record(names[i%pods], at.Add(time.Duration(i+1)*25*time.Millisecond), bc.page, nil)
				}
			}()
			defer func() { close(stop); <-done }()
			for b.Loop() {
				if s.Get(victim, catalog.QueueSize, nil, at, time.Hour).Status != OK {
					b.Fatal("the victim has no value")
				}
			}
		})
	}
}
