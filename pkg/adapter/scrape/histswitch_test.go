// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package scrape

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
)

// Config.Histograms decides per pod: the pages of the pods it names are
// parsed with their latency histograms, the other pods' pages without
// (their gauges and counters either way), whichever worker parses them.
func TestHistogramsParsedPerPod(t *testing.T) {
	t.Parallel()
	srv := pageServer(t, loadFixture(t)) // vLLM V1, with its histograms
	a := types.NamespacedName{Namespace: "a", Name: "asked"}
	b := types.NamespacedName{Namespace: "b", Name: "not-asked"}
	cfg := testConfig()
	cfg.FirstConcurrency = 1 // one worker parses both pages, in turn
	cfg.Histograms = func(pod types.NamespacedName) bool { return pod == a }
	sink := newRecordingSink()
	m, err := NewManager(cfg, sink, nil)
	if err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		m.ScrapeNow(context.Background(), []Target{{Pod: a, URL: srv.URL}, {Pod: b, URL: srv.URL}})
		for _, tc := range []struct {
			pod  types.NamespacedName
			hist bool
		}{{a, true}, {b, false}} {
			recs := sink.get(tc.pod)
			if len(recs) != round+1 || recs[round].err != nil || recs[round].page == nil || len(recs[round].page.Models) == 0 {
				t.Fatalf("round %d, pod %s: records %+v, want a good page", round, tc.pod, recs)
			}
			page := recs[round].page
			hasHist := page.Models[0].Hists[catalog.TimeToFirstToken] != nil
			if page.HistogramsSkipped == tc.hist || hasHist != tc.hist {
				t.Errorf("round %d, pod %s: HistogramsSkipped %v, a TTFT histogram %v; want histograms parsed %v", round, tc.pod, page.HistogramsSkipped, hasHist, tc.hist)
			}
			if _, ok := page.Models[0].Value(catalog.QueueSize); !ok {
				t.Errorf("round %d, pod %s: the queue gauge was not parsed", round, tc.pod)
			}
		}
	}
}
