// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package scrape

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/parse"
)

// TestBufferReleasedAfterLargePage: a worker that read one large page does
// not keep a buffer that large for the pages after it, in either pool.
// Was wrong: each worker kept the largest page it ever read (64 × 16 MiB).
func TestBufferReleasedAfterLargePage(t *testing.T) {
	t.Parallel()
	// A 4 MiB page: comment lines, then one real series.
	var big strings.Builder
	for big.Len() < 4<<20 {
		big.WriteString("# padding padding padding padding padding padding padding padding padding\n")
	}
	big.Write(simplePage(1))
	var mu sync.Mutex
	served := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n := served
		served++
		mu.Unlock()
		if n%4 == 0 { // every round starts with the large page
			_, _ = w.Write([]byte(big.String()))
			return
		}
		_, _ = w.Write(simplePage(2))
	}))
	defer srv.Close()

	for _, tc := range []struct {
		name string
		pool func(m *Manager) chan *worker
	}{
		{"loop pool", func(m *Manager) chan *worker { return m.workers }},
		{"on-demand pool", func(m *Manager) chan *worker { return m.firstWorkers }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			cfg := testConfig()
			cfg.MaxBodySize = 8 << 20
			cfg.Concurrency, cfg.FirstConcurrency = 1, 1
			m, err := NewManager(cfg, newRecordingSink(), reg)
			if err != nil {
				t.Fatal(err)
			}
			target := Target{Pod: pod("p"), URL: srv.URL}
			ep, err := m.newEndpoint(target)
			if err != nil {
				t.Fatal(err)
			}
			defer ep.close()
			pool := tc.pool(m)
			for range 4 { // the large page, then three small ones
				if tc.name == "loop pool" {
					if _, err := m.scrapeOnce(context.Background(), pool, target, ep, nil, false); err != nil {
						t.Fatalf("scrape: %v", err)
					}
				} else {
					m.ScrapeNow(context.Background(), []Target{target})
				}
			}
			if got := testutil.ToFloat64(m.metrics.bytes); got < 4<<20 {
				t.Fatalf("read %v bytes, want the 4 MiB page among them", got)
			}
			w := <-pool
			defer func() { pool <- w }()
			if c := cap(w.buf); c > RetainBufferSize {
				t.Fatalf("worker keeps a %d-byte buffer after small pages, want at most %d", c, RetainBufferSize)
			}
		})
	}
}

// TestParseErrorReasons maps pkg/adapter/parse's errors to failure reasons.
func TestParseErrorReasons(t *testing.T) {
	live := context.Background()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name   string
		parent context.Context
		err    error
		want   string
	}{
		{"over a parser bound", live, fmt.Errorf("line 7: %w", parse.ErrLimit), ReasonLimit},
		{"parse past the scrape deadline", live, fmt.Errorf("line 9000: %w", parse.ErrDeadline), ReasonTimeout},
		{"parse past the caller's deadline", done, fmt.Errorf("line 9000: %w", parse.ErrDeadline), ReasonCanceled},
		{"bad page", live, errors.New("line 1: bad value"), ReasonParse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := parseError(tc.parent, tc.err)
			if got := ReasonOf(err); got != tc.want {
				t.Fatalf("reason %q, want %q", got, tc.want)
			}
			if !errors.Is(err, tc.err) {
				t.Fatalf("%v does not wrap %v", err, tc.err)
			}
		})
	}
}

// TestRejectedSamplesCounted exports Page.Rejected by reason.
func TestRejectedSamplesCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	met, err := newMetrics(reg, newConnSlots(DefaultMaxKeptTLSConnections))
	if err != nil {
		t.Fatal(err)
	}
	var page parse.Page
	page.Rejected[parse.RejectNonFinite] = 2
	page.Rejected[parse.RejectAboveOne] = 1
	met.countRejected(&page)
	met.countRejected(&page)
	want := `
# HELP inference_metrics_adapter_rejected_samples_total Sample values of scraped pages refused by the parser, by reason (non_finite, negative, above_one); the page's other values are kept.
# TYPE inference_metrics_adapter_rejected_samples_total counter
inference_metrics_adapter_rejected_samples_total{reason="above_one"} 2
inference_metrics_adapter_rejected_samples_total{reason="negative"} 0
inference_metrics_adapter_rejected_samples_total{reason="non_finite"} 4
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "inference_metrics_adapter_rejected_samples_total"); err != nil {
		t.Fatal(err)
	}
}

// hangingServer answers every request only when the client gives up.
func hangingServer(t *testing.T) *httptest.Server {
	t.Helper()
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	t.Cleanup(func() {
		close(stop)
		srv.Close()
	})
	return srv
}

// requestCounter counts the adapter's requests per URL, and the most it
// ever had in flight at once for each. It counts on the client side: a
// server notices a client that gave up only some time later.
type requestCounter struct {
	mu       sync.Mutex
	inFlight map[string]int
	maxSeen  map[string]int
	total    map[string]int
}

// countRequests makes m count its requests.
func countRequests(m *Manager) *requestCounter {
	c := &requestCounter{inFlight: map[string]int{}, maxSeen: map[string]int{}, total: map[string]int{}}
	next := m.get
	m.get = func(w *worker, parent context.Context, deadline time.Time, ep *endpoint, maxBody int64) (int, error) {
		c.start(ep.url, ep.addr)
		defer c.done(ep.url, ep.addr)
		return next(w, parent, deadline, ep, maxBody)
	}
	return c
}

func (c *requestCounter) start(url, host string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total[url]++
	c.inFlight[url]++
	c.maxSeen[url] = max(c.maxSeen[url], c.inFlight[url])
	c.inFlight[host]++ // hosts and URLs never collide: URLs have a scheme
	c.maxSeen[host] = max(c.maxSeen[host], c.inFlight[host])
}

func (c *requestCounter) done(url, host string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inFlight[url]--
	c.inFlight[host]--
}

// maxForHost is the most requests that were in flight at once to host
// (host:port), over all its URLs.
func (c *requestCounter) maxForHost(host string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.maxSeen[host]
}

func (c *requestCounter) stats(url string) (maxSeen, total int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.maxSeen[url], c.total[url]
}

// TestOnDemandScrapesOwnPool: many concurrent ScrapeNow calls for hanging
// pods neither starve a healthy target's loop (on-demand scrapes have a pool
// of their own) nor send a pod more than one request at a time (a second
// ScrapeNow of a pod waits for the one in flight).
// Was wrong: on-demand scrapes shared the loops' workers and starved them.
func TestOnDemandScrapesOwnPool(t *testing.T) {
	t.Parallel()
	const (
		interval = 200 * time.Millisecond
		window   = 3 * time.Second
		callers  = 20
	)
	healthy := pageServer(t, simplePage(1))
	hang := hangingServer(t)
	hanging := []Target{
		{Pod: pod("hang-0"), URL: hang.URL + "/hang-0"},
		{Pod: pod("hang-1"), URL: hang.URL + "/hang-1"},
	}

	sink := newRecordingSink()
	cfg := testConfig()
	cfg.Interval, cfg.Timeout, cfg.Jitter = interval, interval, 0
	cfg.Concurrency, cfg.FirstConcurrency = 2, 2
	m, err := NewManager(cfg, sink, nil)
	if err != nil {
		t.Fatal(err)
	}
	requests := countRequests(m)
	m.SetTargets([]Target{{Pod: pod("good"), URL: healthy.URL}})
	stop := startManager(t, m)
	waitFor(t, "the healthy target's first scrape", func() bool { return len(sink.get(pod("good"))) > 0 })

	before := len(sink.get(pod("good")))
	end := time.Now().Add(window)
	var wg sync.WaitGroup
	calls := make([]int, callers)
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				ctx, cancel := context.WithTimeout(context.Background(), 3*interval)
				m.ScrapeNow(ctx, hanging)
				cancel()
				calls[i]++
			}
		}()
	}
	wg.Wait()
	got := len(sink.get(pod("good"))) - before
	stop()

	if want := int(window / interval); float64(got) < 0.6*float64(want) {
		t.Errorf("healthy target scraped %d times in %v of on-demand load, want at least 0.6 × %d", got, window, want)
	}
	nCalls := 0
	for _, n := range calls {
		nCalls += n
	}
	for _, tg := range hanging {
		maxSeen, total := requests.stats(tg.URL)
		if maxSeen > 1 {
			t.Errorf("pod %s had %d requests in flight at once, want at most 1", tg.Pod, maxSeen)
		}
		if total >= nCalls {
			t.Errorf("pod %s got %d requests from %d ScrapeNow calls: concurrent calls did not share its scrape", tg.Pod, total, nCalls)
		}
	}
	for _, tg := range hanging {
		for i, r := range sink.get(tg.Pod) {
			if r.err == nil {
				t.Fatalf("hanging pod %s record %d succeeded", tg.Pod, i)
			}
		}
	}
}

// TestNamespaceShare_HangingNamespaceCannotStallOthers: a namespace whose
// pages all hang holds at most its share of the loop workers, so a healthy
// target in another namespace keeps its scrape rate. Without the share, the
// hanging loops take every worker for a whole timeout each interval.
func TestNamespaceShare_HangingNamespaceCannotStallOthers(t *testing.T) {
	t.Parallel()
	const (
		interval = 200 * time.Millisecond
		window   = 3 * time.Second
		hanging  = 32
	)
	healthy := pageServer(t, simplePage(1))
	hang := hangingServer(t)
	ts := []Target{{Pod: types.NamespacedName{Namespace: "victim", Name: "good"}, URL: healthy.URL}}
	for i := range hanging {
		ts = append(ts, Target{Pod: types.NamespacedName{Namespace: "tenant", Name: fmt.Sprint("hang-", i)}, URL: fmt.Sprintf("%s/hang-%d", hang.URL, i)})
	}

	sink := newRecordingSink()
	cfg := testConfig()
	cfg.Interval, cfg.Timeout, cfg.Jitter = interval, interval, 0
	cfg.Concurrency, cfg.NamespaceConcurrency = 4, 2
	m, err := NewManager(cfg, sink, nil)
	if err != nil {
		t.Fatal(err)
	}
	requests := countRequests(m)
	m.SetTargets(ts)
	stop := startManager(t, m)
	good := ts[0].Pod
	waitFor(t, "the healthy target's first scrape", func() bool { return len(sink.get(good)) > 0 })
	before := len(sink.get(good))
	time.Sleep(window)
	got := len(sink.get(good)) - before
	stop()
	hangTotal := 0
	for _, tg := range ts[1:] {
		_, n := requests.stats(tg.URL)
		hangTotal += n
	}
	t.Logf("healthy target scraped %d times in %v; hanging pods' requests in flight at most %d, %d in all", got, window, requests.maxForHost(hang.Listener.Addr().String()), hangTotal)

	if want := int(window / interval); float64(got) < 0.6*float64(want) {
		t.Errorf("healthy target scraped %d times in %v beside %d hanging pods of another namespace, want at least 0.6 × %d", got, window, hanging, want)
	}
	if inFlight := requests.maxForHost(hang.Listener.Addr().String()); inFlight > cfg.NamespaceConcurrency {
		t.Errorf("the hanging namespace had %d scrapes in flight at once, want at most its share %d", inFlight, cfg.NamespaceConcurrency)
	}
}

// TestRedirectLocationBounded: a redirect's Location is page text (the
// tenant writes it), so the failure's error quotes only a few dozen bytes of
// it, however long it is (up to the 64 KiB header bound).
// Was wrong: the error quoted the whole Location, up to 64 KiB of tenant text.
func TestRedirectLocationBounded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		location string
		wantIn   string // in the error's text
	}{
		{"short location is quoted whole", "/elsewhere", `"/elsewhere"`},
		{"long location", "/" + strings.Repeat("a", 60<<10), `"/aaaa`},
		{"long location of escapes", "/" + strings.Repeat("\x01", 60<<10), `"/\x01\x01`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resp := "HTTP/1.1 302 Found\r\nLocation: " + tc.location + "\r\nContent-Length: 0\r\n\r\n"
			srv := newRawServer(t, func(int, int) (string, bool) { return resp, false })
			err := getOnce(t, &worker{}, testEndpoint(t, srv.url()), 1<<20)
			if got := ReasonOf(err); got != ReasonRedirect {
				t.Fatalf("reason %q (%v), want %q", got, err, ReasonRedirect)
			}
			if msg := err.Error(); !strings.Contains(msg, tc.wantIn) || len(msg) > 400 {
				t.Fatalf("error of %d bytes %.120q…, want at most 400 bytes containing %q", len(msg), msg, tc.wantIn)
			}
		})
	}
}

// TestIncompleteGzipInWholeBody: a body that arrived whole (its framing
// ended cleanly) but is empty or cut-short gzip is a bad page (parse), not a
// broken connection; a body cut short by the connection stays a connection
// failure.
// Was wrong: a whole body of cut-short gzip was counted as a broken connection.
func TestIncompleteGzipInWholeBody(t *testing.T) {
	t.Parallel()
	z := string(gzipped(t, simplePage(1)))
	gz := okHead + "Content-Encoding: gzip\r\n"
	for _, tc := range []struct {
		name       string
		resp       string
		closeAfter bool
		want       string
	}{
		{"empty gzip body", gz + "Content-Length: 0\r\n\r\n", false, ReasonParse},
		{"gzip body shorter than its header", gz + "Content-Length: 3\r\n\r\nabc", false, ReasonParse},
		{"gzip stream cut, content-length whole", gz + fmt.Sprintf("Content-Length: %d\r\n\r\n", len(z)-12) + z[:len(z)-12], false, ReasonParse},
		{"gzip stream cut, chunked whole", gz + "Transfer-Encoding: chunked\r\n\r\n" + fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(z)-12, z[:len(z)-12]), false, ReasonParse},
		{"gzip body cut by the connection", gz + fmt.Sprintf("Content-Length: %d\r\n\r\n", len(z)) + z[:len(z)-12], true, ReasonConnection},
		{"whole gzip body", gz + fmt.Sprintf("Content-Length: %d\r\n\r\n", len(z)) + z, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := newRawServer(t, func(int, int) (string, bool) { return tc.resp, tc.closeAfter })
			err := getOnce(t, &worker{}, testEndpoint(t, srv.url()), 1<<20)
			if got := ReasonOf(err); got != tc.want {
				t.Fatalf("reason %q (%v), want %q", got, err, tc.want)
			}
		})
	}
}
