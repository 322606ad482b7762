// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package parse

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
)

// labels reads a label set; s starts just after '{'. It records the values
// of modelKey in p.model and of keys[i] in p.filter[i] (unescaped), notes an
// `engine` label in p.lineEngine, adds every label to p.labelSum, and
// returns the text after '}' or an error message. A label name or value over
// the size bound is an error with p.over set.
func (p *Parser) labels(s []byte, modelKey string, keys []string) ([]byte, string) {
	limit := p.limits.MaxLabelValueBytes
	// The labels read twice on one line are an error, as in Prometheus:
	// otherwise the last would silently win (a line could name one model
	// and count for another).
	var sawModel bool
	var sawKeys uint64 // bit i: keys[i]
	for {
		s = trimBlanks(s)
		if len(s) == 0 {
			return nil, "unterminated label set"
		}
		if s[0] == '}' {
			return s[1:], ""
		}
		var key []byte
		if s[0] == '"' { // quoted (UTF-8) label name
			var msg string
			key, s, msg = p.unquote(s[1:], &p.keyBuf, "label name")
			if msg != "" {
				return nil, msg
			}
		} else {
			i := 0
			for i < len(s) && isLabelChar(s[i]) {
				i++
			}
			if i == 0 {
				return nil, fmt.Sprintf("expected label name, found %q", s[0])
			}
			if i > limit {
				p.over = true
				return nil, overMsg("label name", limit)
			}
			key, s = s[:i], s[i:]
		}
		s = trimBlanks(s)
		if len(s) == 0 || s[0] != '=' {
			return nil, "expected '=' after label name " + quoteCut(key)
		}
		s = trimBlanks(s[1:])
		if len(s) == 0 || s[0] != '"' {
			return nil, "expected quoted value for label " + quoteCut(key)
		}
		buf, isModel, fi := &p.discardBuf, false, -1
		switch {
		case modelKey != "" && string(key) == modelKey:
			buf, isModel = &p.modelBuf, true
		case string(key) == "engine":
			p.lineEngine = true
		}
		for i, k := range keys {
			if k == string(key) {
				fi = i
				if !isModel {
					buf = &p.fltBufs[i]
				}
				break
			}
		}
		if isModel {
			if sawModel {
				return nil, "label " + quoteCut(key) + " given twice"
			}
			sawModel = true
		} else if fi >= 0 && fi < 64 {
			if sawKeys&(1<<fi) != 0 {
				return nil, "label " + quoteCut(key) + " given twice"
			}
			sawKeys |= 1 << fi
		}
		val, rest, msg := p.unquote(s[1:], buf, "label value")
		if msg != "" {
			return nil, msg
		}
		p.hashLabel(key, val)
		if isModel {
			p.model = val
		}
		if fi >= 0 {
			p.filter[fi] = val
		}
		s = trimBlanks(rest)
		if len(s) > 0 && s[0] == ',' {
			s = s[1:]
			continue
		}
		if len(s) > 0 && s[0] == '}' {
			return s[1:], ""
		}
		return nil, "expected ',' or '}' after label value"
	}
}

// unquote reads a quoted string (a label's name or value: what); s starts
// just after the opening quote. It returns the unescaped value (a slice of s
// when there are no escapes, else of *buf), the text after the closing
// quote, and an error message or "". A value over the size bound is an
// error with p.over set, and *buf never grows past the bound.
func (p *Parser) unquote(s []byte, buf *[]byte, what string) (val, rest []byte, msg string) {
	limit := p.limits.MaxLabelValueBytes
	end := bytes.IndexByte(s, '"')
	if end < 0 {
		return nil, nil, "unterminated quoted string"
	}
	if bytes.IndexByte(s[:end], '\\') < 0 {
		if end > limit {
			p.over = true
			return nil, nil, overMsg(what, limit)
		}
		return s[:end], s[end+1:], ""
	}
	var over bool
	val, rest, *buf, msg, over = unescape(s, (*buf)[:0], limit, what)
	p.over = p.over || over
	return val, rest, msg
}

// unescape reads a quoted string that holds an escape; s starts just after
// the opening quote. It appends the unescaped value to b, growing b to at
// most limit bytes past its length, and returns it (capped, so that later
// appends to b leave it alone), the text after the closing quote, b, and an
// error message or "" (over: the value is over limit bytes).
func unescape(s, b []byte, limit int, what string) (val, rest, _ []byte, msg string, over bool) {
	start := len(b)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"':
			return b[start:len(b):len(b)], s[i+1:], b, "", false
		case '\\':
			if i+1 == len(s) {
				return nil, nil, b, "unterminated quoted string", false
			}
			i++
			switch s[i] {
			case 'n':
				c = '\n'
			case '\\', '"':
				c = s[i]
			default:
				return nil, nil, b, fmt.Sprintf("invalid escape sequence \\%s", quoteCut(s[i:i+1])), false
			}
		}
		if len(b)-start == limit {
			return nil, nil, b, overMsg(what, limit), true
		}
		b = appendCapped(b, c, start+limit)
	}
	return nil, nil, b, "unterminated quoted string", false
}

// Unquote reads a label value as the text format quotes it (escapes \\,
// \" and \n); s starts just after the opening quote. It returns the value,
// the text after the closing quote, and buf: a value without escapes is a
// slice of s, one with escapes is unescaped onto the end of buf, capped so
// that later appends to buf leave it alone. A value over limit bytes is an
// error wrapping ErrLimit. It is the Parser's own label reading, for other
// readers of pages in the text format (pkg/adapter/agentpage).
func Unquote(s, buf []byte, limit int) (val, rest, _ []byte, err error) {
	end := bytes.IndexByte(s, '"')
	if end < 0 {
		return nil, nil, buf, errors.New("unterminated quoted string")
	}
	if bytes.IndexByte(s[:end], '\\') < 0 {
		if end > limit {
			return nil, nil, buf, fmt.Errorf("%s: %w", overMsg("label value", limit), ErrLimit)
		}
		return s[:end], s[end+1:], buf, nil
	}
	val, rest, buf, msg, over := unescape(s, buf, limit, "label value")
	switch {
	case over:
		return nil, nil, buf, fmt.Errorf("%s: %w", msg, ErrLimit)
	case msg != "":
		return nil, nil, buf, errors.New(msg)
	}
	return val, rest, buf, nil
}

// ParseValue reads a sample's "value [timestamp]" as the Parser does: the
// value may be NaN, ±Inf, or out of float64's range (then ±Inf); an error
// quotes at most a few dozen bytes of the text. For other readers of pages
// in the text format (pkg/adapter/agentpage).
func ParseValue(s []byte) (float64, error) {
	v, msg := parseValue(s)
	if msg != "" {
		return 0, errors.New(msg)
	}
	return v, nil
}

// appendCapped appends c to b (len(b) < limit), growing b to at most limit
// bytes.
func appendCapped(b []byte, c byte, limit int) []byte {
	if len(b) == cap(b) {
		nb := make([]byte, len(b), min(max(2*cap(b), 64), limit))
		copy(nb, b)
		b = nb
	}
	return append(b, c)
}

func overMsg(what string, limit int) string {
	return fmt.Sprintf("%s longer than %d bytes (label size bound)", what, limit)
}

// maxQuoted is how much page text an error message quotes.
const maxQuoted = 40

// quoteCut quotes b for an error message, cut to maxQuoted bytes ("…" marks
// the cut), so that a hostile page cannot make long messages.
func quoteCut(b []byte) string {
	if len(b) <= maxQuoted {
		return strconv.Quote(string(b))
	}
	return strconv.Quote(string(b[:maxQuoted])) + "…"
}

// parseValue reads "value [timestamp]"; the value may be NaN, ±Inf or out
// of float64 range (then ±Inf).
func parseValue(s []byte) (v float64, msg string) {
	s = trimBlanks(s)
	tok, s := nextToken(s)
	if len(tok) == 0 {
		return 0, "missing value"
	}
	v, err := strconv.ParseFloat(string(tok), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, "invalid value " + quoteCut(tok)
	}
	// Then an optional timestamp, then an optional OpenMetrics exemplar ("# {...} v").
	if rest := trimBlanks(s); len(rest) > 0 && rest[0] != '#' {
		ts, rest := nextToken(rest)
		if _, err := strconv.ParseFloat(string(ts), 64); err != nil {
			return 0, "invalid timestamp " + quoteCut(ts)
		}
		if rest = trimBlanks(rest); len(rest) > 0 && rest[0] != '#' {
			return 0, "unexpected text " + quoteCut(rest) + " after timestamp"
		}
	}
	return v, ""
}

// nextToken splits s at its first blank.
func nextToken(s []byte) (tok, rest []byte) {
	for i, c := range s {
		if c == ' ' || c == '\t' {
			return s[:i], s[i:]
		}
	}
	return s, nil
}

func trimBlanks(s []byte) []byte {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	return s
}

func isNameStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == ':'
}

func isLabelChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}
