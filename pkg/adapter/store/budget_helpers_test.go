// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package store

import (
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/parse"
)

// tenantPage is a page of n models whose names are nameLen bytes long,
// made afresh for tag (as each pod's scrape parses its own), each with a
// queue size and counters that grow with step; the first histModels models
// carry all four latency histograms of buckets buckets.
func tenantPage(tag string, n, nameLen, histModels, buckets, step int) *parse.Page {
	pg := &parse.Page{Server: parse.VLLMV1, Models: make([]parse.Model, n)}
	for i := range pg.Models {
		m := &pg.Models[i]
		name := fmt.Sprintf("%s-m%d-", tag, i)
		if len(name) < nameLen {
			name += strings.Repeat("x", nameLen-len(name))
		}
		m.Name = name[:nameLen]
		m.Values[catalog.QueueSize] = 1
		m.Has = m.Has.Add(catalog.QueueSize)
		for c := range catalog.NumCounters {
			m.Counters[c] = float64(100 * step)
			m.HasCounter |= 1 << c
		}
		if i >= histModels {
			continue
		}
		for l := range catalog.NumLatencies {
			h := &parse.Histogram{N: buckets}
			for j := range buckets {
				h.Le[j] = float64(j + 1)
				h.Count[j] = float64((j + 1) * step)
			}
			h.Le[buckets-1] = math.Inf(1)
			m.Hists[l] = h
		}
	}
	return pg
}

// realPage is the parsed vLLM V1 page of testdata (87 histogram buckets).
func realPage(tb testing.TB) *parse.Page {
	tb.Helper()
	body, err := os.ReadFile("../parse/testdata/vllm-v1.prom")
	if err != nil {
		tb.Fatal(err)
	}
	pg, err := parse.NewParser().Parse(body)
	if err != nil {
		tb.Fatal(err)
	}
	return pg
}

func podN(i int) types.NamespacedName {
	return types.NamespacedName{Namespace: "tenant", Name: fmt.Sprintf("llm-%d", i)}
}
