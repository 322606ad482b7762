// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package store

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/parse"
)

// cmodel is a model with counters (generated tokens, requests) and a TTFT
// histogram of the given cumulative counts over ttftLe.
func cmodel(name string, tokens, requests float64, ttft ...float64) parse.Model {
	m := mdl(name, 1, 0.5)
	m.Counters[catalog.GenerationTokens], m.Counters[catalog.Requests] = tokens, requests
	m.HasCounter = 1<<catalog.GenerationTokens | 1<<catalog.Requests
	if ttft != nil {
		h := &parse.Histogram{}
		m.Hists[catalog.TimeToFirstToken] = h
		h.N = len(ttftLe)
		copy(h.Le[:], ttftLe)
		copy(h.Count[:], ttft)
	}
	return m
}

var ttftLe = []float64{0.1, 0.5, 1, math.Inf(1)}

func page(ms ...parse.Model) *parse.Page { return &parse.Page{Server: parse.VLLMV1, Models: ms} }

func TestRates(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pod := types.NamespacedName{Namespace: "ns", Name: "p"}
	type rec struct {
		at    time.Duration
		model parse.Model
		err   bool
	}
	for _, tt := range []struct {
		name   string
		recs   []rec
		sig    catalog.Signal
		want   float64
		status Status
	}{
		{"first scrape: missing", []rec{{0, cmodel("a", 100, 1), false}}, catalog.GenerationTokensPerSecond, 0, Absent},
		{"two scrapes", []rec{{0, cmodel("a", 100, 1), false}, {5 * time.Second, cmodel("a", 600, 11), false}}, catalog.GenerationTokensPerSecond, 100, OK},
		{"requests", []rec{{0, cmodel("a", 100, 1), false}, {5 * time.Second, cmodel("a", 600, 11), false}}, catalog.RequestsPerSecond, 2, OK},
		{"idle is a measured zero", []rec{{0, cmodel("a", 100, 1), false}, {5 * time.Second, cmodel("a", 100, 1), false}}, catalog.GenerationTokensPerSecond, 0, OK},
		{"counter reset: missing, never negative", []rec{{0, cmodel("a", 1000, 1), false}, {5 * time.Second, cmodel("a", 10, 1), false}}, catalog.GenerationTokensPerSecond, 0, Absent},
		{"after a reset the rate resumes", []rec{{0, cmodel("a", 1000, 1), false}, {5 * time.Second, cmodel("a", 10, 1), false}, {10 * time.Second, cmodel("a", 60, 1), false}}, catalog.GenerationTokensPerSecond, 10, OK},
		{"a failed scrape in between: over both intervals", []rec{{0, cmodel("a", 0, 0), false}, {5 * time.Second, parse.Model{}, true}, {10 * time.Second, cmodel("a", 500, 0), false}}, catalog.GenerationTokensPerSecond, 50, OK},
		{"counter absent", []rec{{0, mdl("a", 1, 0.1), false}, {5 * time.Second, mdl("a", 1, 0.1), false}}, catalog.PreemptionsPerSecond, 0, Absent},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := New()
			var last time.Duration
			for _, r := range tt.recs {
				if r.err {
					s.Record(pod, t0.Add(r.at), nil, errTest)
				} else {
					s.Record(pod, t0.Add(r.at), page(r.model), nil)
				}
				last = r.at
			}
			got := s.Get(pod, tt.sig, nil, t0.Add(last), time.Minute)
			if got.Status != tt.status || got.Value != tt.want {
				t.Errorf("Get = %v %v (%s), want %v %v", got.Value, got.Status, got.Detail, tt.want, tt.status)
			}
			if got.Status == OK && got.Value < 0 {
				t.Errorf("negative rate %v", got.Value)
			}
		})
	}
}

var errTest = &testError{}

type testError struct{}

func (*testError) Error() string { return "test failure" }

// A pod replaced under the same name is forgotten (targets.Tracker calls
// Retain without it): the new pod's first scrape has no rate, however large
// its counters already are.
func TestRatesPodReplaced(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pod := types.NamespacedName{Namespace: "ns", Name: "llm-0"}
	s := New()
	s.Record(pod, t0, page(cmodel("a", 100, 1)), nil)
	s.Retain(t0.Add(time.Second), func(types.NamespacedName) bool { return false }) // the UID changed
	s.Record(pod, t0.Add(5*time.Second), page(cmodel("a", 100000, 1)), nil)
	if got := s.Get(pod, catalog.GenerationTokensPerSecond, nil, t0.Add(5*time.Second), time.Minute); got.Status != Absent {
		t.Errorf("first scrape of the new pod: %v %v, want absent", got.Value, got.Status)
	}
	s.Record(pod, t0.Add(10*time.Second), page(cmodel("a", 100500, 1)), nil)
	if got := s.Get(pod, catalog.GenerationTokensPerSecond, nil, t0.Add(10*time.Second), time.Minute); got.Status != OK || got.Value != 100 {
		t.Errorf("second scrape: %v %v, want 100", got.Value, got.Status)
	}
}

// refQuantile is histogram_quantile written from Prometheus's description,
// bucket by bucket from non-cumulative counts, as a reference.
func refQuantile(q float64, le, cum []float64) float64 {
	total := cum[len(cum)-1]
	target := q * total
	lower, seen := 0.0, 0.0
	for i := range le {
		inBucket := cum[i] - seen
		if seen+inBucket >= target && inBucket > 0 {
			if math.IsInf(le[i], 1) {
				return le[i-1]
			}
			return lower + (le[i]-lower)*(target-seen)/inBucket
		}
		seen += inBucket
		lower = le[i]
	}
	return le[len(le)-2]
}

func TestQuantile(t *testing.T) {
	le := []float64{0.1, 0.5, 1, math.Inf(1)}
	for _, tt := range []struct {
		name  string
		count []float64
		q     float64
		want  float64
		ok    bool
	}{
		{"empty window: missing", []float64{0, 0, 0, 0}, 0.9, 0, false},
		{"first bucket from 0", []float64{10, 10, 10, 10}, 0.5, 0.05, true},
		{"middle bucket", []float64{0, 10, 20, 20}, 0.9, 0.5 + 0.5*0.8, true},
		{"p50 at a bound", []float64{5, 10, 10, 10}, 0.5, 0.1, true},
		{"in +Inf: the largest finite bound", []float64{0, 0, 1, 10}, 0.9, 1, true},
		{"not monotonic: evened out", []float64{4, 3, 10, 10}, 0.5, 0.5 + 0.5/6, true}, // as {4, 4, 10, 10}
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := Window{Le: le, Count: tt.count}
			got, ok := w.Quantile(tt.q)
			if ok != tt.ok || math.Abs(got-tt.want) > 1e-12 {
				t.Errorf("Quantile(%v) = %v %v, want %v %v", tt.q, got, ok, tt.want, tt.ok)
			}
		})
	}
}

// Random observations, bucketed: the quantile matches the reference
// computation, and lies in the bucket of the true sample quantile (the
// error bucket bounds impose is at most that bucket's width).
func TestQuantileAgainstReference(t *testing.T) {
	le := []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, math.Inf(1)} // vLLM's TTFT bounds, cut
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 200 {
		n := 1 + rng.IntN(500)
		obs := make([]float64, n)
		scale := []float64{0.01, 0.1, 1}[trial%3]
		for i := range obs {
			obs[i] = rng.ExpFloat64() * scale
		}
		cum := make([]float64, len(le))
		for _, o := range obs {
			for i := range le {
				if o <= le[i] {
					cum[i]++
				}
			}
		}
		sort.Float64s(obs)
		w := Window{Le: le, Count: cum}
		for _, q := range []float64{0.5, 0.9, 0.99} {
			got, ok := w.Quantile(q)
			if !ok {
				t.Fatalf("trial %d: no quantile", trial)
			}
			if want := refQuantile(q, le, cum); math.Abs(got-want) > 1e-9 {
				t.Fatalf("trial %d q=%v: %v, reference %v", trial, q, got, want)
			}
			// The true quantile (nearest rank) lies in a bucket [lo, hi]; so does ours.
			truth := obs[int(math.Ceil(q*float64(n)))-1]
			b := sort.SearchFloat64s(le, truth)
			lo, hi := 0.0, le[b]
			if b > 0 {
				lo = le[b-1]
			}
			if math.IsInf(hi, 1) {
				hi = lo // in +Inf the answer is the largest finite bound
			}
			if got < lo-1e-12 || got > hi+1e-12 {
				t.Fatalf("trial %d q=%v: %v outside the true quantile's bucket [%v, %v] (truth %v)", trial, q, got, lo, hi, truth)
			}
		}
	}
}

func TestLatencyWindow(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pod := types.NamespacedName{Namespace: "ns", Name: "p"}
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	get := func(s *Store, now time.Time) Sample {
		return s.Get(pod, catalog.TimeToFirstTokenP90, nil, now, time.Minute)
	}

	t.Run("first scrape: missing", func(t *testing.T) {
		s := New()
		s.Record(pod, at(0), page(cmodel("a", 0, 0, 5, 10, 10, 10)), nil)
		if got := get(s, at(0)); got.Status != Absent {
			t.Errorf("%v %v, want absent", got.Value, got.Status)
		}
	})
	t.Run("no request in the window: missing, not 0", func(t *testing.T) {
		s := New()
		s.Record(pod, at(0), page(cmodel("a", 0, 0, 5, 10, 10, 10)), nil)
		s.Record(pod, at(5), page(cmodel("a", 0, 0, 5, 10, 10, 10)), nil)
		if got := get(s, at(5)); got.Status != Absent {
			t.Errorf("%v %v (%s), want absent", got.Value, got.Status, got.Detail)
		}
	})
	t.Run("only the window's observations count", func(t *testing.T) {
		s := New()
		s.SetSLOWindow(60 * time.Second)
		// 1000 fast requests long ago, then 10 slow ones (0.5..1 s) in the window.
		for sec := 0; sec <= 100; sec += 5 {
			slow := 0.0
			if sec > 70 {
				slow = 10 * float64(sec-70) / 30
			}
			s.Record(pod, at(sec), page(cmodel("a", 0, 0, 1000, 1000, 1000+slow, 1000+slow)), nil)
		}
		got := get(s, at(100))
		if got.Status != OK || got.Value <= 0.5 || got.Value > 1 {
			t.Errorf("p90 = %v %v (%s), want in (0.5, 1]: the old fast requests are out of the window", got.Value, got.Status, got.Detail)
		}
	})
	t.Run("server restart starts the window over", func(t *testing.T) {
		s := New()
		s.Record(pod, at(0), page(cmodel("a", 0, 0, 500, 900, 1000, 1000)), nil)
		s.Record(pod, at(20), page(cmodel("a", 0, 0, 0, 0, 2, 2)), nil) // restarted: counts went down
		if got := get(s, at(20)); got.Status != Absent {
			t.Errorf("right after a restart: %v %v, want absent (no spike, no negative)", got.Value, got.Status)
		}
		s.Record(pod, at(40), page(cmodel("a", 0, 0, 0, 0, 12, 12)), nil)
		got := get(s, at(40))
		if got.Status != OK || got.Value <= 0.5 || got.Value > 1 {
			t.Errorf("after the restart: %v %v, want the new requests' p90 in (0.5, 1]", got.Value, got.Status)
		}
	})
	t.Run("snapshots stay bounded", func(t *testing.T) {
		s := New()
		s.SetSLOWindow(60 * time.Second)
		for sec := range 600 {
			s.Record(pod, at(sec), page(cmodel("a", 0, 0, float64(sec), float64(sec), float64(sec), float64(sec))), nil)
		}
		e := s.pods[pod]
		if n := len(e.serving.good.slo.windows[0].lat[catalog.TimeToFirstToken].anchors); n > WindowAnchors+1 {
			t.Errorf("%d snapshots, want at most %d", n, WindowAnchors+1)
		}
		w, st := s.Window(pod, catalog.TimeToFirstTokenP90, nil, at(599), time.Minute)
		if st.Status != OK || w.Span < 50*time.Second || w.Span > 60*time.Second {
			t.Errorf("window span %v (%v), want between 50s and 60s", w.Span, st.Status)
		}
	})
}

// The fleet's percentile comes from the merged buckets: with one busy slow
// pod and one busy fast pod it is not the mean of their percentiles.
func TestMergedQuantile(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := New()
	fast := types.NamespacedName{Namespace: "ns", Name: "fast"}
	slow := types.NamespacedName{Namespace: "ns", Name: "slow"}
	idle := types.NamespacedName{Namespace: "ns", Name: "idle"}
	for _, p := range []types.NamespacedName{fast, slow, idle} {
		s.Record(p, t0, page(cmodel("a", 0, 0, 0, 0, 0, 0)), nil)
	}
	s.Record(fast, t0.Add(10*time.Second), page(cmodel("a", 0, 0, 90, 90, 90, 90)), nil)
	s.Record(slow, t0.Add(10*time.Second), page(cmodel("a", 0, 0, 0, 0, 10, 10)), nil)
	s.Record(idle, t0.Add(10*time.Second), page(cmodel("a", 0, 0, 0, 0, 0, 0)), nil)
	now := t0.Add(10 * time.Second)

	var merged Window
	for _, p := range []types.NamespacedName{fast, slow, idle} {
		w, st := s.Window(p, catalog.TimeToFirstTokenP90, nil, now, time.Minute)
		if st.Status != OK {
			t.Fatalf("%s: %v %s", p, st.Status, st.Detail)
		}
		if err := merged.Merge(w); err != nil {
			t.Fatal(err)
		}
	}
	got, ok := merged.Quantile(0.9)
	// 100 requests: 90 at most 0.1 s, 10 in (0.5, 1]: p90 is the 90th, at 0.1.
	if !ok || got != 0.1 {
		t.Errorf("merged p90 = %v %v, want 0.1", got, ok)
	}
	f := s.Get(fast, catalog.TimeToFirstTokenP90, nil, now, time.Minute)
	sl := s.Get(slow, catalog.TimeToFirstTokenP90, nil, now, time.Minute)
	if mean := (f.Value + sl.Value) / 2; math.Abs(mean-got) < 0.1 {
		t.Errorf("mean of per-pod p90s %v is close to the merged %v: the test shows nothing", mean, got)
	}
	if sl.Value <= 0.5 || f.Value > 0.1 {
		t.Errorf("per pod: fast %v, slow %v", f.Value, sl.Value)
	}
	if i := s.Get(idle, catalog.TimeToFirstTokenP90, nil, now, time.Minute); i.Status != Absent {
		t.Errorf("idle pod p90: %v %v, want absent", i.Value, i.Status)
	}

	// Different bounds are refused, not mixed.
	other := Window{Le: []float64{1, math.Inf(1)}, Count: []float64{1, 1}}
	if err := slices.Clone([]Window{merged})[0].Merge(other); err == nil {
		t.Error("merging different bounds: no error")
	}
}

// Per-model selection works for percentiles and rates as for the gauges.
func TestSLOModelSelection(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pod := types.NamespacedName{Namespace: "ns", Name: "p"}
	s := New()
	s.Record(pod, t0, page(cmodel("a", 0, 0, 0, 0, 0, 0), cmodel("b", 0, 0, 0, 0, 0, 0)), nil)
	s.Record(pod, t0.Add(10*time.Second), page(cmodel("a", 100, 0, 10, 10, 10, 10), cmodel("b", 300, 0, 0, 0, 10, 10)), nil)
	now := t0.Add(10 * time.Second)
	only := func(n string) ModelMatcher { return func(m string) bool { return m == n } }
	for _, tt := range []struct {
		sig   catalog.Signal
		match ModelMatcher
		want  float64
	}{
		{catalog.GenerationTokensPerSecond, nil, 40},
		{catalog.GenerationTokensPerSecond, only("b"), 30},
		{catalog.TimeToFirstTokenP50, only("a"), 0.05},
		{catalog.TimeToFirstTokenP50, only("b"), 0.75},
		{catalog.TimeToFirstTokenP50, nil, 0.1}, // 20 requests, the 10th at 0.1
	} {
		got := s.Get(pod, tt.sig, tt.match, now, time.Minute)
		if got.Status != OK || math.Abs(got.Value-tt.want) > 1e-12 {
			t.Errorf("%s: %v %v (%s), want %v", tt.sig, got.Value, got.Status, got.Detail, tt.want)
		}
	}
}
