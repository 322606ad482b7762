package targets

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// hasControl reports whether s holds a byte a terminal or a log reader could
// take for something else than text: a C0 control (newline, ESC, BEL...),
// DEL, a C1 control, or a byte that is not valid UTF-8.
func hasControl(s string) bool {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				return true
			}
		}
		if unicode.IsControl(r) {
			return true
		}
	}
	return false
}

// The path annotation goes into the scrape URL, and so into every scrape
// error, "Scrape failing" log line and stored 404 reason about the pod: a
// path with a byte that is not valid in a URL path is refused, and the
// refusal quotes it.
func TestPathAnnotationRefusesBytesNotValidInAURLPath(t *testing.T) {
	cases := []struct {
		name string
		path string
		ok   bool
	}{
		{"plain", "/metrics", true},
		{"nested", "/v1/stats/prometheus", true},
		{"query", "/metrics?format=prometheus&name[]=x", false}, // '[' is not a URL byte
		{"query of URL bytes", "/metrics?format=prometheus", true},
		{"sub-delims and colon", "/a:b@c!$&'()*+,;=-._~", true},
		{"percent-encoded", "/a%20b%2F", true},
		{"newline", "/metrics\nI1202 10:00:00.000000       1 forged.go:1] \"Scrape recovered\"", false},
		{"carriage return", "/metrics\r", false},
		{"ESC", "/metrics\x1b[2J\x1b]0;owned\x07", false},
		{"BEL", "/metrics\a", false},
		{"NUL", "/metrics\x00", false},
		{"tab", "/met\trics", false},
		{"DEL", "/metrics\x7f", false},
		{"space", "/my metrics", false},
		{"C1 control (CSI)", "/metrics\u009b2J", false},
		{"right-to-left override", "/metrics\u202e", false},
		{"invalid UTF-8", "/metrics\xff\xfe", false},
		{"non-ASCII letter", "/métriques", false},
		{"fragment", "/metrics#x", false},
		{"backslash", `/metrics\x`, false},
		{"quote", `/metrics"`, false},
		{"bad percent escape", "/metrics%zz", false},
		{"cut percent escape", "/metrics%2", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Endpoint(testPod("p", map[string]string{AnnotationPort: "8000", AnnotationPath: tc.path}))
			if tc.ok {
				if err != nil || got != "http://10.0.0.1:8000"+tc.path {
					t.Fatalf("Endpoint = %q, %v; want the path kept", got, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Endpoint = %q; want the path %q refused", got, tc.path)
			}
			if hasControl(err.Error()) {
				t.Fatalf("the error holds a control character or invalid UTF-8: %q", err.Error())
			}
			if !strings.Contains(err.Error(), AnnotationPath) {
				t.Fatalf("the error %q does not name the annotation", err)
			}
		})
	}
}
