// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package scrape

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// TestMaxKeptTLSConnections: Config.MaxKeptTLSConnections bounds the HTTPS
// connections kept over all targets; a target past it dials (and
// handshakes) for each scrape, a target that keeps one keeps it from one
// scrape to the next, and closing a target's endpoint frees its slot for
// another. Plain HTTP connections are not bounded.
func TestMaxKeptTLSConnections(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := newTestCA(t, "ca")
	cert, _, _ := ca.issue(t, "p", false, "127.0.0.1")
	page := newTLSPage(t, cert, nil, nil)
	var plainConns atomic.Int64
	plain := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(tlsPageBody))
	}))
	plain.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			plainConns.Add(1)
		}
	}
	plain.Start()
	t.Cleanup(plain.Close)
	caFile := writeFile(t, dir, "ca.pem", ca.pem)

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
			cfg := DefaultConfig()
			cfg.TLS = TLSConfig{CAFile: caFile}
			cfg.MaxKeptTLSConnections = tc.bound
			m, err := NewManager(cfg, newRecordingSink(), nil)
			if err != nil {
				t.Fatal(err)
			}
			url, conns := plain.URL+"/metrics", &plainConns
			if tc.https {
				url, conns = page.url(), &page.conns
			}
			conns0 := conns.Load()
			eps := make([]*endpoint, targets)
			ts := make([]Target, targets)
			for i := range targets {
				ts[i] = Target{Pod: types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("p%d", i)}, URL: url}
				if eps[i], err = m.newEndpoint(ts[i]); err != nil {
					t.Fatal(err)
				}
			}
			ctx := context.Background()
			for range rounds {
				for i := range targets {
					if _, err := m.scrapeOnce(ctx, m.workers, ts[i], eps[i], nil, true); err != nil {
						t.Fatalf("scrape of %s: %v", ts[i].Pod, err)
					}
				}
			}
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
					if _, err := m.scrapeOnce(ctx, m.workers, ts[last], eps[last], nil, true); err != nil {
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
