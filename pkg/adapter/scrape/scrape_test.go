// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package scrape

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/parse"
)

// The values written in testdata/vllm-v1.prom.
const (
	fixtureQueue = 3.0
	fixtureBatch = 24.0
	fixtureKV    = 0.4212881455399061
)

// waitLimit bounds every wait in these tests; conditions are polled, so a
// healthy run takes far less.
const waitLimit = 10 * time.Second

func loadFixture(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/vllm-v1.prom")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// record is one Sink.Record call, with the page copied.
type record struct {
	at   time.Time
	page *parse.Page
	err  error
}

// recordingSink keeps every pod's records.
type recordingSink struct {
	mu      sync.Mutex
	records map[types.NamespacedName][]record
}

var _ Sink = (*recordingSink)(nil)

func newRecordingSink() *recordingSink {
	return &recordingSink{records: map[types.NamespacedName][]record{}}
}

func (s *recordingSink) Record(pod types.NamespacedName, at time.Time, page *parse.Page, err error) {
	r := record{at: at, err: err}
	if page != nil {
		cp := *page
		cp.Models = append([]parse.Model(nil), page.Models...)
		r.page = &cp
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records[pod] = append(s.records[pod], r)
}

func (s *recordingSink) get(pod types.NamespacedName) []record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]record(nil), s.records[pod]...)
}

// waitFor polls cond until it holds or waitLimit passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, waitLimit, true, func(context.Context) (bool, error) {
		return cond(), nil
	}); err != nil {
		t.Fatalf("timed out after %v waiting for %s", waitLimit, what)
	}
}

func pod(name string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: name} }

// value returns signal s of the page's only model.
func value(p *parse.Page, s catalog.Signal) (float64, bool) {
	if p == nil || len(p.Models) != 1 {
		return 0, false
	}
	return p.Models[0].Value(s)
}

// pageServer serves body as a Prometheus page.
func pageServer(t *testing.T, body []byte) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// simplePage is a small vLLM V1 page with the given queue size.
func simplePage(queue int) []byte {
	return fmt.Appendf(nil, "vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} %d\nvllm:num_requests_running{engine=\"0\",model_name=\"m\"} 1\n", queue)
}

func gzipped(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// testConfig has a timeout that a healthy loopback scrape meets even on a
// loaded machine under -race; the interval cannot be shorter than that. The
// tests that use it wait for as few rounds as they can and run in parallel.
func testConfig() Config {
	return Config{
		Interval:         time.Second,
		Timeout:          time.Second,
		MaxBodySize:      200 << 10, // the fixture is 51.5 KB
		Concurrency:      4,
		FirstConcurrency: 4,
		Jitter:           0.1,
	}
}

// startManager runs m until the test ends (or stop is called) and returns stop.
func startManager(t *testing.T, m *Manager) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run returned %v", err)
				}
			case <-time.After(waitLimit):
				t.Errorf("Run did not return within %v of cancel", waitLimit)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// failures returns inference_metrics_adapter_scrape_failures_total{reason} as gathered from reg.
func failures(t *testing.T, reg *prometheus.Registry, reason string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "inference_metrics_adapter_scrape_failures_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no failure series for reason %q", reason)
	return 0
}

// closedAddr returns an address on 127.0.0.1 where nothing listens.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

func TestConfigValidate(t *testing.T) {
	ok := testConfig()
	tests := []struct {
		name    string
		change  func(*Config)
		wantErr string
	}{
		{"valid", func(*Config) {}, ""},
		{"defaults are valid", func(c *Config) { *c = DefaultConfig() }, ""},
		{"timeout equal to interval", func(c *Config) { c.Timeout = c.Interval }, ""},
		{"jitter 0", func(c *Config) { c.Jitter = 0 }, ""},
		{"jitter 1", func(c *Config) { c.Jitter = 1 }, ""},
		{"zero interval", func(c *Config) { c.Interval = 0 }, "interval must be positive"},
		{"negative timeout", func(c *Config) { c.Timeout = -time.Second }, "timeout must be positive"},
		{"timeout over interval", func(c *Config) { c.Timeout = 2 * c.Interval }, "must not exceed the scrape interval"},
		{"zero body size", func(c *Config) { c.MaxBodySize = 0 }, "body size must be positive"},
		{"zero concurrency", func(c *Config) { c.Concurrency = 0 }, "concurrency must be positive"},
		{"zero first-scrape concurrency", func(c *Config) { c.FirstConcurrency = 0 }, "first-scrape concurrency must be positive"},
		{"first-scrape share of the whole pool", func(c *Config) { c.FirstNamespaceConcurrency = c.FirstConcurrency }, ""},
		{"first-scrape share over the pool", func(c *Config) { c.FirstNamespaceConcurrency = c.FirstConcurrency + 1 }, "per-namespace first-scrape concurrency must be in"},
		{"negative first-scrape share", func(c *Config) { c.FirstNamespaceConcurrency = -1 }, "per-namespace first-scrape concurrency must be in"},
		{"negative jitter", func(c *Config) { c.Jitter = -0.1 }, "jitter must be a fraction in [0, 1]"},
		{"jitter over 1", func(c *Config) { c.Jitter = 1.5 }, "jitter must be a fraction in [0, 1]"},
		{"NaN jitter", func(c *Config) { c.Jitter = math.NaN() }, "jitter must be a fraction in [0, 1]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.change(&c)
			err := c.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, tt.wantErr)
			}
			if _, err := NewManager(c, newRecordingSink(), nil); err == nil {
				t.Fatal("NewManager accepted an invalid config")
			}
		})
	}
}

func TestNewManagerRegistersMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := NewManager(testConfig(), newRecordingSink(), reg); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"inference_metrics_adapter_scrape_body_bytes_total",
		"inference_metrics_adapter_scrape_duration_seconds",
		"inference_metrics_adapter_scrape_failures_total",
		"inference_metrics_adapter_scrape_targets",
		"inference_metrics_adapter_scrapes_total",
		"inference_metrics_adapter_rejected_samples_total",
		"inference_metrics_adapter_scrape_kept_tls_connections",
		"inference_metrics_adapter_scrape_max_kept_tls_connections",
		"inference_metrics_adapter_scrape_tls_connections_not_kept_total",
	}
	wantSeries := len(want) - 2 + len(Reasons()) + int(parse.NumRejects)
	if n, err := testutil.GatherAndCount(reg, want...); err != nil || n != wantSeries {
		t.Fatalf("GatherAndCount = %d, %v; want %d series (one per failure reason, one per reject reason)", n, err, wantSeries)
	}
	if _, err := NewManager(testConfig(), newRecordingSink(), reg); err == nil {
		t.Fatal("a second Manager registered the same metrics into the same registry without error")
	}
	if _, err := NewManager(testConfig(), nil, nil); err == nil {
		t.Fatal("NewManager accepted a nil sink")
	}
}

// TestHealthyTarget scrapes the vLLM V1 fixture, plain and gzipped, and
// checks values, request headers and that the timestamp is the start time.
func TestHealthyTarget(t *testing.T) {
	t.Parallel()
	page := loadFixture(t)
	zpage := gzipped(t, page)
	type seen struct {
		ua, accept, encoding string
		at                   time.Time
	}
	for _, useGzip := range []bool{false, true} {
		t.Run(fmt.Sprintf("gzip=%v", useGzip), func(t *testing.T) {
			t.Parallel()
			var last atomic.Pointer[seen]
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				last.Store(&seen{r.UserAgent(), r.Header.Get("Accept"), r.Header.Get("Accept-Encoding"), time.Now()})
				time.Sleep(5 * time.Millisecond) // so that start and end of a scrape differ
				if useGzip && strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
					w.Header().Set("Content-Encoding", "gzip")
					_, _ = w.Write(zpage)
					return
				}
				_, _ = w.Write(page)
			}))
			defer srv.Close()

			sink := newRecordingSink()
			reg := prometheus.NewRegistry()
			cfg := testConfig()
			cfg.RequestGzip = useGzip
			m, err := NewManager(cfg, sink, reg)
			if err != nil {
				t.Fatal(err)
			}
			if !m.LastScrape().IsZero() {
				t.Fatalf("LastScrape before any scrape = %v, want zero", m.LastScrape())
			}
			before := time.Now()
			p := pod("healthy")
			m.SetTargets([]Target{{Pod: p, URL: srv.URL + "/metrics"}})
			stop := startManager(t, m)
			waitFor(t, "2 records", func() bool { return len(sink.get(p)) >= 2 })
			stop()

			recs := sink.get(p)
			for i, r := range recs {
				if r.err != nil {
					t.Fatalf("record %d: error %v", i, r.err)
				}
				if r.page.Server != parse.VLLMV1 {
					t.Errorf("record %d: server %v, want vllm-v1", i, r.page.Server)
				}
				for s, want := range map[catalog.Signal]float64{catalog.QueueSize: fixtureQueue, catalog.BatchSize: fixtureBatch, catalog.KVCacheUsage: fixtureKV} {
					if got, ok := value(r.page, s); !ok || got != want {
						t.Errorf("record %d: %v = %v, %v; want %v", i, s, got, ok, want)
					}
				}
				if i > 0 && !r.at.After(recs[i-1].at) {
					t.Errorf("record %d at %v is not after record %d at %v", i, r.at, i-1, recs[i-1].at)
				}
			}
			if s := last.Load(); !recs[len(recs)-1].at.Before(s.at) {
				t.Errorf("last record stamped %v, not before the server saw the request at %v: want the scrape's start time", recs[len(recs)-1].at, s.at)
			} else if s.ua != "inference-metrics-adapter" || !strings.HasPrefix(s.accept, "text/plain;version=0.0.4") || s.encoding != map[bool]string{true: "gzip", false: "identity"}[useGzip] {
				t.Errorf("request headers User-Agent=%q Accept=%q Accept-Encoding=%q", s.ua, s.accept, s.encoding)
			}
			if ls := m.LastScrape(); ls.Before(before) || ls.Before(recs[len(recs)-1].at) {
				t.Errorf("LastScrape() = %v, want at or after the last record's %v", ls, recs[len(recs)-1].at)
			}
			if got := testutil.ToFloat64(m.metrics.scrapes); got < float64(len(recs)) {
				t.Errorf("scrapes_total = %v, want at least %d", got, len(recs))
			}
			if got, want := testutil.ToFloat64(m.metrics.bytes), float64(len(recs)*len(page)); got < want {
				t.Errorf("scrape_body_bytes_total = %v, want at least %v (decompressed)", got, want)
			}
			for _, r := range Reasons() {
				if r == ReasonCanceled {
					continue // a scrape in flight at stop
				}
				if n := failures(t, reg, r); n != 0 {
					t.Errorf("failures{reason=%q} = %v, want 0", r, n)
				}
			}
		})
	}
}

// TestFailingTargets runs each kind of bad target next to a healthy one: the
// bad one is recorded with its reason and counted, the healthy one keeps
// fresh, intact values.
func TestFailingTargets(t *testing.T) {
	t.Parallel()
	page := loadFixture(t)
	huge := bytes.Repeat([]byte("# padding line of a page that is far too large for the limit\n"), 10000) // ≈620 KB
	tests := []struct {
		name       string
		handler    http.HandlerFunc
		url        func(t *testing.T, healthy string) string // instead of a server
		wantReason string
	}{
		{
			name: "slow past the timeout",
			handler: func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-r.Context().Done():
				case <-time.After(waitLimit):
				}
			},
			wantReason: ReasonTimeout,
		},
		{
			name: "slow body past the timeout",
			handler: func(w http.ResponseWriter, r *http.Request) {
				_, _ = w.Write(page[:1000])
				w.(http.Flusher).Flush()
				select {
				case <-r.Context().Done():
				case <-time.After(waitLimit):
				}
			},
			wantReason: ReasonTimeout,
		},
		{
			name:       "HTTP 500",
			handler:    func(w http.ResponseWriter, r *http.Request) { http.Error(w, "boom", http.StatusInternalServerError) },
			wantReason: ReasonHTTPStatus,
		},
		{
			name:       "HTTP 404",
			handler:    http.NotFound,
			wantReason: ReasonHTTPStatus,
		},
		{
			name: "huge body with Content-Length",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Length", fmt.Sprint(len(huge)))
				_, _ = w.Write(huge)
			},
			wantReason: ReasonBodyTooLarge,
		},
		{
			name: "huge body chunked",
			handler: func(w http.ResponseWriter, r *http.Request) {
				for i := 0; i < len(huge); i += 64 << 10 {
					_, _ = w.Write(huge[i:min(i+64<<10, len(huge))])
					w.(http.Flusher).Flush()
				}
			},
			wantReason: ReasonBodyTooLarge,
		},
		{
			name: "huge body gzipped",
			handler: func() http.HandlerFunc {
				z := gzipped(t, huge) // a few KB on the wire
				return func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Encoding", "gzip")
					_, _ = w.Write(z)
				}
			}(),
			wantReason: ReasonBodyTooLarge,
		},
		{
			name: "malformed value",
			handler: func(w http.ResponseWriter, r *http.Request) {
				_, _ = w.Write([]byte("vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} lots\n"))
			},
			wantReason: ReasonParse,
		},
		{
			name: "HTML instead of a page",
			handler: func(w http.ResponseWriter, r *http.Request) {
				_, _ = w.Write([]byte("<html><body>hello</body></html>\n"))
			},
			wantReason: ReasonParse,
		},
		{
			name: "corrupt gzip",
			handler: func() http.HandlerFunc {
				z := gzipped(t, page)
				z[len(z)/2] ^= 0xff
				return func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Encoding", "gzip")
					_, _ = w.Write(z)
				}
			}(),
			wantReason: ReasonParse,
		},
		{
			name: "redirect",
			handler: func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, "/elsewhere", http.StatusFound)
			},
			wantReason: ReasonRedirect,
		},
		{
			name:       "connection refused",
			url:        func(t *testing.T, _ string) string { return "http://" + closedAddr(t) + "/metrics" },
			wantReason: ReasonConnection,
		},
		{
			name: "connection reset mid-body",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Length", fmt.Sprint(len(page)))
				_, _ = w.Write(page[:1000])
				w.(http.Flusher).Flush()
				conn, _, err := http.NewResponseController(w).Hijack()
				if err == nil {
					_ = conn.Close()
				}
			},
			wantReason: ReasonConnection,
		},
		{
			name:       "invalid URL",
			url:        func(t *testing.T, _ string) string { return "http://[::1" },
			wantReason: ReasonConnection,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			healthy := pageServer(t, page)
			var badURL string
			if tt.url != nil {
				badURL = tt.url(t, healthy.URL)
			} else {
				bad := httptest.NewServer(tt.handler)
				defer bad.Close()
				badURL = bad.URL + "/metrics"
			}

			sink := newRecordingSink()
			reg := prometheus.NewRegistry()
			m, err := NewManager(testConfig(), sink, reg)
			if err != nil {
				t.Fatal(err)
			}
			good, bad := pod("good"), pod("bad")
			m.SetTargets([]Target{
				{Pod: good, URL: healthy.URL + "/metrics"},
				{Pod: bad, URL: badURL},
			})
			stop := startManager(t, m)
			waitFor(t, "a failure of the bad target", func() bool { return len(sink.get(bad)) >= 1 })
			// The healthy target keeps being scraped after the bad one failed.
			afterFailure := sink.get(bad)[0].at
			waitFor(t, "a fresh healthy record", func() bool {
				recs := sink.get(good)
				return len(recs) > 0 && recs[len(recs)-1].at.After(afterFailure)
			})
			stop()

			badRecs := sink.get(bad)
			for i, r := range badRecs {
				if r.page != nil || r.err == nil {
					t.Fatalf("bad record %d: page %v, err %v; want no page and an error", i, r.page, r.err)
				}
				if got := ReasonOf(r.err); got != tt.wantReason {
					t.Fatalf("bad record %d: reason %q (%v), want %q", i, got, r.err, tt.wantReason)
				}
				var se *Error
				if !errors.As(r.err, &se) || !strings.Contains(r.err.Error(), badURL) {
					t.Errorf("bad record %d: error %q does not wrap an *Error and name the URL", i, r.err)
				}
			}
			for i, r := range sink.get(good) {
				if r.err != nil {
					t.Fatalf("healthy record %d: %v", i, r.err)
				}
				if got, ok := value(r.page, catalog.QueueSize); !ok || got != fixtureQueue {
					t.Fatalf("healthy record %d: queue %v, %v; want %v", i, got, ok, fixtureQueue)
				}
				if got, ok := value(r.page, catalog.BatchSize); !ok || got != fixtureBatch {
					t.Fatalf("healthy record %d: batch %v, %v; want %v", i, got, ok, fixtureBatch)
				}
			}
			if got := failures(t, reg, tt.wantReason); got < float64(len(badRecs)) {
				t.Errorf("failures{reason=%q} = %v, want at least the %d recorded", tt.wantReason, got, len(badRecs))
			}
			for _, r := range Reasons() {
				if r == tt.wantReason || r == ReasonCanceled {
					continue
				}
				if got := failures(t, reg, r); got != 0 {
					t.Errorf("failures{reason=%q} = %v, want 0", r, got)
				}
			}
		})
	}
}

// TestBodyLimit checks that a page just under the limit is read
// whole and one just over it is refused, through the same worker.
func TestBodyLimit(t *testing.T) {
	page := loadFixture(t)
	for _, tt := range []struct {
		name       string
		limit      int64
		gzip       bool
		wantReason string
	}{
		{"exactly at the limit", int64(len(page)), false, ""},
		{"one byte over the limit", int64(len(page)) - 1, false, ReasonBodyTooLarge},
		{"gzip exactly at the limit", int64(len(page)), true, ""},
		{"gzip one byte over the limit", int64(len(page)) - 1, true, ReasonBodyTooLarge},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body := page
			if tt.gzip {
				body = gzipped(t, page)
			}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.gzip {
					w.Header().Set("Content-Encoding", "gzip")
				}
				_, _ = w.Write(body)
			}))
			defer srv.Close()
			sink := newRecordingSink()
			cfg := testConfig()
			cfg.MaxBodySize = tt.limit
			cfg.Concurrency, cfg.FirstConcurrency = 1, 1
			m, err := NewManager(cfg, sink, nil)
			if err != nil {
				t.Fatal(err)
			}
			p := pod("p")
			for range 2 { // the second time through a warm worker
				m.ScrapeNow(context.Background(), []Target{{Pod: p, URL: srv.URL}})
			}
			recs := sink.get(p)
			if len(recs) != 2 {
				t.Fatalf("%d records, want 2", len(recs))
			}
			for i, r := range recs {
				if got := ReasonOf(r.err); got != tt.wantReason {
					t.Fatalf("record %d: reason %q (%v), want %q", i, got, r.err, tt.wantReason)
				}
				if r.err == nil {
					if got, ok := value(r.page, catalog.QueueSize); !ok || got != fixtureQueue {
						t.Fatalf("record %d: queue %v, %v; want %v", i, got, ok, fixtureQueue)
					}
				}
			}
		})
	}
}

func TestScrapeNow(t *testing.T) {
	t.Parallel()
	page := loadFixture(t)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(waitLimit):
		}
	}))
	defer slow.Close()
	healthy := pageServer(t, page)
	targets := []Target{
		{Pod: pod("good"), URL: healthy.URL, Server: parse.VLLMV1},
		{Pod: pod("slow"), URL: slow.URL},
	}

	t.Run("per-request timeout", func(t *testing.T) {
		sink := newRecordingSink()
		cfg := testConfig()
		cfg.FirstConcurrency = 1 // the slow target must not starve the healthy one for more than Timeout
		m, err := NewManager(cfg, sink, nil)
		if err != nil {
			t.Fatal(err)
		}
		m.ScrapeNow(context.Background(), append([]Target{targets[1]}, targets[0]))
		if recs := sink.get(pod("good")); len(recs) != 1 || recs[0].err != nil || recs[0].page.Server != parse.VLLMV1 {
			t.Fatalf("healthy target records %+v, want one good page", recs)
		}
		if recs := sink.get(pod("slow")); len(recs) != 1 || ReasonOf(recs[0].err) != ReasonTimeout {
			t.Fatalf("slow target records %+v, want one timeout", recs)
		}
	})

	t.Run("caller's deadline before the timeout", func(t *testing.T) {
		sink := newRecordingSink()
		cfg := testConfig()
		cfg.Interval, cfg.Timeout = time.Minute, time.Minute
		m, err := NewManager(cfg, sink, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		done := make(chan struct{})
		go func() { m.ScrapeNow(ctx, targets); close(done) }()
		select {
		case <-done:
		case <-time.After(waitLimit):
			t.Fatalf("ScrapeNow did not return within %v of a 100ms deadline", waitLimit)
		}
		if recs := sink.get(pod("good")); len(recs) != 1 || recs[0].err != nil {
			t.Fatalf("healthy target records %+v, want one good page", recs)
		}
		if recs := sink.get(pod("slow")); len(recs) != 1 || ReasonOf(recs[0].err) != ReasonCanceled {
			t.Fatalf("slow target records %+v, want one canceled", recs)
		}
	})

	t.Run("context already done", func(t *testing.T) {
		sink := newRecordingSink()
		m, err := NewManager(testConfig(), sink, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		m.ScrapeNow(ctx, targets)
		if n := len(sink.get(pod("good"))) + len(sink.get(pod("slow"))); n != 0 {
			t.Fatalf("%d records after ScrapeNow with a done context, want 0", n)
		}
		if !m.LastScrape().IsZero() {
			t.Fatalf("LastScrape() = %v, want zero: nothing was attempted", m.LastScrape())
		}
	})
}

// TestSetTargets reconciles: add, remove, change URL, change Server, and
// checks that loops stop and no goroutine is left behind.
func TestSetTargets(t *testing.T) {
	baseline := runtime.NumGoroutine()
	srvA := pageServer(t, simplePage(1))
	srvB := pageServer(t, simplePage(2))
	srvC := pageServer(t, simplePage(3))

	sink := newRecordingSink()
	cfg := testConfig()
	// Short: a scrape that times out on a loaded machine only delays the
	// conditions below, which look at the latest good record.
	cfg.Interval, cfg.Timeout = 50*time.Millisecond, 50*time.Millisecond
	m, err := NewManager(cfg, sink, nil)
	if err != nil {
		t.Fatal(err)
	}
	p1, p2, p3 := pod("p1"), pod("p2"), pod("p3")
	lastQueue := func(p types.NamespacedName) float64 {
		recs := sink.get(p)
		if len(recs) == 0 || recs[len(recs)-1].err != nil {
			return -1
		}
		v, ok := value(recs[len(recs)-1].page, catalog.QueueSize)
		if !ok {
			return -1
		}
		return v
	}
	loopOf := func(p types.NamespacedName) *loop {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.loops[p]
	}
	stopped := func(l *loop) bool {
		select {
		case <-l.done:
			return true
		default:
			return false
		}
	}

	// Targets set before Run start with Run.
	m.SetTargets([]Target{{Pod: p1, URL: srvA.URL}, {Pod: p2, URL: srvB.URL}})
	stop := startManager(t, m)
	waitFor(t, "p1 and p2 scraped", func() bool { return lastQueue(p1) == 1 && lastQueue(p2) == 2 })
	if got := testutil.ToFloat64(m.metrics.targets); got != 2 {
		t.Errorf("targets gauge = %v, want 2", got)
	}

	// Remove p2, add p3.
	loop1, loop2 := loopOf(p1), loopOf(p2)
	m.SetTargets([]Target{{Pod: p1, URL: srvA.URL}, {Pod: p3, URL: srvC.URL}})
	waitFor(t, "p2's loop to stop", func() bool { return stopped(loop2) })
	waitFor(t, "p3 scraped", func() bool { return lastQueue(p3) == 3 })
	if loopOf(p2) != nil {
		t.Error("p2 still has a loop after its removal")
	}
	if loopOf(p1) != loop1 {
		t.Error("p1's loop was restarted although its target did not change")
	}
	n2 := len(sink.get(p2))
	n1 := len(sink.get(p1))
	waitFor(t, "3 more scrapes of p1", func() bool { return len(sink.get(p1)) >= n1+3 })
	if got := len(sink.get(p2)); got != n2 {
		t.Errorf("p2 recorded %d more times after its loop stopped", got-n2)
	}

	// Change p1's URL: a new loop scrapes the new URL.
	m.SetTargets([]Target{{Pod: p1, URL: srvC.URL}, {Pod: p3, URL: srvC.URL}})
	waitFor(t, "p1's old loop to stop", func() bool { return stopped(loop1) })
	waitFor(t, "p1 scraped at its new URL", func() bool { return lastQueue(p1) == 3 })

	// Change p1's Server: restarted again, now parsing as TGI finds nothing.
	loop1 = loopOf(p1)
	m.SetTargets([]Target{{Pod: p1, URL: srvC.URL, Server: parse.TGI}, {Pod: p3, URL: srvC.URL}})
	waitFor(t, "p1's loop to restart", func() bool { return stopped(loop1) })
	waitFor(t, "p1 parsed as TGI", func() bool {
		recs := sink.get(p1)
		return len(recs) > 0 && recs[len(recs)-1].page != nil && recs[len(recs)-1].page.Server == parse.Unknown
	})

	// Remove everything.
	loop1, loop3 := loopOf(p1), loopOf(p3)
	m.SetTargets(nil)
	waitFor(t, "all loops to stop", func() bool { return stopped(loop1) && stopped(loop3) })
	if got := testutil.ToFloat64(m.metrics.targets); got != 0 {
		t.Errorf("targets gauge = %v, want 0", got)
	}

	// Targets set after Run returned wait for the next Run.
	stop()
	m.SetTargets([]Target{{Pod: p1, URL: srvA.URL}})
	if l := loopOf(p1); l != nil {
		t.Error("SetTargets started a loop while Run was not running")
	}

	srvA.Close()
	srvB.Close()
	srvC.Close()
	waitFor(t, fmt.Sprintf("goroutines back to the baseline of %d", baseline), func() bool {
		return runtime.NumGoroutine() <= baseline
	})
}

func TestRunTwice(t *testing.T) {
	m, err := NewManager(testConfig(), newRecordingSink(), nil)
	if err != nil {
		t.Fatal(err)
	}
	startManager(t, m)
	waitFor(t, "Run to start", func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.runCtx != nil
	})
	if err := m.Run(context.Background()); err == nil {
		t.Fatal("a second concurrent Run returned nil, want an error")
	}
}

// The custom servers of Config.Servers reach every worker's parser, both for
// detection and for a target forced to a custom server, in one-off scrapes
// and in the background loop.
func TestCustomServers(t *testing.T) {
	t.Parallel()
	servers, err := parse.NewServers([]parse.CustomServer{
		{Name: "my-server", ModelLabel: "model",
			Queue:   parse.Series{Name: "my_server_queue_depth"},
			KVCache: parse.Series{Name: "my_server_kv_percent", Scale: 0.01}},
		{Name: "vllm-fork", ModelLabel: "served",
			Queue: parse.Series{Name: "vllm:num_requests_waiting"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	my, _ := servers.ByName("my-server")
	fork, _ := servers.ByName("vllm-fork")
	custom := pageServer(t, []byte("# TYPE my_server_queue_depth gauge\nmy_server_queue_depth{model=\"m\"} 7\nmy_server_kv_percent{model=\"m\"} 30\n"))
	vllmish := pageServer(t, []byte("vllm:num_requests_waiting{model_name=\"m\",served=\"s\"} 2\n"))

	cfg := testConfig()
	cfg.Servers = servers
	cfg.Concurrency = 2
	sink := newRecordingSink()
	m, err := NewManager(cfg, sink, nil)
	if err != nil {
		t.Fatal(err)
	}
	m.ScrapeNow(context.Background(), []Target{
		{Pod: pod("detected"), URL: custom.URL},
		{Pod: pod("forced"), URL: vllmish.URL, Server: fork},
		{Pod: pod("built-in"), URL: vllmish.URL},
	})
	check := func(name string, server parse.Server, model string, s catalog.Signal, want float64) {
		t.Helper()
		recs := sink.get(pod(name))
		if len(recs) == 0 || recs[0].err != nil {
			t.Fatalf("%s: records %+v, want a good page", name, recs)
		}
		p := recs[0].page
		if v, ok := value(p, s); p.Server != server || p.Models[0].Name != model || !ok || v != want {
			t.Errorf("%s: page %+v, want server %s, model %q, %s = %v", name, *p, servers.Name(server), model, s, want)
		}
	}
	check("detected", my, "m", catalog.KVCacheUsage, 0.3)
	check("forced", fork, "s", catalog.QueueSize, 2)
	check("built-in", parse.VLLMV0, "m", catalog.QueueSize, 2)

	m.SetTargets([]Target{{Pod: pod("looped"), URL: custom.URL, Server: my}})
	startManager(t, m)
	waitFor(t, "a scrape by the loop", func() bool { return len(sink.get(pod("looped"))) > 0 })
	check("looped", my, "m", catalog.QueueSize, 7)
}

// TestTargetsCountsTheLatestSet: Targets, which the adapter's liveness check
// reads, counts the distinct pods of the latest SetTargets, before and
// without Run.
func TestTargetsCountsTheLatestSet(t *testing.T) {
	a := types.NamespacedName{Namespace: "ns", Name: "a"}
	b := types.NamespacedName{Namespace: "ns", Name: "b"}
	for _, tc := range []struct {
		name string
		sets [][]Target
		want int
	}{
		{"none yet", nil, 0},
		{"two pods", [][]Target{{{Pod: a, URL: "http://127.0.0.1:1/metrics"}, {Pod: b, URL: "http://127.0.0.1:2/metrics"}}}, 2},
		{"a pod twice counts once", [][]Target{{{Pod: a, URL: "http://127.0.0.1:1/metrics"}, {Pod: a, URL: "http://127.0.0.1:3/metrics"}}}, 1},
		{"the latest set wins", [][]Target{{{Pod: a, URL: "http://127.0.0.1:1/metrics"}, {Pod: b, URL: "http://127.0.0.1:2/metrics"}}, {}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := NewManager(testConfig(), &lockedSink{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, ts := range tc.sets {
				m.SetTargets(ts)
			}
			if got := m.Targets(); got != tc.want {
				t.Errorf("Targets() = %d, want %d", got, tc.want)
			}
		})
	}
}
