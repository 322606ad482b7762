// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/parse"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/scrape"
)

func mdl(name string, q, kv float64) parse.Model {
	m := parse.Model{Name: name}
	m.Values[catalog.QueueSize], m.Values[catalog.KVCacheUsage] = q, kv
	m.Has = m.Has.Add(catalog.QueueSize).Add(catalog.KVCacheUsage)
	return m
}

func TestGet(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pod := types.NamespacedName{Namespace: "ns", Name: "p"}
	only := func(name string) ModelMatcher { return func(m string) bool { return m == name } }
	cases := []struct {
		name   string
		record func(s *Store)
		sig    catalog.Signal
		match  ModelMatcher
		now    time.Time
		want   float64
		status Status
		wantAt time.Time
	}{
		{name: "never scraped", record: func(*Store) {}, sig: catalog.QueueSize, now: t0, status: NotScraped},
		{name: "sum over models", record: func(s *Store) {
			s.Record(pod, t0, &parse.Page{Models: []parse.Model{mdl("a", 2, 0.1), mdl("b", 3, 0.7)}}, nil)
		}, sig: catalog.QueueSize, now: t0.Add(time.Second), want: 5, status: OK, wantAt: t0},
		{name: "max over models", record: func(s *Store) {
			s.Record(pod, t0, &parse.Page{Models: []parse.Model{mdl("a", 2, 0.1), mdl("b", 3, 0.7)}}, nil)
		}, sig: catalog.KVCacheUsage, now: t0, want: 0.7, status: OK, wantAt: t0},
		{name: "one model", record: func(s *Store) {
			s.Record(pod, t0, &parse.Page{Models: []parse.Model{mdl("a", 2, 0.1), mdl("b", 3, 0.7)}}, nil)
		}, sig: catalog.QueueSize, match: only("a"), now: t0, want: 2, status: OK, wantAt: t0},
		{name: "no such model", record: func(s *Store) { s.Record(pod, t0, &parse.Page{Models: []parse.Model{mdl("a", 2, 0.1)}}, nil) }, sig: catalog.QueueSize, match: only("z"), now: t0, status: Absent, wantAt: t0},
		{name: "series absent", record: func(s *Store) { s.Record(pod, t0, &parse.Page{Models: []parse.Model{mdl("a", 2, 0.1)}}, nil) }, sig: catalog.BatchSize, now: t0, status: Absent, wantAt: t0},
		{name: "zero is a value", record: func(s *Store) { s.Record(pod, t0, &parse.Page{Models: []parse.Model{mdl("a", 0, 0)}}, nil) }, sig: catalog.QueueSize, now: t0, want: 0, status: OK, wantAt: t0},
		{name: "stale", record: func(s *Store) { s.Record(pod, t0, &parse.Page{Models: []parse.Model{mdl("a", 2, 0.1)}}, nil) }, sig: catalog.QueueSize, now: t0.Add(16 * time.Second), status: Stale, wantAt: t0},
		{name: "failure after a value older than max age", record: func(s *Store) {
			s.Record(pod, t0, &parse.Page{Models: []parse.Model{mdl("a", 2, 0.1)}}, nil)
			s.Record(pod, t0.Add(10*time.Second), nil, errors.New("timeout"))
		}, sig: catalog.QueueSize, now: t0.Add(16 * time.Second), status: Failed, wantAt: t0.Add(10 * time.Second)},
		{name: "failure without any good scrape", record: func(s *Store) {
			s.Record(pod, t0, nil, errors.New("refused"))
		}, sig: catalog.QueueSize, now: t0, status: Failed, wantAt: t0},
		{name: "older outcome never overwrites newer", record: func(s *Store) {
			s.Record(pod, t0.Add(time.Second), &parse.Page{Models: []parse.Model{mdl("a", 9, 0.1)}}, nil)
			s.Record(pod, t0, nil, errors.New("late failure"))
		}, sig: catalog.QueueSize, now: t0.Add(time.Second), want: 9, status: OK, wantAt: t0.Add(time.Second)},
		{name: "gpu never reported", record: func(s *Store) { s.Record(pod, t0, &parse.Page{}, nil) }, sig: catalog.GPUUtilization, now: t0, status: NotScraped},
		{name: "gpu value", record: func(s *Store) {
			g := GPU{GPUs: 2, Has: catalog.Set(0).Add(catalog.GPUUtilization)}
			g.Values[catalog.GPUUtilization] = 0.97
			s.RecordGPU(t0, map[types.NamespacedName]GPU{pod: g})
		}, sig: catalog.GPUUtilization, now: t0, want: 0.97, status: OK, wantAt: t0},
		{name: "gpu SM activity unsupported is absent, not zero", record: func(s *Store) {
			s.RecordGPU(t0, map[types.NamespacedName]GPU{pod: {GPUs: 1, Has: catalog.Set(0).Add(catalog.GPUUtilization)}})
		}, sig: catalog.GPUSMActive, now: t0, status: Absent, wantAt: t0},
		{name: "gpu stale", record: func(s *Store) {
			s.RecordGPU(t0, map[types.NamespacedName]GPU{pod: {GPUs: 1, Has: catalog.Set(0).Add(catalog.GPUUtilization)}})
		}, sig: catalog.GPUUtilization, now: t0.Add(time.Minute), status: Stale, wantAt: t0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := New()
			tc.record(s)
			got := s.Get(pod, tc.sig, tc.match, tc.now, 15*time.Second)
			if got.Status != tc.status || got.Value != tc.want || !got.Time.Equal(tc.wantAt) {
				t.Fatalf("got %+v, want value %v status %s at %s", got, tc.want, tc.status, tc.wantAt)
			}
			if got.Status != OK && got.Status != NotScraped && got.Detail == "" {
				t.Errorf("status %s without detail", got.Status)
			}
		})
	}
}

// TestFailureKeepsGoodValue: a failed scrape does not erase a good value
// younger than the maximum age; once the good value is older, the pod is
// Failed with the latest error in the detail.
// Was wrong: one failed scrape of the busiest pod made it Failed at once, mid-spike.
func TestFailureKeepsGoodValue(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pod := types.NamespacedName{Namespace: "ns", Name: "busiest"}
	const maxAge = 15 * time.Second
	s := New()
	s.Record(pod, t0, &parse.Page{Models: []parse.Model{mdl("a", 7, 0.5)}}, nil)
	s.Record(pod, t0.Add(5*time.Second), nil, errors.New("timeout: busy"))
	s.Record(pod, t0.Add(10*time.Second), nil, errors.New("timeout: still busy"))

	cases := []struct {
		name       string
		now        time.Time
		status     Status
		value      float64
		at         time.Time
		wantDetail string
	}{
		{name: "good value younger than max age", now: t0.Add(12 * time.Second), status: OK, value: 7, at: t0},
		{name: "good value at exactly max age", now: t0.Add(maxAge), status: OK, value: 7, at: t0},
		{name: "good value older than max age", now: t0.Add(16 * time.Second), status: Failed, at: t0.Add(10 * time.Second), wantDetail: "still busy"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := s.Get(pod, catalog.QueueSize, nil, tc.now, maxAge)
			if got.Status != tc.status || got.Value != tc.value || !got.Time.Equal(tc.at) || !strings.Contains(got.Detail, tc.wantDetail) {
				t.Fatalf("got %+v, want %s %v at %s with detail %q", got, tc.status, tc.value, tc.at, tc.wantDetail)
			}
			counts := s.Counts(tc.now, maxAge)
			if counts[tc.status] != 1 {
				t.Fatalf("counts %v, want the pod counted as %s", counts, tc.status)
			}
		})
	}
	if got := s.Models(pod); got != nil {
		t.Errorf("Models after a failed attempt = %v, want nil", got)
	}
}

// canceledErr is a scrape canceled by its caller, as the scrape manager
// records it.
func canceledErr() error {
	return fmt.Errorf("scraping pod: %w", &scrape.Error{Reason: scrape.ReasonCanceled, Err: context.DeadlineExceeded})
}

// TestCanceledNeverOverwrites: a canceled scrape (the ScrapeNow deadline,
// shutdown) says nothing about the pod: it never replaces an existing
// outcome, older or newer, and never hides a good value.
// Was wrong: a canceled first scrape overwrote a newer good outcome.
func TestCanceledNeverOverwrites(t *testing.T) {
	t1 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t2, t3 := t1.Add(time.Second), t1.Add(2*time.Second)
	pod := types.NamespacedName{Namespace: "ns", Name: "p"}
	good := &parse.Page{Models: []parse.Model{mdl("a", 4, 0.5)}}
	cases := []struct {
		name   string
		record func(s *Store)
		status Status
		value  float64
		at     time.Time
	}{
		{name: "canceled started before the good scrape", record: func(s *Store) {
			s.Record(pod, t2, good, nil)
			s.Record(pod, t1, nil, canceledErr())
		}, status: OK, value: 4, at: t2},
		{name: "canceled started after the good scrape", record: func(s *Store) {
			s.Record(pod, t2, good, nil)
			s.Record(pod, t3, nil, canceledErr())
		}, status: OK, value: 4, at: t2},
		{name: "canceled after a failure keeps the failure", record: func(s *Store) {
			s.Record(pod, t2, nil, errors.New("refused"))
			s.Record(pod, t3, nil, canceledErr())
		}, status: Failed, at: t2},
		{name: "canceled first, then an older good scrape", record: func(s *Store) {
			s.Record(pod, t3, nil, canceledErr())
			s.Record(pod, t2, good, nil)
		}, status: OK, value: 4, at: t2},
		{name: "canceled first, then an older failure", record: func(s *Store) {
			s.Record(pod, t3, nil, canceledErr())
			s.Record(pod, t2, nil, errors.New("refused"))
		}, status: Failed, at: t2},
		{name: "canceled only", record: func(s *Store) {
			s.Record(pod, t1, nil, canceledErr())
		}, status: Failed, at: t1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := New()
			tc.record(s)
			got := s.Get(pod, catalog.QueueSize, nil, t3, 15*time.Second)
			if got.Status != tc.status || got.Value != tc.value || !got.Time.Equal(tc.at) {
				t.Fatalf("got %+v, want %s %v at %s", got, tc.status, tc.value, tc.at)
			}
			if tc.status == Failed && strings.Contains(got.Detail, "canceled") != (tc.name == "canceled only") {
				t.Fatalf("detail %q", got.Detail)
			}
		})
	}
}

// TestErrorTextBounded: the error text kept per pod is cut at record time,
// so a hostile target cannot make the store hold its answer.
// Was wrong: the whole error text was kept per pod, 4 MiB for a 1 MiB bad value.
func TestErrorTextBounded(t *testing.T) {
	pod := types.NamespacedName{Namespace: "ns", Name: "p"}
	at := time.Unix(1000, 0)
	// 1 MiB of two-byte runes. MaxErrorLen is even, so without a prefix the
	// cut falls between runes; the one-byte prefix puts it inside a rune,
	// which the cut must back off from to stay valid UTF-8.
	for _, prefix := range []string{"", "x"} {
		s := New()
		s.Record(pod, at, nil, errors.New(prefix+strings.Repeat("é", 1<<19)))
		got := s.Get(pod, catalog.QueueSize, nil, at, time.Minute)
		if got.Status != Failed {
			t.Fatalf("prefix %q: status %s, want %s", prefix, got.Status, Failed)
		}
		if len(got.Detail) > MaxErrorLen+len("…") || !strings.HasSuffix(got.Detail, "…") || !utf8.ValidString(got.Detail) {
			t.Fatalf("prefix %q: detail of %d bytes (%q...), want at most %d valid UTF-8 bytes ending in …", prefix, len(got.Detail), got.Detail[:min(len(got.Detail), 20)], MaxErrorLen+len("…"))
		}
		if stored := s.pods[pod].serving.err; len(stored) > MaxErrorLen+len("…") {
			t.Fatalf("prefix %q: store keeps %d bytes of error text", prefix, len(stored))
		}
	}
}

func TestRecordCopiesThePage(t *testing.T) {
	s := New()
	pod := types.NamespacedName{Namespace: "ns", Name: "p"}
	pg := &parse.Page{Models: []parse.Model{mdl("a", 2, 0.1)}}
	s.Record(pod, time.Unix(100, 0), pg, nil)
	pg.Models[0].Values[catalog.QueueSize] = 99
	if got := s.Get(pod, catalog.QueueSize, nil, time.Unix(100, 0), time.Minute); got.Value != 2 {
		t.Fatalf("store shares the caller's page: got %v", got.Value)
	}
}

func TestRetain(t *testing.T) {
	s := New()
	a := types.NamespacedName{Namespace: "ns", Name: "a"}
	b := types.NamespacedName{Namespace: "ns", Name: "b"}
	s.Record(a, time.Unix(1, 0), &parse.Page{}, nil)
	s.Record(b, time.Unix(1, 0), &parse.Page{}, nil)
	s.Retain(time.Unix(2, 0), func(p types.NamespacedName) bool { return p == a })
	if !s.Scraped(a) || s.Scraped(b) || s.Len() != 1 {
		t.Fatalf("retain kept the wrong pods: a=%v b=%v len=%d", s.Scraped(a), s.Scraped(b), s.Len())
	}
}

func TestCollector(t *testing.T) {
	s := New()
	t0 := time.Unix(1000, 0)
	s.Record(types.NamespacedName{Namespace: "ns", Name: "ok"}, t0, &parse.Page{}, nil)
	s.Record(types.NamespacedName{Namespace: "ns", Name: "old"}, t0.Add(-time.Minute), &parse.Page{}, nil)
	s.Record(types.NamespacedName{Namespace: "ns", Name: "bad"}, t0, nil, errors.New("refused"))
	// A failure after a fresh good scrape still counts as ok.
	s.Record(types.NamespacedName{Namespace: "ns", Name: "blip"}, t0.Add(-time.Second), &parse.Page{}, nil)
	s.Record(types.NamespacedName{Namespace: "ns", Name: "blip"}, t0, nil, errors.New("timeout"))
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(s, 15*time.Second, func() time.Time { return t0 }))
	want := `
# HELP inference_metrics_adapter_pods Target pods by the status of their model-server sample: ok (a good scrape younger than --max-age, even if later ones failed), stale (latest scrape good but older than --max-age), failed (latest scrape failed, no good one younger than --max-age), not_scraped (not scraped yet).
# TYPE inference_metrics_adapter_pods gauge
inference_metrics_adapter_pods{status="failed"} 1
inference_metrics_adapter_pods{status="not_scraped"} 0
inference_metrics_adapter_pods{status="ok"} 2
inference_metrics_adapter_pods{status="stale"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}

// TestAbsentSaysValuesWereRefused: a series whose values the parser refused
// (out of range) is absent, and the 404's detail says the page carried
// refused values, so that "no series" does not mislead.
func TestAbsentSaysValuesWereRefused(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pod := types.NamespacedName{Namespace: "ns", Name: "p"}
	cases := []struct {
		name     string
		rejected [parse.NumRejects]uint32
		want     string
	}{
		{name: "none refused", want: "page (unknown) has no series for inference_batch_size"},
		{name: "negative and above one", rejected: [parse.NumRejects]uint32{parse.RejectNegative: 1, parse.RejectAboveOne: 2},
			want: "page (unknown) has no series for inference_batch_size; the page's values refused as out of range: 1 negative, 2 above_one"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := New()
			s.Record(pod, t0, &parse.Page{Models: []parse.Model{mdl("a", 2, 0.1)}, Rejected: tc.rejected}, nil)
			got := s.Get(pod, catalog.BatchSize, nil, t0, 15*time.Second)
			if got.Status != Absent || got.Detail != tc.want {
				t.Errorf("Get = %v %q, want %v %q", got.Status, got.Detail, Absent, tc.want)
			}
		})
	}
}

// TestRetainDropsLateScrapes: a scrape of a pod that was in flight when
// Retain forgot the pod, and ends after, must not put the forgotten pod's
// page (or its node's GPU report) under the pod's name: a StatefulSet's new
// pod of that name would be answered with it. A scrape that started after
// the pod was forgotten is the new pod's, and is kept.
func TestRetainDropsLateScrapes(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	pod := types.NamespacedName{Namespace: "ns", Name: "llm-0"}
	for _, tc := range []struct {
		name     string
		startsAt time.Time // the late scrape's start
		want     bool      // recorded
	}{
		{"started before the pod was forgotten", t0.Add(900 * time.Millisecond), false},
		{"started as it was forgotten", t0.Add(time.Second), true},
		{"started after", t0.Add(2 * time.Second), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New()
			s.Record(pod, t0, &parse.Page{}, nil)
			s.Retain(t0.Add(time.Second), func(types.NamespacedName) bool { return false })
			s.Record(pod, tc.startsAt, &parse.Page{}, nil)
			if got := s.Scraped(pod); got != tc.want {
				t.Errorf("page recorded: %v, want %v", got, tc.want)
			}
			s.RecordGPU(tc.startsAt, map[types.NamespacedName]GPU{pod: {GPUs: 1}})
			if e := s.pods[pod]; (e != nil && e.hasGPU) != tc.want {
				t.Errorf("GPU report recorded: %v, want %v", !tc.want, tc.want)
			}
		})
	}
	// A pod forgotten long ago is forgotten by Retain too (the map stays
	// bounded), and then any scrape of the name is recorded.
	s := New()
	s.Record(pod, t0, &parse.Page{}, nil)
	s.Retain(t0.Add(time.Second), func(types.NamespacedName) bool { return false })
	s.Retain(t0.Add(time.Second+removedTTL+time.Nanosecond), func(types.NamespacedName) bool { return true })
	if len(s.removed) != 0 {
		t.Errorf("%d forgotten pods remembered past %s", len(s.removed), removedTTL)
	}
}
