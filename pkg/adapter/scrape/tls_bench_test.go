// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package scrape

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// reuseServer serves page over loopback, plain or over TLS with cert, and
// counts the connections it accepted and the TLS handshakes that resumed
// a session. keepAlive off makes it answer every request with
// "Connection: close", so that each scrape dials a new connection;
// tickets off makes every handshake a full one (no session resumption).
type reuseServer struct {
	srv            *httptest.Server
	conns, resumed atomic.Int64
}

func newReuseServer(b *testing.B, page []byte, cert *tls.Certificate, keepAlive, tickets bool) *reuseServer {
	b.Helper()
	s := &reuseServer{}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS != nil && r.TLS.DidResume {
			s.resumed.Add(1)
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		w.Header().Set("Content-Length", strconv.Itoa(len(page)))
		_, _ = w.Write(page)
	}))
	s.srv.Config.SetKeepAlivesEnabled(keepAlive)
	s.srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	if cert == nil {
		s.srv.Start()
	} else {
		s.srv.TLS = &tls.Config{Certificates: []tls.Certificate{*cert}, MinVersion: tls.VersionTLS12, SessionTicketsDisabled: !tickets}
		s.srv.StartTLS()
	}
	b.Cleanup(s.srv.Close)
	return s
}

// BenchmarkScrapeReuse compares, in one run, a whole scrape of the vLLM V1
// fixture (GET + read + parse + Sink.Record) through a Manager as the
// adapter builds it (--scrape-ca-file set, so HTTPS targets are verified
// and their sessions cached), over plain HTTP and over TLS:
//
//   - reuse=kept: the server keeps the connection alive, as model servers
//     do; the scraper keeps one connection per target, so TLS costs its
//     record encryption only, the handshake paid once;
//   - reuse=none: the server closes the connection after each page, so
//     every scrape dials; over TLS the handshake resumes the session the
//     scraper cached (https-resumed, the Go server's default session
//     tickets) or, with tickets disabled on the server, is a full one
//     (https-full: certificate chain, signature and its verification).
//
// The servers run in this process, so ns/op and cpu-ns/op (the process's
// CPU per scrape, both sides) include the server's share. conns/op and
// resumed/op say how many connections each scrape opened and how many
// handshakes resumed a session: the check that reuse and resumption
// happen (the benchmark fails when they do not).
//
//	go test -run '^$' -bench BenchmarkScrapeReuse -benchmem -benchtime=2000x -count=3 ./pkg/adapter/scrape
func BenchmarkScrapeReuse(b *testing.B) {
	page := loadFixture(b)
	dir := b.TempDir()
	ca := newTestCA(b, "bench-ca")
	cert, _, _ := ca.issue(b, "page", false, "127.0.0.1")
	caFile := writeFile(b, dir, "ca.pem", ca.pem)
	for _, bc := range []struct {
		name      string
		tls       bool
		keepAlive bool
		tickets   bool
	}{
		{"reuse=kept/scheme=http", false, true, true},
		{"reuse=kept/scheme=https", true, true, true},
		{"reuse=none/scheme=http", false, false, true},
		{"reuse=none/scheme=https-resumed", true, false, true},
		{"reuse=none/scheme=https-full", true, false, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var srvCert *tls.Certificate
			if bc.tls {
				srvCert = &cert
			}
			srv := newReuseServer(b, page, srvCert, bc.keepAlive, bc.tickets)
			cfg := DefaultConfig()
			cfg.Concurrency = 1
			cfg.TLS = TLSConfig{CAFile: caFile}
			m, err := NewManager(cfg, &copyingSink{}, nil)
			if err != nil {
				b.Fatal(err)
			}
			target := Target{Pod: types.NamespacedName{Namespace: "ns", Name: "p"}, URL: srv.srv.URL + "/metrics"}
			ep, err := m.newEndpoint(target)
			if err != nil {
				b.Fatal(err)
			}
			defer ep.close()
			ctx := context.Background()
			// One scrape first: the kept connection, or the cached session,
			// that the measured scrapes reuse.
			if _, err := m.scrapeOnce(ctx, m.workers, target, ep, nil, true); err != nil {
				b.Fatal(err)
			}
			conns0, resumed0 := srv.conns.Load(), srv.resumed.Load()
			b.SetBytes(int64(len(page)))
			b.ReportAllocs()
			cpu0 := processCPU(b)
			b.ResetTimer()
			for b.Loop() {
				if _, err := m.scrapeOnce(ctx, m.workers, target, ep, nil, true); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			n := float64(b.N)
			conns, resumed := srv.conns.Load()-conns0, srv.resumed.Load()-resumed0
			b.ReportMetric(float64(processCPU(b)-cpu0)/n, "cpu-ns/op")
			b.ReportMetric(float64(conns)/n, "conns/op")
			b.ReportMetric(float64(resumed)/n, "resumed/op")
			switch {
			case bc.keepAlive && conns != 0:
				b.Fatalf("%d new connections for %d scrapes of a keep-alive server: the connection was not reused", conns, b.N)
			case !bc.keepAlive && conns != int64(b.N):
				b.Fatalf("%d connections for %d scrapes of a server that closes each", conns, b.N)
			case bc.tls && !bc.keepAlive && bc.tickets && resumed != conns:
				b.Fatalf("%d of %d handshakes resumed a session: the session cache is not used", resumed, conns)
			case !bc.tickets && resumed != 0:
				b.Fatalf("%d handshakes resumed without session tickets", resumed)
			}
		})
	}
}
