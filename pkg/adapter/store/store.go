// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Package store keeps the latest scrape outcome of every target pod: the
// serving signals per model from the pod's own page (and the LoRA adapters a
// vLLM page names as running or waiting: Adapter), and GPU activity from the
// gpu-agent on its node, each with the time of the scrape it came from.
//
// The store answers "what is the value of this signal for this pod" with a
// Status that says why there is no value when there is none. It never turns
// a missing, failed or stale sample into a zero.
//
// For model servers it keeps two things per pod: the last good scrape (its
// time, server and models) and the latest attempt (its time and error).
// A failed attempt does not erase a good value: Get serves the last good
// value, with its own timestamp, while it is younger than the maximum age,
// and only then reports the pod Failed (the latest attempt failed) or Stale.
// A canceled scrape (scrape.ReasonCanceled) says nothing about the pod and
// is kept only when the pod has no outcome at all. Error texts are cut to
// MaxErrorLen bytes when recorded.
//
// What it keeps per pod is bounded whatever the pages (budget.go): at most
// MaxModels models and MaxModelNameBytes of their names, and MaxPodBytes of
// heap in all. Record builds a pod's new record outside the store's lock
// and swaps it in under it, so the lock is held for the same short time
// whatever the page.
package store

import (
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/types"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/agentpage"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/parse"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/scrape"
)

// Status says whether a lookup found a usable value, and if not, why not.
type Status uint8

const (
	// OK means the value is fresh and measured.
	OK Status = iota
	// NotScraped means the pod has never been scraped (yet).
	NotScraped
	// Failed means the pod's latest scrape failed and it has no good sample
	// younger than the maximum age.
	Failed
	// Absent means the latest scrape succeeded but the page lacked the series
	// (or no model matched the metric selector).
	Absent
	// Stale means the latest scrape succeeded but is older than the maximum
	// age.
	Stale
)

var statusNames = [...]string{OK: "ok", NotScraped: "not scraped yet", Failed: "scrape failed", Absent: "series absent", Stale: "stale"}

func (s Status) String() string { return statusNames[s] }

var statusLabels = [...]string{OK: "ok", NotScraped: "not_scraped", Failed: "failed", Absent: "absent", Stale: "stale"}

// Label returns the status as a metric label value, e.g. "not_scraped".
func (s Status) Label() string { return statusLabels[s] }

// ModelMatcher picks the models a query covers; nil matches every model.
type ModelMatcher func(model string) bool

// Sample is one looked-up value.
type Sample struct {
	Value float64
	// Time is the start time of the scrape the value came from.
	Time   time.Time
	Status Status
	// Detail says more about a non-OK status, e.g. the scrape error.
	Detail string
}

// MaxErrorLen is the most bytes of a scrape error's text kept per pod;
// longer texts are cut and end in "…".
const MaxErrorLen = 256

type servingEntry struct {
	at       time.Time // start of the latest scrape attempt
	err      string    // its error, cut to MaxErrorLen; "" when it succeeded
	canceled bool      // the latest attempt was canceled: any real outcome replaces it

	good *good // the latest good page; nil if none. Never changed: Record replaces it
}

// failed reports whether the latest attempt failed.
func (sv *servingEntry) failed() bool { return sv.err != "" }

// attempt records the outcome of an attempt started at at (errText "" when
// it succeeded) unless a newer one is kept.
func (sv *servingEntry) attempt(at time.Time, errText string) {
	if !at.Before(sv.at) || sv.canceled {
		sv.at, sv.err, sv.canceled = at, errText, false
	}
}

// status returns OK when the last good scrape is younger than maxAge, else
// NotScraped, Failed or Stale. It does not look at the models (Absent).
func (sv *servingEntry) status(now time.Time, maxAge time.Duration) Status {
	switch {
	case sv.good != nil && now.Sub(sv.good.at) <= maxAge:
		return OK
	case sv.at.IsZero():
		return NotScraped
	case sv.failed():
		return Failed
	default:
		return Stale
	}
}

// truncate cuts s to at most MaxErrorLen bytes, on a rune boundary, marking the cut.
func truncate(s string) string {
	if len(s) <= MaxErrorLen {
		return s
	}
	cut := MaxErrorLen
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// GPU holds one pod's GPU activity as reported by the gpu-agent.
type GPU struct {
	// GPUs is the number of GPUs allocated to the pod.
	GPUs   int
	Values [catalog.Count]float64
	Has    catalog.Set
}

type gpuEntry struct {
	at  time.Time
	gpu GPU
}

type entry struct {
	serving servingEntry
	hasGPU  bool
	gpu     gpuEntry

	// rec is held by a Record of a good page of the pod while it builds the
	// pod's next record outside the store's lock (one at a time per pod),
	// so that the pod's record it follows is not reused meanwhile.
	rec sync.Mutex
}

// Store is safe for concurrent use.
type Store struct {
	mu   sync.RWMutex
	pods map[types.NamespacedName]*entry
	// removed holds, for each pod Retain forgot in the last removedTTL,
	// when: an outcome of a scrape of it that started before then is the
	// removed pod's, and is not recorded.
	removed   map[types.NamespacedName]time.Time
	sloWindow time.Duration // of the latency percentiles
	// spares holds replaced good records, which no reader holds any more,
	// for Record to build the next ones into, so that Record allocates
	// nothing once warm and no pod keeps two records; [0] those of small
	// pages, [1] the larger, so that a small page's record never holds a
	// large one's memory (good.large).
	spares [2]sync.Pool
}

// removedTTL is how long Retain remembers a forgotten pod: far longer than
// any scrape in flight can take (its timeout is at most the interval).
const removedTTL = 10 * time.Minute

// New returns an empty store.
func New() *Store {
	return &Store{pods: make(map[types.NamespacedName]*entry), removed: make(map[types.NamespacedName]time.Time), sloWindow: DefaultSLOWindow}
}

// SetSLOWindow sets the sliding window of the latency percentiles (see
// WindowAnchors); call it before the first Record. A window of zero or
// less keeps the default.
func (s *Store) SetSLOWindow(d time.Duration) {
	if d <= 0 {
		d = DefaultSLOWindow
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sloWindow = d
}

// Record stores the outcome of one scrape of pod's model server, started at
// at. page is copied; it may be reused by the caller afterwards. An older
// outcome never overwrites a newer one, and a failure never erases the last
// good page (Get decides, by age, which one answers). A canceled scrape is
// kept only when the pod has no outcome yet. The error's text is cut to
// MaxErrorLen bytes. A good page's record is built outside the store's
// lock, so Record holds it for the same short time whatever the page.
func (s *Store) Record(pod types.NamespacedName, at time.Time, page *parse.Page, err error) {
	if err == nil && page == nil {
		err = fmt.Errorf("no page")
	}
	if err != nil {
		s.recordFailure(pod, at, err)
		return
	}
	for {
		if s.recordGood(pod, at, page) {
			return
		}
	}
}

// recordFailure is Record of a failed or canceled scrape.
func (s *Store) recordFailure(pod types.NamespacedName, at time.Time, err error) {
	canceled := scrape.ReasonOf(err) == scrape.ReasonCanceled
	text := truncate(err.Error())
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entryLocked(pod, at)
	if e == nil {
		return
	}
	sv := &e.serving
	if canceled {
		if sv.at.IsZero() {
			sv.at, sv.err, sv.canceled = at, text, true
		}
		return
	}
	sv.attempt(at, text)
}

// entryLocked returns pod's entry, made if it has none, or nil when the pod
// was forgotten after at (the outcome of a scrape of a pod forgotten since,
// which ended late). s.mu is held for writing.
func (s *Store) entryLocked(pod types.NamespacedName, at time.Time) *entry {
	if gone, ok := s.removed[pod]; ok {
		if at.Before(gone) {
			return nil
		}
		delete(s.removed, pod) // a scrape of the pod now under this name
	}
	e := s.pods[pod]
	if e == nil {
		e = &entry{}
		s.pods[pod] = e
	}
	return e
}

// recordGood is Record of a good page. It returns false when the pod was
// forgotten (and maybe made again) while the record was built, to be called
// again.
func (s *Store) recordGood(pod types.NamespacedName, at time.Time, page *parse.Page) bool {
	s.mu.RLock()
	e, window := s.pods[pod], s.sloWindow
	_, gone := s.removed[pod]
	s.mu.RUnlock()
	if e == nil || gone {
		s.mu.Lock()
		e = s.entryLocked(pod, at)
		s.mu.Unlock()
		if e == nil {
			return true
		}
	}
	e.rec.Lock()
	defer e.rec.Unlock()
	// Only a Record holding e.rec changes e.serving.good: it can be read
	// without s.mu here, and does not change until the swap below.
	prev := e.serving.good
	var next *good
	if prev == nil || !at.Before(prev.at) {
		// The work that grows with the page, outside the lock.
		spare, _ := s.spares[b2i(len(page.Models) > maxSpareModels && len(page.Models) <= MaxModels)].Get().(*good)
		next = build(spare, at, page, prev, window)
	}
	s.mu.Lock()
	if s.pods[pod] != e {
		s.mu.Unlock()
		s.spare(next) // no reader ever saw it
		return false
	}
	e.serving.attempt(at, "")
	if next != nil {
		e.serving.good = next
	}
	s.mu.Unlock()
	if next != nil {
		s.spare(prev) // no reader holds it now: readers hold s.mu
	}
	return true
}

// spare keeps g, a record no reader holds, for a later Record to build
// into.
func (s *Store) spare(g *good) {
	if g != nil {
		s.spares[b2i(g.large())].Put(g)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// RecordGPU replaces the GPU activity of pods on one node, as read from
// one scrape of that node's agent started at at. Pods the agent reports are
// updated; it does not remove other pods' GPU values (they go stale).
func (s *Store) RecordGPU(at time.Time, pods map[types.NamespacedName]GPU) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for pod, g := range pods {
		if gone, ok := s.removed[pod]; ok && at.Before(gone) {
			continue // read before the pod was forgotten: maybe another pod's
		}
		e := s.pods[pod]
		if e == nil {
			e = &entry{}
			s.pods[pod] = e
		}
		if at.Before(e.gpu.at) {
			continue
		}
		e.hasGPU = true
		e.gpu = gpuEntry{at: at, gpu: g}
	}
}

// RecordAgent stores one scrape of a gpu-agent's page: the GPU activity of
// the pods on its node. A failed agent scrape changes nothing; the pods'
// GPU values then age out after the maximum age like any other.
func (s *Store) RecordAgent(_ types.NamespacedName, at time.Time, pods []agentpage.PodGPU, err error) {
	if err != nil {
		return
	}
	m := make(map[types.NamespacedName]GPU, len(pods))
	for _, p := range pods {
		m[types.NamespacedName{Namespace: p.Namespace, Name: p.Pod}] = GPU{GPUs: p.GPUs, Values: p.Values, Has: p.Has}
	}
	s.RecordGPU(at, m)
}

// Delete forgets a pod, e.g. when it is deleted or no longer a target.
func (s *Store) Delete(pod types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pods, pod)
}

// Retain forgets every pod for which keep returns false, at time at: after
// it, an outcome of a scrape of such a pod that started before at (one that
// was in flight when the pod stopped being a target, and ended late) is not
// recorded, so that it never answers for a new pod of the same name.
func (s *Store) Retain(at time.Time, keep func(types.NamespacedName) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for pod := range s.pods {
		if !keep(pod) {
			delete(s.pods, pod)
			s.removed[pod] = at
		}
	}
	for pod, gone := range s.removed {
		if at.Sub(gone) > removedTTL {
			delete(s.removed, pod)
		}
	}
}

// Len returns the number of pods with any recorded outcome.
func (s *Store) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.pods)
}

// Scraped reports whether pod has any recorded scrape outcome.
func (s *Store) Scraped(pod types.NamespacedName) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e := s.pods[pod]
	return e != nil && !e.serving.at.IsZero()
}

// Get looks up signal sig of pod, over the models match selects, as of now,
// treating samples older than maxAge as stale. Serving signals are combined
// over the matching models with the signal's aggregation (queue and batch
// summed, fractions maxed).
func (s *Store) Get(pod types.NamespacedName, sig catalog.Signal, match ModelMatcher, now time.Time, maxAge time.Duration) Sample {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e := s.pods[pod]
	if e == nil {
		return Sample{Status: NotScraped}
	}
	if sig.IsGPU() {
		return e.gpuSample(sig, now, maxAge)
	}
	sv := &e.serving
	if st := sv.status(now, maxAge); st != OK {
		return sv.notOK(st, now)
	}
	g := sv.good
	if c, ok := sig.Rate(); ok {
		return g.rateSample(sig, c, match)
	}
	if _, q, ok := sig.Quantile(); ok {
		w, s := g.windowSample(sig, match)
		if s.Status != OK {
			return s
		}
		v, ok := w.Quantile(q)
		if !ok {
			return Sample{Time: g.at, Status: Absent, Detail: NoObservation(sig, w.Span)}
		}
		return Sample{Value: v, Time: g.at, Status: OK}
	}
	if g.over {
		return Sample{Time: g.at, Status: Absent, Detail: g.overDetail()}
	}
	var v float64
	n := 0
	matched := 0
	for i := range g.models {
		m := &g.models[i]
		if match != nil && !match(m.Name) {
			continue
		}
		matched++
		x, ok := m.Value(sig)
		if !ok {
			continue
		}
		v = catalog.Combine(sig.Aggregation(), v, n, x)
		n++
	}
	if n == 0 {
		detail := fmt.Sprintf("page (%s) has no series for %s", g.server, sig.Name())
		if matched == 0 && match != nil {
			detail = fmt.Sprintf("page (%s) has no model matching the metric selector", g.server)
		}
		detail += refusedDetail(&g.rejected)
		return Sample{Time: g.at, Status: Absent, Detail: detail}
	}
	return Sample{Value: v, Time: g.at, Status: OK}
}

// notOK is the Sample of an entry whose status is st (not OK).
func (sv *servingEntry) notOK(st Status, now time.Time) Sample {
	switch st {
	case Failed:
		detail := sv.err
		if sv.good != nil {
			detail += fmt.Sprintf(" (last good scrape %s ago)", now.Sub(sv.good.at).Round(time.Millisecond))
		}
		return Sample{Time: sv.at, Status: Failed, Detail: detail}
	case Stale:
		return Sample{Time: sv.good.at, Status: Stale, Detail: fmt.Sprintf("last good scrape %s ago", now.Sub(sv.good.at).Round(time.Millisecond))}
	}
	return Sample{Status: NotScraped}
}

func (e *entry) gpuSample(sig catalog.Signal, now time.Time, maxAge time.Duration) Sample {
	switch {
	case !e.hasGPU:
		return Sample{Status: NotScraped, Detail: "no gpu-agent reported this pod"}
	case now.Sub(e.gpu.at) > maxAge:
		return Sample{Time: e.gpu.at, Status: Stale, Detail: fmt.Sprintf("last gpu-agent report %s ago", now.Sub(e.gpu.at).Round(time.Millisecond))}
	case !e.gpu.gpu.Has.Has(sig):
		return Sample{Time: e.gpu.at, Status: Absent, Detail: fmt.Sprintf("the pod's GPUs do not report %s", sig.Name())}
	}
	return Sample{Value: e.gpu.gpu.Values[sig], Time: e.gpu.at, Status: OK}
}

// Models returns the model names pod's latest good page reported, unless
// the latest attempt failed or the page was over the budget (none kept).
func (s *Store) Models(pod types.NamespacedName) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e := s.pods[pod]
	if e == nil || e.serving.failed() || e.serving.good == nil || e.serving.good.over {
		return nil
	}
	out := make([]string, 0, len(e.serving.good.models))
	for _, m := range e.serving.good.models {
		out = append(out, m.Name)
	}
	return out
}

// refusedDetail says which values the page had refused (out of range or not
// finite), so that a 404 about an absent series does not hide that the page
// did carry one; "" when none was refused.
func refusedDetail(rejected *[parse.NumRejects]uint32) string {
	var parts []string
	for r, n := range rejected {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, parse.Reject(r)))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "; the page's values refused as out of range: " + strings.Join(parts, ", ")
}
