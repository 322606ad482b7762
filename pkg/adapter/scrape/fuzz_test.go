// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package scrape

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// The HTTP/1.1 reply reader's fuzz targets. Each drives (*worker).get, the
// function every scrape runs, on a kept connection that is an in-memory
// net.Conn holding the reply's bytes, so a run needs no socket and no
// goroutine: thousands of executions per second. The connection hands the
// bytes out at most split at a time (0: all that fits), so every framing
// is read across every possible read boundary, and can stall at a byte
// offset as a server that stops sending does: the read there fails as a
// passed deadline does.

// memConn is a net.Conn over a reply's bytes. Writes (the request) are
// accepted and dropped.
type memConn struct {
	data    []byte
	off     int
	split   int  // most bytes per Read; 0: no limit
	stallAt int  // a Read at this offset fails with a timeout; -1: never
	stalled bool // a Read failed with the timeout
}

func (c *memConn) Read(p []byte) (int, error) {
	if c.stallAt >= 0 && c.off >= c.stallAt {
		c.stalled = true
		return 0, os.ErrDeadlineExceeded
	}
	if c.off == len(c.data) {
		return 0, io.EOF
	}
	end := len(c.data)
	if c.stallAt >= 0 {
		end = min(end, c.stallAt)
	}
	if c.split > 0 {
		end = min(end, c.off+c.split)
	}
	n := copy(p, c.data[c.off:end])
	c.off += n
	return n, nil
}

func (c *memConn) Write(p []byte) (int, error)      { return len(p), nil }
func (c *memConn) Close() error                     { return nil }
func (c *memConn) LocalAddr() net.Addr              { return memAddr{} }
func (c *memConn) RemoteAddr() net.Addr             { return memAddr{} }
func (c *memConn) SetDeadline(time.Time) error      { return nil }
func (c *memConn) SetReadDeadline(time.Time) error  { return nil }
func (c *memConn) SetWriteDeadline(time.Time) error { return nil }

type memAddr struct{}

func (memAddr) Network() string { return "mem" }
func (memAddr) String() string  { return "mem" }

// getFrom runs one scrape's get of a reply held by conn, with the body
// bound maxBody. conn is the endpoint's kept connection; a retry after it
// (a reply empty up to its end: a stale connection) fails to dial at once,
// without touching the network.
func getFrom(tb testing.TB, w *worker, conn *memConn, maxBody int64) (n int, kept bool, err error) {
	tb.Helper()
	ep, err := newEndpoint("http://127.0.0.1:1/metrics", false, time.Minute)
	if err != nil {
		tb.Fatal(err)
	}
	ep.addr = "no port" // a dial fails in net.SplitHostPort
	defer ep.close()
	ep.put(conn, time.Now())
	n, err = w.get(context.Background(), time.Now().Add(time.Hour), ep, maxBody)
	return n, ep.kept(), err
}

// fuzzSplit and fuzzStall turn a fuzzer's numbers into a memConn's split
// and stall offset: the stall is off for most inputs.
func fuzzSplit(split uint8) int { return int(split % 17) }

func fuzzStall(stall uint16, size int) int {
	if stall&1 == 0 || size == 0 {
		return -1
	}
	return int(stall>>1) % (size + 1)
}

// responseSeeds are replies from TestResponses, TestBodyAnySplit and the
// gzip tests, well-formed and not.
func responseSeeds(tb testing.TB) []string {
	page := "vllm:num_requests_waiting 1\n"
	zpage := string(gzipBytes(tb, []byte(page)))
	chunk := func(s string) string { return fmt.Sprintf("%x\r\n%s\r\n", len(s), s) }
	return []string{
		okHead + "Content-Length: 28\r\n\r\n" + page,
		"HTTP/1.1 200 OK\nContent-Length: 28\n\n" + page,
		"HTTP/1.1 200\r\nContent-Length: 28\r\n\r\n" + page,
		okHead + "Content-Length: 28\r\ncontent-length: 28\r\n\r\n" + page,
		okHead + "Content-Length: 0\r\n\r\n",
		okHead + "Transfer-Encoding: chunked\r\n\r\n" + chunk(page[:10]) + chunk(page[10:]) + "0\r\n\r\n",
		okHead + "Transfer-Encoding: Chunked\r\n\r\na;name=value\r\n" + page[:10] + "\r\n" + chunk(page[10:]) + "0;last\r\nX-Trailer: 1\r\nX-Other: 2\r\n\r\n",
		okHead + "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk(page) + "0\r\n\r\n",
		okHead + "Content-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk(zpage) + "0\r\n\r\n",
		okHead + "Content-Encoding: gzip\r\nContent-Length: " + fmt.Sprint(len(zpage)) + "\r\n\r\n" + zpage,
		okHead + "Content-Encoding: gzip\r\n\r\n" + zpage,
		okHead + "Content-Encoding: gzip\r\nContent-Length: " + fmt.Sprint(len(zpage)-3) + "\r\n\r\n" + zpage[:len(zpage)-3],
		"HTTP/1.1 100 Continue\r\n\r\n" + okHead + "Content-Length: 28\r\n\r\n" + page,
		"HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n" + okHead + "Content-Length: 28\r\n\r\n" + page,
		okHead + "Connection: keep-alive, Close\r\nContent-Length: 28\r\n\r\n" + page,
		"HTTP/1.0 200 OK\r\nContent-Length: 28\r\n\r\n" + page,
		"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n" + page,
		okHead + "\r\n" + page,
		okHead + "Content-Length: 28\r\n\r\n" + page + "HTTP/1.1 200 OK\r\n",
		"HTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.1 304 Not Modified\r\nContent-Length: 28\r\n\r\n",
		"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\n\r\nboom",
		"HTTP/1.1 302 Found\r\nLocation: /elsewhere\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 2OO OK\r\n\r\n",
		"HTTP/2 200 OK\r\n\r\n",
		"SSH-2.0-OpenSSH_9.6\r\n",
		okHead + "X-A: b\r\n c\r\nContent-Length: 28\r\n\r\n" + page,
		okHead + "Content-Length: 9223372036854775807\r\n\r\n" + page,
		okHead + "Content-Length: 28\r\nContent-Length: 27\r\n\r\n" + page,
		okHead + "Transfer-Encoding: gzip, chunked\r\n\r\n",
		"HTTP/1.1 101 Switching Protocols\r\n\r\n",
		strings.Repeat("HTTP/1.1 100 Continue\r\n\r\n", max1xx+1) + okHead + "Content-Length: 28\r\n\r\n" + page,
		okHead + "Transfer-Encoding: chunked\r\n\r\n7fffffffffffffff\r\n" + page,
		okHead + "Transfer-Encoding: chunked\r\n\r\n1c\r\n" + page + "XX0\r\n\r\n",
		okHead + "Transfer-Encoding: chunked\r\n\r\n" + chunk(page) + "0\r\n" + strings.Repeat("X-T: 1\r\n", 3) + "\r\n",
		okHead + "Transfer-Encoding: chunked\r\n\r\n" + chunk(page),
		"HTTP/1.1 200 OK\r\nContent-Le",
		"",
	}
}

func gzipBytes(tb testing.TB, b []byte) []byte {
	tb.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		tb.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// fuzzReasons are the reasons a get may fail with (it neither parses nor
// has a caller that goes away).
var fuzzReasons = map[string]bool{
	ReasonTimeout: true, ReasonConnection: true, ReasonHTTPStatus: true,
	ReasonBodyTooLarge: true, ReasonRedirect: true, ReasonParse: true,
}

// FuzzResponse reads any bytes as a scrape's reply. It holds that the reader
// never panics; fails only with an *Error of a get's reasons; never holds
// more than the body bound, nor a buffer past it; fails with a timeout
// exactly when the connection stalled and the reply needed more; keeps the
// connection only after a reply whose end it read; and, for a 200 it
// accepts that net/http's reader also accepts, delivers net/http's body
// (decompressed when gzipped).
func FuzzResponse(f *testing.F) {
	for i, s := range responseSeeds(f) {
		f.Add([]byte(s), uint16(1<<10), uint8(i), uint16(0))
		f.Add([]byte(s), uint16(20), uint8(1), uint16(2*i+1))
	}
	f.Fuzz(func(t *testing.T, data []byte, maxBody16 uint16, split uint8, stall uint16) {
		maxBody := int64(maxBody16)
		conn := &memConn{data: data, split: fuzzSplit(split), stallAt: fuzzStall(stall, len(data))}
		w := newWorker()
		n, kept, err := getFrom(t, w, conn, maxBody)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || !fuzzReasons[e.Reason] {
				t.Fatalf("error %v (%T) is not an *Error with a get's reason", err, err)
			}
		}
		if int64(cap(w.buf)) > maxBody+1 {
			t.Fatalf("buffer of %d bytes for a body bound of %d", cap(w.buf), maxBody)
		}
		if timedOut := ReasonOf(err) == ReasonTimeout; timedOut != conn.stalled && (timedOut || err == nil) {
			t.Fatalf("stalled %v, error %v", conn.stalled, err)
		}
		if kept && (conn.stalled || (err != nil && ReasonOf(err) != ReasonHTTPStatus && ReasonOf(err) != ReasonRedirect)) {
			t.Fatalf("connection kept after %v (stalled %v)", err, conn.stalled)
		}
		if err != nil {
			return
		}
		if n != len(w.buf) || int64(n) > maxBody {
			t.Fatalf("get said %d bytes, buffer holds %d, bound %d", n, len(w.buf), maxBody)
		}
		if want, ok := netHTTPBody(data[:conn.off], maxBody); ok && !bytes.Equal(w.buf, want) {
			t.Fatalf("body %q, net/http reads %q", w.buf, want)
		}
	})
}

// netHTTPBody reads reply, the bytes the scrape read, with net/http's
// response reader: the final response's body, gunzipped when its one
// Content-Encoding is gzip. ok is false when net/http does not read a
// whole 200 there (it is more lenient in some ways and stricter in others).
func netHTTPBody(reply []byte, maxBody int64) ([]byte, bool) {
	r := bufio.NewReader(bytes.NewReader(reply))
	for range max1xx + 1 {
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			return nil, false
		}
		if resp.StatusCode >= 100 && resp.StatusCode < 200 {
			continue
		}
		defer func() { _ = resp.Body.Close() }()
		if resp.StatusCode != http.StatusOK {
			return nil, false
		}
		var body io.Reader = resp.Body
		if enc := resp.Header.Values("Content-Encoding"); len(enc) == 1 && strings.EqualFold(strings.TrimSpace(enc[0]), "gzip") {
			zr, err := gzip.NewReader(resp.Body)
			if err != nil {
				return nil, false
			}
			body = zr
		} else if len(enc) > 1 {
			return nil, false
		}
		b, err := io.ReadAll(io.LimitReader(body, maxBody+1))
		if err != nil {
			return nil, false
		}
		return b, true
	}
	return nil, false
}

// FuzzResponseRoundTrip frames any body as a well-formed 200 (by
// Content-Length, chunked in chunks of any size with or without
// extensions and a trailer, or up to the close; gzipped or not) and holds
// that the scrape reads back exactly that body, keeps the connection
// exactly when the framing ends the body, and fails with ReasonBodyTooLarge
// exactly when the body is over the bound, whatever the read boundaries.
func FuzzResponseRoundTrip(f *testing.F) {
	page := []byte("vllm:num_requests_waiting 1\nvllm:num_requests_running 2\n")
	for framing := range uint8(3) {
		for _, gz := range []bool{false, true} {
			f.Add(page, framing, gz, uint16(5), uint8(1), uint16(1<<10))
			f.Add(page, framing, gz, uint16(0x8003), uint8(7), uint16(len(page)-1))
		}
	}
	f.Add([]byte{}, uint8(1), false, uint16(1), uint8(0), uint16(0))
	f.Fuzz(func(t *testing.T, body []byte, framing uint8, gz bool, chunk uint16, split uint8, maxBody16 uint16) {
		maxBody := int64(maxBody16)
		wire := body
		head := okHead
		if gz {
			wire = gzipBytes(t, body)
			head += "Content-Encoding: gzip\r\n"
		}
		var reply bytes.Buffer
		reply.WriteString(head)
		framing %= 3
		switch framing {
		case 0:
			fmt.Fprintf(&reply, "Content-Length: %d\r\n\r\n", len(wire))
			reply.Write(wire)
		case 1:
			reply.WriteString("Transfer-Encoding: chunked\r\n\r\n")
			size := max(int(chunk&0x7fff), 1)
			for rest := wire; len(rest) > 0; {
				c := rest[:min(size, len(rest))]
				rest = rest[len(c):]
				if chunk&0x8000 != 0 {
					fmt.Fprintf(&reply, "%X;ext=\"v\"\r\n", len(c))
				} else {
					fmt.Fprintf(&reply, "%x\r\n", len(c))
				}
				reply.Write(c)
				reply.WriteString("\r\n")
			}
			reply.WriteString("0\r\n")
			if chunk&0x8000 != 0 {
				reply.WriteString("X-Trailer: 1\r\n")
			}
			reply.WriteString("\r\n")
		case 2:
			reply.WriteString("\r\n")
			reply.Write(wire)
		}
		conn := &memConn{data: reply.Bytes(), split: fuzzSplit(split), stallAt: -1}
		w := newWorker()
		n, kept, err := getFrom(t, w, conn, maxBody)
		if int64(len(body)) > maxBody {
			if ReasonOf(err) != ReasonBodyTooLarge {
				t.Fatalf("%d-byte body, bound %d: error %v, want %s", len(body), maxBody, err, ReasonBodyTooLarge)
			}
			return
		}
		if err != nil {
			t.Fatalf("framing %d, gzip %v: %v", framing, gz, err)
		}
		if n != len(body) || !bytes.Equal(w.buf, body) {
			t.Fatalf("framing %d, gzip %v: body %q (n %d), want %q", framing, gz, w.buf, n, body)
		}
		if wantKept := framing != 2; kept != wantKept {
			t.Fatalf("framing %d: connection kept %v, want %v", framing, kept, wantKept)
		}
	})
}
