// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package scrape

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
)

// The scrape client's HTTP/1.1 response reading: the status line and the
// header of a response, and the framing of its body (Content-Length,
// chunked, or up to the connection's close). Only what a GET of a metrics
// page needs is read; every other header is skipped.

// Limits on what a server may send before the body.
const (
	// maxHeaderBytes bounds the status lines and header lines of one
	// response, informational (1xx) responses included.
	maxHeaderBytes = 64 << 10
	// maxHeaderLines bounds the header lines of one response, 1xx included.
	maxHeaderLines = 256
	// max1xx bounds the informational responses before the final one.
	max1xx = 5
	// maxChunkLine bounds a chunk-size line (with its extensions); it is
	// also the size of the connection's read buffer.
	maxChunkLine = 4 << 10
	// maxTrailerLines bounds the trailer lines after the last chunk.
	maxTrailerLines = 64
)

// errProtocol marks a response that breaks HTTP/1.1 framing.
var errProtocol = errors.New("malformed HTTP response")

func protocolError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errProtocol, fmt.Sprintf(format, args...))
}

// bodyMode is how a response's body ends.
type bodyMode uint8

const (
	bodyNone    bodyMode = iota // no body (204, 304)
	bodyLength                  // Content-Length bytes
	bodyChunked                 // Transfer-Encoding: chunked
	bodyToClose                 // up to the connection's close
)

// respHead is what the scrape needs of a response's status line and header.
type respHead struct {
	status        int
	mode          bodyMode
	contentLength int64 // -1 when not given (or not used: chunked)
	gzip          bool  // Content-Encoding: gzip
	close         bool  // the connection cannot carry another request
	location      string
}

// headReader reads response heads with the limits above. line is scratch
// space for a line longer than the connection's read buffer, kept from
// one response to the next.
type headReader struct {
	line []byte
}

// read reads the head of the final response from r, skipping
// informational (1xx) responses.
func (h *headReader) read(r *bufio.Reader) (respHead, error) {
	budget, lines := maxHeaderBytes, maxHeaderLines
	for range max1xx + 1 {
		hd, err := h.readOne(r, &budget, &lines)
		if err != nil {
			return respHead{}, err
		}
		switch {
		case hd.status == 101:
			return respHead{}, protocolError("unexpected 101 Switching Protocols")
		case hd.status >= 100 && hd.status < 200:
			continue // 100 Continue, 103 Early Hints: the final response follows
		}
		return hd, nil
	}
	return respHead{}, protocolError("more than %d informational responses", max1xx)
}

// readOne reads one status line and its header lines.
func (h *headReader) readOne(r *bufio.Reader, budget, lines *int) (respHead, error) {
	line, err := h.readLine(r, budget)
	if err != nil {
		return respHead{}, err
	}
	hd, minor, err := parseStatusLine(line)
	if err != nil {
		return respHead{}, err
	}
	var (
		chunked, haveTE, haveCL bool
		keepAlive               bool // HTTP/1.0 only
	)
	for {
		line, err := h.readLine(r, budget)
		if err != nil {
			return respHead{}, err
		}
		if len(line) == 0 {
			break
		}
		if *lines--; *lines < 0 {
			return respHead{}, protocolError("more than %d header lines", maxHeaderLines)
		}
		if line[0] == ' ' || line[0] == '\t' {
			return respHead{}, protocolError("obsolete line folding in header")
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok || !validToken(name) {
			return respHead{}, protocolError("header line %q", truncate(line))
		}
		value = bytes.Trim(value, " \t")
		switch {
		case equalFold(name, "Content-Length"):
			n, ok := parseContentLength(value)
			if !ok || (haveCL && n != hd.contentLength) {
				return respHead{}, protocolError("Content-Length %q", truncate(value))
			}
			hd.contentLength, haveCL = n, true
		case equalFold(name, "Transfer-Encoding"):
			if haveTE || !equalFold(value, "chunked") {
				return respHead{}, protocolError("unsupported Transfer-Encoding %q", truncate(value))
			}
			haveTE, chunked = true, true
		case equalFold(name, "Content-Encoding"):
			hd.gzip = equalFold(value, "gzip")
		case equalFold(name, "Connection"):
			for tok := range bytes.SplitSeq(value, []byte(",")) {
				tok = bytes.Trim(tok, " \t")
				switch {
				case equalFold(tok, "close"):
					hd.close = true
				case equalFold(tok, "keep-alive"):
					keepAlive = true
				}
			}
		case equalFold(name, "Location") && hd.status >= 300 && hd.status < 400:
			// Only for the error's text: page text, so cut short.
			hd.location = string(truncate(value))
		}
	}
	if minor == 0 {
		// HTTP/1.0 knows no chunked encoding, and keeps the connection
		// only when the server says so.
		chunked = false
		hd.close = hd.close || !keepAlive
	}
	switch {
	case hd.status < 200 || hd.status == 204 || hd.status == 304:
		hd.mode, hd.contentLength = bodyNone, 0
	case chunked:
		hd.mode, hd.contentLength = bodyChunked, -1
	case haveCL:
		hd.mode = bodyLength
	default:
		hd.mode, hd.contentLength, hd.close = bodyToClose, -1, true
	}
	return hd, nil
}

// parseStatusLine parses "HTTP/1.x SSS reason"; the reason is optional.
func parseStatusLine(line []byte) (hd respHead, minor int, err error) {
	// "HTTP/1.1 200" is the shortest.
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || (line[7] != '0' && line[7] != '1') ||
		line[8] != ' ' || (len(line) > 12 && line[12] != ' ') {
		return respHead{}, 0, protocolError("status line %q", truncate(line))
	}
	status := 0
	for _, c := range line[9:12] {
		if c < '0' || c > '9' {
			return respHead{}, 0, protocolError("status line %q", truncate(line))
		}
		status = status*10 + int(c-'0')
	}
	if status < 100 {
		return respHead{}, 0, protocolError("status line %q", truncate(line))
	}
	return respHead{status: status, contentLength: -1}, int(line[7] - '0'), nil
}

// readLine reads one line without its line end ("\r\n" or "\n"),
// charging it to budget. The line is valid until the next read from r or h.
func (h *headReader) readLine(r *bufio.Reader, budget *int) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		// Longer than the read buffer: gather it in h.line.
		h.line = append(h.line[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			if len(h.line) > *budget {
				break
			}
			line, err = r.ReadSlice('\n')
			h.line = append(h.line, line...)
		}
		line = h.line
	}
	if *budget -= len(line); *budget < 0 {
		return nil, protocolError("response header over %d bytes", maxHeaderBytes)
	}
	if err != nil {
		if errors.Is(err, io.EOF) && len(line) > 0 {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return trimEOL(line), nil
}

// trimEOL removes a line's "\n" or "\r\n".
func trimEOL(line []byte) []byte {
	line = line[:len(line)-1]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	return line
}

// parseContentLength parses a Content-Length value: decimal digits only,
// at most 2^63-1.
func parseContentLength(v []byte) (int64, bool) {
	if len(v) == 0 || len(v) > 19 {
		return 0, false
	}
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
		if n < 0 {
			return 0, false
		}
	}
	return n, true
}

// validToken reports whether b is a non-empty HTTP token (a header name).
func validToken(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// equalFold reports whether b equals the ASCII string s, ignoring case.
func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		if lower(b[i]) != lower(s[i]) {
			return false
		}
	}
	return true
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// truncate shortens b for an error message.
func truncate(b []byte) []byte {
	const n = 64
	if len(b) > n {
		return b[:n]
	}
	return b
}

// body reads one response's body from the connection's reader, ending it
// as its head says: after Content-Length bytes, after the last chunk and
// its trailer, or at the connection's close. It is reused from one
// response to the next (reset). done says that the body's end was read
// exactly, so the connection may carry another request.
type body struct {
	r    *bufio.Reader
	mode bodyMode
	// left is what remains of the body (bodyLength) or of the current
	// chunk (bodyChunked).
	left int64
	// crlf: the current chunk's data is read, its "\r\n" is not.
	crlf bool
	done bool
	err  error // sticky
}

func (b *body) reset(r *bufio.Reader, hd *respHead) {
	*b = body{r: r, mode: hd.mode}
	switch hd.mode {
	case bodyNone:
		b.done = true
	case bodyLength:
		b.left = hd.contentLength
		b.done = b.left == 0
	}
}

// Read reads the body; it returns io.EOF at its end and
// io.ErrUnexpectedEOF when the connection closes before.
func (b *body) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.done {
		return 0, io.EOF
	}
	var n int
	switch b.mode {
	case bodyLength:
		n, b.err = b.readLength(p)
	case bodyChunked:
		n, b.err = b.readChunked(p)
	case bodyToClose:
		n, b.err = b.r.Read(p)
		if errors.Is(b.err, io.EOF) {
			b.done = true
		}
	}
	if b.done && b.err == nil {
		b.err = io.EOF
	}
	return n, b.err
}

func (b *body) readLength(p []byte) (int, error) {
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	if b.left == 0 {
		b.done = true
		return n, nil
	}
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// readChunked reads chunk data into p, crossing chunk boundaries while
// the next chunk's header is already buffered (it waits for the
// connection only while it has nothing to return), and reads the last
// chunk's trailer.
func (b *body) readChunked(p []byte) (n int, err error) {
	for len(p) > 0 && !b.done {
		if b.crlf {
			if n > 0 && b.r.Buffered() < 2 {
				return n, nil
			}
			if err := b.readCRLF(); err != nil {
				return n, err
			}
			b.crlf = false
		}
		if b.left == 0 {
			if n > 0 && !b.chunkHeaderBuffered() {
				return n, nil
			}
			if err := b.beginChunk(); err != nil {
				return n, err
			}
			continue
		}
		chunk := p
		if int64(len(chunk)) > b.left {
			chunk = chunk[:b.left]
		}
		m, err := b.r.Read(chunk)
		n += m
		p = p[m:]
		b.left -= int64(m)
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return n, err
		}
		if b.left > 0 {
			return n, nil // the rest of the chunk may not have arrived: do not wait here
		}
		b.crlf = true
	}
	return n, nil
}

// chunkHeaderBuffered reports whether a whole chunk-size line is buffered.
func (b *body) chunkHeaderBuffered() bool {
	buf, _ := b.r.Peek(b.r.Buffered())
	return bytes.IndexByte(buf, '\n') >= 0
}

func (b *body) readCRLF() error {
	c1, err := b.r.ReadByte()
	if err != nil {
		return unexpected(err)
	}
	c2, err := b.r.ReadByte()
	if err != nil {
		return unexpected(err)
	}
	if c1 != '\r' || c2 != '\n' {
		return protocolError("chunk data not followed by CRLF")
	}
	return nil
}

// beginChunk reads a chunk-size line; for the last chunk (size 0) it also
// reads the trailer and ends the body.
func (b *body) beginChunk() error {
	line, err := b.r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return protocolError("chunk-size line over %d bytes", maxChunkLine)
	}
	if err != nil {
		return unexpected(err)
	}
	line = trimEOL(line)
	if i := bytes.IndexByte(line, ';'); i >= 0 {
		line = line[:i] // chunk extensions are ignored
	}
	line = bytes.TrimRight(line, " \t")
	size, ok := parseChunkSize(line)
	if !ok {
		return protocolError("chunk size %q", truncate(line))
	}
	if size > 0 {
		b.left = size
		return nil
	}
	for range maxTrailerLines + 1 {
		line, err := b.r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			return protocolError("trailer line over %d bytes", maxChunkLine)
		}
		if err != nil {
			return unexpected(err)
		}
		if len(trimEOL(line)) == 0 {
			b.done = true
			return nil
		}
	}
	return protocolError("more than %d trailer lines", maxTrailerLines)
}

// parseChunkSize parses a chunk size: hexadecimal, at most 2^63-1.
func parseChunkSize(v []byte) (int64, bool) {
	if len(v) == 0 || len(v) > 16 {
		return 0, false
	}
	var n int64
	for _, c := range v {
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		n = n<<4 | int64(d)
		if n < 0 {
			return 0, false
		}
	}
	return n, true
}

// unexpected turns the end of the connection inside a body into
// io.ErrUnexpectedEOF.
func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
