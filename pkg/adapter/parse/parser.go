// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Package parse reads a model server's Prometheus text /metrics page and
// picks out the few series that carry the serving signals (queue size, batch
// size, KV-cache usage, batch fill), the counters (tokens, requests,
// preemptions) and latency histograms (time to first token, inter-token
// latency, queue time, end-to-end latency) behind the SLO signals, and
// vLLM's running LoRA adapters, per model, for every built-in server and
// any custom ones. It owns the table of wanted series and the detection of
// which server wrote a page. It is a single forward scan over the page's
// lines that looks closely only at the lines it needs, does constant work per
// line, and allocates nothing per page once warm.
//
// Pages are untrusted. A wanted line with a label name or value over
// Limits.MaxLabelValueBytes, or a page with more than Limits.MaxModels
// models, fails whole with an error wrapping ErrLimit; a parse past its
// deadline fails with ErrDeadline; a wanted series written twice is a
// SyntaxError, as in Prometheus. Sample values a signal cannot take (NaN,
// ±Inf, negative, a fraction above 1) are refused: the series counts as
// absent and Page.Rejected counts the refusal. What a Parser keeps between
// pages is bounded in bytes, whatever the pages.
package parse

import (
	"bytes"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"time"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
)

// ErrLimit marks a page that exceeds one of the parser's bounds (label value
// size, models per page); such a page is refused whole, nothing of it is kept.
var ErrLimit = errors.New("page exceeds a parser limit")

// ErrDeadline marks a parse that did not finish before its deadline.
var ErrDeadline = errors.New("parse deadline exceeded")

// ErrNotText marks a body that is not a Prometheus text page at all (HTML,
// JSON, binary), as opposed to a page with a malformed line.
var ErrNotText = errors.New("not a Prometheus text exposition")

// SyntaxError reports a malformed line, 1-based, in a series the parser
// needed (a duplicated series included), or a body that is not Prometheus
// text (then Err is ErrNotText). Page text quoted in Msg is cut short.
type SyntaxError struct {
	Line int
	Msg  string
	Err  error
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("metrics page line %d: %s", e.Line, e.Msg) }

// Unwrap returns ErrNotText for non-Prometheus bodies, else nil.
func (e *SyntaxError) Unwrap() error { return e.Err }

// Limits bound what one page can make a Parser hold or do. A page over a
// bound fails whole with an error wrapping ErrLimit.
type Limits struct {
	// MaxLabelValueBytes bounds each label name and (unescaped) label value
	// on a wanted line. Lines the parser does not need are not looked at.
	MaxLabelValueBytes int
	// MaxModels bounds the models on a page: the distinct model label
	// values of each server's wanted series, counted over all servers
	// together (a name under two servers' series counts twice).
	MaxModels int
}

// Default bounds: far above what real servers write (model names are tens
// of bytes, a server serves a handful of models and LoRA adapters). The
// store keeps at most DefaultMaxModels models per pod too (store.MaxModels),
// so a page with more is refused here, before it costs a parse.
const (
	DefaultMaxLabelValueBytes = 1024
	DefaultMaxModels          = 64
)

// DefaultLimits returns the bounds NewParserFor starts with.
func DefaultLimits() Limits {
	return Limits{MaxLabelValueBytes: DefaultMaxLabelValueBytes, MaxModels: DefaultMaxModels}
}

// accum accumulates one model's wanted series of one server.
type accum struct {
	server Server
	name   string
	vals   [numRoles]float64 // gauges and counters
	has    uint32            // roles with at least one accepted sample
	seen   uint32            // roles with at least one series, accepted or refused
	bad    uint32            // roles whose sum overflowed: no value for the page
	hists  [numHistSlots]histAcc
	lora   int // 1 + the index in Parser.loraLines of the adapter lists of the latest vllm:lora_requests_info line; 0: none
}

// loraLine is the adapter lists (raw label values) of one model's latest
// vllm:lora_requests_info line.
type loraLine struct {
	running, waiting []byte
}

// histAcc accumulates one histogram's buckets over a model's series.
type histAcc struct {
	h    Histogram
	last int  // the bucket the last line added to: the next line's is likely the one after
	bad  bool // a bucket was refused or past MaxBuckets: no histogram for the page
}

// Parser parses pages. Its state is reused from call to call, so a warm
// Parser allocates nothing per page; it is not safe for concurrent use.
type Parser struct {
	dialects []dialect // built-in, then custom servers
	matchers []matcher // per server; [Unknown] holds every server's series
	// quiet is matchers without the histogram bucket series, made on the
	// first page parsed without them; wantHist (nil: always) says, before
	// each page, which of the two to use.
	quiet    []matcher
	wantHist func() bool
	limits   Limits
	accs     []accum
	index    []map[string]int     // per server: model name -> index in accs
	last     int                  // index in accs of the last accumulator used, -1 if none
	counts   []int                // matched lines per server
	rejected [][NumRejects]uint32 // refused samples per server
	engine   bool                 // a vLLM series had an `engine` label
	names    map[string]string    // model names seen before, reused to avoid allocating
	nameSize int                  // bytes in names
	dups     map[uint64]int       // series hash of each counted line -> its line number
	seed     maphash.Seed         // of series hashes; random, fixed for p's life
	page     Page

	loraLines []loraLine // per model with a vllm:lora_requests_info line (accum.lora)
	adapters  []Adapter  // the page's adapters; the Models' Adapters slice it

	// per-line scratch
	model              []byte   // the model label's value on the current line
	filter             [][]byte // the values of the run's filter keys on the current line
	lineEngine         bool     // the current line has an `engine` label
	labelSum           uint64   // order-independent hash of the current line's label set
	over               bool     // the current line's error is a bound, not a syntax error
	modelBuf           []byte   // unescaped label values, at most MaxLabelValueBytes each
	fltBufs            [][]byte
	keyBuf, discardBuf []byte
}

// The model-name cache is bounded in count and in bytes, so that pages with
// ever-changing names cannot grow it.
const (
	maxCachedNames     = 256
	maxCachedNameBytes = 64 << 10
)

// maxRetainedEntries bounds the per-page maps (series hashes, model index)
// a Parser keeps between pages; a larger one is dropped and made again.
const maxRetainedEntries = 4096

// maxRetainedAccums bounds the per-model accumulators (about 3.5 KB each,
// their histograms included) a Parser keeps between pages: a page may make
// up to Limits.MaxModels of them (220 KB at the default 64, more under a
// larger bound); more than this are dropped and made again.
const maxRetainedAccums = 64

// maxRetainedLoRALines bounds the adapter-list buffers a Parser keeps
// between pages (a vLLM page has one vllm:lora_requests_info model); more
// are dropped and made again.
const maxRetainedLoRALines = 4

// deadlineEvery is how many lines pass between two looks at the clock.
const deadlineEvery = 4096

// NewParser returns a Parser that knows the built-in servers.
func NewParser() *Parser { return NewParserFor(nil) }

// NewParserFor returns a Parser that knows servers (nil: the built-in ones),
// with DefaultLimits.
func NewParserFor(servers *Servers) *Parser { return newParser(servers, true) }

// newParser is NewParserFor; without hist it always skips the histogram
// bucket lines (for the benchmark that measures what they cost).
func newParser(servers *Servers, hist bool) *Parser {
	ds := servers.all()
	p := &Parser{
		dialects: ds,
		wantHist: servers.histogramSwitch(),
		matchers: newMatchers(ds, true),
		limits:   DefaultLimits(),
		index:    make([]map[string]int, len(ds)),
		last:     -1,
		seed:     maphash.MakeSeed(),
		counts:   make([]int, len(ds)),
		rejected: make([][NumRejects]uint32, len(ds)),
	}
	if !hist {
		p.wantHist = func() bool { return false }
	}
	maxKeys := 0
	for i := range p.matchers {
		maxKeys = max(maxKeys, p.matchers[i].maxKeys) // the bucket series' keys included: enough for quiet too
	}
	p.filter = make([][]byte, maxKeys)
	p.fltBufs = make([][]byte, maxKeys)
	return p
}

// newMatchers returns the matchers of every server of ds, indexed by
// Server; [Unknown] holds every server's series. Without hist they leave
// the histogram bucket series out.
func newMatchers(ds []dialect, hist bool) []matcher {
	ms := make([]matcher, len(ds))
	detect := []Server{VLLMV1, TGI, SGLang, TRTLLMServe, TritonTRTLLM, JetStream, GIEEPP, FrontDoor}
	for s := numBuiltin; s < len(ds); s++ {
		detect = append(detect, Server(s))
	}
	ms[Unknown] = newMatcher(ds, hist, detect...)
	for s := VLLMV1; int(s) < len(ds); s++ {
		ms[s] = newMatcher(ds, hist, s)
	}
	return ms
}

// matcherFor returns the matcher to parse the next page with, and whether
// it skips the histogram bucket lines.
func (p *Parser) matcherFor(server Server) (*matcher, bool) {
	if p.wantHist == nil || p.wantHist() {
		return &p.matchers[server], false
	}
	if p.quiet == nil {
		p.quiet = newMatchers(p.dialects, false)
	}
	return &p.quiet[server], true
}

// SetLimits replaces p's bounds; a field that is zero or negative takes its
// default. Scratch buffers grown under a larger bound are dropped.
func (p *Parser) SetLimits(l Limits) {
	d := DefaultLimits()
	if l.MaxLabelValueBytes <= 0 {
		l.MaxLabelValueBytes = d.MaxLabelValueBytes
	}
	if l.MaxModels <= 0 {
		l.MaxModels = d.MaxModels
	}
	p.limits = l
	p.modelBuf, p.keyBuf, p.discardBuf = nil, nil, nil
	clear(p.fltBufs)
}

// Limits returns p's bounds.
func (p *Parser) Limits() Limits { return p.limits }

// Parse detects the server from the page and returns its signals. The
// server is the built-in one with the most matching sample lines (ties: the
// order of the Server constants); only when no built-in series is on the
// page, the custom server with the most (ties: the order given to
// NewServers). A vLLM page is V1 when it has a `vllm:kv_cache_usage_perc`
// series or an `engine` label on a wanted vLLM series, else V0. The Page is
// owned by p and valid until p's next call.
func (p *Parser) Parse(page []byte) (*Page, error) {
	return p.ParseAs(page, Unknown)
}

// ParseAs parses assuming the given server's names (Unknown = detect, as in
// Parse). The Page is owned by p and valid until p's next call; its Server
// is Unknown when none of the server's series were found.
func (p *Parser) ParseAs(page []byte, server Server) (*Page, error) {
	return p.ParseBy(page, server, time.Time{})
}

// ParseBy is ParseAs that gives up with an error wrapping ErrDeadline once
// deadline has passed; the zero deadline means none. The clock is read
// every few thousand lines, so a page is never cut short much past it.
func (p *Parser) ParseBy(page []byte, server Server, deadline time.Time) (*Page, error) {
	if int(server) >= len(p.dialects) {
		return nil, fmt.Errorf("parse metrics page: unknown server %d", server)
	}
	p.reset()
	m, skipped := p.matcherFor(server)
	if err := p.scan(page, m, deadline); err != nil {
		p.reset()
		return nil, err
	}
	p.finish(server)
	p.page.HistogramsSkipped = skipped
	return &p.page, nil
}

// reset forgets the last page, keeping the memory it needed unless that
// grew past what a Parser should hold on to.
func (p *Parser) reset() {
	if cap(p.accs) > maxRetainedAccums {
		p.accs = nil // 3.5 KB each: a page of many models must not pin them
	}
	clear(p.accs) // drop the name strings
	p.accs = p.accs[:0]
	for s, m := range p.index {
		p.index[s] = clearOrDrop(m)
	}
	p.last = -1
	clear(p.counts)
	clear(p.rejected)
	p.engine = false
	p.dups = clearOrDrop(p.dups)
	if len(p.loraLines) > maxRetainedLoRALines {
		p.loraLines = nil
	}
	p.loraLines = p.loraLines[:0]
	clear(p.adapters)
	p.adapters = p.adapters[:0]
	p.page.Server = Unknown
	clear(p.page.Models)
	p.page.Models = p.page.Models[:0]
	p.page.Rejected = [NumRejects]uint32{}
	p.page.HistogramsSkipped = false
}

// clearOrDrop empties m for reuse, or drops it when it grew large (a Go map
// does not shrink, and clearing costs its capacity).
func clearOrDrop[K comparable, V any](m map[K]V) map[K]V {
	if len(m) > maxRetainedEntries {
		return nil
	}
	clear(m)
	return m
}

// scan reads the page line by line and accumulates the wanted series.
func (p *Parser) scan(page []byte, m *matcher, deadline time.Time) error {
	if i := bytes.IndexByte(page, 0); i >= 0 {
		return &SyntaxError{Line: bytes.Count(page[:i], []byte{'\n'}) + 1, Msg: "NUL byte", Err: ErrNotText}
	}
	for lineNo := 1; len(page) > 0; lineNo++ {
		if lineNo%deadlineEvery == 1 && !deadline.IsZero() && !time.Now().Before(deadline) {
			return fmt.Errorf("metrics page: parse stopped at line %d: %w", lineNo, ErrDeadline)
		}
		var line []byte
		if i := bytes.IndexByte(page, '\n'); i >= 0 {
			line, page = page[:i], page[i+1:]
		} else {
			line, page = page, nil
		}
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
		line = trimBlanks(line)
		if len(line) == 0 {
			continue
		}
		if line[0] == '#' {
			if string(line) == "# EOF" {
				return nil
			}
			continue
		}
		if !isNameStart(line[0]) {
			return &SyntaxError{Line: lineNo, Msg: fmt.Sprintf("line starts with %q, not a metric name", line[0]), Err: ErrNotText}
		}
		entries := m.match(line)
		if entries == nil {
			continue
		}
		if err := p.sample(line, lineNo, entries); err != nil {
			return err
		}
	}
	return nil
}

// sample handles one line whose name is wanted. The line counts for every
// entry of the run whose filters it meets.
func (p *Parser) sample(line []byte, lineNo int, entries []entry) error {
	first := &entries[0]
	rest := trimBlanks(line[len(first.name):])
	p.model, p.lineEngine, p.labelSum, p.over = nil, false, 0, false
	filter := p.filter[:len(first.keys)]
	clear(filter)
	if len(rest) > 0 && rest[0] == '{' {
		var msg string
		rest, msg = p.labels(rest[1:], p.dialects[first.server].modelLabel, first.keys)
		if msg != "" {
			return p.lineError(lineNo, first.name+": "+msg)
		}
	}
	v, msg := parseValue(rest)
	if msg != "" {
		return p.lineError(lineNo, first.name+": "+msg)
	}
	var a *accum
	for i := range entries {
		e := &entries[i]
		if !e.matches(filter) {
			continue // e.g. request_type="context": not wanted
		}
		if a == nil {
			if prev := p.dup(first.name, lineNo); prev != 0 {
				return &SyntaxError{Line: lineNo, Msg: fmt.Sprintf("%s: duplicate series, first on line %d", first.name, prev)}
			}
			if e.role < numGaugeRoles { // only gauges tell servers apart
				p.counts[e.server]++
			}
			if p.lineEngine && (e.server == VLLMV1 || e.server == VLLMV0) {
				p.engine = true
			}
			if a = p.accum(e.server, p.model); a == nil {
				p.over = true
				return p.lineError(lineNo, fmt.Sprintf("%s: more than %d models on the page (models bound)", first.name, p.limits.MaxModels))
			}
		}
		if _, ok := e.role.bucket(); ok {
			p.addBucket(a, e, filter[e.le], v)
			continue
		}
		if e.role == roleLoRA {
			p.addLoRA(a, filter[slices.Index(e.keys, loraKeys[0])], filter[slices.Index(e.keys, loraKeys[1])], v)
			continue
		}
		p.add(a, e, v)
	}
	return nil
}

// addBucket accumulates one bucket line (upper bound le, cumulative count
// v) of e's histogram into a. A bad bound, a refused count or one bucket
// too many leaves the model without that histogram for the page.
func (p *Parser) addBucket(a *accum, e *entry, le []byte, v float64) {
	a.seen |= 1 << e.role
	slot, _ := e.role.bucket()
	h := &a.hists[slot]
	if h.bad {
		return
	}
	if r, ok := check(e.role, v); !ok {
		p.rejected[e.server][r]++
		h.bad = true
		return
	}
	bound, err := strconv.ParseFloat(string(le), 64)
	if err != nil || math.IsNaN(bound) {
		h.bad = true
		return
	}
	i := h.find(bound)
	if i < 0 {
		if i = h.insert(bound); i < 0 {
			h.bad = true
			return
		}
	}
	if h.h.Count[i] += v; math.IsInf(h.h.Count[i], 0) {
		p.rejected[e.server][RejectNonFinite]++
		h.bad = true
	}
}

// addLoRA takes a vllm:lora_requests_info line whose value (the time of
// its last update) v is the latest so far: the adapters it lists as
// running and waiting (comma-separated) are counted, and the lists are
// kept (copied: they may be the line's scratch) for finish to name them.
func (p *Parser) addLoRA(a *accum, running, waiting []byte, v float64) {
	bit := uint32(1) << roleLoRA
	a.seen |= bit
	if math.IsNaN(v) || (a.has&bit != 0 && v < a.vals[roleLoRA]) {
		return
	}
	a.has |= bit
	a.vals[roleLoRA] = v
	a.vals[roleLoRARunning] = float64(countList(running))
	a.vals[roleLoRAWaiting] = float64(countList(waiting))
	if a.lora == 0 {
		n := len(p.loraLines)
		if n < cap(p.loraLines) {
			p.loraLines = p.loraLines[:n+1] // reuse the buffers of an earlier page
		} else {
			p.loraLines = append(p.loraLines, loraLine{})
		}
		a.lora = n + 1
	}
	l := &p.loraLines[a.lora-1]
	l.running = append(l.running[:0], running...)
	l.waiting = append(l.waiting[:0], waiting...)
}

// listAdapters appends the adapters of l to p.adapters, each name once,
// names at most MaxAdapterNameBytes long, until the page has MaxAdapters,
// and returns them and whether any name was left out.
func (p *Parser) listAdapters(l *loraLine) ([]Adapter, bool) {
	start := len(p.adapters)
	cut := false
	add := func(list []byte, waiting bool) {
		for len(list) > 0 {
			i := bytes.IndexByte(list, ',')
			if i < 0 {
				i = len(list)
			}
			name := bytes.TrimSpace(list[:i])
			list = list[min(i+1, len(list)):]
			if len(name) == 0 {
				continue
			}
			if len(name) > MaxAdapterNameBytes {
				cut = true
				continue
			}
			j := -1
			for k := start; k < len(p.adapters); k++ {
				if p.adapters[k].Name == string(name) {
					j = k - start
					break
				}
			}
			if j < 0 {
				if len(p.adapters) == MaxAdapters { // all models together
					cut = true
					continue
				}
				j = len(p.adapters) - start
				p.adapters = append(p.adapters, Adapter{Name: p.intern(name)})
			}
			if a := &p.adapters[start+j]; waiting {
				a.Waiting = true
			} else {
				a.Running = true
			}
		}
	}
	add(l.running, false)
	add(l.waiting, true)
	end := len(p.adapters)
	return p.adapters[start:end:end], cut
}

// countList counts the non-empty items of a comma-separated list.
func countList(b []byte) int {
	n := 0
	for len(b) > 0 {
		i := bytes.IndexByte(b, ',')
		if i < 0 {
			i = len(b)
		}
		if len(bytes.TrimSpace(b[:i])) > 0 {
			n++
		}
		b = b[min(i+1, len(b)):]
	}
	return n
}

// find returns the index of the bucket with upper bound le, or -1. Lines
// come in bucket order, so the bucket after the last one is tried first.
func (h *histAcc) find(le float64) int {
	if i := h.last + 1; i < h.h.N && h.h.Le[i] == le {
		h.last = i
		return i
	}
	for i := range h.h.N {
		if h.h.Le[i] == le {
			h.last = i
			return i
		}
	}
	return -1
}

// insert adds an empty bucket with upper bound le in order and returns its
// index, or -1 when the histogram already has MaxBuckets buckets.
func (h *histAcc) insert(le float64) int {
	if h.h.N == MaxBuckets {
		return -1
	}
	i := h.h.N
	for i > 0 && h.h.Le[i-1] > le {
		i--
	}
	copy(h.h.Le[i+1:h.h.N+1], h.h.Le[i:h.h.N])
	copy(h.h.Count[i+1:h.h.N+1], h.h.Count[i:h.h.N])
	h.h.Le[i], h.h.Count[i] = le, 0
	h.h.N++
	h.last = i
	return i
}

// add accumulates one sample of e into a, unless the value is refused.
func (p *Parser) add(a *accum, e *entry, v float64) {
	bit := uint32(1) << e.role
	a.seen |= bit
	if e.scale != 0 {
		v *= e.scale
	}
	if r, ok := check(e.role, v); !ok {
		p.rejected[e.server][r]++
		return
	}
	switch {
	case a.bad&bit != 0: // the sum already overflowed
	case a.has&bit == 0:
		a.vals[e.role] = v
		a.has |= bit
	default:
		sum := catalog.Combine(roleAgg[e.role], a.vals[e.role], 1, v)
		if math.IsInf(sum, 0) {
			a.bad |= bit
			a.has &^= bit
			p.rejected[e.server][RejectNonFinite]++
			return
		}
		a.vals[e.role] = sum
	}
}

// check says whether a role may take the value v, and if not why: no
// signal is NaN, infinite or negative, and fractions are at most 1.
func check(r role, v float64) (Reject, bool) {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return RejectNonFinite, false
	case v < 0:
		return RejectNegative, false
	case v > 1 && (r == roleKV || r == roleKVFallback || r == roleFill):
		return RejectAboveOne, false
	}
	return 0, true
}

// lineError is the error for a failed wanted line: a bound (p.over) or a
// syntax error.
func (p *Parser) lineError(lineNo int, msg string) error {
	if p.over {
		return fmt.Errorf("metrics page line %d: %s: %w", lineNo, msg, ErrLimit)
	}
	return &SyntaxError{Line: lineNo, Msg: msg}
}

// dup records the series of the current line (name and label set, in any
// order; an empty label value is no label, as in Prometheus) and returns the
// line that had it before, or 0. Series are told apart by a 64-bit hash with
// a per-Parser random seed, so a false match is as good as impossible.
func (p *Parser) dup(name string, lineNo int) int {
	h := maphash.String(p.seed, name) + p.labelSum
	if prev, ok := p.dups[h]; ok {
		return prev
	}
	if p.dups == nil {
		p.dups = make(map[uint64]int)
	}
	p.dups[h] = lineNo
	return 0
}

// hashLabel adds one label to the current line's label-set hash: the sum,
// so the order of labels does not matter, of a non-linear mix of the
// name's and the value's hashes, so swapping values between names does.
func (p *Parser) hashLabel(key, val []byte) {
	if len(val) == 0 {
		return
	}
	hi, lo := bits.Mul64(maphash.Bytes(p.seed, key)^0xa0761d6478bd642f, maphash.Bytes(p.seed, val)^0xe7037ed1a0b428db)
	p.labelSum += hi ^ lo
}

// matches reports whether the line's filter label values (indexed like
// e.keys) meet all of e's filters.
func (e *entry) matches(filter [][]byte) bool {
	for i, f := range e.filters {
		if string(filter[e.idx[i]]) != f.value {
			return false
		}
	}
	return true
}

// accum returns the accumulator for (server, model), adding one if needed,
// or nil when that would pass the models bound. Constant work per call.
func (p *Parser) accum(server Server, model []byte) *accum {
	if p.last >= 0 {
		if a := &p.accs[p.last]; a.server == server && a.name == string(model) {
			return a // consecutive lines of one model: the usual case
		}
	}
	idx := p.index[server]
	if i, ok := idx[string(model)]; ok {
		p.last = i
		return &p.accs[i]
	}
	if len(p.accs) >= p.limits.MaxModels { // the whole page's, not idx's: every server's models count
		return nil
	}
	if idx == nil {
		idx = make(map[string]int)
		p.index[server] = idx
	}
	name := p.intern(model)
	p.last = len(p.accs)
	idx[name] = p.last
	p.accs = append(p.accs, accum{server: server, name: name})
	return &p.accs[p.last]
}

// intern returns model as a string, reusing one from an earlier page. The
// cache holds at most maxCachedNames names of maxCachedNameBytes in all;
// when full it starts over.
func (p *Parser) intern(model []byte) string {
	if n, ok := p.names[string(model)]; ok {
		return n
	}
	n := string(model)
	if len(n) > maxCachedNameBytes/16 {
		return n // one name must not take the place of many
	}
	if len(p.names) >= maxCachedNames || p.nameSize+len(n) > maxCachedNameBytes {
		clear(p.names)
		p.nameSize = 0
	}
	if p.names == nil {
		p.names = make(map[string]string)
	}
	p.names[n] = n
	p.nameSize += len(n)
	return n
}

// finish picks the server and turns its accumulators into p.page.
func (p *Parser) finish(asked Server) {
	winner := asked
	if asked == Unknown {
		for s := range numBuiltin {
			if p.counts[s] > p.counts[winner] {
				winner = Server(s)
			}
		}
		if p.counts[winner] == 0 { // no built-in series: try the custom servers
			for s := numBuiltin; s < len(p.counts); s++ {
				if p.counts[s] > p.counts[winner] {
					winner = Server(s)
				}
			}
		}
	}
	if p.counts[winner] == 0 {
		return // Unknown, no models
	}
	p.page.Server = winner
	p.page.Rejected = p.rejected[winner]
	if asked == Unknown && winner == VLLMV1 && !p.engine && !p.anySeen(VLLMV1, roleKV) {
		p.page.Server = VLLMV0 // same names, accumulated the same way
	}
	for i := range p.accs {
		if a := &p.accs[i]; a.server == winner {
			m := a.model(&p.page.Rejected)
			if m.Has == 0 {
				continue
			}
			if a.lora > 0 && m.Has.Has(catalog.LoRAAdaptersRunning) {
				m.Adapters, m.AdaptersCut = p.listAdapters(&p.loraLines[a.lora-1])
			}
			p.page.Models = append(p.page.Models, m)
		}
	}
}

func (p *Parser) anySeen(server Server, r role) bool {
	for i := range p.accs {
		if p.accs[i].server == server && p.accs[i].seen&(1<<r) != 0 {
			return true
		}
	}
	return false
}

// model turns an accumulator into the signals it stands for, counting a
// refused derived batch fill in rejected.
func (a *accum) model(rejected *[NumRejects]uint32) Model {
	m := Model{Name: a.name}
	set := func(s catalog.Signal, v float64) {
		m.Values[s] = v
		m.Has = m.Has.Add(s)
	}
	has := func(r role) bool { return a.has&(1<<r) != 0 }
	for r := roleGenTokens; r <= rolePreempt; r++ {
		if has(r) {
			m.Counters[r.counter()] = a.vals[r]
			m.HasCounter |= 1 << r.counter()
		}
	}
	for slot := range a.hists {
		h := &a.hists[slot]
		r := roleTTFT + role(slot)
		if r == roleITLFallback && a.seen&(1<<roleITL) != 0 {
			continue // the newer name wins when the page has both
		}
		if !h.bad && h.h.N > 0 && math.IsInf(h.h.Le[h.h.N-1], 1) {
			m.Hists[slotLatency[slot]] = &h.h
		}
	}
	if has(roleLoRA) {
		set(catalog.LoRAAdaptersRunning, a.vals[roleLoRARunning])
		set(catalog.LoRAAdaptersWaiting, a.vals[roleLoRAWaiting])
	}
	// A deprecated name counts only when the current one has no series at
	// all (a refused current value is not replaced by the deprecated one).
	current := func(r, old role, s catalog.Signal) {
		switch {
		case a.seen&(1<<r) != 0:
			if has(r) {
				set(s, a.vals[r])
			}
		case has(old):
			set(s, a.vals[old])
		}
	}
	current(roleQueue, roleQueueOld, catalog.QueueSize)
	current(roleBatch, roleBatchOld, catalog.BatchSize)
	switch {
	case a.seen&(1<<roleKV) != 0:
		if has(roleKV) {
			set(catalog.KVCacheUsage, a.vals[roleKV])
		}
	case has(roleKVFallback):
		set(catalog.KVCacheUsage, a.vals[roleKVFallback])
	}
	current(roleSaturation, roleSaturationOld, catalog.BatchFill)
	switch {
	case m.Has.Has(catalog.BatchFill): // a front door's pool saturation
	case has(roleFill):
		set(catalog.BatchFill, a.vals[roleFill])
	case has(roleBatch) && has(roleBatchMax) && a.vals[roleBatchMax] > 0:
		f := a.vals[roleBatch] / a.vals[roleBatchMax]
		if r, ok := check(roleFill, f); ok {
			set(catalog.BatchFill, f)
		} else {
			rejected[r]++
		}
	}
	return m
}
