// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package scrape

import (
	"container/heap"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// TestNextTick: the next due time after a scrape is the next tick on the
// loop's phase; a scrape that ended after its next tick is followed by one
// more at once, and the ticks missed meanwhile are skipped (time.Ticker).
func TestNextTick(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const iv = time.Second
	for _, tc := range []struct {
		name string
		end  time.Duration // when the scrape ended, after its tick
		want time.Duration // the next due time, after the same tick
	}{
		{"quick scrape", 10 * time.Millisecond, iv},
		{"scrape just before the next tick", iv - time.Nanosecond, iv},
		{"scrape ends on the next tick", iv, iv},
		{"overrun by half an interval", 3 * iv / 2, iv},
		{"overrun by 2.5 intervals skips two ticks", 7 * iv / 2, 3 * iv},
		{"overrun by exactly 3 intervals", 3 * iv, 3 * iv},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := nextTick(t0, t0.Add(tc.end), iv)
			if want := t0.Add(tc.want); !got.Equal(want) {
				t.Errorf("nextTick(end at +%v) = +%v, want +%v", tc.end, got.Sub(t0), tc.want)
			}
			if end := t0.Add(tc.end); got.After(end) != (tc.end < iv) {
				t.Errorf("due at +%v after a scrape that ended at +%v: due at once = %v, want %v", got.Sub(t0), tc.end, !got.After(end), tc.end >= iv)
			}
		})
	}
}

// TestSchedulerFinish: after its scrape a loop goes back to the heap at its
// next tick, or straight to its namespace's queue when that tick has
// passed; a loop removed while running is done only when its scrape ends.
func TestSchedulerFinish(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const iv = time.Second
	for _, tc := range []struct {
		name      string
		end       time.Duration
		removed   bool
		wantState loopState
		wantTick  time.Duration
	}{
		{"in time: back to the heap", iv / 2, false, stateDue, iv},
		{"overrun: queued at once, missed ticks skipped", 5*iv/2 + 1, false, stateQueued, 2 * iv},
		{"removed while running: done", iv / 2, true, stateStopped, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ran []string
			cfg := testConfig()
			cfg.Interval, cfg.Concurrency, cfg.NamespaceConcurrency = iv, 1, 1
			s := newScheduler(cfg, func(l *loop) { ran = append(ran, l.target.Pod.Name) })
			l, wg := testLoop("ns", "p")
			l.tick, l.state = t0, stateRunning
			s.mu.Lock()
			q := s.namespaceLocked("ns")
			q.running, s.busy = 1, 1 // as startLocked left it
			s.mu.Unlock()
			if tc.removed && !s.remove(l) {
				t.Fatal("remove of a running loop says none runs")
			}
			s.finish(l, t0.Add(tc.end))
			if l.state == stateRunning { // the queued loop was handed to the (only) runner at once
				l.state = stateQueued
			}
			if l.state != tc.wantState {
				t.Fatalf("state %v, want %v", l.state, tc.wantState)
			}
			if tc.removed {
				select {
				case <-l.done:
				default:
					t.Fatal("done not closed when the removed loop's scrape ended")
				}
				wg.Wait()
				if len(s.namespaces) != 0 || len(s.due) != 0 {
					t.Errorf("scheduler keeps %d namespaces and %d due loops after its only loop ended", len(s.namespaces), len(s.due))
				}
				return
			}
			if got := l.tick.Sub(t0); got != tc.wantTick {
				t.Errorf("next tick +%v, want +%v", got, tc.wantTick)
			}
			if tc.wantState == stateDue && (len(s.due) != 1 || s.due[0] != l) {
				t.Errorf("heap %v, want the loop alone", s.due)
			}
		})
	}
}

// testLoop is a loop of pod ns/name, not yet scheduled, with a WaitGroup
// to which it counts.
func testLoop(ns, name string) (*loop, *sync.WaitGroup) {
	wg := &sync.WaitGroup{}
	wg.Add(1)
	ctx, cancel := context.WithCancel(context.Background())
	return &loop{
		target: Target{Pod: types.NamespacedName{Namespace: ns, Name: name}},
		ctx:    ctx, cancel: cancel, done: make(chan struct{}), wg: wg, index: -1,
	}, wg
}

// TestSchedulerDueOrder: loops run in the order of their due times, not of
// their addition, and each once per interval.
func TestSchedulerDueOrder(t *testing.T) {
	for _, tc := range []struct {
		name    string
		offsets []time.Duration // due times of loops p0, p1, ... relative to now
		want    []string
	}{
		{"reverse", []time.Duration{-time.Millisecond, -2 * time.Millisecond, -3 * time.Millisecond}, []string{"p2", "p1", "p0"}},
		{"mixed", []time.Duration{-2 * time.Millisecond, -5 * time.Millisecond, -time.Millisecond, -4 * time.Millisecond}, []string{"p1", "p3", "p0", "p2"}},
		{"one", []time.Duration{0}, []string{"p0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.Interval, cfg.Timeout, cfg.Concurrency = time.Hour, time.Second, 1 // one runner: a strict order
			var (
				mu  sync.Mutex
				ran []string
			)
			s := newScheduler(cfg, func(l *loop) {
				mu.Lock()
				defer mu.Unlock()
				ran = append(ran, l.target.Pod.Name)
			})
			now := time.Now()
			s.mu.Lock() // held while adding: the dispatcher sees them all at once
			for i, off := range tc.offsets {
				l, _ := testLoop("ns", fmt.Sprint("p", i))
				l.tick = now.Add(off)
				s.due.Push(l)
			}
			heap.Init(&s.due)
			s.mu.Unlock()
			ctx, cancel := context.WithCancel(context.Background())
			stop := s.start(ctx)
			waitFor(t, "every loop's scrape", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(ran) >= len(tc.want)
			})
			cancel()
			stop()
			mu.Lock()
			defer mu.Unlock()
			if fmt.Sprint(ran) != fmt.Sprint(tc.want) {
				t.Errorf("ran %v, want %v", ran, tc.want)
			}
		})
	}
}

// TestSchedulerSlack: one wake-up of the dispatcher takes every loop due
// within the slack, early, and leaves the later ones in the heap; the slack
// is a twentieth of the interval, at most 50ms.
func TestSchedulerSlack(t *testing.T) {
	for _, tc := range []struct {
		interval, want time.Duration
	}{
		{10 * time.Millisecond, 500 * time.Microsecond},
		{100 * time.Millisecond, 5 * time.Millisecond},
		{time.Second, 50 * time.Millisecond},
		{15 * time.Second, 50 * time.Millisecond},
	} {
		if got := dispatchSlack(tc.interval); got != tc.want {
			t.Errorf("dispatchSlack(%v) = %v, want %v", tc.interval, got, tc.want)
		}
	}

	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cfg := testConfig()
	cfg.Interval = time.Second
	s := newScheduler(cfg, func(*loop) {})
	offsets := map[string]time.Duration{
		"overdue":          -time.Millisecond,
		"now":              0,
		"within the slack": 30 * time.Millisecond,
		"at the slack":     50 * time.Millisecond,
		"past the slack":   50*time.Millisecond + 1,
		"later":            500 * time.Millisecond,
	}
	loops := map[string]*loop{}
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, off := range offsets {
		l, _ := testLoop("ns", name)
		l.tick, l.state = t0.Add(off), stateDue
		heap.Push(&s.due, l)
		loops[name] = l
	}
	s.takeDueLocked(t0)
	for name, off := range offsets {
		want := stateDue
		if off <= 50*time.Millisecond {
			want = stateQueued
		}
		if got := loops[name].state; got != want {
			t.Errorf("loop due at %+v: state %v after a wake-up at 0, want %v", off, got, want)
		}
		if !loops[name].tick.Equal(t0.Add(off)) {
			t.Errorf("loop due at %+v: tick moved to %+v", off, loops[name].tick.Sub(t0))
		}
	}
	if len(s.due) != 2 || s.due[0] != loops["past the slack"] {
		t.Errorf("heap holds %d loops, want the 2 due past the slack, earliest first", len(s.due))
	}
}

// TestSchedulerJitter: a new loop's first scrape is due within
// [now, now + Jitter × Interval).
func TestSchedulerJitter(t *testing.T) {
	for _, jitter := range []float64{0, 0.25, 1} {
		t.Run(fmt.Sprint(jitter), func(t *testing.T) {
			cfg := testConfig()
			cfg.Interval, cfg.Jitter = 10*time.Second, jitter
			s := newScheduler(cfg, func(*loop) {})
			now := time.Now()
			const n = 1000
			var lo, hi time.Duration = cfg.Interval, -1
			for i := range n {
				l, _ := testLoop("ns", fmt.Sprint("p", i))
				s.add(l, now)
				d := l.tick.Sub(now)
				lo, hi = min(lo, d), max(hi, d)
			}
			limit := time.Duration(jitter * float64(cfg.Interval))
			if lo < 0 || (jitter > 0 && hi >= limit) || (jitter == 0 && hi != 0) {
				t.Errorf("start delays in [%v, %v], want within [0, %v)", lo, hi, limit)
			}
			if jitter > 0 && hi-lo < limit/2 {
				t.Errorf("%d start delays all within [%v, %v], want them spread over [0, %v)", n, lo, hi, limit)
			}
			if len(s.due) != n || s.due[0].tick.Sub(now) != lo {
				t.Errorf("heap holds %d loops, earliest +%v; want %d, earliest +%v", len(s.due), s.due[0].tick.Sub(now), n, lo)
			}
		})
	}
}

// TestManager_NoOverlapAndRemovalInFlight runs real loops: one target's
// scrapes never overlap, even when a worker is scarce and scrapes overrun
// their interval, and removing a target whose scrape hangs interrupts that
// scrape, ends its loop and records nothing for it.
func TestManager_NoOverlapAndRemovalInFlight(t *testing.T) {
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // slower than the interval over three targets and one worker
		case <-time.After(40 * time.Millisecond):
		case <-r.Context().Done():
		}
		_, _ = w.Write(simplePage(1))
	}))
	t.Cleanup(slow.Close)
	hang := hangingServer(t)

	for _, tc := range []struct {
		name   string
		url    string
		remove bool
	}{
		{"overrunning scrapes never overlap", slow.URL, false},
		{"removal while a scrape hangs", hang.URL, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := newRecordingSink()
			cfg := testConfig()
			cfg.Interval, cfg.Timeout, cfg.Jitter = 50*time.Millisecond, 50*time.Millisecond, 0
			cfg.Concurrency, cfg.NamespaceConcurrency = 1, 1
			if tc.remove {
				cfg.Interval, cfg.Timeout = 10*time.Second, 10*time.Second
			}
			m, err := NewManager(cfg, sink, nil)
			if err != nil {
				t.Fatal(err)
			}
			requests := countRequests(m)
			var ts []Target
			for i := range 3 {
				ts = append(ts, Target{Pod: pod(fmt.Sprint("p", i)), URL: fmt.Sprintf("%s/p%d", tc.url, i)})
			}
			m.SetTargets(ts)
			stop := startManager(t, m)
			defer stop()
			if !tc.remove {
				waitFor(t, "5 scrapes of each target", func() bool {
					for _, tg := range ts {
						if _, n := requests.stats(tg.URL); n < 5 {
							return false
						}
					}
					return true
				})
				stop()
				for _, tg := range ts {
					if maxSeen, _ := requests.stats(tg.URL); maxSeen != 1 {
						t.Errorf("%s had %d scrapes in flight at once, want 1", tg.Pod, maxSeen)
					}
				}
				return
			}

			var inFlight Target
			waitFor(t, "a hanging scrape in flight", func() bool {
				requests.mu.Lock()
				defer requests.mu.Unlock()
				for _, tg := range ts {
					if requests.inFlight[tg.URL] > 0 {
						inFlight = tg
						return true
					}
				}
				return false
			})
			m.mu.Lock()
			l := m.loops[inFlight.Pod]
			m.mu.Unlock()
			m.SetTargets(nil)
			select {
			case <-l.done:
			case <-time.After(waitLimit):
				t.Fatalf("the removed loop of %s is not done %v after its removal", inFlight.Pod, waitLimit)
			}
			if n, _ := requests.stats(inFlight.URL); requests.inFlightOf(inFlight.URL) != 0 {
				t.Errorf("%s: a request still in flight after its loop is done (%d seen)", inFlight.Pod, n)
			}
			if l.ep.kept() {
				t.Errorf("%s: the removed loop's connection is still kept", inFlight.Pod)
			}
			for _, tg := range ts {
				if recs := sink.get(tg.Pod); len(recs) != 0 {
					t.Errorf("%s: %d records of a canceled scrape, want none: %v", tg.Pod, len(recs), recs[0].err)
				}
			}
		})
	}
}

// inFlightOf is the number of requests to url in flight now.
func (c *requestCounter) inFlightOf(url string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inFlight[url]
}

// TestManager_HungNamespaceDoesNotDelayOthers: while every slot of one
// namespace hangs on a real loopback server for much longer than the test,
// the targets of other namespaces, due after the hung ones, are scraped at
// once, and each namespace's scrapes stay within its share.
func TestManager_HungNamespaceDoesNotDelayOthers(t *testing.T) {
	hang := hangingServer(t)
	good := pageServer(t, simplePage(1))
	for _, tc := range []struct {
		name               string
		concurrency, share int
		hung, others       int // targets in the hanging namespace; healthy ones in each of two others
	}{
		{"share of half", 4, 2, 10, 3},
		{"share of one", 3, 1, 5, 4},
		{"share of all but one", 4, 3, 8, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := newRecordingSink()
			cfg := testConfig()
			// Nothing is scraped twice: every hung scrape holds its slot
			// for the whole test.
			cfg.Interval, cfg.Timeout, cfg.Jitter = time.Hour, time.Hour, 0
			cfg.Concurrency, cfg.NamespaceConcurrency = tc.concurrency, tc.share
			m, err := NewManager(cfg, sink, nil)
			if err != nil {
				t.Fatal(err)
			}
			requests := countRequests(m)
			var hung, healthy []Target
			for i := range tc.hung {
				hung = append(hung, Target{Pod: types.NamespacedName{Namespace: "tenant", Name: fmt.Sprint("hang-", i)}, URL: fmt.Sprintf("%s/hang-%d", hang.URL, i)})
			}
			for _, ns := range []string{"a", "b"} {
				for i := range tc.others {
					healthy = append(healthy, Target{Pod: types.NamespacedName{Namespace: ns, Name: fmt.Sprint("good-", i)}, URL: good.URL})
				}
			}
			m.SetTargets(hung)
			stop := startManager(t, m)
			defer stop()
			hangHost := hang.Listener.Addr().String()
			waitFor(t, "the hanging namespace to fill its share", func() bool { return requests.inFlightOf(hangHost) == tc.share })

			m.SetTargets(append(hung, healthy...))
			waitFor(t, "every healthy target's scrape", func() bool {
				for _, tg := range healthy {
					if len(sink.get(tg.Pod)) == 0 {
						return false
					}
				}
				return true
			})
			if got := requests.maxForHost(hangHost); got != tc.share {
				t.Errorf("the hanging namespace had %d scrapes in flight at once, want its share %d", got, tc.share)
			}
			for _, tg := range healthy {
				if r := sink.get(tg.Pod)[0]; r.err != nil {
					t.Errorf("%s: %v", tg.Pod, r.err)
				}
			}
			for _, tg := range hung {
				if n := len(sink.get(tg.Pod)); n != 0 {
					t.Errorf("hung %s recorded %d times while hanging", tg.Pod, n)
				}
			}
		})
	}
}

// TestManager_GoroutinesDoNotGrowWithTargets: the loops of 1,000 targets
// add no goroutine.
func TestManager_GoroutinesDoNotGrowWithTargets(t *testing.T) {
	cfg := testConfig()
	cfg.Interval, cfg.Timeout = time.Hour, time.Second // loops exist but do not scrape yet
	m, err := NewManager(cfg, newRecordingSink(), nil)
	if err != nil {
		t.Fatal(err)
	}
	m.SetTargets([]Target{{Pod: pod("first"), URL: "http://127.0.0.1:1/metrics"}})
	stop := startManager(t, m)
	defer stop()
	before := runtime.NumGoroutine()
	var ts []Target
	for i := range 1000 {
		ts = append(ts, Target{Pod: pod(fmt.Sprint("p", i)), URL: fmt.Sprintf("http://127.0.0.%d:1/metrics", 1+i%200)})
	}
	m.SetTargets(ts)
	// A little slack for goroutines of earlier tests that end late.
	if got := runtime.NumGoroutine(); got > before+20 {
		t.Errorf("%d goroutines with 1,000 targets, %d with one: want no more (+20)", got, before)
	}
}
