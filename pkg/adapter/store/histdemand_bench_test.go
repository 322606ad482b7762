// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package store

import (
	"os"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/parse"
)

// BenchmarkParseRecordHistograms is the parse and store share of one
// pod-scrape of a vLLM V1 page, with the latency histograms wanted (a
// latency percentile was asked for within --demand-ttl) and not wanted:
// compare the two in one run, as a ratio. The scrapes of one pod are a
// second apart, so the latency windows take snapshots as they do live.
func BenchmarkParseRecordHistograms(b *testing.B) {
	page, err := os.ReadFile("../parse/testdata/vllm-v1.prom")
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		wanted bool
	}{{"histograms-wanted", true}, {"histograms-not-wanted", false}} {
		b.Run(tc.name, func(b *testing.B) {
			var builtin *parse.Servers // nil: the built-in servers
			p := parse.NewParserFor(builtin.WithHistograms(func() bool { return tc.wanted }))
			s := New()
			pod := types.NamespacedName{Namespace: "ns", Name: "llm-0"}
			at := time.Unix(1000, 0)
			b.SetBytes(int64(len(page)))
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				pg, err := p.Parse(page)
				if err != nil {
					b.Fatal(err)
				}
				if pg.HistogramsSkipped == tc.wanted {
					b.Fatalf("HistogramsSkipped %v with the histograms wanted %v", pg.HistogramsSkipped, tc.wanted)
				}
				s.Record(pod, at.Add(time.Duration(i)*time.Second), pg, nil)
			}
		})
	}
}
