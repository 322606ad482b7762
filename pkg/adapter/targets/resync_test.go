// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package targets

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	testclock "k8s.io/utils/clock/testing"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/scrape"
)

// countSetter counts the target sets it is given and keeps the last.
type countSetter struct {
	calls int
	last  []scrape.Target
}

func (c *countSetter) SetTargets(ts []scrape.Target) { c.calls++; c.last = ts }

// TestResyncRecomputesOnlyOnChange: a resync tick with no pod event, no new
// demand and no expiry leaves the target set alone; a poke, a new selector,
// an expiry and fullResync each make it recompute, and the set it computes
// then is right.
func TestResyncRecomputesOnlyOnChange(t *testing.T) {
	port := corev1.ContainerPort{Name: "http", ContainerPort: 8000}
	optIn := map[string]string{AnnotationScrape: "true"}
	a, b, c := testPod("a", optIn, port), testPod("b", optIn, port), testPod("c", nil, port)
	idx := podIndex(t, a, c)
	clk := testclock.NewFakePassiveClock(time.Unix(1000, 0))
	setter := &countSetter{}
	const ttl = 30 * time.Second // under fullResync, so that only expiry explains a recomputation
	tr := New(Config{DemandTTL: ttl, Resync: time.Second}, corelisters.NewPodLister(idx), testScraper{setter, &recProber{}}, testStore{knownSet{}, &retained{}}, clk)

	steps := []struct {
		name      string
		do        func()
		wantCalls int
		wantSet   string
	}{
		{"first reconcile", tr.Reconcile, 1, "[a]"},
		{"resync, nothing changed", nil, 1, "[a]"},
		{"a pod added, poked", func() {
			b.Status.PodIP = "10.1.9.9"
			if err := idx.Add(b); err != nil {
				t.Fatal(err)
			}
			tr.Poke()
		}, 2, "[a b]"},
		{"resync, nothing changed again", nil, 2, "[a b]"},
		{"a new selector asked", func() {
			tr.Want(context.Background(), "ns", labels.SelectorFromSet(labels.Set{"app": "c"}), []*corev1.Pod{c})
		}, 3, "[a b c]"},
		{"the same selector asked again", func() {
			clk.SetTime(clk.Now().Add(ttl / 2))
			tr.Want(context.Background(), "ns", labels.SelectorFromSet(labels.Set{"app": "c"}), []*corev1.Pod{c})
		}, 4, "[a b c]"}, // c was never scraped (knownSet{}): Want pokes for its first scrape
		{"resync before the selector expires", func() { clk.SetTime(clk.Now().Add(ttl - time.Second)) }, 4, "[a b c]"},
		{"resync after it expired", func() { clk.SetTime(clk.Now().Add(2 * time.Second)) }, 5, "[a b]"},
		{"resync just before fullResync", func() { clk.SetTime(clk.Now().Add(fullResync - time.Second)) }, 5, "[a b]"},
		{"resync at fullResync", func() { clk.SetTime(clk.Now().Add(time.Second)) }, 6, "[a b]"},
	}
	for _, s := range steps {
		if s.do != nil {
			s.do()
		}
		tr.reconcile(false)
		if setter.calls != s.wantCalls || names(setter.last) != s.wantSet {
			t.Fatalf("%s: %d target sets, the last %s; want %d, %s", s.name, setter.calls, names(setter.last), s.wantCalls, s.wantSet)
		}
	}
}

// BenchmarkResync10000 is one resync tick over 10,000 target pods when
// nothing changed, against the full recomputation every tick used to do
// (and a poke still does). Compare the two ns/op and B/op.
func BenchmarkResync10000(b *testing.B) {
	port := corev1.ContainerPort{Name: "http", ContainerPort: 8000}
	pods := make([]*corev1.Pod, 10000)
	for i := range pods {
		pods[i] = testPod(fmt.Sprintf("p%d", i), map[string]string{AnnotationScrape: "true"}, port)
		pods[i].UID = types.UID(pods[i].Name)
		pods[i].ResourceVersion = "1"
	}
	idx := podIndex(b, pods...)
	for _, bc := range []struct {
		name  string
		force bool
	}{{"full", true}, {"unchanged", false}} {
		b.Run(bc.name, func(b *testing.B) {
			tr := New(Config{DemandTTL: time.Hour, Resync: time.Second}, corelisters.NewPodLister(idx), testScraper{nopSetter{}, &recProber{}}, testStore{knownSet{}, nopForget{}},
				testclock.NewFakePassiveClock(time.Unix(1000, 0)))
			tr.Reconcile()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				tr.reconcile(bc.force)
			}
		})
	}
}

// flakyLister fails List while failing is set.
type flakyLister struct {
	corelisters.PodLister
	failing bool
}

func (f *flakyLister) List(sel labels.Selector) ([]*corev1.Pod, error) {
	if f.failing {
		return nil, errors.New("cache unavailable")
	}
	return f.PodLister.List(sel)
}

// TestResyncRetriesAfterAFailedList: a reconcile whose pod list fails
// leaves the tracker marked changed, so the next resync tick tries again
// rather than waiting for fullResync.
func TestResyncRetriesAfterAFailedList(t *testing.T) {
	port := corev1.ContainerPort{Name: "http", ContainerPort: 8000}
	lister := &flakyLister{PodLister: corelisters.NewPodLister(podIndex(t, testPod("a", map[string]string{AnnotationScrape: "true"}, port)))}
	setter := &countSetter{}
	tr := New(Config{DemandTTL: time.Minute, Resync: time.Second}, lister, testScraper{setter, &recProber{}}, testStore{knownSet{}, &retained{}}, testclock.NewFakePassiveClock(time.Unix(1000, 0)))
	tr.Reconcile()
	lister.failing = true
	tr.Poke()
	tr.reconcile(false)
	if setter.calls != 1 {
		t.Fatalf("%d target sets after a failed list, want only the first", setter.calls)
	}
	lister.failing = false
	tr.reconcile(false)
	if setter.calls != 2 || names(setter.last) != "[a]" {
		t.Fatalf("after the list recovered: %d target sets, the last %s; want 2, [a]", setter.calls, names(setter.last))
	}
}
