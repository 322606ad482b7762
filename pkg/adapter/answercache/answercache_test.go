// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package answercache

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"k8s.io/apiserver/pkg/features"
	testclock "k8s.io/utils/clock/testing"
)

const queuePath = "/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/pods/*/inference_queue_size"

// counting is the handler behind the cache: it answers with the number of
// times it was called, the status of the path's last element, and reports a
// value measured at valueAt.
type counting struct {
	calls   atomic.Int64
	status  int
	valueAt time.Time
	gate    chan struct{} // when set, each call waits for it
}

func (h *counting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := h.calls.Add(1)
	if h.gate != nil {
		<-h.gate
	}
	if !h.valueAt.IsZero() {
		Seen(r.Context(), h.valueAt)
	}
	w.Header().Set("Content-Type", "application/json")
	if h.status != 0 {
		w.WriteHeader(h.status)
	}
	fmt.Fprintf(w, "answer %d", n)
}

func get(t *testing.T, h http.Handler, target string, header map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, target, nil)
	for k, v := range header {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func newCache(cfg Config, next http.Handler, clk *testclock.FakeClock) (*Cache, *prometheus.Registry) {
	reg := prometheus.NewRegistry()
	return New(cfg, next, reg, clk), reg
}

func TestCacheServesIdenticalQuestionsFromOneAnswer(t *testing.T) {
	now := time.Unix(1000, 0)
	cases := []struct {
		name      string
		first     string
		firstHdr  map[string]string
		second    string
		secondHdr map[string]string
		advance   time.Duration
		status    int
		valueAt   time.Time
		wantCalls int64
	}{
		{name: "same question within the TTL is a hit", first: queuePath + "?labelSelector=app%3Dllm", second: queuePath + "?labelSelector=app%3Dllm", advance: 900 * time.Millisecond, wantCalls: 1},
		{name: "past the TTL it is built again", first: queuePath, second: queuePath, advance: time.Second, wantCalls: 2},
		{name: "another selector is another answer", first: queuePath + "?labelSelector=app%3Da", second: queuePath + "?labelSelector=app%3Db", wantCalls: 2},
		{name: "another metric is another answer", first: queuePath, second: "/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/pods/*/inference_batch_size", wantCalls: 2},
		{name: "gzip and identity are kept apart", first: queuePath, firstHdr: map[string]string{"Accept-Encoding": "gzip"}, second: queuePath, wantCalls: 2},
		{name: "another Accept is another answer", first: queuePath, firstHdr: map[string]string{"Accept": "application/json"}, second: queuePath, secondHdr: map[string]string{"Accept": "application/yaml"}, wantCalls: 2},
		{name: "errors are never kept", first: queuePath, second: queuePath, status: http.StatusNotFound, wantCalls: 2},
		{name: "an answer whose oldest value reaches max-age expires then", first: queuePath, second: queuePath, valueAt: now.Add(-9700 * time.Millisecond), advance: 400 * time.Millisecond, wantCalls: 2},
		{name: "an answer whose values stay younger than max-age lives its TTL", first: queuePath, second: queuePath, valueAt: now.Add(-8 * time.Second), advance: 900 * time.Millisecond, wantCalls: 1},
		{name: "an answer already at max-age is not kept", first: queuePath, second: queuePath, valueAt: now.Add(-10 * time.Second), wantCalls: 2},
		{name: "other APIs pass through", first: "/apis/apps/v1/deployments", second: "/apis/apps/v1/deployments", wantCalls: 2},
		{name: "health checks pass through", first: "/readyz", second: "/readyz", wantCalls: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := testclock.NewFakeClock(now)
			next := &counting{status: tc.status, valueAt: tc.valueAt}
			c, _ := newCache(Config{TTL: time.Second, MaxAge: 10 * time.Second}, next, clk)
			a := get(t, c, tc.first, tc.firstHdr)
			clk.Step(tc.advance)
			b := get(t, c, tc.second, tc.secondHdr)
			if got := next.calls.Load(); got != tc.wantCalls {
				t.Fatalf("handler called %d times, want %d", got, tc.wantCalls)
			}
			if tc.wantCalls == 1 && b.Body.String() != a.Body.String() {
				t.Errorf("second answer %q, want the kept %q", b.Body.String(), a.Body.String())
			}
			if tc.wantCalls == 2 && b.Body.String() == a.Body.String() {
				t.Errorf("second answer %q is the first one, want a fresh one", b.Body.String())
			}
		})
	}
}

func TestCacheReplaysStatusAndHeaders(t *testing.T) {
	clk := testclock.NewFakeClock(time.Unix(1000, 0))
	c, _ := newCache(Config{TTL: time.Second}, &counting{}, clk)
	get(t, c, queuePath, nil)
	r := httptest.NewRequest(http.MethodGet, queuePath, nil)
	w := httptest.NewRecorder()
	w.Header().Set("Audit-Id", "outer") // set by a filter outside the cache
	c.ServeHTTP(w, r)
	if w.Code != http.StatusOK || w.Body.String() != "answer 1" {
		t.Fatalf("hit: %d %q, want 200 \"answer 1\"", w.Code, w.Body.String())
	}
	if got := w.Header().Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type %q, want the handler's application/json", got)
	}
	if got := w.Header().Get("Audit-Id"); got != "outer" {
		t.Errorf("Audit-Id %q: the outer filter's header was lost", got)
	}
}

func TestCacheCoalescesConcurrentQuestions(t *testing.T) {
	clk := testclock.NewFakeClock(time.Unix(1000, 0))
	next := &counting{gate: make(chan struct{})}
	c, reg := newCache(Config{TTL: time.Second}, next, clk)
	const callers = 8
	bodies := make(chan string, callers)
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bodies <- get(t, c, queuePath, nil).Body.String()
		}()
	}
	// Let the callers arrive while the first build is held at the gate.
	if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return waiting(c, queuePath) >= callers-1, nil
	}); err != nil {
		t.Errorf("%d callers waiting on the build after 10s, want %d", waiting(c, queuePath), callers-1)
	}
	close(next.gate)
	wg.Wait()
	close(bodies)
	for b := range bodies {
		if b != "answer 1" {
			t.Errorf("a caller got %q, want the one shared answer", b)
		}
	}
	if got := next.calls.Load(); got != 1 {
		t.Errorf("handler called %d times for %d concurrent identical questions, want 1", got, callers)
	}
	if got := testutil.ToFloat64(c.results.WithLabelValues(resultShared)); got != callers-1 {
		t.Errorf("shared = %v, want %d", got, callers-1)
	}
	if n, err := testutil.GatherAndCount(reg, "inference_metrics_adapter_answer_cache_requests_total"); err != nil || n != 4 {
		t.Errorf("counter series = %d (%v), want 4 results", n, err)
	}
}

// waiting counts the callers waiting on the build of path.
func waiting(c *Cache, path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if b, ok := c.inflight[key(httptest.NewRequest(http.MethodGet, path, nil))]; ok {
		return b.waiters
	}
	return 0
}

// builderAndWaiter asks queuePath twice: the first caller builds the answer
// (and blocks in next until its gate closes), the second waits on that
// build. It returns once both are in place (or after 10 s), with the
// channels their answers arrive on.
func builderAndWaiter(t *testing.T, c *Cache, next *counting) (first, second chan *httptest.ResponseRecorder) {
	t.Helper()
	first, second = make(chan *httptest.ResponseRecorder), make(chan *httptest.ResponseRecorder)
	go func() { first <- get(t, c, queuePath, nil) }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := wait.PollUntilContextCancel(ctx, time.Millisecond, true, func(context.Context) (bool, error) {
		return next.calls.Load() > 0, nil
	}); err != nil {
		t.Errorf("the first caller's build did not start within 10s (%d handler calls)", next.calls.Load())
	}
	go func() { second <- get(t, c, queuePath, nil) }()
	if err := wait.PollUntilContextCancel(ctx, time.Millisecond, true, func(context.Context) (bool, error) {
		return waiting(c, queuePath) >= 1, nil
	}); err != nil {
		t.Errorf("%d callers waiting on the build after 10s, want 1", waiting(c, queuePath))
	}
	return first, second
}

func TestCacheWaiterComputesItsOwnWhenTheBuildFails(t *testing.T) {
	clk := testclock.NewFakeClock(time.Unix(1000, 0))
	next := &counting{status: http.StatusInternalServerError, gate: make(chan struct{})}
	c, _ := newCache(Config{TTL: time.Second}, next, clk)
	first, second := builderAndWaiter(t, c, next)
	close(next.gate)
	a, b := <-first, <-second
	if a.Code != http.StatusInternalServerError || b.Code != http.StatusInternalServerError {
		t.Fatalf("codes %d, %d, want both 500", a.Code, b.Code)
	}
	if a.Body.String() == b.Body.String() {
		t.Errorf("the waiter got the failed build's answer %q, want its own", b.Body.String())
	}
}

func TestCacheBounds(t *testing.T) {
	cases := []struct {
		name     string
		cfg      Config
		advance  time.Duration
		wantKept int
		hit      int // a question asked again that must be served kept
	}{
		{name: "entries", cfg: Config{TTL: time.Second, MaxEntries: 3}, wantKept: 3, hit: 2},
		{name: "bytes", cfg: Config{TTL: time.Second, MaxBytes: 2 * 520}, wantKept: 2, hit: 1},
		{name: "expired entries make room", cfg: Config{TTL: time.Second, MaxEntries: 3}, advance: time.Second, wantKept: 3, hit: 7},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := testclock.NewFakeClock(time.Unix(1000, 0))
			next := &counting{}
			c, _ := newCache(tc.cfg, next, clk)
			for i := range 10 {
				get(t, c, fmt.Sprintf("%s?labelSelector=app%%3D%d", queuePath, i), nil)
				if i == 4 {
					clk.Step(tc.advance)
				}
			}
			n, b := c.Len()
			if n != tc.wantKept {
				t.Errorf("kept %d answers (%d bytes), want %d", n, b, tc.wantKept)
			}
			if b > c.cfg.MaxBytes {
				t.Errorf("kept %d bytes, over the bound %d", b, c.cfg.MaxBytes)
			}
			get(t, c, fmt.Sprintf("%s?labelSelector=app%%3D%d", queuePath, tc.hit), nil)
			if got := next.calls.Load(); got != 10 {
				t.Errorf("question %d asked again was computed (%d calls), want it served kept", tc.hit, got)
			}
		})
	}
}

func TestWrapZeroTTLIsThePlainHandler(t *testing.T) {
	next := &counting{}
	h := Wrap(Config{}, next, nil, testclock.NewFakeClock(time.Unix(1000, 0)))
	get(t, h, queuePath, nil)
	get(t, h, queuePath, nil)
	if got := next.calls.Load(); got != 2 {
		t.Errorf("handler called %d times with the cache off, want 2", got)
	}
}

// A handler that panics (the API server's timeout filter aborts a request
// with http.ErrAbortHandler) must not leave its question in flight forever:
// the next identical question is computed.
func TestCachePanickingBuildReleasesTheQuestion(t *testing.T) {
	clk := testclock.NewFakeClock(time.Unix(1000, 0))
	var calls atomic.Int64
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			panic(http.ErrAbortHandler)
		}
		fmt.Fprint(w, "answer")
	})
	c, _ := newCache(Config{TTL: time.Second}, next, clk)
	func() {
		defer func() {
			r := recover()
			if err, _ := r.(error); !errors.Is(err, http.ErrAbortHandler) {
				t.Fatalf("recovered %v, want the handler's panic", r)
			}
		}()
		get(t, c, queuePath, nil)
	}()
	if n := waiting(c, queuePath); n != 0 {
		t.Fatalf("%d waiters", n)
	}
	c.mu.Lock()
	_, inflight := c.inflight[key(httptest.NewRequest(http.MethodGet, queuePath, nil))]
	c.mu.Unlock()
	if inflight {
		t.Fatal("the panicked build is still in flight: every later identical question would wait on it")
	}
	if got := get(t, c, queuePath, nil).Body.String(); got != "answer" {
		t.Errorf("next answer %q, want a computed one", got)
	}
}

// gzipping is the handler behind the cache for the encoding tests: it
// negotiates the response's encoding as the API server's response writers
// do, and says which it chose.
type gzipping struct{ calls atomic.Int64 }

func (h *gzipping) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.calls.Add(1)
	enc := responsewriters.ContentEncodingSupported(r, features.APIResponseCompression)
	if enc != "" {
		w.Header().Set("Content-Encoding", enc)
	}
	fmt.Fprintf(w, "encoding %q", enc)
}

// TestCacheKeyFollowsTheServersGzipNegotiation: the API server gzips an
// answer only for an Accept-Encoding token that is exactly "gzip"; a kept
// gzipped answer must never reach a caller whose header merely contains
// the word (gzip;q=0 refuses gzip, x-gzip is another token).
func TestCacheKeyFollowsTheServersGzipNegotiation(t *testing.T) {
	for _, tc := range []struct {
		name, first, second string
	}{
		{name: "gzip;q=0 refuses gzip", first: "gzip", second: "gzip;q=0"},
		{name: "x-gzip is not gzip", first: "gzip", second: "x-gzip"},
		{name: "gzip;q=1 is not gzip to the API server", first: "gzip", second: "deflate, gzip;q=1"},
		{name: "identity first, gzip second", first: "x-gzip", second: "gzip"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := testclock.NewFakeClock(time.Unix(1000, 0))
			next := &gzipping{}
			c, _ := newCache(Config{TTL: time.Second}, next, clk)
			get(t, c, queuePath, map[string]string{"Accept-Encoding": tc.first})
			r := httptest.NewRequest(http.MethodGet, queuePath, nil)
			r.Header.Set("Accept-Encoding", tc.second)
			want := responsewriters.ContentEncodingSupported(r, features.APIResponseCompression)
			w := get(t, c, queuePath, map[string]string{"Accept-Encoding": tc.second})
			if got := w.Header().Get("Content-Encoding"); got != want {
				t.Errorf("Accept-Encoding %q after %q: Content-Encoding %q (%s), want %q: another caller's encoding was served", tc.second, tc.first, got, w.Body.String(), want)
			}
		})
	}
}

// TestCacheSharedAnswerNeverPastMaxAge: a caller that waited for an
// identical question's build gets that answer only while its oldest value
// is younger than --max-age; past it (the build was slow), it computes its
// own.
func TestCacheSharedAnswerNeverPastMaxAge(t *testing.T) {
	now := time.Unix(1000, 0)
	for _, tc := range []struct {
		name       string
		buildTakes time.Duration
		wantShared bool
	}{
		{name: "a quick build is shared", buildTakes: 100 * time.Millisecond, wantShared: true},
		{name: "a build that ends past max-age is not shared", buildTakes: 600 * time.Millisecond, wantShared: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := testclock.NewFakeClock(now)
			next := &counting{gate: make(chan struct{}), valueAt: now.Add(-9500 * time.Millisecond)}
			c, _ := newCache(Config{TTL: time.Second, MaxAge: 10 * time.Second}, next, clk)
			first, second := builderAndWaiter(t, c, next)
			clk.Step(tc.buildTakes)
			close(next.gate)
			a, b := <-first, <-second
			if shared := b.Body.String() == a.Body.String(); shared != tc.wantShared {
				t.Errorf("waiter got %q, builder %q: shared %v, want %v (value 9.5 s old, max-age 10 s, the build took %s)", b.Body.String(), a.Body.String(), shared, tc.wantShared, tc.buildTakes)
			}
		})
	}
}
