// Package parse reads a model server's Prometheus text /metrics page and
// picks out the few series that carry the serving signals (queue size, batch
// size, KV-cache usage, batch fill), per model, for every server in
// DESIGN.md's "Signals" table. It owns the table of wanted series and the
// detection of which server wrote a page. It is a single forward scan over
// the page's lines that looks closely only at the lines it needs, and it
// allocates nothing per page once warm.
package parse

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/signals"
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
// needed, or a body that is not Prometheus text (then Err is ErrNotText).
type SyntaxError struct {
	Line int
	Msg  string
	Err  error
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("metrics page line %d: %s", e.Line, e.Msg) }

// Unwrap returns ErrNotText for non-Prometheus bodies, else nil.
func (e *SyntaxError) Unwrap() error { return e.Err }

// accum accumulates one model's wanted series of one server.
type accum struct {
	server Server
	name   string
	vals   [numRoles]float64
	has    uint8 // roles with at least one finite sample
	seen   uint8 // roles with at least one series, finite or not
}

// Parser parses pages. Its state is reused from call to call, so a warm
// Parser allocates nothing per page; it is not safe for concurrent use.
type Parser struct {
	dialects []dialect // built-in, then custom servers
	matchers []matcher // per server; [Unknown] holds every server's series
	accs     []accum
	counts   []int    // matched lines per server
	engine   bool     // a vLLM series had an `engine` label
	names    []string // model names seen before, reused to avoid allocating
	page     Page

	// per-line scratch
	model              []byte   // the model label's value on the current line
	filter             [][]byte // the values of the run's filter keys on the current line
	lineEngine         bool     // the current line has an `engine` label
	modelBuf           []byte   // unescaped label values
	fltBufs            [][]byte
	keyBuf, discardBuf []byte
}

// maxCachedNames bounds Parser.names on pages with ever-changing model names.
const maxCachedNames = 256

// NewParser returns a Parser that knows the built-in servers.
func NewParser() *Parser { return NewParserFor(nil) }

// NewParserFor returns a Parser that knows servers (nil: the built-in ones).
func NewParserFor(servers *Servers) *Parser {
	ds := servers.all()
	p := &Parser{
		dialects: ds,
		matchers: make([]matcher, len(ds)),
		counts:   make([]int, len(ds)),
	}
	detect := []Server{VLLMV1, TGI, SGLang, TRTLLMServe, TritonTRTLLM, JetStream}
	for s := numBuiltin; s < len(ds); s++ {
		detect = append(detect, Server(s))
	}
	p.matchers[Unknown] = newMatcher(ds, detect...)
	maxKeys := p.matchers[Unknown].maxKeys
	for s := VLLMV1; int(s) < len(ds); s++ {
		p.matchers[s] = newMatcher(ds, s)
		maxKeys = max(maxKeys, p.matchers[s].maxKeys)
	}
	p.filter = make([][]byte, maxKeys)
	p.fltBufs = make([][]byte, maxKeys)
	return p
}

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
// deadline has passed; the zero deadline means none.
func (p *Parser) ParseBy(page []byte, server Server, deadline time.Time) (*Page, error) {
	if int(server) >= len(p.dialects) {
		return nil, fmt.Errorf("parse metrics page: unknown server %d", server)
	}
	p.reset()
	if err := p.scan(page, &p.matchers[server]); err != nil {
		p.reset()
		return nil, err
	}
	p.finish(server)
	return &p.page, nil
}

func (p *Parser) reset() {
	p.accs = p.accs[:0]
	clear(p.counts)
	p.engine = false
	p.page.Server = Unknown
	p.page.Models = p.page.Models[:0]
}

// scan reads the page line by line and accumulates the wanted series.
func (p *Parser) scan(page []byte, m *matcher) error {
	if i := bytes.IndexByte(page, 0); i >= 0 {
		return &SyntaxError{Line: bytes.Count(page[:i], []byte{'\n'}) + 1, Msg: "NUL byte", Err: ErrNotText}
	}
	for lineNo := 1; len(page) > 0; lineNo++ {
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
		if msg := p.sample(line, entries); msg != "" {
			return &SyntaxError{Line: lineNo, Msg: msg}
		}
	}
	return nil
}

// sample handles one line whose name is wanted; it returns an error message
// or "". The line counts for every entry of the run whose filters it meets.
func (p *Parser) sample(line []byte, entries []entry) string {
	first := &entries[0]
	rest := trimBlanks(line[len(first.name):])
	p.model, p.lineEngine = nil, false
	filter := p.filter[:len(first.keys)]
	clear(filter)
	if len(rest) > 0 && rest[0] == '{' {
		var msg string
		rest, msg = p.labels(rest[1:], p.dialects[first.server].modelLabel, first.keys)
		if msg != "" {
			return first.name + ": " + msg
		}
	}
	v, finite, msg := parseValue(rest)
	if msg != "" {
		return first.name + ": " + msg
	}
	var a *accum
	for i := range entries {
		e := &entries[i]
		if !e.matches(filter) {
			continue // e.g. request_type="context": not wanted
		}
		if a == nil {
			p.counts[e.server]++
			if p.lineEngine && (e.server == VLLMV1 || e.server == VLLMV0) {
				p.engine = true
			}
			a = p.accum(e.server, p.model)
		}
		bit := uint8(1) << e.role
		a.seen |= bit
		ev, efinite := v, finite
		if e.scale != 0 {
			ev *= e.scale
			efinite = finite && !math.IsInf(ev, 0)
		}
		if !efinite {
			continue // NaN and ±Inf count as absent for this series
		}
		if a.has&bit == 0 {
			a.vals[e.role] = ev
			a.has |= bit
		} else {
			a.vals[e.role] = signals.Combine(roleAgg[e.role], a.vals[e.role], 1, ev)
		}
	}
	return ""
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

// accum returns the accumulator for (server, model), adding one if needed.
func (p *Parser) accum(server Server, model []byte) *accum {
	for i := range p.accs {
		if a := &p.accs[i]; a.server == server && a.name == string(model) {
			return a
		}
	}
	p.accs = append(p.accs, accum{server: server, name: p.intern(model)})
	return &p.accs[len(p.accs)-1]
}

// intern returns model as a string, reusing one from an earlier page.
func (p *Parser) intern(model []byte) string {
	for _, n := range p.names {
		if n == string(model) {
			return n
		}
	}
	if len(p.names) >= maxCachedNames {
		p.names = p.names[:0]
	}
	n := string(model)
	p.names = append(p.names, n)
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
	if asked == Unknown && winner == VLLMV1 && !p.engine && !p.anySeen(VLLMV1, roleKV) {
		p.page.Server = VLLMV0 // same names, accumulated the same way
	}
	for i := range p.accs {
		if a := &p.accs[i]; a.server == winner {
			if m := a.model(); m.Has != 0 {
				p.page.Models = append(p.page.Models, m)
			}
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

// model turns an accumulator into the signals it stands for.
func (a *accum) model() Model {
	m := Model{Name: a.name}
	set := func(s signals.Signal, v float64) {
		m.Values[s] = v
		m.Has = m.Has.Add(s)
	}
	has := func(r role) bool { return a.has&(1<<r) != 0 }
	if has(roleQueue) {
		set(signals.QueueSize, a.vals[roleQueue])
	}
	if has(roleBatch) {
		set(signals.BatchSize, a.vals[roleBatch])
	}
	switch {
	case a.seen&(1<<roleKV) != 0:
		if has(roleKV) {
			set(signals.KVCacheUsage, a.vals[roleKV])
		}
	case has(roleKVFallback):
		set(signals.KVCacheUsage, a.vals[roleKVFallback])
	}
	switch {
	case has(roleFill):
		set(signals.BatchFill, a.vals[roleFill])
	case has(roleBatch) && has(roleBatchMax) && a.vals[roleBatchMax] > 0:
		if f := a.vals[roleBatch] / a.vals[roleBatchMax]; !math.IsNaN(f) && !math.IsInf(f, 0) {
			set(signals.BatchFill, f)
		}
	}
	return m
}
