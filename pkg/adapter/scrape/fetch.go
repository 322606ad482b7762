// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

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
	"sync"
	"time"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/agentpage"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/parse"
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
	buf []byte
	rd  *bufio.Reader // the response, Reset onto each scrape's connection; nil until the first
	// reqBuf holds a request with a bearer token (endpoint.request).
	reqBuf []byte
	head   headReader
	body   body
	br     *bufio.Reader // under gz; nil until the first gzip body
	gz     *gzip.Reader  // nil until the first gzip body
	parser *parse.Parser // nil until the first scrape
	// hist says whether the page being parsed is parsed with its latency
	// histograms (Config.Histograms of its pod); the parser's switch reads it.
	hist  bool
	agent *agentpage.Parser

	// job is the scrape the worker runs; done says it ended, when an exec
	// goroutine ran it (see Manager.onStack).
	job  job
	done chan struct{}

	// conn is the connection of the request in flight, which the end of
	// the caller's context interrupts (interrupt, bound once as
	// interruptFn, runs on the context's own goroutine).
	mu          sync.Mutex
	conn        net.Conn
	interruptFn func()
}

func newWorker() *worker { return &worker{done: make(chan struct{}, 1)} }

// parsePage parses w.buf as a model server's page, by the scrape's
// deadline. On failure the error is an *Error.
func (w *worker) parsePage(parent context.Context, deadline time.Time, server parse.Server) (*parse.Page, error) {
	// The parse shares the request's deadline, so a page that would take
	// long to parse stops at the scrape's deadline instead of pinning a core.
	page, err := w.parser.ParseBy(w.buf, server, deadline)
	if err != nil {
		return nil, parseError(parent, err)
	}
	return page, nil
}

// parseError classifies an error of pkg/adapter/parse: a page over a parser bound,
// a parse cut short by the deadline (or by the caller), or a bad page.
func parseError(parent context.Context, err error) error {
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

// parseAgent parses w.buf as a gpu-agent's page.
func (w *worker) parseAgent() ([]agentpage.PodGPU, error) {
	if w.agent == nil {
		w.agent = &agentpage.Parser{}
	}
	pods, err := w.agent.Parse(w.buf)
	if err != nil {
		return nil, &Error{ReasonParse, err}
	}
	return pods, nil
}

// readBody reads a 200 response's body r into w.buf, decompressing it when
// gzipped; contentLength is -1 when unknown. On failure the error is an *Error.
func (w *worker) readBody(parent context.Context, deadline time.Time, r io.Reader, contentLength int64, gzipped bool, maxBody int64) (int, error) {
	// whole says that the response's body arrived whole (its framing ended
	// cleanly): a gzip stream that ends early within it is a bad page, not
	// a broken connection.
	src := r
	whole := func() bool { b, ok := src.(*body); return ok && b.done }
	if gzipped {
		// gzip.Reader.Reset allocates a bufio.Reader per call unless its
		// source is a flate.Reader, so give it the worker's own.
		if w.br == nil {
			w.br = bufio.NewReaderSize(r, 32<<10)
		} else {
			w.br.Reset(r)
		}
		defer w.br.Reset(nil) // hold no connection between scrapes
		var err error
		if w.gz == nil {
			w.gz, err = gzip.NewReader(w.br)
		} else {
			err = w.gz.Reset(w.br)
		}
		if err != nil {
			return 0, bodyError(parent, deadline, fmt.Errorf("reading gzip header: %w", err), true, whole())
		}
		r = w.gz
	} else if contentLength > maxBody {
		return 0, &Error{ReasonBodyTooLarge, fmt.Errorf("Content-Length %d exceeds the limit of %d bytes", contentLength, maxBody)}
	}

	n, err := w.read(r, contentLength, gzipped, maxBody)
	if err != nil {
		if errors.Is(err, errTooLarge) {
			w.buf = nil // do not keep a buffer that big for the next target
			return n, &Error{ReasonBodyTooLarge, fmt.Errorf("body exceeds the limit of %d bytes", maxBody)}
		}
		return n, bodyError(parent, deadline, fmt.Errorf("reading body: %w", err), gzipped, gzipped && whole())
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

// classify turns an error of a request into an *Error: the caller's
// context ended, the scrape's deadline passed, or the connection failed.
func classify(parent context.Context, deadline time.Time, err error) error {
	switch {
	case parent.Err() != nil:
		return &Error{ReasonCanceled, err}
	case isTimeout(err) || !time.Now().Before(deadline):
		return &Error{ReasonTimeout, err}
	default:
		return &Error{ReasonConnection, err}
	}
}

// bodyError classifies an error met while reading the body: a context that
// ended, a broken connection, or (for gzip) a corrupt stream, which a
// stream cut short in a body that arrived whole (whole) is too.
func bodyError(parent context.Context, deadline time.Time, err error, gzipped, whole bool) error {
	if parent.Err() != nil || isTimeout(err) || !time.Now().Before(deadline) {
		return classify(parent, deadline, err)
	}
	cut := errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
	if gzipped && (errors.Is(err, gzip.ErrHeader) || errors.Is(err, gzip.ErrChecksum) || isFlateError(err) || whole && cut) {
		return &Error{ReasonParse, err}
	}
	return &Error{ReasonConnection, err}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// isFlateError reports whether err says the deflate stream is corrupt.
// A stream cut short (io.ErrUnexpectedEOF) is not: bodyError tells a body
// that arrived whole (a bad page) from a connection that broke.
func isFlateError(err error) bool {
	var corrupt flate.CorruptInputError
	var internal flate.InternalError
	return errors.As(err, &corrupt) || errors.As(err, &internal)
}
