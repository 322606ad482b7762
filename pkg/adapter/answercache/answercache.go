// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Package answers keeps the metrics API's encoded answers for a moment, so
// that many callers asking the same question share one computation.
//
// An answer to "the queue size of the 1,000 pods labelled app=llm" costs
// about 2 ms of CPU to build: listing the pods, reading the store, then the
// API machinery converting and JSON-encoding (and, for large answers,
// gzipping) 1,000 items. The HorizontalPodAutoscaler, dashboards and
// `kubectl get --raw` ask the same few questions again and again. The Cache
// sits inside the API server's handler chain, after authentication and
// authorization, and keeps each successful answer's bytes, exactly as they
// were written, for a short time:
//
//   - Concurrent identical questions are coalesced: one builds the answer,
//     the others wait for it and receive the same bytes.
//   - An answer is served from the cache for at most TTL after it was built,
//     and never once its oldest value is older than the maximum age that the
//     provider applies: the provider reports each value's time with Seen.
//   - Only 200 answers are kept; errors (404 "no value", 400, 403) are always
//     computed afresh.
//   - The cache is bounded in entries and bytes; an answer that does not fit
//     is served but not kept.
//
// The answer depends only on the request's path, query, Accept and
// Accept-Encoding headers, never on who asks: the provider answers every
// authorized caller alike. Every request still passes the API server's
// authentication and authorization before it reaches the cache, so a cached
// answer is only ever given to a caller allowed to ask the question.
package answercache

import (
	"bytes"
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"k8s.io/apiserver/pkg/features"
	"k8s.io/utils/clock"
)

// Config bounds the cache.
type Config struct {
	// TTL is how long an answer is served after it was built; 0 disables
	// the cache (every request goes straight through).
	TTL time.Duration
	// MaxAge is the oldest a value may be when it is served; an answer
	// expires when its oldest value reaches it.
	MaxAge time.Duration
	// MaxEntries and MaxBytes bound what the cache holds.
	MaxEntries int
	MaxBytes   int64
}

// Default bounds.
const (
	DefaultMaxEntries = 1024
	DefaultMaxBytes   = 64 << 20
)

// Cache is an http.Handler wrapper; see the package comment.
type Cache struct {
	cfg     Config
	clock   clock.PassiveClock
	next    http.Handler
	results *prometheus.CounterVec

	mu       sync.Mutex
	entries  map[string]*entry
	bytes    int64
	inflight map[string]*build
}

// entry is one kept answer.
type entry struct {
	status  int
	header  http.Header
	body    []byte
	expires time.Time
}

func (e *entry) size() int64 { return int64(len(e.body)) + 512 }

// build is an answer being computed; done closes when res is set.
type build struct {
	done    chan struct{}
	res     *entry // nil when the answer was not a 200
	waiters int    // callers waiting for it
}

// Results counted in inference_metrics_adapter_answer_cache_requests_total.
const (
	resultHit    = "hit"    // served from a kept answer
	resultShared = "shared" // waited for a concurrent identical question
	resultMiss   = "miss"   // computed
	resultBypass = "bypass" // not a cacheable request
)

// New returns a cache in front of next, its counters registered in reg.
func New(cfg Config, next http.Handler, reg prometheus.Registerer, clk clock.PassiveClock) *Cache {
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = DefaultMaxEntries
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	c := &Cache{
		cfg:   cfg,
		clock: clk,
		next:  next,
		results: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inference_metrics_adapter_answer_cache_requests_total",
			Help: "Metrics API requests by how the answer cache served them: hit (a kept answer), shared (waited for an identical question in flight), miss (computed), bypass (not cacheable).",
		}, []string{"result"}),
		entries:  map[string]*entry{},
		inflight: map[string]*build{},
	}
	for _, r := range []string{resultHit, resultShared, resultMiss, resultBypass} {
		c.results.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(c.results)
	}
	return c
}

// Wrap returns next behind the cache; with a zero TTL it returns next.
func Wrap(cfg Config, next http.Handler, reg prometheus.Registerer, clk clock.PassiveClock) http.Handler {
	if cfg.TTL <= 0 {
		return next
	}
	return New(cfg, next, reg, clk)
}

// metricsAPIs are the path prefixes whose answers are kept.
var metricsAPIs = []string{"/apis/custom.metrics.k8s.io/", "/apis/external.metrics.k8s.io/"}

func cacheable(r *http.Request) bool {
	if r.Method != http.MethodGet {
		return false
	}
	for _, p := range metricsAPIs {
		if strings.HasPrefix(r.URL.Path, p) {
			return !strings.Contains(r.URL.RawQuery, "watch")
		}
	}
	return false
}

// key is what the answer depends on: the question and the encoding asked for.
// The encoding is the one the API server's response writers will choose
// (gzip only for an Accept-Encoding token that is exactly "gzip"), so that a
// gzipped answer never reaches a caller that did not get gzip by that rule
// (e.g. "gzip;q=0" or "x-gzip").
func key(r *http.Request) string {
	gz := "identity"
	if responsewriters.ContentEncodingSupported(r, features.APIResponseCompression) == "gzip" {
		gz = "gzip"
	}
	return r.URL.Path + "?" + r.URL.RawQuery + "\x00" + r.Header.Get("Accept") + "\x00" + gz
}

// ServeHTTP implements http.Handler.
func (c *Cache) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !cacheable(r) {
		c.results.WithLabelValues(resultBypass).Inc()
		c.next.ServeHTTP(w, r)
		return
	}
	k := key(r)
	now := c.clock.Now()
	c.mu.Lock()
	if e, ok := c.entries[k]; ok {
		if now.Before(e.expires) {
			c.mu.Unlock()
			c.results.WithLabelValues(resultHit).Inc()
			e.writeTo(w)
			return
		}
		c.dropLocked(k, e)
	}
	if b, ok := c.inflight[k]; ok {
		b.waiters++
		c.mu.Unlock()
		select {
		case <-b.done:
		case <-r.Context().Done():
			return // the caller went away; the API server answers it
		}
		if b.res != nil && c.clock.Now().Before(b.res.expires) {
			c.results.WithLabelValues(resultShared).Inc()
			b.res.writeTo(w)
			return
		}
		// The build failed (an error, or its caller went away), or its
		// oldest value reached the maximum age while it was built: compute
		// this caller's own answer.
		c.results.WithLabelValues(resultMiss).Inc()
		c.next.ServeHTTP(w, r)
		return
	}
	b := &build{done: make(chan struct{})}
	c.inflight[k] = b
	c.mu.Unlock()

	var res *entry
	// Deferred, so that a handler that panics (the API server's timeout
	// filter aborts with one) still releases the question's waiters.
	defer func() {
		c.mu.Lock()
		delete(c.inflight, k)
		if res != nil {
			c.keepLocked(k, res, now)
		}
		b.res = res
		c.mu.Unlock()
		close(b.done)
	}()
	c.results.WithLabelValues(resultMiss).Inc()
	res = c.compute(w, r, now)
}

// compute runs the request through next, writing the answer to w as it
// comes, and returns the answer to keep, or nil when it is not a 200.
func (c *Cache) compute(w http.ResponseWriter, r *http.Request, now time.Time) *entry {
	ages := &oldest{}
	rec := &recorder{header: http.Header{}, status: http.StatusOK}
	c.next.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), oldestKey{}, ages)))
	e := &entry{status: rec.status, header: rec.header, body: rec.body.Bytes(), expires: now.Add(c.cfg.TTL)}
	e.writeTo(w)
	if rec.status != http.StatusOK {
		return nil
	}
	if t, ok := ages.get(); ok && c.cfg.MaxAge > 0 {
		if limit := t.Add(c.cfg.MaxAge); limit.Before(e.expires) {
			e.expires = limit
		}
	}
	if !now.Before(e.expires) {
		return nil
	}
	return e
}

// keepLocked stores e under k within the bounds, first dropping expired
// entries when it would not fit.
func (c *Cache) keepLocked(k string, e *entry, now time.Time) {
	if old, ok := c.entries[k]; ok {
		c.dropLocked(k, old)
	}
	if len(c.entries) >= c.cfg.MaxEntries || c.bytes+e.size() > c.cfg.MaxBytes {
		for ok, old := range c.entries {
			if !now.Before(old.expires) {
				c.dropLocked(ok, old)
			}
		}
	}
	if len(c.entries) >= c.cfg.MaxEntries || c.bytes+e.size() > c.cfg.MaxBytes {
		return
	}
	c.entries[k] = e
	c.bytes += e.size()
}

func (c *Cache) dropLocked(k string, e *entry) {
	delete(c.entries, k)
	c.bytes -= e.size()
}

// Len reports how many answers are kept and their bytes.
func (c *Cache) Len() (int, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries), c.bytes
}

func (e *entry) writeTo(w http.ResponseWriter) {
	h := w.Header()
	for k, v := range e.header {
		h[k] = slices.Clone(v) // a filter may append to it
	}
	w.WriteHeader(e.status)
	_, _ = w.Write(e.body)
}

// recorder captures what the handler writes.
type recorder struct {
	header      http.Header
	status      int
	wroteHeader bool
	body        bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if !r.wroteHeader {
		r.status, r.wroteHeader = status, true
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	r.wroteHeader = true
	return r.body.Write(p)
}

type oldestKey struct{}

// oldest is the time of the oldest value in an answer.
type oldest struct {
	mu  sync.Mutex
	t   time.Time
	set bool
}

func (o *oldest) see(t time.Time) {
	o.mu.Lock()
	if !o.set || t.Before(o.t) {
		o.t, o.set = t, true
	}
	o.mu.Unlock()
}

func (o *oldest) get() (time.Time, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.t, o.set
}

// Seen tells the cache, through the request's context, that the answer
// being built contains a value measured at t, so that the answer is not
// served once that value is older than the maximum age. Outside a cached
// request it does nothing.
func Seen(ctx context.Context, t time.Time) {
	if o, ok := ctx.Value(oldestKey{}).(*oldest); ok {
		o.see(t)
	}
}
