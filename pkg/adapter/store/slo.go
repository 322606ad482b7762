// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package store

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/parse"
)

// DefaultSLOWindow is the sliding window of the latency percentiles when
// SetSLOWindow was not called.
const DefaultSLOWindow = 60 * time.Second

// WindowAnchors is how many bucket snapshots (anchors) a latency window is
// cut into: a snapshot is kept at most every window/WindowAnchors, so the
// span a percentile covers is between (1-1/WindowAnchors) and 1 window,
// ending at the pod's latest good scrape.
const WindowAnchors = 6

// MaxWindowModels is the most models per pod whose latency histograms are
// windowed, and MaxWindowBuckets the most histogram buckets (le bounds) of
// their windows together (8 histograms of the parser's most, parse.MaxBuckets;
// the real vLLM V1 page has 87): the page's first models with histograms
// that fit are windowed. A percentile over models one of which is past them
// is absent (a 404 that says so), never merged from the others alone. Rates
// have no such bound: they keep one number per counter of a kept model.
const (
	MaxWindowModels  = 4
	MaxWindowBuckets = 4 * parse.MaxBuckets
)

// sloState is what a pod keeps between scrapes for the rate and percentile
// signals: the rates computed at its latest good scrape, and the bucket
// snapshots of its latency windows.
type sloState struct {
	models  []modelSLO    // aligned with good.models
	windows []modelWindow // at most MaxWindowModels, of MaxWindowBuckets buckets in all
	// skipped says the latest good page was parsed without its latency
	// histograms (no one asked for a percentile lately): the windows were
	// reset, and the next page with histograms starts them over.
	skipped bool
}

// modelSLO is one model's counter rates between the pod's last two good
// scrapes, and where its latency windows are.
type modelSLO struct {
	vals [catalog.NumCounters]float64
	has  uint8
	win  int8 // index in sloState.windows, or noWindow or cutWindow
}

const (
	noWindow  = -1 // the page had none of the model's latency histograms
	cutWindow = -2 // past MaxWindowModels or MaxWindowBuckets
)

type modelWindow struct {
	lat [catalog.NumLatencies]latWindow
}

// latWindow is one latency histogram's window: its bucket bounds, its
// latest counts and its snapshots, oldest first. A server restart (a count
// going down), a change of bounds or a page without the histogram (one
// parsed without histograms included) starts it over, so that a delta
// never spans a scrape that did not see the histogram. Its le and its
// anchors' counts are never changed once made: the next record's window
// shares them; latest and the anchors slice are the record's own.
type latWindow struct {
	le      []float64 // nil: the model's page has no such histogram
	latest  []float64 // cumulative, per bucket of le, at the latest good scrape
	anchors []anchor
}

type anchor struct {
	at    time.Time
	count []float64 // cumulative, per bucket of le
}

// build makes st, reusing its memory, the rates and windows of ms (a good
// page's models, scraped at at, those the store keeps) following prev (the
// pod's previous good record, nil if none). Models are found on prev by
// name in constant time each (good.find). It returns whether ms are prev's
// models, in the same order.
func (st *sloState) build(at time.Time, skipped bool, ms []parse.Model, prev *good, window time.Duration) (same bool) {
	st.skipped = skipped
	st.models = slices.Grow(st.models[:0], len(ms))[:len(ms)]
	if prev != nil && prev.over {
		prev = nil // it kept no model
	}
	dt := 0.0
	if prev != nil {
		dt = at.Sub(prev.at).Seconds()
		same = len(prev.models) == len(ms)
	}
	ws := st.windows[:cap(st.windows)] // their buffers are reused
	nw, buckets, full := 0, 0, false
	for i := range ms {
		m := &ms[i]
		r := &st.models[i]
		*r = modelSLO{win: noWindow}
		j := -1
		if prev != nil {
			j = prev.find(m.Name, i)
			same = same && j == i
		}
		if j >= 0 && dt > 0 {
			old := &prev.models[j]
			for c := range catalog.NumCounters {
				cur, ok1 := m.Counter(c)
				was, ok2 := old.Counter(c)
				if !ok1 || !ok2 || cur < was {
					continue // absent, or a counter reset (a restarted server): no rate
				}
				r.vals[c] = (cur - was) / dt
				r.has |= 1 << c
			}
		}
		n := histBuckets(m)
		if n == 0 {
			continue
		}
		if full || nw == MaxWindowModels || buckets+n > MaxWindowBuckets {
			full = true // the first models that fit are windowed, no later one
			r.win = cutWindow
			continue
		}
		var old *modelWindow
		if j >= 0 && prev.slo.models[j].win >= 0 {
			old = &prev.slo.windows[prev.slo.models[j].win]
		}
		if nw == len(ws) {
			ws = append(ws, modelWindow{})
		}
		w := &ws[nw]
		for l := range catalog.NumLatencies {
			var was *latWindow
			if old != nil {
				was = &old.lat[l]
			}
			w.lat[l].build(was, at, m.Hists[l], window)
		}
		r.win = int8(nw)
		nw++
		buckets += n
	}
	clear(ws[nw:]) // drop the snapshots of windows no longer kept
	st.windows = ws[:nw]
	return same
}

// histBuckets returns the buckets of m's latency histograms together.
func histBuckets(m *parse.Model) int {
	n := 0
	for _, h := range m.Hists {
		if h != nil {
			n += h.N
		}
	}
	return n
}

// build makes w, reusing its latest and anchors buffers, the window of
// the histogram h (nil if absent) of a good scrape at at, following was
// (the window of the pod's previous good record; nil if none), which it
// does not change.
func (w *latWindow) build(was *latWindow, at time.Time, h *parse.Histogram, window time.Duration) {
	latest, anchors := w.latest[:0], w.anchors[:0]
	switch {
	case h == nil:
		w.le, w.latest = nil, latest
	case was == nil || !slices.Equal(was.le, h.Le[:h.N]) || wentDown(was.latest, h.Count[:h.N]):
		// New bounds, or a restarted server: the window starts over.
		w.le = slices.Clone(h.Le[:h.N])
		w.latest = append(latest, h.Count[:h.N]...)
		anchors = append(anchors, anchor{at: at, count: slices.Clone(h.Count[:h.N])})
	default:
		w.le = was.le
		w.latest = append(latest, h.Count[:h.N]...)
		// Drop the snapshots older than the window: the oldest one left starts it.
		drop := 0
		for drop < len(was.anchors) && at.Sub(was.anchors[drop].at) > window {
			drop++
		}
		anchors = append(anchors, was.anchors[drop:]...)
		if n := len(anchors); n == 0 || at.Sub(anchors[n-1].at) >= window/WindowAnchors {
			anchors = append(anchors, anchor{at: at, count: slices.Clone(h.Count[:h.N])})
		} // else the newest snapshot is recent enough; the page itself ends the window
	}
	clear(anchors[len(anchors):cap(anchors)]) // no snapshot kept past the window's
	w.anchors = anchors
}

// wentDown reports whether a bucket count went down from was (the same
// bounds) to now: the server restarted.
func wentDown(was, now []float64) bool {
	for i := range min(len(was), len(now)) {
		if now[i] < was[i] {
			return true
		}
	}
	return false
}

// Window is a histogram of the observations made in a window: Count[i]
// observations were at most Le[i] (cumulative); Le ends with +Inf.
type Window struct {
	Le    []float64
	Count []float64
	// Span is the time the window covers (from its oldest snapshot to the
	// latest scrape).
	Span time.Duration
}

// Total returns the number of observations in w.
func (w *Window) Total() float64 {
	if len(w.Count) == 0 {
		return 0
	}
	return w.Count[len(w.Count)-1]
}

// Merge adds o's observations to w. Windows merge only when their bucket
// bounds are the same; an empty w takes o's bounds.
func (w *Window) Merge(o Window) error {
	if len(w.Le) == 0 {
		w.Le = slices.Clone(o.Le)
		w.Count = slices.Clone(o.Count)
		w.Span = o.Span
		return nil
	}
	if len(o.Le) == 0 {
		return nil
	}
	if !slices.Equal(w.Le, o.Le) {
		return fmt.Errorf("histograms with different bucket bounds (%d and %d buckets) cannot be merged", len(w.Le), len(o.Le))
	}
	for i := range w.Count {
		w.Count[i] += o.Count[i]
	}
	w.Span = max(w.Span, o.Span)
	return nil
}

// Quantile returns the q-quantile (0 < q < 1) of w's observations, by
// linear interpolation inside the bucket it falls into, as Prometheus's
// histogram_quantile does: a quantile in the first bucket is interpolated
// from 0 (when that bucket's bound is positive), one in the +Inf bucket is
// the largest finite bound. ok is false when w has no observations.
func (w *Window) Quantile(q float64) (v float64, ok bool) {
	n := len(w.Le)
	if n < 2 || w.Total() <= 0 || math.IsNaN(q) {
		return 0, false
	}
	// Counts read from a page need not be monotonic when the server wrote
	// them while observing; Prometheus evens them out the same way.
	count := slices.Clone(w.Count)
	for i := 1; i < n; i++ {
		count[i] = max(count[i], count[i-1])
	}
	rank := q * count[n-1]
	b := 0
	for b < n-1 && count[b] < rank {
		b++
	}
	switch {
	case b == n-1:
		return w.Le[n-2], true
	case b == 0 && w.Le[0] <= 0:
		return w.Le[0], true
	}
	start, below := 0.0, 0.0
	if b > 0 {
		start, below = w.Le[b-1], count[b-1]
	}
	in := count[b] - below
	if in <= 0 {
		return w.Le[b], true
	}
	return start + (w.Le[b]-start)*((rank-below)/in), true
}

// window returns the window of latency l of the model at index i of g's
// models as of g's page: the latest bucket counts less the oldest
// snapshot's. The error says why there is none; it wraps errWindowCut when
// the model is past the windows' budget.
func (g *good) window(i int, l catalog.Latency) (Window, error) {
	// The store's models are kept without their histograms: their latest
	// counts are in the window.
	var lw *latWindow
	switch win := g.slo.models[i].win; {
	case win == cutWindow:
		return Window{}, fmt.Errorf("%w, and model %.64q is past them", errWindowCut, g.models[i].Name)
	case win == noWindow && g.slo.skipped:
		return Window{}, errHistogramsSkipped
	case win == noWindow:
		return Window{}, errNoHistogram
	default:
		lw = &g.slo.windows[win].lat[l]
	}
	if lw.le == nil {
		return Window{}, errNoHistogram
	}
	w := Window{Le: slices.Clone(lw.le), Count: make([]float64, len(lw.le))}
	if len(lw.anchors) == 0 || !lw.anchors[0].at.Before(g.at) {
		// One good scrape so far (or since a restart): nothing measured yet,
		// an empty window that merges as such and gives no percentile.
		return w, nil
	}
	base := &lw.anchors[0]
	w.Span = g.at.Sub(base.at)
	for i := range w.Count {
		w.Count[i] = max(0, lw.latest[i]-base.count[i])
	}
	return w, nil
}

var (
	errNoHistogram       = fmt.Errorf("page has no histogram for it")
	errHistogramsSkipped = fmt.Errorf("the latency histograms are parsed only while a latency metric has been asked for lately, and the latest page was parsed without them; they are parsed again from the next scrape, and a percentile needs two such scrapes and a finished request in the window")
	errWindowCut         = fmt.Errorf("percentiles are kept for at most %d models and %d histogram buckets per pod (the page's first models with histograms that fit), and a percentile over models one of which is past them is not merged from the others", MaxWindowModels, MaxWindowBuckets)
)

// rate returns the rate of counter c over the models match selects, summed,
// and how many models had one.
func (g *good) rate(c catalog.Counter, match ModelMatcher) (v float64, n, matched int) {
	for i := range g.models {
		if match != nil && !match(g.models[i].Name) {
			continue
		}
		matched++
		if r := &g.slo.models[i]; r.has&(1<<c) != 0 {
			v += r.vals[c]
			n++
		}
	}
	return v, n, matched
}

// rateSample is Get for a rate signal of a fresh good record.
func (g *good) rateSample(sig catalog.Signal, c catalog.Counter, match ModelMatcher) Sample {
	if g.over {
		return Sample{Time: g.at, Status: Absent, Detail: g.overDetail()}
	}
	v, n, matched := g.rate(c, match)
	if n > 0 {
		return Sample{Value: v, Time: g.at, Status: OK}
	}
	detail := fmt.Sprintf("no rate for %s: the page (%s) lacks the counter, or this is the pod's first good scrape, or the counter went down (a restarted server)", sig.Name(), g.server)
	if matched == 0 && match != nil {
		detail = fmt.Sprintf("page (%s) has no model matching the metric selector", g.server)
	}
	return Sample{Time: g.at, Status: Absent, Detail: detail}
}

// windowSample returns the latency window of sig of a fresh good record,
// merged over the models match selects; the Sample says why there is none
// when its Status is not OK. A window with no observation is OK: it is a
// measured zero count, which merges as such. A selected model past the
// windows' budget makes it absent: the others alone would not be the
// selected models' percentile.
func (g *good) windowSample(sig catalog.Signal, match ModelMatcher) (Window, Sample) {
	if g.over {
		return Window{}, Sample{Time: g.at, Status: Absent, Detail: g.overDetail()}
	}
	l, _, _ := sig.Quantile()
	var merged Window
	var why error
	matched, found := 0, 0
	for i := range g.models {
		if match != nil && !match(g.models[i].Name) {
			continue
		}
		matched++
		w, err := g.window(i, l)
		if errors.Is(err, errWindowCut) {
			return Window{}, Sample{Time: g.at, Status: Absent, Detail: fmt.Sprintf("page (%s): no window for %s: %v", g.server, sig.Name(), err)}
		}
		if err != nil {
			why = err
			continue
		}
		if err := merged.Merge(w); err != nil {
			return Window{}, Sample{Time: g.at, Status: Absent, Detail: fmt.Sprintf("%s: the models' %v", sig.Name(), err)}
		}
		found++
	}
	switch {
	case found > 0:
		return merged, Sample{Time: g.at, Status: OK}
	case matched == 0 && match != nil:
		return Window{}, Sample{Time: g.at, Status: Absent, Detail: fmt.Sprintf("page (%s) has no model matching the metric selector", g.server)}
	case why == nil:
		why = errNoHistogram
	}
	return Window{}, Sample{Time: g.at, Status: Absent, Detail: fmt.Sprintf("page (%s): no window for %s: %v", g.server, sig.Name(), why)}
}

// Window returns pod's latency window of the percentile signal sig over
// the models match selects, as of now, for merging over a workload's pods:
// a Sample whose Status is not OK says why there is none. A window with no
// observation (an idle pod) is OK.
func (s *Store) Window(pod types.NamespacedName, sig catalog.Signal, match ModelMatcher, now time.Time, maxAge time.Duration) (Window, Sample) {
	if _, _, ok := sig.Quantile(); !ok {
		return Window{}, Sample{Status: Absent, Detail: fmt.Sprintf("%s is not a percentile", sig.Name())}
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	e := s.pods[pod]
	if e == nil {
		return Window{}, Sample{Status: NotScraped}
	}
	if st := e.serving.status(now, maxAge); st != OK {
		return Window{}, e.serving.notOK(st, now)
	}
	return e.serving.good.windowSample(sig, match)
}

// NoObservation says why a window of span gives no percentile of sig.
func NoObservation(sig catalog.Signal, span time.Duration) string {
	if span == 0 {
		return fmt.Sprintf("no %s window yet: one good scrape so far (or since the server restarted, or since the latency histograms are parsed again), a window needs two", sig.Name())
	}
	return fmt.Sprintf("no request finished in the last %s (no %s observation in the window)", span.Round(time.Second), sig.Name())
}
