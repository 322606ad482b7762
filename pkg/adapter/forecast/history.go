// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Package forecast keeps bounded per-workload histories of demand and
// estimates from them the demand a workload will have within a horizon (one
// model-load time). It knows nothing of Kubernetes: a workload is a Key, a
// sample is a time, a demand (requests waiting plus running) and a
// completions rate; the estimators are pure functions of a history.
//
// Memory is bounded: at most MaxSamples samples per history, at most
// Config.MaxWorkloads histories (the oldest-touched evicted first), at most
// a share of them per namespace (a namespace over it evicts its own oldest),
// and a history not touched for two windows is dropped.
package forecast

import (
	"container/list"
	"math"
	"sync"
	"time"
)

// MaxSamples is the most samples a history keeps: the HPA asks every 15 s,
// so 64 cover 16 minutes, more than the default 5m window.
const MaxSamples = 64

// MaxBytesPerHistory bounds the heap one full history holds (MaxSamples
// samples, a key of typical length, its map and list entries): TestBytesPerHistory
// measures about 1,433 bytes and fails above this bound. The adapter's
// start-up memory budget counts Config.MaxWorkloads × MaxBytesPerHistory.
const MaxBytesPerHistory = 1600

// NamespaceShare is the largest share of Config.MaxWorkloads one namespace
// may hold (1/NamespaceShare, at least one history): a tenant asking about
// many workloads evicts its own histories, not the others'.
const NamespaceShare = 4

// Key names one workload's history: the model selector is part of it, as
// the demand of one model is another series than the demand of all.
type Key struct {
	Namespace string
	Kind      string
	Name      string
	Selector  string
}

// Sample is one reading of a workload's demand.
type Sample struct {
	At time.Time
	// Demand is the requests waiting plus running, summed over the pods.
	Demand float64
	// Completions is the requests finished per second summed over the
	// pods; NaN when unknown (a Ready pod had no rate yet).
	Completions float64
}

// entry is a stored sample: 16 bytes.
type entry struct {
	at          int64   // Unix nanoseconds
	demand      float32 // requests: float32 is exact to 2^24
	completions float32 // NaN: unknown
}

// history is one workload's ring of samples.
type history struct {
	key     Key
	samples [MaxSamples]entry
	next    int32 // where the next sample goes (int32s keep a history in the 1,152-byte size class: TestBytesPerHistory)
	n       int32 // samples held
	// The completions rates read since the last stored sample, each over
	// the time since the sample before it (stored or skipped): the next
	// stored sample's completions are their time-weighted mean.
	seen         int64         // Unix nanoseconds of the last sample seen
	rateSeconds  float64       // Σ rate × seconds over the known rates
	knownSeconds float64       // Σ seconds of the known rates
	touched      int64         // Unix nanoseconds of the last use; 0: never
	all          *list.Element // in Histories.lru
	ns           *list.Element // in its namespace's lru
}

// idle reports whether h has not been used for longer than two windows
// before now.
func (h *history) idle(now time.Time, window time.Duration) bool {
	return time.Duration(now.UnixNano()-h.touched) > 2*window
}

func (h *history) last() (entry, bool) {
	if h.n == 0 {
		return entry{}, false
	}
	return h.samples[(h.next+MaxSamples-1)%MaxSamples], true
}

func (h *history) add(e entry) {
	h.samples[h.next] = e
	h.next = (h.next + 1) % MaxSamples
	if h.n < MaxSamples {
		h.n++
	}
}

// series returns the samples in time order.
func (h *history) series() []Sample {
	out := make([]Sample, 0, h.n)
	for i := range h.n {
		e := h.samples[(h.next-h.n+i+MaxSamples)%MaxSamples]
		out = append(out, Sample{At: time.Unix(0, e.at), Demand: float64(e.demand), Completions: float64(e.completions)})
	}
	return out
}

// Config bounds the histories.
type Config struct {
	// Window is the longest span an estimate reads (the estimators'
	// window or the floor's): samples are kept at least Window/MaxSamples
	// apart, so that a full history covers it, and a history idle for two
	// windows is dropped.
	Window time.Duration
	// MinSpacing: a sample closer than this to the previous one is skipped
	// (half the scrape interval: the values change at each scrape).
	MinSpacing time.Duration
	// MaxWorkloads is the most histories kept.
	MaxWorkloads int
}

// Histories holds the workloads' histories; safe for concurrent use.
type Histories struct {
	cfg     Config
	perNS   int
	mu      sync.Mutex
	byKey   map[Key]*history
	lru     *list.List            // of *history, oldest-touched first
	nsLRU   map[string]*list.List // per namespace, oldest-touched first
	evicted int
}

// NewHistories returns empty histories bounded by cfg; MaxWorkloads below 1
// counts as 1.
func NewHistories(cfg Config) *Histories {
	cfg.MaxWorkloads = max(1, cfg.MaxWorkloads)
	return &Histories{
		cfg:   cfg,
		perNS: max(1, cfg.MaxWorkloads/NamespaceShare),
		byKey: map[Key]*history{},
		lru:   list.New(),
		nsLRU: map[string]*list.List{},
	}
}

// spacing is the least time between stored samples: MinSpacing, or more
// when MaxSamples at MinSpacing would not cover the window (many callers
// asking often).
func (hs *Histories) spacing() time.Duration {
	return max(hs.cfg.MinSpacing, hs.cfg.Window/MaxSamples)
}

// Record stores s in k's history and reports whether it was stored. A
// sample with a non-finite or negative demand, or a zero time, is refused;
// a completions rate that is not finite and not negative is unknown; a
// sample closer than the spacing to the previous one, or older, is skipped.
// A history idle for longer than two windows restarts empty.
//
// A skipped sample's demand is dropped but not its completions rate: a
// stored sample's completions are the time-weighted mean of the rates read
// since the previous stored one, each over the time since the sample
// before it, so that the completions between two stored samples count
// however many questions came in between (the spacing is the window over
// MaxSamples: about 14 s for 15 minutes, where the adapter may be asked
// every second). They are unknown when the known rates cover less than
// half of that time (a pod just turned Ready has no rate yet).
func (hs *Histories) Record(k Key, s Sample) bool {
	if s.At.IsZero() || math.IsNaN(s.Demand) || math.IsInf(s.Demand, 0) || s.Demand < 0 || s.Demand > math.MaxFloat32 {
		return false
	}
	c := s.Completions
	if math.IsNaN(c) || math.IsInf(c, 0) || c < 0 || c > math.MaxFloat32 {
		c = math.NaN()
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	hs.dropIdle(s.At)
	h := hs.byKey[k]
	if h == nil {
		h = hs.insert(k)
	}
	at := s.At.UnixNano()
	last, ok := h.last()
	if ok && at > h.seen {
		if dt := time.Duration(at - h.seen).Seconds(); !math.IsNaN(c) {
			h.rateSeconds += c * dt
			h.knownSeconds += dt
		}
		h.seen = at
	}
	if ok && time.Duration(at-last.at) < hs.spacing() {
		hs.touch(h, s.At)
		return false
	}
	if ok {
		c = math.NaN()
		if span := time.Duration(at - last.at).Seconds(); h.knownSeconds > 0 && h.knownSeconds >= span/2 {
			c = h.rateSeconds / h.knownSeconds
		}
	}
	h.add(entry{at: at, demand: float32(s.Demand), completions: float32(c)})
	h.seen, h.rateSeconds, h.knownSeconds = at, 0, 0
	hs.touch(h, s.At)
	return true
}

// Series returns k's samples in time order, as of now: none when k has no
// history or its history has been idle for longer than two windows.
func (hs *Histories) Series(k Key, now time.Time) []Sample {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	h := hs.byKey[k]
	if h == nil || h.idle(now, hs.cfg.Window) {
		return nil
	}
	return h.series()
}

// Len is the number of histories held.
func (hs *Histories) Len() int {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return len(hs.byKey)
}

// Evicted is the number of histories evicted for room so far (not counting
// those dropped as idle).
func (hs *Histories) Evicted() int {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.evicted
}

// insert makes room and adds an empty history for k.
func (hs *Histories) insert(k Key) *history {
	nl := hs.nsLRU[k.Namespace]
	if nl != nil && nl.Len() >= hs.perNS {
		hs.remove(nl.Front().Value.(*history))
		hs.evicted++
	} else if len(hs.byKey) >= hs.cfg.MaxWorkloads {
		hs.remove(hs.lru.Front().Value.(*history))
		hs.evicted++
	}
	if nl = hs.nsLRU[k.Namespace]; nl == nil {
		nl = list.New()
		hs.nsLRU[k.Namespace] = nl
	}
	h := &history{key: k}
	h.all = hs.lru.PushBack(h)
	h.ns = nl.PushBack(h)
	hs.byKey[k] = h
	return h
}

// touch marks h as used at now; a history idle for two windows restarts
// empty.
func (hs *Histories) touch(h *history, now time.Time) {
	if h.touched != 0 && h.idle(now, hs.cfg.Window) {
		h.n, h.next = 0, 0
		h.seen, h.rateSeconds, h.knownSeconds = 0, 0, 0
	}
	h.touched = max(h.touched, now.UnixNano())
	hs.lru.MoveToBack(h.all)
	hs.nsLRU[h.key.Namespace].MoveToBack(h.ns)
}

// dropIdle removes the histories untouched for longer than two windows
// before now, oldest first: amortized constant work per call.
func (hs *Histories) dropIdle(now time.Time) {
	for e := hs.lru.Front(); e != nil; e = hs.lru.Front() {
		h := e.Value.(*history)
		if !h.idle(now, hs.cfg.Window) {
			return
		}
		hs.remove(h)
	}
}

func (hs *Histories) remove(h *history) {
	hs.lru.Remove(h.all)
	nl := hs.nsLRU[h.key.Namespace]
	nl.Remove(h.ns)
	if nl.Len() == 0 {
		delete(hs.nsLRU, h.key.Namespace)
	}
	delete(hs.byKey, h.key)
}
