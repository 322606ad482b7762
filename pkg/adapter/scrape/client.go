// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package scrape

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The scrape client: a plain HTTP/1.1 GET over one kept connection per
// target, driven entirely on the goroutine of the worker that runs the
// scrape. net/http's Transport runs two goroutines per connection (a read
// loop and a write loop) and hands each request and response between them
// and the caller through channels; at thousands of targets those goroutines'
// stacks and that scheduling cost more than the scrape itself. Here a
// target's idle connection is just a net.Conn in its endpoint, and a scrape
// writes the request and reads the response with blocking calls on the
// worker's goroutine (the runtime's network poller parks it while it waits).

// endpoint is one target's address, its request bytes, built once, and
// its one idle connection. It is shared by the target's loop and the
// on-demand scrapes of the same target.
type endpoint struct {
	url  string
	addr string // host:port to dial
	req  []byte // the whole GET request, written with one Write
	// tls: an https:// URL; the connection is a tls.Client over the dialed
	// one, verified for serverName with creds.
	tls        bool
	serverName string
	creds      *credentials
	// bearer: the request carries creds' token, written between reqHead
	// and reqTail (the token may change from one scrape to the next).
	bearer  bool
	reqHead []byte
	reqTail []byte
	// idleTimeout: an idle connection older than this is closed, not reused.
	idleTimeout time.Duration
	// slots bounds the kept connections of the https endpoints of all
	// targets (Config.MaxKeptTLSConnections); nil: no bound.
	slots *connSlots

	mu     sync.Mutex
	idle   net.Conn // nil when none
	idleAt time.Time
	closed bool // the target is gone: no connection is kept any more
	// slot: ep holds one of slots, from the first connection it keeps
	// until a scrape ends without keeping one, or ep is closed; its kept
	// connection counts against the bound while idle and while in use.
	slot bool
}

// connSlots counts the endpoints holding a kept connection against a
// bound shared by all targets. Its counts are the self-metrics
// scrape_kept_tls_connections and scrape_tls_connections_not_kept_total,
// read when the metrics are gathered.
type connSlots struct {
	max  int64
	held atomic.Int64
	// full counts the acquires refused because every slot was held: the
	// connections closed after their scrape only because of the bound.
	full atomic.Uint64
}

func newConnSlots(n int) *connSlots { return &connSlots{max: int64(n)} }

// acquire takes a slot, if one is free, and counts the refusal otherwise.
func (s *connSlots) acquire() bool {
	for {
		n := s.held.Load()
		if n >= s.max {
			s.full.Add(1)
			return false
		}
		if s.held.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (s *connSlots) release() { s.held.Add(-1) }

// newEndpoint prepares the GET of rawURL, an http:// or https:// URL.
func newEndpoint(rawURL string, gzip bool, idleTimeout time.Duration) (*endpoint, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("%q: scheme %q is not supported, only http and https", rawURL, u.Scheme)
	case u.Host == "" || u.Hostname() == "":
		return nil, fmt.Errorf("%q: no host", rawURL)
	case u.User != nil:
		return nil, fmt.Errorf("%q: user information in the URL is not supported", rawURL)
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	host, path := removeZone(u.Host), u.RequestURI()
	if !printable(host) || !printable(path) {
		return nil, fmt.Errorf("%q: invalid character in host or path", rawURL)
	}
	encoding := "identity"
	if gzip {
		encoding = "gzip"
	}
	head := "GET " + path + " HTTP/1.1\r\n" +
		"Host: " + host + "\r\n"
	tail := "User-Agent: " + userAgent + "\r\n" +
		"Accept: " + acceptHeader + "\r\n" +
		"Accept-Encoding: " + encoding + "\r\n\r\n"
	return &endpoint{
		url:         rawURL,
		addr:        net.JoinHostPort(u.Hostname(), port),
		req:         []byte(head + tail),
		reqHead:     []byte(head),
		reqTail:     []byte(tail),
		tls:         u.Scheme == "https",
		serverName:  u.Hostname(),
		idleTimeout: idleTimeout,
	}, nil
}

// newTargetEndpoint prepares t's GET with the credentials t asks for: the
// TLS server name of an https target, and the bearer token when the rules
// allow it (over verified HTTPS only, to a host-network pod only when
// allowed). A target that asks for the token where the rules forbid it
// is refused, rather than scraped without it (a page that then fails
// authorization) or, worse, with it.
func newTargetEndpoint(t Target, gzip bool, idleTimeout time.Duration, creds *credentials) (*endpoint, error) {
	ep, err := newEndpoint(t.URL, gzip, idleTimeout)
	if err != nil {
		return nil, err
	}
	ep.creds = creds
	if ep.tls && t.TLSServerName != "" {
		ep.serverName = t.TLSServerName
	}
	if t.Auth == AuthBearer {
		switch {
		case !ep.tls:
			return nil, errors.New("the target asks for the bearer token over plain http: the token is only sent over https")
		case creds == nil || creds.token == nil:
			return nil, errors.New("the target asks for the bearer token, but no token file is configured (--scrape-bearer-token-file)")
		case creds.cfg.InsecureSkipVerify:
			return nil, errors.New("the target asks for the bearer token, which is never sent while certificates are not verified (--scrape-insecure-skip-verify)")
		case t.HostNetwork && !creds.cfg.TokenToHostNetwork:
			return nil, errors.New("the target is a host-network pod: the bearer token goes to host-network pods only with --scrape-token-to-host-network")
		}
		ep.bearer = true
	}
	return ep, nil
}

// request returns the bytes of ep's GET: ep.req, or with the bearer token
// written into buf.
func (ep *endpoint) request(buf *[]byte) []byte {
	if !ep.bearer {
		return ep.req
	}
	b := append((*buf)[:0], ep.reqHead...)
	b = append(b, "Authorization: Bearer "...)
	b = append(b, ep.creds.bearer()...)
	b = append(b, "\r\n"...)
	b = append(b, ep.reqTail...)
	*buf = b
	return b
}

// removeZone removes an IPv6 zone from a Host header's host ("[fe80::1%eth0]:80").
func removeZone(host string) string {
	if !strings.HasPrefix(host, "[") {
		return host
	}
	i, j := strings.LastIndex(host, "%"), strings.LastIndex(host, "]")
	if i < 0 || j < i {
		return host
	}
	return host[:i] + host[j:]
}

// printable reports whether s is non-empty and has no space or control character.
func printable(s string) bool {
	for i := range len(s) {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return s != ""
}

// take returns the idle connection, if there is one young enough, and
// leaves the slot empty.
func (e *endpoint) take(now time.Time) net.Conn {
	e.mu.Lock()
	c, at := e.idle, e.idleAt
	e.idle = nil
	e.mu.Unlock()
	if c != nil && now.Sub(at) > e.idleTimeout {
		_ = c.Close()
		return nil
	}
	return c
}

// put keeps c as the idle connection, or closes it when the slot is taken
// (an on-demand scrape overlapped the loop's), the endpoint is closed, or
// it is an https endpoint that holds none of the kept connections' slots
// and none is free.
func (e *endpoint) put(c net.Conn, now time.Time) {
	e.mu.Lock()
	if e.idle == nil && !e.closed && e.holdSlotLocked() {
		e.idle, e.idleAt = c, now
		c = nil
	}
	e.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
}

// holdSlotLocked reports whether e may keep a connection: it has no bound,
// holds a slot, or takes a free one.
func (e *endpoint) holdSlotLocked() bool {
	if e.slots == nil || e.slot {
		return true
	}
	e.slot = e.slots.acquire()
	return e.slot
}

// unkept gives back e's slot after a scrape that kept no connection (it
// failed to connect, or its connection could not carry another request),
// unless another scrape of e has parked one meanwhile.
func (e *endpoint) unkept() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.slot && e.idle == nil {
		e.slot = false
		e.slots.release()
	}
}

// close closes the idle connection, gives back e's slot and keeps none
// from now on.
func (e *endpoint) close() {
	e.mu.Lock()
	c := e.idle
	e.idle, e.closed = nil, true
	if e.slot {
		e.slot = false
		e.slots.release()
	}
	e.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
}

// errStale marks a connection that ended before any byte of the response:
// a kept connection the server closed while it was idle.
var errStale = errors.New("connection closed before the response")

// aLongTimeAgo is a deadline in the past: setting it interrupts blocked I/O.
var aLongTimeAgo = time.Unix(1, 0)

// get GETs ep's page into w.buf, on the kept connection when there is one,
// by the deadline or until parent ends. A kept connection that ends before
// any byte of the response (the server closed it while idle) is retried
// once on a fresh connection, as net/http does; nothing else is retried.
// On failure the error is an *Error.
func (w *worker) get(parent context.Context, deadline time.Time, ep *endpoint, maxBody int64) (int, error) {
	c := ep.take(time.Now())
	reused := c != nil
	for {
		if c == nil {
			d := net.Dialer{Deadline: deadline, KeepAlive: 30 * time.Second}
			var err error
			if c, err = d.DialContext(parent, "tcp", ep.addr); err != nil {
				ep.unkept()
				return 0, classify(parent, deadline, err)
			}
			if ep.tls {
				if c, err = w.handshake(parent, deadline, c, ep); err != nil {
					ep.unkept()
					return 0, err
				}
			}
		}
		n, keep, err := w.exchange(parent, deadline, c, ep, maxBody)
		if keep {
			ep.put(c, time.Now())
		} else {
			_ = c.Close()
		}
		if reused && errors.Is(err, errStale) && parent.Err() == nil && time.Now().Before(deadline) {
			c, reused = nil, false
			continue
		}
		if !keep {
			ep.unkept()
		}
		return n, err
	}
}

// exchange sends ep's request on c and reads the response; keep says
// whether c may carry the next request. On failure the error is an *Error;
// it wraps errStale when c ended before any byte of the response.
func (w *worker) exchange(parent context.Context, deadline time.Time, c net.Conn, ep *endpoint, maxBody int64) (n int, keep bool, err error) {
	if err := c.SetDeadline(deadline); err != nil {
		return 0, false, classify(parent, deadline, fmt.Errorf("setting the deadline: %w", err))
	}
	// The caller's end (a removed target, shutdown, ScrapeNow's deadline)
	// interrupts a blocked write or read.
	w.setConn(c)
	if w.interruptFn == nil {
		w.interruptFn = w.interrupt
	}
	if parent.Done() != nil { // else it never ends
		stop := context.AfterFunc(parent, w.interruptFn)
		defer stop()
	}
	defer w.setConn(nil) // from here on, a late interrupt touches nothing

	if _, err := c.Write(ep.request(&w.reqBuf)); err != nil {
		return 0, false, connError(parent, deadline, fmt.Errorf("writing request: %w", err))
	}
	if w.rd == nil {
		w.rd = bufio.NewReaderSize(c, maxChunkLine)
	} else {
		w.rd.Reset(c)
	}
	defer w.rd.Reset(nil) // hold no connection between scrapes
	if _, err := w.rd.Peek(1); err != nil {
		return 0, false, connError(parent, deadline, fmt.Errorf("reading response: %w", err))
	}
	hd, err := w.head.read(w.rd)
	if err != nil {
		return 0, false, classify(parent, deadline, fmt.Errorf("reading response header: %w", err))
	}
	w.body.reset(w.rd, &hd)
	// reusable says whether c may carry the next request once the body is read.
	reusable := func() bool { return w.body.done && !hd.close && w.rd.Buffered() == 0 }

	switch {
	case hd.status >= 300 && hd.status < 400:
		drain(&w.body)
		return 0, reusable(), &Error{ReasonRedirect, fmt.Errorf("HTTP %d redirect to %q not followed", hd.status, hd.location)}
	case hd.status != http.StatusOK:
		drain(&w.body)
		return 0, reusable(), &Error{ReasonHTTPStatus, fmt.Errorf("HTTP %d %s", hd.status, http.StatusText(hd.status))}
	}
	n, err = w.readBody(parent, deadline, &w.body, hd.contentLength, hd.gzip, maxBody)
	return n, err == nil && reusable(), err
}

// handshake runs the TLS handshake of ep over the dialed connection raw,
// by the scrape's deadline, interrupted by the end of parent like the
// request. It closes raw on failure. On failure the error is an *Error
// that says why: a certificate not trusted, one for another name, the
// server's refusal (of the client certificate, say), or the deadline.
func (w *worker) handshake(parent context.Context, deadline time.Time, raw net.Conn, ep *endpoint) (net.Conn, error) {
	if err := raw.SetDeadline(deadline); err != nil {
		_ = raw.Close()
		return nil, classify(parent, deadline, fmt.Errorf("setting the deadline: %w", err))
	}
	cfg := ep.tlsConfig()
	tc := tls.Client(raw, cfg)
	w.setConn(raw)
	if w.interruptFn == nil {
		w.interruptFn = w.interrupt
	}
	var stop func() bool
	if parent.Done() != nil {
		stop = context.AfterFunc(parent, w.interruptFn)
	}
	err := tc.Handshake()
	if stop != nil {
		stop()
	}
	w.setConn(nil)
	if err == nil {
		return tc, nil
	}
	_ = raw.Close()
	var (
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
	)
	switch {
	case errors.As(err, &unknown):
		err = fmt.Errorf("TLS handshake: the server's certificate is not trusted (it does not chain to a CA of the scrape CA bundle): %w", err)
	case errors.As(err, &hostname):
		err = fmt.Errorf("TLS handshake: the server's certificate is not valid for the name %q: %w", cfg.ServerName, err)
	case errors.As(err, &invalid):
		err = fmt.Errorf("TLS handshake: the server's certificate is not valid: %w", err)
	default:
		err = fmt.Errorf("TLS handshake: %w", err)
	}
	if ep.creds != nil && parent.Err() == nil && !isTimeout(err) {
		ep.creds.handshakeFailed()
	}
	return nil, classify(parent, deadline, err)
}

// tlsConfig is the client configuration of a handshake with ep.
func (ep *endpoint) tlsConfig() *tls.Config {
	if ep.creds == nil {
		return &tls.Config{ServerName: ep.serverName, MinVersion: tls.VersionTLS12, Renegotiation: tls.RenegotiateNever}
	}
	return ep.creds.tlsConfig(ep.serverName)
}

func (w *worker) setConn(c net.Conn) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.conn = c
}

// interrupt makes the I/O in flight on w's connection, if any, fail at
// once with a timeout.
func (w *worker) interrupt() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.conn != nil {
		_ = w.conn.SetDeadline(aLongTimeAgo)
	}
}

// connError classifies an error met before any byte of the response was
// read: a closed or reset connection is marked errStale.
func connError(parent context.Context, deadline time.Time, err error) error {
	if parent.Err() == nil && !isTimeout(err) &&
		(errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)) {
		return &Error{ReasonConnection, fmt.Errorf("%w: %w", errStale, err)}
	}
	return classify(parent, deadline, err)
}

// drain reads a little of an unwanted body so that the connection can be reused.
func drain(r io.Reader) { _, _ = io.Copy(io.Discard, io.LimitReader(r, drainLimit)) }
