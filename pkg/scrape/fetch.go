package scrape

import (
	"bufio"
	"compress/flate"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/agentpage"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/parse"
)

const (
	acceptHeader = "text/plain;version=0.0.4;q=1,*/*;q=0.1"
	userAgent    = "inference-metrics-adapter"
	// drainLimit is how much of an unwanted body (an error status, a
	// redirect) is read so that the connection can be reused.
	drainLimit = 4 << 10
)

// worker is one scrape slot: it owns the memory a scrape needs, reused from
// one scrape to the next, so memory scales with the number of workers and
// not with the number of targets. buf is kept only up to RetainBufferSize.
type worker struct {
	buf    []byte
	br     *bufio.Reader // under gz; nil until the first gzip body
	gz     *gzip.Reader  // nil until the first gzip body
	parser *parse.Parser // nil until the first scrape
	agent  *agentpage.Parser
}

// newClient returns the one HTTP client shared by all scrapes.
//
// Compression: the Transport's own gzip support (DisableCompression false)
// adds "Accept-Encoding: gzip" and, when the server complies, wraps the body
// in a new gzip.Reader per response (tens of KB of decompressor state each
// time) and hides Content-Encoding and Content-Length. We disable it, ask for
// gzip ourselves and decompress with the worker's gzip.Reader, reset per
// response, so a steady-state scrape allocates no decompressor, and the body
// limit applies to the decompressed bytes (a small gzip bomb cannot blow up
// memory).
// Per-connection buffer sizes of the scrape client.
const (
	connWriteBufferSize = 512
	connReadBufferSize  = 2 << 10
)

func newClient(cfg Config) *http.Client {
	dialer := &net.Dialer{Timeout: cfg.Timeout, KeepAlive: 30 * time.Second}
	transport := &http.Transport{
		Proxy:       nil, // pod IPs are reached directly, never through HTTP_PROXY
		DialContext: dialer.DialContext,
		// Each target is its own host:port; one connection per target is
		// reused from interval to interval, a second covers a ScrapeNow that
		// overlaps the loop's scrape.
		MaxIdleConns:        0, // no global limit: one idle connection per target is the point
		MaxIdleConnsPerHost: 2,
		// Keep idle connections across at least two intervals.
		IdleConnTimeout:        max(90*time.Second, 3*cfg.Interval),
		TLSHandshakeTimeout:    cfg.Timeout,
		ResponseHeaderTimeout:  cfg.Timeout,
		MaxResponseHeaderBytes: 64 << 10,
		DisableCompression:     true,
		ForceAttemptHTTP2:      false,
		// Every target keeps a connection, and each connection its own
		// buffers: the defaults (4 KiB each way) cost 8 KiB per pod. A
		// request is about 200 bytes; a response's status line and headers
		// fit 2 KiB (longer lines are still read whole), and the body is
		// read straight into the worker's buffer, past this one.
		WriteBufferSize: connWriteBufferSize,
		ReadBufferSize:  connReadBufferSize,
	}
	return &http.Client{
		Transport: transport,
		// Never follow a redirect: return the 3xx response itself, which
		// fetch turns into ReasonRedirect after draining it, so the
		// connection stays reusable.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// newRequest prepares the GET for url; each scrape uses it with its own context.
func newRequest(url string, gzip bool) (*http.Request, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", acceptHeader)
	if gzip {
		req.Header.Set("Accept-Encoding", "gzip")
	} else {
		req.Header.Set("Accept-Encoding", "identity")
	}
	req.Header.Set("User-Agent", userAgent)
	return req, nil
}

// fetch GETs req into w.buf and parses it as a model server's page. parent
// is the caller's context; ctx is parent with the per-request timeout. On
// failure the error is an *Error.
func (w *worker) fetch(parent, ctx context.Context, client *http.Client, req *http.Request, server parse.Server, maxBody int64) (*parse.Page, int, error) {
	n, err := w.get(parent, ctx, client, req, maxBody)
	if err != nil {
		return nil, n, err
	}
	// The parse shares the request's deadline, so a page that would take
	// long to parse stops at the scrape's deadline instead of pinning a core.
	deadline, _ := ctx.Deadline()
	page, err := w.parser.ParseBy(w.buf, server, deadline)
	if err != nil {
		return nil, n, parseError(parent, ctx, err)
	}
	return page, n, nil
}

// parseError classifies an error of pkg/parse: a page over a parser bound,
// a parse cut short by the deadline (or by the caller), or a bad page.
func parseError(parent, ctx context.Context, err error) error {
	switch {
	case errors.Is(err, parse.ErrLimit):
		return &Error{ReasonLimit, err}
	case errors.Is(err, parse.ErrDeadline):
		if parent.Err() != nil {
			return &Error{ReasonCanceled, err}
		}
		return &Error{ReasonTimeout, err}
	default:
		return &Error{ReasonParse, err}
	}
}

// release drops the body buffer when a large page grew it past
// RetainBufferSize, so that a worker does not keep the largest page it ever
// read. Called after the scrape's outcome has been recorded.
func (w *worker) release() {
	if cap(w.buf) > RetainBufferSize {
		w.buf = nil
	}
}

// fetchAgent GETs req into w.buf and parses it as a gpu-agent's page.
func (w *worker) fetchAgent(parent, ctx context.Context, client *http.Client, req *http.Request, maxBody int64) ([]agentpage.PodGPU, int, error) {
	n, err := w.get(parent, ctx, client, req, maxBody)
	if err != nil {
		return nil, n, err
	}
	if w.agent == nil {
		w.agent = &agentpage.Parser{}
	}
	pods, err := w.agent.Parse(w.buf)
	if err != nil {
		return nil, n, &Error{ReasonParse, err}
	}
	return pods, n, nil
}

// get GETs req into w.buf.
func (w *worker) get(parent, ctx context.Context, client *http.Client, req *http.Request, maxBody int64) (int, error) {
	resp, err := client.Do(req.WithContext(ctx))
	if err != nil {
		return 0, classify(parent, ctx, err)
	}
	defer resp.Body.Close()

	switch {
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		drain(resp.Body)
		return 0, &Error{ReasonRedirect, fmt.Errorf("HTTP %d redirect to %q not followed", resp.StatusCode, resp.Header.Get("Location"))}
	case resp.StatusCode != http.StatusOK:
		drain(resp.Body)
		return 0, &Error{ReasonHTTPStatus, fmt.Errorf("HTTP %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))}
	}

	var body io.Reader = resp.Body
	gzipped := resp.Header.Get("Content-Encoding") == "gzip"
	if gzipped {
		// gzip.Reader.Reset allocates a bufio.Reader per call unless its
		// source is a flate.Reader, so give it the worker's own.
		if w.br == nil {
			w.br = bufio.NewReaderSize(resp.Body, 32<<10)
		} else {
			w.br.Reset(resp.Body)
		}
		if w.gz == nil {
			w.gz, err = gzip.NewReader(w.br)
		} else {
			err = w.gz.Reset(w.br)
		}
		if err != nil {
			return 0, bodyError(parent, ctx, fmt.Errorf("reading gzip header: %w", err), true)
		}
		body = w.gz
	} else if resp.ContentLength > maxBody {
		return 0, &Error{ReasonBodyTooLarge, fmt.Errorf("Content-Length %d exceeds the limit of %d bytes", resp.ContentLength, maxBody)}
	}

	n, err := w.read(body, resp.ContentLength, gzipped, maxBody)
	if err != nil {
		if errors.Is(err, errTooLarge) {
			w.buf = nil // do not keep a buffer that big for the next target
			return n, &Error{ReasonBodyTooLarge, fmt.Errorf("body exceeds the limit of %d bytes", maxBody)}
		}
		return n, bodyError(parent, ctx, fmt.Errorf("reading body: %w", err), gzipped)
	}

	return n, nil
}

var errTooLarge = errors.New("body too large")

// read reads r to EOF into w.buf, growing it as needed up to maxBody bytes.
func (w *worker) read(r io.Reader, contentLength int64, gzipped bool, maxBody int64) (int, error) {
	buf := w.buf[:0]
	if !gzipped && contentLength > 0 && int64(cap(buf)) < contentLength {
		buf = make([]byte, 0, contentLength+1) // +1 so EOF is seen without growing
	}
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) > maxBody {
				w.buf = buf[:0]
				return len(buf), errTooLarge
			}
			// Grow, but never past maxBody+1: one byte past the limit is
			// enough to tell that the page is too large.
			newCap := min(max(2*int64(cap(buf)), 32<<10), maxBody+1)
			grown := make([]byte, len(buf), newCap)
			copy(grown, buf)
			buf = grown
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > maxBody {
			w.buf = buf[:0]
			return len(buf), errTooLarge
		}
		if err == io.EOF {
			w.buf = buf
			return len(buf), nil
		}
		if err != nil {
			w.buf = buf[:0]
			return len(buf), err
		}
	}
}

// drain reads a little of an unwanted body so that the connection can be reused.
func drain(r io.Reader) { _, _ = io.Copy(io.Discard, io.LimitReader(r, drainLimit)) }

// classify turns an error from client.Do into an *Error.
func classify(parent, ctx context.Context, err error) error {
	switch {
	case parent.Err() != nil:
		return &Error{ReasonCanceled, err}
	case ctx.Err() != nil || isTimeout(err):
		return &Error{ReasonTimeout, err}
	default:
		return &Error{ReasonConnection, err}
	}
}

// bodyError classifies an error met while reading the body: a context that
// ended, a broken connection, or (for gzip) a corrupt stream.
func bodyError(parent, ctx context.Context, err error, gzipped bool) error {
	if parent.Err() != nil || ctx.Err() != nil || isTimeout(err) {
		return classify(parent, ctx, err)
	}
	if gzipped && (errors.Is(err, gzip.ErrHeader) || errors.Is(err, gzip.ErrChecksum) || isFlateError(err)) {
		return &Error{ReasonParse, err}
	}
	return &Error{ReasonConnection, err}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// isFlateError reports whether err says the deflate stream is corrupt.
// A stream cut short (io.ErrUnexpectedEOF) is ambiguous, since the
// connection may have broken, and is left to ReasonConnection.
func isFlateError(err error) bool {
	var corrupt flate.CorruptInputError
	var internal flate.InternalError
	return errors.As(err, &corrupt) || errors.As(err, &internal)
}
