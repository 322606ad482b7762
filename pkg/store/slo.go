package store

import (
	"fmt"
	"math"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/parse"
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
// windowed; the percentiles of a pod's further models are absent (a 404
// that says so). Rates have no such bound: they keep one number per counter.
const MaxWindowModels = 8

// sloState is what a pod keeps between scrapes for the rate and percentile
// signals: the rates computed at its latest good scrape, and the bucket
// snapshots of its latency windows.
type sloState struct {
	rates   []modelRates  // aligned with servingEntry.models
	windows []modelWindow // at most MaxWindowModels
	// skipped says the latest good page was parsed without its latency
	// histograms (no one asked for a percentile lately): the windows were
	// reset, and the next page with histograms starts them over.
	skipped bool
}

// modelRates are one model's counter rates between the pod's last two good
// scrapes.
type modelRates struct {
	vals [catalog.NumCounters]float64
	has  uint8
}

type modelWindow struct {
	name string
	lat  [catalog.NumLatencies]latWindow
}

// latWindow is one latency histogram's window: its bucket bounds, its
// latest counts and its snapshots, oldest first. A server restart (a count
// going down), a change of bounds or a page without the histogram (one
// parsed without histograms included) starts it over, so that a delta
// never spans a scrape that did not see the histogram.
type latWindow struct {
	le      []float64 // nil: the model's page has no such histogram
	latest  []float64 // cumulative, per bucket of le, at the latest good scrape
	anchors []anchor
}

type anchor struct {
	at    time.Time
	count []float64 // cumulative, per bucket of le
}

// recordSLO updates the rates and windows with a good page scraped at at.
// prev and prevAt are the pod's previous good page and its time (zero if
// none). It runs under the store's lock, before the page replaces prev.
func (sv *servingEntry) recordSLO(at time.Time, page *parse.Page, prev []parse.Model, prevAt time.Time, window time.Duration) {
	st := &sv.slo
	st.skipped = page.HistogramsSkipped
	st.rates = slices.Grow(st.rates[:0], len(page.Models))[:len(page.Models)]
	dt := at.Sub(prevAt).Seconds()
	for i := range page.Models {
		m := &page.Models[i]
		r := &st.rates[i]
		*r = modelRates{}
		old := findModel(prev, m.Name)
		if old == nil || prevAt.IsZero() || dt <= 0 {
			continue // the first scrape of the pod (or of the model): no rate
		}
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

	// Windows: those of the page's first MaxWindowModels models; the
	// windows of models no longer on the page are dropped.
	old := st.windows
	n := min(len(page.Models), MaxWindowModels)
	if !sameNames(old, page.Models[:n]) {
		st.windows = make([]modelWindow, 0, n)
	} else {
		st.windows = st.windows[:0] // the usual case: the same models in the same order, updated in place
	}
	for i := range page.Models[:n] {
		m := &page.Models[i]
		w := modelWindow{name: m.Name}
		for j := range old {
			if old[j].name == m.Name {
				w = old[j]
				break
			}
		}
		for l := range catalog.NumLatencies {
			w.lat[l].update(at, m.Hists[l], window)
		}
		st.windows = append(st.windows, w)
	}
}

// sameNames reports whether ws are the windows of ms's models, in order.
func sameNames(ws []modelWindow, ms []parse.Model) bool {
	if len(ws) != len(ms) {
		return false
	}
	for i := range ws {
		if ws[i].name != ms[i].Name {
			return false
		}
	}
	return true
}

func findModel(ms []parse.Model, name string) *parse.Model {
	for i := range ms {
		if ms[i].Name == name {
			return &ms[i]
		}
	}
	return nil
}

// update adds the histogram h (nil if absent) of a good scrape at at to
// the window.
func (w *latWindow) update(at time.Time, h *parse.Histogram, window time.Duration) {
	if h == nil {
		w.reset(nil)
		return
	}
	if !slices.Equal(w.le, h.Le[:h.N]) || wentDown(w.latest, h.Count[:h.N]) {
		w.reset(h.Le[:h.N]) // new bounds, or a restarted server
	}
	w.latest = append(w.latest[:0], h.Count[:h.N]...)
	// Drop the snapshots older than the window: the oldest one left starts it.
	drop := 0
	for drop < len(w.anchors) && at.Sub(w.anchors[drop].at) > window {
		drop++
	}
	w.anchors = slices.Delete(w.anchors, 0, drop)
	if n := len(w.anchors); n > 0 && at.Sub(w.anchors[n-1].at) < window/WindowAnchors {
		return // the newest snapshot is recent enough; the page itself ends the window
	}
	w.anchors = append(w.anchors, anchor{at: at, count: slices.Clone(h.Count[:h.N])})
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

func (w *latWindow) reset(le []float64) {
	w.le = slices.Clone(le)
	w.latest, w.anchors = nil, nil
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

// window returns model m's window of latency l as of its latest good page
// (scraped at goodAt): the latest bucket counts less the oldest snapshot's.
func (st *sloState) window(m *parse.Model, l catalog.Latency, goodAt time.Time) (Window, error) {
	// m is the store's copy of the page's model, without its histograms:
	// their latest counts are in the window.
	var lw *latWindow
	for i := range st.windows {
		if st.windows[i].name == m.Name {
			lw = &st.windows[i].lat[l]
		}
	}
	switch {
	case lw == nil:
		return Window{}, fmt.Errorf("the pod serves more than %d models; percentiles are kept for the first %d", MaxWindowModels, MaxWindowModels)
	case lw.le == nil && st.skipped:
		return Window{}, errHistogramsSkipped
	case lw.le == nil:
		return Window{}, errNoHistogram
	}
	w := Window{Le: slices.Clone(lw.le), Count: make([]float64, len(lw.le))}
	if len(lw.anchors) == 0 || !lw.anchors[0].at.Before(goodAt) {
		// One good scrape so far (or since a restart): nothing measured yet,
		// an empty window that merges as such and gives no percentile.
		return w, nil
	}
	base := &lw.anchors[0]
	w.Span = goodAt.Sub(base.at)
	for i := range w.Count {
		w.Count[i] = max(0, lw.latest[i]-base.count[i])
	}
	return w, nil
}

var (
	errNoHistogram       = fmt.Errorf("page has no histogram for it")
	errHistogramsSkipped = fmt.Errorf("the latency histograms are parsed only while a latency metric has been asked for lately, and the latest page was parsed without them; they are parsed again from the next scrape, and a percentile needs two such scrapes and a finished request in the window")
)

// rate returns the rate of counter c over the models match selects, summed,
// and how many models had one.
func (st *sloState) rate(models []parse.Model, c catalog.Counter, match ModelMatcher) (v float64, n, matched int) {
	for i := range models {
		if match != nil && !match(models[i].Name) {
			continue
		}
		matched++
		if i < len(st.rates) && st.rates[i].has&(1<<c) != 0 {
			v += st.rates[i].vals[c]
			n++
		}
	}
	return v, n, matched
}

// rateSample is Get for a rate signal of an entry with a fresh good page.
func (sv *servingEntry) rateSample(sig catalog.Signal, c catalog.Counter, match ModelMatcher) Sample {
	v, n, matched := sv.slo.rate(sv.models, c, match)
	if n > 0 {
		return Sample{Value: v, Time: sv.goodAt, Status: OK}
	}
	detail := fmt.Sprintf("no rate for %s: the page (%s) lacks the counter, or this is the pod's first good scrape, or the counter went down (a restarted server)", sig.Name(), sv.server)
	if matched == 0 && match != nil {
		detail = fmt.Sprintf("page (%s) has no model matching the metric selector", sv.server)
	}
	return Sample{Time: sv.goodAt, Status: Absent, Detail: detail}
}

// windowSample returns the latency window of sig for an entry with a fresh
// good page, merged over the models match selects; the Sample says why
// there is none when its Status is not OK. A window with no observation is
// OK: it is a measured zero count, which merges as such.
func (sv *servingEntry) windowSample(sig catalog.Signal, match ModelMatcher) (Window, Sample) {
	l, _, _ := sig.Quantile()
	var merged Window
	var why error
	matched, found := 0, 0
	for i := range sv.models {
		m := &sv.models[i]
		if match != nil && !match(m.Name) {
			continue
		}
		matched++
		w, err := sv.slo.window(m, l, sv.goodAt)
		if err != nil {
			why = err
			continue
		}
		if err := merged.Merge(w); err != nil {
			return Window{}, Sample{Time: sv.goodAt, Status: Absent, Detail: fmt.Sprintf("%s: the models' %v", sig.Name(), err)}
		}
		found++
	}
	switch {
	case found > 0:
		return merged, Sample{Time: sv.goodAt, Status: OK}
	case matched == 0 && match != nil:
		return Window{}, Sample{Time: sv.goodAt, Status: Absent, Detail: fmt.Sprintf("page (%s) has no model matching the metric selector", sv.server)}
	case why == nil:
		why = errNoHistogram
	}
	return Window{}, Sample{Time: sv.goodAt, Status: Absent, Detail: fmt.Sprintf("page (%s): no window for %s: %v", sv.server, sig.Name(), why)}
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
	return e.serving.windowSample(sig, match)
}

// NoObservation says why a window of span gives no percentile of sig.
func NoObservation(sig catalog.Signal, span time.Duration) string {
	if span == 0 {
		return fmt.Sprintf("no %s window yet: one good scrape so far (or since the server restarted, or since the latency histograms are parsed again), a window needs two", sig.Name())
	}
	return fmt.Sprintf("no request finished in the last %s (no %s observation in the window)", span.Round(time.Second), sig.Name())
}
