package app

import (
	"bytes"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/contrast/contrasttest"
)

// hasControl reports whether s holds a byte a terminal could take for
// something else than text: a C0 control (newline, ESC, BEL...), DEL, a C1
// control, a bidirectional override, or a byte that is not valid UTF-8.
func hasControl(s string) bool {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				return true
			}
		}
		if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) {
			return true
		}
	}
	return false
}

// An error's text from the API (the adapter's reason, which quotes tenant
// text, or whatever serves the metrics API) is printed escaped: it cannot
// drive the terminal or forge a line of output.
func TestAPIErrorsArePrintedEscaped(t *testing.T) {
	const evil = "\x1b]0;owned\x07\x1b[2J\x1b[31m\nforged\u009b31m\u202e\xff"
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"contrast", []string{"contrast", "-l", "app=llm"}},
		{"top", []string{"top"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := contrasttest.New(t)
			lbls := map[string]string{"app": "llm"}
			s.Deployments = append(s.Deployments, contrasttest.Deployment("llm", lbls, lbls))
			s.Pods = append(s.Pods, contrasttest.Pod("llm-a", lbls, 1))
			s.Fail, s.FailMessage = 503, "overloaded: "+evil
			var stdout, stderr bytes.Buffer
			args := append(tc.args, "--kubeconfig", s.Kubeconfig(t, t.TempDir()), "--request-timeout=5s")
			if code := Main(args, &stdout, &stderr); code != 1 {
				t.Fatalf("exit %d, want 1; stderr %q", code, &stderr)
			}
			out := strings.TrimSuffix(stderr.String(), "\n")
			if hasControl(out) || !strings.Contains(out, "overloaded: ") {
				t.Fatalf("stderr %q: want the API's message, escaped, on one line", out)
			}
		})
	}
}
