package parse

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// labels reads a label set; s starts just after '{'. It records the values
// of modelKey in p.model and of keys[i] in p.filter[i] (unescaped), notes an
// `engine` label in p.lineEngine, and returns the text after '}' or an error message.
func (p *Parser) labels(s []byte, modelKey string, keys []string) ([]byte, string) {
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
			key, s, msg = unquote(s[1:], &p.keyBuf)
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
			key, s = s[:i], s[i:]
		}
		s = trimBlanks(s)
		if len(s) == 0 || s[0] != '=' {
			return nil, "expected '=' after label name " + strconv.Quote(string(key))
		}
		s = trimBlanks(s[1:])
		if len(s) == 0 || s[0] != '"' {
			return nil, "expected quoted value for label " + strconv.Quote(string(key))
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
		val, rest, msg := unquote(s[1:], buf)
		if msg != "" {
			return nil, msg
		}
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

// unquote reads a quoted string; s starts just after the opening quote. It
// returns the unescaped value (a slice of s when there are no escapes, else
// of *buf), the text after the closing quote, and an error message or "".
func unquote(s []byte, buf *[]byte) (val, rest []byte, msg string) {
	end := bytes.IndexByte(s, '"')
	if end < 0 {
		return nil, nil, "unterminated quoted string"
	}
	if bytes.IndexByte(s[:end], '\\') < 0 {
		return s[:end], s[end+1:], ""
	}
	b := (*buf)[:0]
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			*buf = b
			return b, s[i+1:], ""
		case '\\':
			if i+1 == len(s) {
				return nil, nil, "unterminated quoted string"
			}
			i++
			switch s[i] {
			case 'n':
				b = append(b, '\n')
			case '\\', '"':
				b = append(b, s[i])
			default:
				return nil, nil, fmt.Sprintf("invalid escape sequence \\%c", s[i])
			}
		default:
			b = append(b, c)
		}
	}
	*buf = b
	return nil, nil, "unterminated quoted string"
}

// parseValue reads "value [timestamp]" and reports whether the value is
// finite; NaN and ±Inf (including out-of-range numbers) are not.
func parseValue(s []byte) (v float64, finite bool, msg string) {
	s = trimBlanks(s)
	tok, s := nextToken(s)
	if len(tok) == 0 {
		return 0, false, "missing value"
	}
	v, err := strconv.ParseFloat(string(tok), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, false, fmt.Sprintf("invalid value %q", tok)
	}
	// Then an optional timestamp, then an optional OpenMetrics exemplar ("# {...} v").
	if rest := trimBlanks(s); len(rest) > 0 && rest[0] != '#' {
		ts, rest := nextToken(rest)
		if _, err := strconv.ParseFloat(string(ts), 64); err != nil {
			return 0, false, fmt.Sprintf("invalid timestamp %q", ts)
		}
		if rest = trimBlanks(rest); len(rest) > 0 && rest[0] != '#' {
			return 0, false, fmt.Sprintf("unexpected text %q after timestamp", rest)
		}
	}
	return v, !math.IsNaN(v) && !math.IsInf(v, 0), ""
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
