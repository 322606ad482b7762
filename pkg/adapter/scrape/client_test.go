// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package scrape

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"
)

// rawServer is a loopback HTTP/1.1 server of canned bytes: for each
// request on a connection it calls respond with the connection's number
// (0 for the first accepted) and the request's number on it, writes what
// respond returns, and closes the connection after it when close is true.
type rawServer struct {
	l        net.Listener
	accepted atomic.Int64
	requests chan string // each request's head, for the tests that look
	wg       sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

type respondFunc func(conn, req int) (resp string, close bool)

func newRawServer(t *testing.T, respond respondFunc) *rawServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{l: l, requests: make(chan string, 100), conns: map[net.Conn]struct{}{}}
	s.wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n := int(s.accepted.Add(1) - 1)
			s.mu.Lock()
			s.conns[c] = struct{}{}
			s.mu.Unlock()
			s.wg.Go(func() { s.serve(c, n, respond) })
		}
	})
	t.Cleanup(s.close)
	return s
}

func (s *rawServer) serve(c net.Conn, n int, respond respondFunc) {
	defer func() {
		_ = c.Close()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
	}()
	r := bufio.NewReader(c)
	for i := 0; ; i++ {
		var head strings.Builder
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return // the client closed the connection
			}
			head.WriteString(line)
			if line == "\r\n" {
				break
			}
		}
		select {
		case s.requests <- head.String():
		default:
		}
		resp, closeAfter := respond(n, i)
		if _, err := io.WriteString(c, resp); err != nil || closeAfter {
			return
		}
	}
}

// open is the number of connections the server has not seen closed.
func (s *rawServer) open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

func (s *rawServer) url() string { return "http://" + s.l.Addr().String() + "/metrics" }

func (s *rawServer) close() {
	_ = s.l.Close()
	s.mu.Lock()
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// getOnce runs one get of url's endpoint ep with a fresh worker or w.
func getOnce(t *testing.T, w *worker, ep *endpoint, maxBody int64) error {
	t.Helper()
	_, err := w.get(context.Background(), time.Now().Add(waitLimit), ep, maxBody)
	return err
}

func testEndpoint(t *testing.T, url string) *endpoint {
	t.Helper()
	ep, err := newEndpoint(url, false, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ep.close)
	return ep
}

// kept reports whether ep holds an idle connection.
func (e *endpoint) kept() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.idle != nil
}

const okHead = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"

// TestResponses reads canned responses over a real loopback connection:
// the body, the failure's reason, and whether the connection is kept.
func TestResponses(t *testing.T) {
	t.Parallel()
	page := "vllm:num_requests_waiting 1\n"
	many := strings.Repeat("X-Filler: y\r\n", maxHeaderLines+1)
	long := "X-Long: " + strings.Repeat("a", maxHeaderBytes) + "\r\n"
	zpage := string(gzipped(t, []byte(page)))
	chunk := func(s string) string { return fmt.Sprintf("%x\r\n%s\r\n", len(s), s) }
	tests := []struct {
		name       string
		resp       string
		closeAfter bool // the server closes the connection after the response
		maxBody    int64
		wantReason string
		wantErr    string // in the error's text
		wantBody   string
		wantKeep   bool
	}{
		{name: "content-length", resp: okHead + "Content-Length: 28\r\n\r\n" + page, wantBody: page, wantKeep: true},
		{name: "bare LF line ends", resp: "HTTP/1.1 200 OK\nContent-Length: 28\n\n" + page, wantBody: page, wantKeep: true},
		{name: "status line without reason", resp: "HTTP/1.1 200\r\nContent-Length: 28\r\n\r\n" + page, wantBody: page, wantKeep: true},
		{name: "same content-length twice", resp: okHead + "Content-Length: 28\r\ncontent-length: 28\r\n\r\n" + page, wantBody: page, wantKeep: true},
		{name: "empty body", resp: okHead + "Content-Length: 0\r\n\r\n", wantBody: "", wantKeep: true},
		{name: "chunked", resp: okHead + "Transfer-Encoding: chunked\r\n\r\n" + chunk(page[:10]) + chunk(page[10:]) + "0\r\n\r\n", wantBody: page, wantKeep: true},
		{name: "chunked with extensions and trailers", resp: okHead + "Transfer-Encoding: Chunked\r\n\r\n" +
			"a;name=value\r\n" + page[:10] + "\r\n" + chunk(page[10:]) + "0;last\r\nX-Trailer: 1\r\nX-Other: 2\r\n\r\n", wantBody: page, wantKeep: true},
		{name: "chunked wins over content-length", resp: okHead + "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk(page) + "0\r\n\r\n", wantBody: page, wantKeep: true},
		{name: "gzip chunked", resp: okHead + "Content-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk(zpage) + "0\r\n\r\n", wantBody: page, wantKeep: true},
		{name: "100 continue then 200", resp: "HTTP/1.1 100 Continue\r\n\r\n" + okHead + "Content-Length: 28\r\n\r\n" + page, wantBody: page, wantKeep: true},
		{name: "103 early hints then 200", resp: "HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n" + okHead + "Content-Length: 28\r\n\r\n" + page, wantBody: page, wantKeep: true},
		{name: "Connection: close honoured", resp: okHead + "Connection: close\r\nContent-Length: 28\r\n\r\n" + page, wantBody: page, wantKeep: false},
		{name: "Connection: keep-alive, close", resp: okHead + "Connection: keep-alive, Close\r\nContent-Length: 28\r\n\r\n" + page, wantBody: page, wantKeep: false},
		{name: "HTTP/1.0", resp: "HTTP/1.0 200 OK\r\nContent-Length: 28\r\n\r\n" + page, closeAfter: true, wantBody: page, wantKeep: false},
		{name: "HTTP/1.0 keep-alive", resp: "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 28\r\n\r\n" + page, wantBody: page, wantKeep: true},
		{name: "body up to the close", resp: okHead + "\r\n" + page, closeAfter: true, wantBody: page, wantKeep: false},
		{name: "bytes after the body", resp: okHead + "Content-Length: 28\r\n\r\n" + page + "HTTP/1.1 200 OK\r\n", wantBody: page, wantKeep: false},

		{name: "204", resp: "HTTP/1.1 204 No Content\r\n\r\n", wantReason: ReasonHTTPStatus, wantKeep: true},
		{name: "304 with a content-length (a 3xx, as before)", resp: "HTTP/1.1 304 Not Modified\r\nContent-Length: 28\r\n\r\n", wantReason: ReasonRedirect, wantKeep: true},
		{name: "500 drained", resp: "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\n\r\nboom", wantReason: ReasonHTTPStatus, wantErr: "HTTP 500", wantKeep: true},
		{name: "500 too long to drain", resp: "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 5000\r\n\r\n" + strings.Repeat("x", 5000), wantReason: ReasonHTTPStatus, wantKeep: false},
		{name: "302 not followed", resp: "HTTP/1.1 302 Found\r\nLocation: /elsewhere\r\nContent-Length: 0\r\n\r\n", wantReason: ReasonRedirect, wantErr: `"/elsewhere"`, wantKeep: true},
		{name: "content-length over the limit", resp: okHead + "Content-Length: 28\r\n\r\n" + page, maxBody: 27, wantReason: ReasonBodyTooLarge, wantKeep: false},
		{name: "chunked over the limit", resp: okHead + "Transfer-Encoding: chunked\r\n\r\n" + chunk(page) + "0\r\n\r\n", maxBody: 27, wantReason: ReasonBodyTooLarge, wantKeep: false},

		{name: "malformed status line", resp: "HTTP/1.1 2OO OK\r\n\r\n", wantReason: ReasonConnection, wantErr: "status line"},
		{name: "HTTP/2 status line", resp: "HTTP/2 200 OK\r\n\r\n", wantReason: ReasonConnection, wantErr: "status line"},
		{name: "not HTTP", resp: "SSH-2.0-OpenSSH_9.6\r\n", closeAfter: true, wantReason: ReasonConnection, wantErr: "status line"},
		{name: "status below 100", resp: "HTTP/1.1 099 Odd\r\n\r\n", wantReason: ReasonConnection, wantErr: "status line"},
		{name: "header line without colon", resp: okHead + "Content-Length 28\r\n\r\n" + page, wantReason: ReasonConnection, wantErr: "header line"},
		{name: "space before colon", resp: okHead + "Content-Length : 28\r\n\r\n" + page, wantReason: ReasonConnection, wantErr: "header line"},
		{name: "obsolete line folding", resp: okHead + "X-A: b\r\n c\r\nContent-Length: 28\r\n\r\n" + page, wantReason: ReasonConnection, wantErr: "folding"},
		{name: "header too long", resp: okHead + long + "Content-Length: 28\r\n\r\n" + page, wantReason: ReasonConnection, wantErr: "over 65536 bytes"},
		{name: "too many header lines", resp: okHead + many + "Content-Length: 28\r\n\r\n" + page, wantReason: ReasonConnection, wantErr: "header lines"},
		{name: "content-length not a number", resp: okHead + "Content-Length: 2a\r\n\r\n" + page, wantReason: ReasonConnection, wantErr: "Content-Length"},
		{name: "negative content-length", resp: okHead + "Content-Length: -1\r\n\r\n" + page, wantReason: ReasonConnection, wantErr: "Content-Length"},
		{name: "content-length past int64", resp: okHead + "Content-Length: 9223372036854775808\r\n\r\n" + page, wantReason: ReasonConnection, wantErr: "Content-Length"},
		{name: "conflicting content-lengths", resp: okHead + "Content-Length: 28\r\nContent-Length: 27\r\n\r\n" + page, wantReason: ReasonConnection, wantErr: "Content-Length"},
		{name: "content-length list", resp: okHead + "Content-Length: 28, 28\r\n\r\n" + page, wantReason: ReasonConnection, wantErr: "Content-Length"},
		{name: "unsupported transfer-encoding", resp: okHead + "Transfer-Encoding: gzip, chunked\r\n\r\n", wantReason: ReasonConnection, wantErr: "Transfer-Encoding"},
		{name: "101 switching protocols", resp: "HTTP/1.1 101 Switching Protocols\r\n\r\n", wantReason: ReasonConnection, wantErr: "101"},
		{name: "too many 1xx", resp: strings.Repeat("HTTP/1.1 100 Continue\r\n\r\n", max1xx+1) + okHead + "Content-Length: 28\r\n\r\n" + page, wantReason: ReasonConnection, wantErr: "informational"},
		{name: "negative chunk size", resp: okHead + "Transfer-Encoding: chunked\r\n\r\n-1c\r\n" + page + "\r\n0\r\n\r\n", wantReason: ReasonConnection, wantErr: "chunk size"},
		{name: "chunk size past int64", resp: okHead + "Transfer-Encoding: chunked\r\n\r\n8000000000000000\r\n" + page, wantReason: ReasonConnection, wantErr: "chunk size"},
		{name: "chunk size of 17 digits", resp: okHead + "Transfer-Encoding: chunked\r\n\r\n0000000000000001c\r\n" + page + "\r\n0\r\n\r\n", wantReason: ReasonConnection, wantErr: "chunk size"},
		{name: "empty chunk size", resp: okHead + "Transfer-Encoding: chunked\r\n\r\n\r\n", wantReason: ReasonConnection, wantErr: "chunk size"},
		{name: "chunk-size line too long", resp: okHead + "Transfer-Encoding: chunked\r\n\r\n1c;" + strings.Repeat("e", maxChunkLine) + "\r\n" + page + "\r\n0\r\n\r\n", wantReason: ReasonConnection, wantErr: "chunk-size line"},
		{name: "chunk without CRLF", resp: okHead + "Transfer-Encoding: chunked\r\n\r\n1c\r\n" + page + "XX0\r\n\r\n", wantReason: ReasonConnection, wantErr: "CRLF"},
		{name: "too many trailer lines", resp: okHead + "Transfer-Encoding: chunked\r\n\r\n" + chunk(page) + "0\r\n" + strings.Repeat("X-T: 1\r\n", maxTrailerLines+1) + "\r\n", wantReason: ReasonConnection, wantErr: "trailer lines"},
		{name: "body cut short", resp: okHead + "Content-Length: 100\r\n\r\n" + page, closeAfter: true, wantReason: ReasonConnection, wantErr: "unexpected EOF"},
		{name: "chunked body cut short", resp: okHead + "Transfer-Encoding: chunked\r\n\r\n" + chunk(page), closeAfter: true, wantReason: ReasonConnection, wantErr: "unexpected EOF"},
		{name: "head cut short", resp: "HTTP/1.1 200 OK\r\nContent-Le", closeAfter: true, wantReason: ReasonConnection, wantErr: "unexpected EOF"},
		{name: "closed before any byte", resp: "", closeAfter: true, wantReason: ReasonConnection, wantErr: errStale.Error()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := newRawServer(t, func(int, int) (string, bool) { return tc.resp, tc.closeAfter })
			ep := testEndpoint(t, srv.url())
			maxBody := tc.maxBody
			if maxBody == 0 {
				maxBody = 1 << 20
			}
			w := &worker{}
			err := getOnce(t, w, ep, maxBody)
			if got := ReasonOf(err); got != tc.wantReason {
				t.Fatalf("reason %q (%v), want %q", got, err, tc.wantReason)
			}
			if err != nil && !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %q does not contain %q", err, tc.wantErr)
			}
			if err == nil && string(w.buf) != tc.wantBody {
				t.Errorf("body %q, want %q", w.buf, tc.wantBody)
			}
			if got := ep.kept(); got != tc.wantKeep {
				t.Errorf("connection kept: %v, want %v", got, tc.wantKeep)
			}
			if srv.accepted.Load() != 1 {
				t.Errorf("%d connections, want 1 (nothing retried on a fresh connection)", srv.accepted.Load())
			}
		})
	}
}

// TestConnectionReused: scrapes of a target, whether by its loop or on
// demand, share one kept connection (one accepted by the server), plain
// or chunked.
func TestConnectionReused(t *testing.T) {
	t.Parallel()
	page := string(simplePage(1))
	for _, tc := range []struct{ name, resp string }{
		{"content-length", fmt.Sprintf("%sContent-Length: %d\r\n\r\n%s", okHead, len(page), page)},
		{"chunked", fmt.Sprintf("%sTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", okHead, len(page), page)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := newRawServer(t, func(int, int) (string, bool) { return tc.resp, false })
			sink := newRecordingSink()
			cfg := testConfig()
			cfg.Interval, cfg.Jitter = 100*time.Millisecond, 0
			cfg.Timeout = cfg.Interval
			m, err := NewManager(cfg, sink, nil)
			if err != nil {
				t.Fatal(err)
			}
			target := Target{Pod: pod("p"), URL: srv.url()}
			m.SetTargets([]Target{target})
			stop := startManager(t, m)
			waitFor(t, "3 good scrapes by the loop", func() bool { return goodRecords(sink.get(target.Pod)) >= 3 })
			m.ScrapeNow(context.Background(), []Target{target})
			m.ScrapeNow(context.Background(), []Target{target})
			n := goodRecords(sink.get(target.Pod))
			waitFor(t, "2 more good scrapes by the loop", func() bool { return goodRecords(sink.get(target.Pod)) >= n+2 })
			waitFor(t, "the one kept connection open", func() bool { return srv.open() == 1 })
			// The loop's and the on-demand scrapes may overlap: then the
			// second takes a fresh connection and closes it after. A scrape
			// that failed (a timeout on a loaded machine) closed its
			// connection, and the next one dialed.
			recs := sink.get(target.Pod)
			failed := len(recs) - goodRecords(recs)
			if got, most := srv.accepted.Load(), int64(1+2+failed); got > most {
				t.Errorf("%d connections for %d scrapes (%d failed), want at most %d: 1, one per failure, 2 for overlaps", got, len(recs), failed, most)
			}
			stop()
			waitFor(t, "the kept connection closed at stop", func() bool { return srv.open() == 0 })
		})
	}
}

func goodRecords(recs []record) int {
	n := 0
	for _, r := range recs {
		if r.err == nil {
			n++
		}
	}
	return n
}

// TestStaleConnectionRetriedOnce: a kept connection that the server closed
// while idle is retried once on a fresh connection; a fresh connection
// that fails, or a kept one that fails after some of the response, is not.
func TestStaleConnectionRetriedOnce(t *testing.T) {
	t.Parallel()
	page := string(simplePage(1))
	good := fmt.Sprintf("%sContent-Length: %d\r\n\r\n%s", okHead, len(page), page)
	var mode atomic.Value // what the server does with a request
	mode.Store("answer-then-close")
	srv := newRawServer(t, func(int, int) (string, bool) {
		switch mode.Load() {
		case "answer-then-close": // as a server whose idle timeout passed
			return good, true
		case "partial-then-close":
			return "HTTP/1.1 200 OK\r\n", true
		default: // "close"
			return "", true
		}
	})
	ep := testEndpoint(t, srv.url())
	w := &worker{}
	step := func(name string, wantReason string, wantAccepted int64) {
		t.Helper()
		before := srv.accepted.Load()
		err := getOnce(t, w, ep, 1<<20)
		if got := ReasonOf(err); got != wantReason {
			t.Fatalf("%s: reason %q (%v), want %q", name, got, err, wantReason)
		}
		if got := srv.accepted.Load() - before; got != wantAccepted {
			t.Fatalf("%s: %d new connections, want %d", name, got, wantAccepted)
		}
	}
	step("first scrape", "", 1)
	if !ep.kept() {
		t.Fatal("the first scrape's connection was not kept")
	}
	// The server closed it after answering: the next scrape's request
	// meets a closed connection and is sent again on a fresh one.
	step("kept connection closed by the server", "", 1)
	step("and again", "", 1)

	// The retry's fresh connection fails too: no third try.
	mode.Store("close")
	step("retry fails too", ReasonConnection, 1)
	if ep.kept() {
		t.Fatal("a failed connection was kept")
	}
	// A fresh connection that fails is never retried.
	step("fresh connection fails", ReasonConnection, 1)

	// A kept connection that fails after part of the response is not retried.
	mode.Store("answer-then-close")
	step("good again", "", 1)
	mode.Store("partial-then-close")
	step("kept connection, partial response", ReasonConnection, 1) // the retry's: the kept one was closed
}

// TestStaleRetryOnlyBeforeResponse: on a kept connection the server did
// not close, a response cut short is a failure, not a retry.
func TestStaleRetryOnlyBeforeResponse(t *testing.T) {
	t.Parallel()
	page := string(simplePage(1))
	good := fmt.Sprintf("%sContent-Length: %d\r\n\r\n%s", okHead, len(page), page)
	srv := newRawServer(t, func(_, req int) (string, bool) {
		if req == 0 {
			return good, false
		}
		return "HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\nvllm", true
	})
	ep := testEndpoint(t, srv.url())
	w := &worker{}
	if err := getOnce(t, w, ep, 1<<20); err != nil {
		t.Fatal(err)
	}
	err := getOnce(t, w, ep, 1<<20)
	if got := ReasonOf(err); got != ReasonConnection || errors.Is(err, errStale) {
		t.Fatalf("reason %q (%v), want %q and not a stale connection", got, err, ReasonConnection)
	}
	if got := srv.accepted.Load(); got != 1 {
		t.Fatalf("%d connections, want 1: a response cut short is not retried", got)
	}
}

// TestRemovedTargetClosesConnection: the kept connection of a removed
// target, and of every target when Run ends, is closed.
func TestRemovedTargetClosesConnection(t *testing.T) {
	t.Parallel()
	page := string(simplePage(1))
	good := fmt.Sprintf("%sContent-Length: %d\r\n\r\n%s", okHead, len(page), page)
	a := newRawServer(t, func(int, int) (string, bool) { return good, false })
	b := newRawServer(t, func(int, int) (string, bool) { return good, false })
	sink := newRecordingSink()
	cfg := testConfig()
	cfg.Jitter = 0
	m, err := NewManager(cfg, sink, nil)
	if err != nil {
		t.Fatal(err)
	}
	ta, tb := Target{Pod: pod("a"), URL: a.url()}, Target{Pod: pod("b"), URL: b.url()}
	m.SetTargets([]Target{ta, tb})
	stop := startManager(t, m)
	waitFor(t, "both scraped", func() bool { return goodRecords(sink.get(ta.Pod)) > 0 && goodRecords(sink.get(tb.Pod)) > 0 })
	waitFor(t, "one kept connection to each", func() bool { return a.open() == 1 && b.open() == 1 })
	m.SetTargets([]Target{tb})
	waitFor(t, "the removed target's connection closed", func() bool { return a.open() == 0 })
	if b.open() != 1 {
		t.Fatalf("the remaining target has %d connections open, want 1", b.open())
	}
	stop()
	waitFor(t, "every connection closed when Run ended", func() bool { return b.open() == 0 })
}

// TestEndpointIdleTimeout: an idle connection older than the idle timeout
// is closed, not reused; a younger one is reused; a closed endpoint keeps
// none.
func TestEndpointIdleTimeout(t *testing.T) {
	ep, err := newEndpoint("http://127.0.0.1:1/metrics", false, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	for _, tc := range []struct {
		name     string
		after    time.Duration
		wantKept bool
	}{
		{"young", 59 * time.Second, true},
		{"at the timeout", time.Minute, true},
		{"past the timeout", time.Minute + time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, peer := net.Pipe()
			defer peer.Close()
			ep.put(c, t0)
			got := ep.take(t0.Add(tc.after))
			if (got != nil) != tc.wantKept {
				t.Fatalf("take returned %v, want a connection: %v", got, tc.wantKept)
			}
			if got != nil {
				_ = got.Close()
				return
			}
			// The stale connection was closed: its peer reads EOF.
			_ = peer.SetReadDeadline(time.Now().Add(waitLimit))
			if _, err := peer.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
				t.Fatalf("peer read %v, want EOF: the stale connection was not closed", err)
			}
		})
	}
	c, peer := net.Pipe()
	defer peer.Close()
	ep.close()
	ep.put(c, t0)
	if ep.take(t0) != nil {
		t.Fatal("a closed endpoint kept a connection")
	}
}

// TestNewEndpoint checks the request bytes and the refused URLs.
func TestNewEndpoint(t *testing.T) {
	for _, tc := range []struct {
		name, url string
		gzip      bool
		wantAddr  string
		wantReq   string
		wantErr   string
	}{
		{name: "pod endpoint", url: "http://10.0.0.5:8000/metrics", wantAddr: "10.0.0.5:8000",
			wantReq: "GET /metrics HTTP/1.1\r\nHost: 10.0.0.5:8000\r\nUser-Agent: inference-metrics-adapter\r\nAccept: text/plain;version=0.0.4;q=1,*/*;q=0.1\r\nAccept-Encoding: identity\r\n\r\n"},
		{name: "gzip", url: "http://10.0.0.5:8000/metrics", gzip: true, wantAddr: "10.0.0.5:8000",
			wantReq: "GET /metrics HTTP/1.1\r\nHost: 10.0.0.5:8000\r\nUser-Agent: inference-metrics-adapter\r\nAccept: text/plain;version=0.0.4;q=1,*/*;q=0.1\r\nAccept-Encoding: gzip\r\n\r\n"},
		{name: "default port, query, no path", url: "HTTP://example?x=1", wantAddr: "example:80",
			wantReq: "GET /?x=1 HTTP/1.1\r\nHost: example\r\n"},
		{name: "IPv6", url: "http://[fd00::5]:8000/stats/prometheus", wantAddr: "[fd00::5]:8000",
			wantReq: "GET /stats/prometheus HTTP/1.1\r\nHost: [fd00::5]:8000\r\n"},
		{name: "IPv6 zone", url: "http://[fe80::1%25eth0]:8000/m", wantAddr: "[fe80::1%eth0]:8000",
			wantReq: "GET /m HTTP/1.1\r\nHost: [fe80::1]:8000\r\n"},
		{name: "escaped path", url: "http://h:1/a b", wantAddr: "h:1", wantReq: "GET /a%20b HTTP/1.1\r\n"},
		{name: "https", url: "https://10.0.0.5/metrics", wantAddr: "10.0.0.5:443", wantReq: "GET /metrics HTTP/1.1\r\nHost: 10.0.0.5\r\n"},
		{name: "other scheme", url: "ftp://10.0.0.5/metrics", wantErr: "only http and https"},
		{name: "user info", url: "http://u:p@10.0.0.5/metrics", wantErr: "user information"},
		{name: "no host", url: "http:///metrics", wantErr: "no host"},
		{name: "unparsable", url: "http://[::1", wantErr: "missing ']'"},
		{name: "space in query", url: "http://h:1/m?a b", wantErr: "invalid character"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ep, err := newEndpoint(tc.url, tc.gzip, time.Minute)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ep.addr != tc.wantAddr || !strings.HasPrefix(string(ep.req), tc.wantReq) {
				t.Fatalf("addr %q, request %q; want %q and a request starting %q", ep.addr, ep.req, tc.wantAddr, tc.wantReq)
			}
		})
	}
}

// TestSteadyStateAllocations: a scrape on a kept connection allocates only
// the two objects of context.AfterFunc (none with a context that cannot
// end), whether the body has a Content-Length or is chunked.
func TestSteadyStateAllocations(t *testing.T) {
	page := loadFixture(t)
	for _, tc := range []struct {
		name string
		resp []byte
	}{
		{"content-length", fmt.Appendf(nil, "%sContent-Length: %d\r\n\r\n%s", okHead, len(page), page)},
		{"chunked", fmt.Appendf(nil, "%sTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n", okHead, 4096, page[:4096], len(page)-4096, page[4096:])},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := fixedServer(t, tc.resp)
			ep := testEndpoint(t, "http://"+addr+"/metrics")
			w := &worker{}
			canceled, cancel := context.WithCancel(context.Background())
			defer cancel()
			for _, c := range []struct {
				name string
				ctx  context.Context
				want float64
			}{
				{"context that can end", canceled, 2},
				{"context that cannot end", context.Background(), 0},
			} {
				var err error
				get := func() {
					if err == nil {
						_, err = w.get(c.ctx, time.Now().Add(waitLimit), ep, 1<<20)
					}
				}
				get() // the first: dial, buffers
				allocs := testing.AllocsPerRun(50, get)
				if err != nil {
					t.Fatal(err)
				}
				if len(w.buf) != len(page) {
					t.Fatalf("read %d bytes, want %d", len(w.buf), len(page))
				}
				if allocs > c.want {
					t.Errorf("%s: %v allocations per scrape, want at most %v", c.name, allocs, c.want)
				}
			}
		})
	}
}

// fixedServer answers every request on every connection with resp,
// allocating nothing per request, and returns its address.
func fixedServer(t *testing.T, resp []byte) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				defer c.Close()
				var buf [4096]byte
				n := 0
				for {
					m, err := c.Read(buf[n:])
					if err != nil {
						return
					}
					n += m
					// Requests carry no body: one ends at its blank line.
					if n >= 4 && string(buf[n-4:n]) == "\r\n\r\n" {
						n = 0
						if _, err := c.Write(resp); err != nil {
							return
						}
					} else if n == len(buf) {
						return
					}
				}
			})
		}
	})
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return l.Addr().String()
}

// TestBodyAnySplit reads bodies that arrive a byte at a time, or in
// halves, into buffers of every size from 1 to 7 bytes: the framing does
// not depend on where reads end, and ends exactly at the body's end.
func TestBodyAnySplit(t *testing.T) {
	page := "vllm:num_requests_waiting 1\nvllm:num_requests_running 2\n"
	for _, tc := range []struct {
		name string
		head respHead
		raw  string // the body on the wire
	}{
		{"content-length", respHead{mode: bodyLength, contentLength: int64(len(page))}, page},
		{"chunked", respHead{mode: bodyChunked, contentLength: -1},
			fmt.Sprintf("5\r\n%s\r\n1;x=y\r\n%s\r\n%x\r\n%s\r\n0\r\nX-T: 1\r\n\r\n", page[:5], page[5:6], len(page)-6, page[6:])},
		{"up to the close", respHead{mode: bodyToClose, contentLength: -1}, page},
	} {
		for _, split := range []struct {
			name string
			r    func(io.Reader) io.Reader
		}{
			{"bytes", iotest.OneByteReader},
			{"halves", iotest.HalfReader},
		} {
			for size := 1; size <= 7; size++ {
				t.Run(fmt.Sprintf("%s/%s/%d", tc.name, split.name, size), func(t *testing.T) {
					const next = "NEXT" // what the connection holds after the body
					raw := tc.raw
					if tc.head.mode != bodyToClose {
						raw += next
					}
					r := bufio.NewReaderSize(split.r(strings.NewReader(raw)), 16)
					var b body
					b.reset(r, &tc.head)
					var got []byte
					buf := make([]byte, size)
					for range len(raw) + 10 {
						n, err := b.Read(buf)
						got = append(got, buf[:n]...)
						if errors.Is(err, io.EOF) {
							break
						}
						if err != nil {
							t.Fatalf("read %q then %v", got, err)
						}
					}
					if string(got) != page || !b.done {
						t.Fatalf("body %q (done %v), want %q", got, b.done, page)
					}
					if tc.head.mode != bodyToClose {
						rest, _ := io.ReadAll(r)
						if string(rest) != next {
							t.Fatalf("after the body the connection holds %q, want %q", rest, next)
						}
					}
				})
			}
		}
	}
}
