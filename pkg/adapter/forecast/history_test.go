// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package forecast

import (
	"fmt"
	"math"
	"runtime"
	"testing"
	"time"
)

func testConfig() Config {
	return Config{Window: 5 * time.Minute, MinSpacing: 2500 * time.Millisecond, MaxWorkloads: 8}
}

func key(ns, name string) Key { return Key{Namespace: ns, Kind: "deployment", Name: name} }

// TestRecord: what is stored, refused and skipped.
func TestRecord(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []Sample
		// wantStored is Record's answer for each sample; want the demands
		// and completions kept, in order (NaN: unknown).
		wantStored []bool
		want       [][2]float64
	}{
		{"every 15 s",
			[]Sample{{t0, 1, 1}, {t0.Add(15 * time.Second), 2, 1}, {t0.Add(30 * time.Second), 3, 2}},
			[]bool{true, true, true}, [][2]float64{{1, 1}, {2, 1}, {3, 2}}},
		{"closer than the spacing: skipped, its demand dropped, its rate in the next stored sample's mean",
			[]Sample{{t0, 1, 1}, {t0.Add(2 * time.Second), 9, 9}, {t0.Add(6 * time.Second), 3, 3}},
			[]bool{true, false, true}, [][2]float64{{1, 1}, {3, (9*2 + 3*4) / 6.0}}},
		{"a rate unknown for less than half the interval: the known rates' mean",
			[]Sample{{t0, 1, 1}, {t0.Add(2 * time.Second), 9, math.NaN()}, {t0.Add(6 * time.Second), 3, 3}},
			[]bool{true, false, true}, [][2]float64{{1, 1}, {3, 3}}},
		{"the stored sample's own rate unknown, the skipped one's known for most of the interval",
			[]Sample{{t0, 1, 1}, {t0.Add(4 * time.Second), 9, 2}, {t0.Add(6 * time.Second), 3, math.NaN()}},
			[]bool{true, false, true}, [][2]float64{{1, 1}, {3, 2}}},
		{"a rate unknown for more than half the interval: unknown",
			[]Sample{{t0, 1, 1}, {t0.Add(4 * time.Second), 9, math.NaN()}, {t0.Add(6 * time.Second), 3, 3}},
			[]bool{true, false, true}, [][2]float64{{1, 1}, {3, math.NaN()}}},
		{"older than the last: skipped",
			[]Sample{{t0, 1, 1}, {t0.Add(-time.Minute), 9, 9}},
			[]bool{true, false}, [][2]float64{{1, 1}}},
		{"non-finite or negative demand, zero time: refused",
			[]Sample{{t0, math.NaN(), 1}, {t0, math.Inf(1), 1}, {t0, -1, 1}, {time.Time{}, 1, 1}, {t0, 1e39, 1}},
			[]bool{false, false, false, false, false}, nil},
		{"non-finite or negative completions: stored as unknown",
			[]Sample{{t0, 1, math.Inf(1)}, {t0.Add(time.Minute), 2, -3}, {t0.Add(2 * time.Minute), 3, math.NaN()}},
			[]bool{true, true, true}, [][2]float64{{1, math.NaN()}, {2, math.NaN()}, {3, math.NaN()}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hs := NewHistories(testConfig())
			for i, s := range tc.in {
				if got := hs.Record(key("a", "w"), s); got != tc.wantStored[i] {
					t.Errorf("Record(%v) = %v, want %v", s, got, tc.wantStored[i])
				}
			}
			got := hs.Series(key("a", "w"), t0.Add(3*time.Minute))
			if len(got) != len(tc.want) {
				t.Fatalf("%d samples kept, want %d: %v", len(got), len(tc.want), got)
			}
			for i, s := range got {
				w := tc.want[i]
				if s.Demand != w[0] || !(s.Completions == w[1] || math.IsNaN(s.Completions) && math.IsNaN(w[1])) {
					t.Errorf("sample %d = %g, %g; want %g, %g", i, s.Demand, s.Completions, w[0], w[1])
				}
				if math.IsInf(s.Demand, 0) || math.IsNaN(s.Demand) || math.IsInf(s.Completions, 0) {
					t.Errorf("sample %d stores a non-finite value: %v", i, s)
				}
			}
		})
	}
}

// TestRecordCountsCompletionsBetweenStoredSamples: asked every second, a
// 15-minute history keeps a sample about every 14 s; a 5-second burst of
// completions between two stored samples is counted in full in the next
// one's completions, whichever second it falls on, where the rate read at
// the stored sample alone would miss it or count it for 14 s.
func TestRecordCountsCompletionsBetweenStoredSamples(t *testing.T) {
	for _, burstAt := range []int{16, 20, 26, 28} {
		t.Run(fmt.Sprintf("burst at %d s", burstAt), func(t *testing.T) {
			hs := NewHistories(Config{Window: 15 * time.Minute, MinSpacing: 500 * time.Millisecond, MaxWorkloads: 1})
			const seconds = 60
			rate := func(i int) float64 { // over the second before i
				if i > burstAt && i <= burstAt+5 {
					return 60
				}
				return 10
			}
			for i := 0; i <= seconds; i++ {
				hs.Record(key("a", "w"), Sample{At: t0.Add(time.Duration(i) * time.Second), Demand: 4, Completions: rate(i)})
			}
			got := hs.Series(key("a", "w"), t0.Add(seconds*time.Second))
			if len(got) < 4 || len(got) > 5 {
				t.Fatalf("%d samples stored over %d s, want one about every 14 s: %v", len(got), seconds, got)
			}
			var counted float64
			for i := 1; i < len(got); i++ {
				counted += got[i].Completions * got[i].At.Sub(got[i-1].At).Seconds()
			}
			// Up to the last stored sample: the seconds after it are not
			// counted yet.
			end := int(got[len(got)-1].At.Sub(t0).Seconds())
			var want float64
			for i := 1; i <= end; i++ {
				want += rate(i)
			}
			if math.Abs(counted-want) > 1e-3*want {
				t.Errorf("the stored samples count %g completions up to %d s, want %g", counted, end, want)
			}
		})
	}
}

// TestRecordBoundedPerWorkload: at most MaxSamples, the newest kept.
func TestRecordBoundedPerWorkload(t *testing.T) {
	hs := NewHistories(Config{Window: time.Hour, MinSpacing: time.Second, MaxWorkloads: 1})
	for i := range 3 * MaxSamples {
		hs.Record(key("a", "w"), Sample{At: t0.Add(time.Duration(i) * time.Minute), Demand: float64(i)})
	}
	got := hs.Series(key("a", "w"), t0.Add(time.Duration(3*MaxSamples)*time.Minute))
	if len(got) != MaxSamples {
		t.Fatalf("%d samples kept, want %d", len(got), MaxSamples)
	}
	if first, last := got[0].Demand, got[len(got)-1].Demand; first != float64(2*MaxSamples) || last != float64(3*MaxSamples-1) {
		t.Errorf("kept %g..%g, want the newest %d..%d", first, last, 2*MaxSamples, 3*MaxSamples-1)
	}
}

// TestSpacingCoversWindow: many callers asking every half scrape interval
// still leave MaxSamples covering the window.
func TestSpacingCoversWindow(t *testing.T) {
	hs := NewHistories(Config{Window: 5 * time.Minute, MinSpacing: 500 * time.Millisecond, MaxWorkloads: 1})
	now := t0
	for range 2000 {
		now = now.Add(500 * time.Millisecond)
		hs.Record(key("a", "w"), Sample{At: now, Demand: 1})
	}
	got := hs.Series(key("a", "w"), now)
	if span := got[len(got)-1].At.Sub(got[0].At); span < 5*time.Minute-5*time.Second {
		t.Errorf("%d samples span %s, want about the 5m window", len(got), span)
	}
}

// TestHistoriesBounded: the total, the per-namespace share and idle
// histories.
func TestHistoriesBounded(t *testing.T) {
	t.Run("total: the oldest-touched evicted", func(t *testing.T) {
		hs := NewHistories(Config{Window: time.Hour, MinSpacing: time.Second, MaxWorkloads: 8})
		// Two per namespace (the share is 8/4 = 2), in four namespaces.
		for i := range 8 {
			hs.Record(key(fmt.Sprintf("ns%d", i/2), fmt.Sprint(i)), Sample{At: t0.Add(time.Duration(i) * time.Second), Demand: 1})
		}
		// Touch the first again, so that the second is the oldest.
		hs.Record(key("ns0", "0"), Sample{At: t0.Add(10 * time.Second), Demand: 1})
		hs.Record(key("ns9", "new"), Sample{At: t0.Add(11 * time.Second), Demand: 1})
		now := t0.Add(12 * time.Second)
		if hs.Len() != 8 {
			t.Errorf("%d histories, want 8", hs.Len())
		}
		if hs.Series(key("ns0", "1"), now) != nil {
			t.Error("the oldest-touched history is kept")
		}
		for _, k := range []Key{key("ns0", "0"), key("ns9", "new"), key("ns3", "7")} {
			if hs.Series(k, now) == nil {
				t.Errorf("%v evicted", k)
			}
		}
	})
	t.Run("one namespace evicts its own", func(t *testing.T) {
		hs := NewHistories(Config{Window: time.Hour, MinSpacing: time.Second, MaxWorkloads: 8})
		hs.Record(key("victim", "a"), Sample{At: t0, Demand: 1})
		hs.Record(key("victim", "b"), Sample{At: t0, Demand: 1})
		for i := range 100 {
			hs.Record(key("tenant", fmt.Sprint(i)), Sample{At: t0.Add(time.Duration(i+1) * time.Second), Demand: 1})
		}
		now := t0.Add(200 * time.Second)
		for _, k := range []Key{key("victim", "a"), key("victim", "b")} {
			if hs.Series(k, now) == nil {
				t.Errorf("a tenant's 100 workloads evicted %v", k)
			}
		}
		if hs.Len() != 4 {
			t.Errorf("%d histories, want 2 of the victim + 2 of the tenant (its share of 8)", hs.Len())
		}
		if hs.Series(key("tenant", "99"), now) == nil || hs.Series(key("tenant", "97"), now) != nil {
			t.Error("the tenant kept other than its newest two")
		}
	})
	t.Run("idle for two windows: dropped", func(t *testing.T) {
		hs := NewHistories(Config{Window: time.Minute, MinSpacing: time.Second, MaxWorkloads: 8})
		for i := range 5 {
			hs.Record(key("a", "idle"), Sample{At: t0.Add(time.Duration(i) * 10 * time.Second), Demand: 1})
		}
		last := t0.Add(40 * time.Second)
		if got := hs.Series(key("a", "idle"), last.Add(2*time.Minute)); len(got) != 5 {
			t.Errorf("%d samples two windows after, want 5", len(got))
		}
		if got := hs.Series(key("a", "idle"), last.Add(2*time.Minute+time.Second)); got != nil {
			t.Errorf("samples %v past two windows idle, want none", got)
		}
		// Another workload's sample sweeps it out.
		hs.Record(key("b", "busy"), Sample{At: last.Add(3 * time.Minute), Demand: 1})
		if hs.Len() != 1 {
			t.Errorf("%d histories after the sweep, want 1", hs.Len())
		}
		// A new sample after the idle gap starts afresh.
		hs.Record(key("a", "idle"), Sample{At: last.Add(4 * time.Minute), Demand: 7})
		if got := hs.Series(key("a", "idle"), last.Add(4*time.Minute)); len(got) != 1 || got[0].Demand != 7 {
			t.Errorf("after the idle gap: %v, want the one new sample", got)
		}
	})
	t.Run("at least one", func(t *testing.T) {
		hs := NewHistories(Config{Window: time.Minute, MinSpacing: time.Second, MaxWorkloads: 0})
		hs.Record(key("a", "1"), Sample{At: t0, Demand: 1})
		hs.Record(key("b", "2"), Sample{At: t0, Demand: 1})
		if hs.Len() != 1 || hs.Evicted() != 1 {
			t.Errorf("%d histories, %d evicted; want 1, 1", hs.Len(), hs.Evicted())
		}
	})
}

// TestBytesPerHistory measures the heap one full history holds and bounds
// it by MaxBytesPerHistory: docs/metrics.md gives the cost at 10,000
// workloads from this figure, and the start-up memory budget counts the bound.
func TestBytesPerHistory(t *testing.T) {
	const n = 2000
	per := bytesPerHistory(n)
	t.Logf("%.0f bytes per full history (%d samples); %.1f MiB at 10,000 workloads", per, MaxSamples, per*10000/(1<<20))
	if per < float64(MaxSamples*16) || per > MaxBytesPerHistory {
		t.Errorf("%.0f bytes per history, want between the samples' %d and MaxBytesPerHistory (%d), which the memory budget counts", per, MaxSamples*16, MaxBytesPerHistory)
	}
}

func BenchmarkHistoryBytes(b *testing.B) {
	for range b.N {
		b.ReportMetric(bytesPerHistory(1000), "bytes/history")
	}
}

// bytesPerHistory fills n histories with MaxSamples samples each and
// returns the heap they hold, per history.
func bytesPerHistory(n int) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	hs := NewHistories(Config{Window: time.Hour, MinSpacing: time.Second, MaxWorkloads: n})
	for i := range n {
		k := Key{Namespace: fmt.Sprintf("tenant-%d", i%NamespaceShare), Kind: "deployment", Name: fmt.Sprintf("model-server-%05d", i), Selector: "model_name=llama-3-8b"}
		for j := range MaxSamples {
			hs.Record(k, Sample{At: t0.Add(time.Duration(j) * 15 * time.Second), Demand: float64(j), Completions: 1})
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	held := hs.Len()
	runtime.KeepAlive(hs)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(held)
}

// BenchmarkRecord: one question about a workload, asked every second
// (most skipped: a 15m history keeps one every 14 s) and every 15 s (each
// kept, as the HPA asks by default).
func BenchmarkRecord(b *testing.B) {
	for _, every := range []time.Duration{time.Second, 15 * time.Second} {
		b.Run("every "+every.String(), func(b *testing.B) {
			hs := NewHistories(Config{Window: 15 * time.Minute, MinSpacing: 500 * time.Millisecond, MaxWorkloads: 1})
			k := key("a", "w")
			at := t0
			for i := range b.N {
				at = at.Add(every)
				hs.Record(k, Sample{At: at, Demand: float64(i % 7), Completions: float64(i % 5)})
			}
		})
	}
}
