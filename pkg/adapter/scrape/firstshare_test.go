// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package scrape

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// A namespace asking about many new pods whose pages hang holds at most its
// share of the first-scrape pool, so another namespace's first scrape still
// runs within its deadline. Without the share the flood takes all four
// on-demand workers for a whole scrape timeout, and the other namespace's
// question gets no first scrape at all.
func TestFirstScrapeShare_FloodingNamespaceCannotStallOthers(t *testing.T) {
	t.Parallel()
	const (
		floodPods = 12
		callers   = 6
	)
	healthy := pageServer(t, simplePage(1))
	hang := hangingServer(t)
	var flood []Target
	for i := range floodPods {
		flood = append(flood, Target{Pod: types.NamespacedName{Namespace: "flood", Name: fmt.Sprint("new-", i)}, URL: fmt.Sprintf("%s/new-%d", hang.URL, i)})
	}
	victim := Target{Pod: types.NamespacedName{Namespace: "victim", Name: "new"}, URL: healthy.URL}

	sink := newRecordingSink()
	cfg := testConfig()
	cfg.Interval, cfg.Timeout = 5*time.Second, 5*time.Second // a hanging first scrape holds its worker this long
	cfg.FirstConcurrency = 4
	m, err := NewManager(cfg, sink, nil)
	if err != nil {
		t.Fatal(err)
	}
	requests := countRequests(m)
	stop := startManager(t, m)
	defer stop()

	// Several questions in the flooding namespace, each about new pods.
	floodCtx, cancelFlood := context.WithTimeout(context.Background(), 2*cfg.Timeout)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			// Each caller asks about the pods in its own order, as
			// different selectors would.
			ts := append(append([]Target(nil), flood[2*i:]...), flood[:2*i]...)
			m.ScrapeNow(floodCtx, ts)
		})
	}
	defer func() {
		cancelFlood()
		wg.Wait()
	}()
	hangHost := hang.Listener.Addr().String()
	waitFor(t, "the flooding namespace's first scrapes to start", func() bool { return requests.maxForHost(hangHost) >= 2 })
	time.Sleep(200 * time.Millisecond) // the flood takes what it can

	// The other namespace's first answer waits for its first scrape at
	// most this long (--first-scrape-timeout).
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	m.ScrapeNow(ctx, []Target{victim})
	cancel()
	took := time.Since(start)
	recs := sink.get(victim.Pod)
	if len(recs) != 1 || recs[0].err != nil {
		t.Errorf("the other namespace's first scrape: records %+v after %v; want one good scrape within its deadline", recs, took)
	}
	if got, share := requests.maxForHost(hangHost), cfg.firstNamespaceConcurrency(); got > share {
		t.Errorf("the flooding namespace had %d first scrapes in flight at once, want at most its share %d of %d", got, share, cfg.FirstConcurrency)
	}
}
