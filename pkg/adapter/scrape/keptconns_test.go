// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package scrape

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"
)

// keptConns is the setup TestMaxKeptTLSConnections and
// TestKeptTLSConnectionMetrics share: a CA file scrapers trust, a
// certificate that CA issued for 127.0.0.1 (to serve HTTPS pages with), and
// a plain HTTP page that counts the connections it accepts.
type keptConns struct {
	caFile     string
	cert       tls.Certificate
	plain      *httptest.Server
	plainConns atomic.Int64
}

// newKeptConns writes the CA file and starts the plain HTTP page, which
// closes when the test ends.
func newKeptConns(t *testing.T) *keptConns {
	t.Helper()
	ca := newTestCA(t, "ca")
	k := &keptConns{caFile: writeFile(t, t.TempDir(), "ca.pem", ca.pem)}
	k.cert, _, _ = ca.issue(t, "p", false, "127.0.0.1")
	k.plain = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(tlsPageBody))
	}))
	k.plain.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			k.plainConns.Add(1)
		}
	}
	k.plain.Start()
	t.Cleanup(k.plain.Close)
	return k
}

// scraper builds a Manager that trusts k's CA and keeps at most bound
// HTTPS connections over all targets (reg, when not nil, takes its
// metrics), and n targets ns/p0 to ns/p<n-1>, all on url, each with its
// endpoint. The endpoints are closed when the test ends; a test may close
// them before (closing twice is harmless).
func (k *keptConns) scraper(t *testing.T, bound int, reg prometheus.Registerer, url string, n int) (*Manager, []Target, []*endpoint) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.TLS = TLSConfig{CAFile: k.caFile}
	cfg.MaxKeptTLSConnections = bound
	m, err := NewManager(cfg, newRecordingSink(), reg)
	if err != nil {
		t.Fatal(err)
	}
	ts := make([]Target, n)
	eps := make([]*endpoint, n)
	for i := range n {
		ts[i] = Target{Pod: types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("p%d", i)}, URL: url}
		if eps[i], err = m.newEndpoint(ts[i]); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, ep := range eps {
			ep.close()
		}
	})
	return m, ts, eps
}

// scrapeRounds scrapes each of ts through its endpoint in eps, in order,
// rounds times over.
func scrapeRounds(t *testing.T, m *Manager, ts []Target, eps []*endpoint, rounds int) {
	t.Helper()
	for range rounds {
		for i := range ts {
			if _, err := m.scrapeOnce(context.Background(), m.workers, ts[i], eps[i], nil, true); err != nil {
				t.Fatalf("scrape of %s: %v", ts[i].Pod, err)
			}
		}
	}
}

// TestMaxKeptTLSConnections: Config.MaxKeptTLSConnections bounds the HTTPS
// connections kept over all targets; a target past it dials (and
// handshakes) for each scrape, a target that keeps one keeps it from one
// scrape to the next, and closing a target's endpoint frees its slot for
// another. Plain HTTP connections are not bounded.
func TestMaxKeptTLSConnections(t *testing.T) {
	t.Parallel()
	k := newKeptConns(t)
	page := newTLSPage(t, k.cert, nil, nil)

	const targets, rounds = 5, 3
	cases := []struct {
		name      string
		https     bool
		bound     int
		wantConns int64 // connections the server accepted over all rounds
		wantHeld  int64 // slots held after the rounds
	}{
		{name: "none kept", https: true, bound: 0, wantConns: targets * rounds},
		{name: "two kept", https: true, bound: 2, wantConns: 2 + (targets-2)*rounds, wantHeld: 2},
		{name: "as many as targets", https: true, bound: targets, wantConns: targets, wantHeld: targets},
		{name: "the default", https: true, bound: DefaultMaxKeptTLSConnections, wantConns: targets, wantHeld: targets},
		{name: "plain http is not bounded", bound: 0, wantConns: targets},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			url, conns := k.plain.URL+"/metrics", &k.plainConns
			if tc.https {
				url, conns = page.url(), &page.conns
			}
			conns0 := conns.Load()
			m, ts, eps := k.scraper(t, tc.bound, nil, url, targets)
			scrapeRounds(t, m, ts, eps, rounds)
			if got := conns.Load() - conns0; got != tc.wantConns {
				t.Errorf("%d connections accepted for %d scrapes, want %d", got, targets*rounds, tc.wantConns)
			}
			if got := m.tlsSlots.held.Load(); got != tc.wantHeld {
				t.Errorf("%d kept TLS connections' slots held, want %d", got, tc.wantHeld)
			}
			// Closing a target that keeps its connection frees its slot:
			// the next target past the bound keeps its connection then.
			if tc.bound > 0 && tc.bound < targets {
				eps[0].close()
				last := targets - 1
				for range 2 {
					if _, err := m.scrapeOnce(context.Background(), m.workers, ts[last], eps[last], nil, true); err != nil {
						t.Fatal(err)
					}
				}
				if got := conns.Load() - conns0; got != tc.wantConns+1 {
					t.Errorf("%d connections after the freed slot, want %d (one dial, then kept)", got, tc.wantConns+1)
				}
			}
			for _, ep := range eps {
				ep.close()
			}
			if got := m.tlsSlots.held.Load(); got != 0 {
				t.Errorf("%d slots held once every endpoint is closed, want 0", got)
			}
		})
	}
}

// TestKeptTLSConnectionMetrics: scrape_kept_tls_connections follows the
// slots held (taken by a target's first kept connection, given back when
// its endpoint closes), scrape_max_kept_tls_connections is the bound, and
// scrape_tls_connections_not_kept_total counts each HTTPS scrape whose
// connection is closed only because the bound is reached: not below the
// bound, not over plain HTTP, not when the server closes the connection.
// Was missing: an operator could not see whether the bound was reached.
func TestKeptTLSConnectionMetrics(t *testing.T) {
	t.Parallel()
	k := newKeptConns(t)
	kept := newTLSPage(t, k.cert, nil, nil)
	closing := newTLSPage(t, k.cert, nil, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Connection", "close")
		_, _ = w.Write([]byte(tlsPageBody))
	})

	const targets, rounds = 4, 3
	cases := []struct {
		name        string
		url         string
		bound       int
		wantKept    float64 // scrape_kept_tls_connections after the rounds
		wantNotKept float64 // scrape_tls_connections_not_kept_total after the rounds
	}{
		{name: "below the bound", url: kept.url(), bound: targets + 1, wantKept: targets},
		{name: "at the bound", url: kept.url(), bound: targets, wantKept: targets},
		{name: "one past the bound", url: kept.url(), bound: targets - 1, wantKept: targets - 1, wantNotKept: rounds},
		{name: "half past the bound", url: kept.url(), bound: targets / 2, wantKept: targets / 2, wantNotKept: targets / 2 * rounds},
		{name: "none kept", url: kept.url(), bound: 0, wantNotKept: targets * rounds},
		{name: "the default", url: kept.url(), bound: DefaultMaxKeptTLSConnections, wantKept: targets},
		{name: "the server closes its connections", url: closing.url(), bound: 0},
		{name: "plain http is not bounded", url: k.plain.URL + "/metrics", bound: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, ts, eps := k.scraper(t, tc.bound, prometheus.NewRegistry(), tc.url, targets)
			check := func(when string, wantKept, wantNotKept float64) {
				t.Helper()
				if got := testutil.ToFloat64(m.metrics.keptTLS); got != wantKept {
					t.Errorf("%s: scrape_kept_tls_connections %v, want %v", when, got, wantKept)
				}
				if got := testutil.ToFloat64(m.metrics.notKeptTLS); got != wantNotKept {
					t.Errorf("%s: scrape_tls_connections_not_kept_total %v, want %v", when, got, wantNotKept)
				}
			}
			if got := testutil.ToFloat64(m.metrics.maxKeptTLS); got != float64(tc.bound) {
				t.Errorf("scrape_max_kept_tls_connections %v, want %d", got, tc.bound)
			}
			check("before any scrape", 0, 0)
			scrapeRounds(t, m, ts, eps, rounds)
			check("after the rounds", tc.wantKept, tc.wantNotKept)
			// Closing a target that keeps its connection frees its slot;
			// a target past the bound takes it at its next scrape, and
			// the count of connections not kept stays where it was.
			notKept := tc.wantNotKept
			if tc.wantKept > 0 {
				eps[0].close()
				check("after a kept target's close", tc.wantKept-1, notKept)
				if tc.wantNotKept > 0 {
					last := targets - 1
					if _, err := m.scrapeOnce(context.Background(), m.workers, ts[last], eps[last], nil, true); err != nil {
						t.Fatal(err)
					}
					check("after a target past the bound took the freed slot", tc.wantKept, notKept)
				}
			}
			for _, ep := range eps {
				ep.close()
			}
			check("after every target's close", 0, notKept)
		})
	}

	// The names, types and help the registry exports.
	reg := prometheus.NewRegistry()
	cfg := DefaultConfig()
	cfg.MaxKeptTLSConnections = 7
	if _, err := NewManager(cfg, newRecordingSink(), reg); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP inference_metrics_adapter_scrape_kept_tls_connections HTTPS scrape connections kept for the next scrape now, over all targets (a target's counts while its scrape runs too); at most scrape_max_kept_tls_connections.
# TYPE inference_metrics_adapter_scrape_kept_tls_connections gauge
inference_metrics_adapter_scrape_kept_tls_connections 0
# HELP inference_metrics_adapter_scrape_max_kept_tls_connections The bound on kept HTTPS scrape connections over all targets (--scrape-max-kept-tls-connections).
# TYPE inference_metrics_adapter_scrape_max_kept_tls_connections gauge
inference_metrics_adapter_scrape_max_kept_tls_connections 7
# HELP inference_metrics_adapter_scrape_tls_connections_not_kept_total HTTPS scrapes whose connection could have been kept but was closed because scrape_max_kept_tls_connections were kept already; the target's next scrape pays a TLS handshake.
# TYPE inference_metrics_adapter_scrape_tls_connections_not_kept_total counter
inference_metrics_adapter_scrape_tls_connections_not_kept_total 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"inference_metrics_adapter_scrape_kept_tls_connections",
		"inference_metrics_adapter_scrape_max_kept_tls_connections",
		"inference_metrics_adapter_scrape_tls_connections_not_kept_total"); err != nil {
		t.Error(err)
	}
}

// TestConnSlotsCountWithoutAllocating: taking, refusing and giving back
// slots, and so counting the refusals, allocates nothing (it runs on the
// scrape's path).
func TestConnSlotsCountWithoutAllocating(t *testing.T) {
	s := newConnSlots(1)
	allocs := testing.AllocsPerRun(100, func() {
		if !s.acquire() {
			t.Fatal("the free slot was refused")
		}
		if s.acquire() {
			t.Fatal("a slot was taken past the bound")
		}
		s.release()
	})
	if allocs != 0 {
		t.Errorf("%v allocations per acquire, refusal and release, want 0", allocs)
	}
	if got := s.full.Load(); got != 101 { // AllocsPerRun runs it once more to warm up
		t.Errorf("%d refusals counted, want 101", got)
	}
	if got := s.held.Load(); got != 0 {
		t.Errorf("%d slots held, want 0", got)
	}
}
