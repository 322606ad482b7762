package scrape

import (
	"bytes"
	"context"
	"flag"
	"os"
	"strings"
	"sync"
	"testing"
	"unicode"
	"unicode/utf8"

	"k8s.io/klog/v2"
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

// A failed scrape's error is stored (a 404's reason) and logged ("Scrape
// failing"): whatever the target's URL or the server's status line and
// headers hold, its text has no control character.
func TestScrapeErrorsHoldNoControlCharacters(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		url    func(srv string) string // srv: the raw server's page URL
		resp   string                  // the raw server's answer
		reason string
	}{
		{
			name:   "status line's reason phrase with ESC and BEL",
			resp:   "HTTP/1.1 500 \x1b]0;owned\x07\x1b[2J\x1b[31mFAIL\r\nContent-Length: 0\r\n\r\n",
			reason: ReasonHTTPStatus,
		},
		{
			name:   "redirect to a Location with ESC and a C1 control",
			resp:   "HTTP/1.1 302 Found\r\nLocation: /x\x1b[2J\xc2\x9b31m\x07\r\nContent-Length: 0\r\n\r\n",
			reason: ReasonRedirect,
		},
		{
			name:   "header line with ESC",
			resp:   "HTTP/1.1 200 OK\r\nX-\x1b[2J: y\r\nContent-Length: 0\r\n\r\n",
			reason: ReasonConnection,
		},
		{
			name:   "URL path with a newline and ESC",
			url:    func(srv string) string { return srv + "\nE1202 forged] \"Scrape recovered\"\x1b[2J" },
			reason: ReasonConnection,
		},
		{
			name:   "URL path with invalid UTF-8 and a C1 control",
			url:    func(srv string) string { return srv + "\xff\u009b2J" },
			resp:   "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n",
			reason: ReasonHTTPStatus,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resp := tc.resp
			if resp == "" {
				resp = okHead + "Content-Length: 0\r\n\r\n"
			}
			srv := newRawServer(t, func(int, int) (string, bool) { return resp, false })
			url := srv.url()
			if tc.url != nil {
				url = tc.url(url)
			}
			sink := newRecordingSink()
			m, err := NewManager(testConfig(), sink, nil)
			if err != nil {
				t.Fatal(err)
			}
			m.ScrapeNow(context.Background(), []Target{{Pod: pod("p"), URL: url}})
			recs := sink.get(pod("p"))
			if len(recs) != 1 || recs[0].err == nil {
				t.Fatalf("records %+v, want one failure", recs)
			}
			msg := recs[0].err.Error()
			if got := ReasonOf(recs[0].err); got != tc.reason {
				t.Errorf("reason %q (%q), want %q", got, msg, tc.reason)
			}
			if hasControl(msg) {
				t.Errorf("the error holds a control character or invalid UTF-8: %q", msg)
			}
			if got := logURL(url); hasControl(got) {
				t.Errorf("the URL logged beside it holds a control character or invalid UTF-8: %q", got)
			}
		})
	}
}

// syncBuffer is a bytes.Buffer safe for klog's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// captureLogs sends klog's text output, at verbosity v, to the returned
// buffer until the test ends. klog is process-wide: call it only from a
// test that is not parallel (the parallel ones wait until it is done).
func captureLogs(t *testing.T, v string) *syncBuffer {
	t.Helper()
	var fs flag.FlagSet
	klog.InitFlags(&fs)
	prev := map[string]string{}
	for name, value := range map[string]string{"logtostderr": "false", "alsologtostderr": "false", "stderrthreshold": "FATAL", "v": v} {
		prev[name] = fs.Lookup(name).Value.String()
		if err := fs.Set(name, value); err != nil {
			t.Fatal(err)
		}
	}
	buf := &syncBuffer{}
	klog.SetOutput(buf)
	t.Cleanup(func() {
		klog.Flush()
		for name, value := range prev {
			_ = fs.Set(name, value)
		}
		klog.SetOutput(os.Stderr)
	})
	return buf
}

// The "Scrape failing" line is logged at the default verbosity: a target
// URL with a newline or an ESC in it (pkg/targets refuses such a path
// annotation, this is the scraper's own guard) cannot forge a log line.
func TestScrapeFailingLogLineHoldsNoControlCharacters(t *testing.T) {
	logs := captureLogs(t, "2")
	srv := newRawServer(t, func(int, int) (string, bool) { return "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n", false })
	cfg := testConfig()
	cfg.Jitter = 0
	m, err := NewManager(cfg, newRecordingSink(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ts := []Target{
		{Pod: pod("newline"), URL: srv.url() + "\nE1202 10:00:00.000000       1 forged.go:1] \"Scrape recovered\"\x1b[2J"},
		{Pod: pod("bytes"), URL: srv.url() + "\xff\u009b2J"},
	}
	m.SetTargets(ts)
	stop := startManager(t, m)
	waitFor(t, "both targets' failures logged", func() bool { return strings.Count(logs.String(), "Scrape failing") >= len(ts) })
	m.ScrapeNow(context.Background(), ts) // "Scrape failed", at verbosity 2
	stop()
	klog.Flush()
	for _, line := range strings.Split(strings.TrimSuffix(logs.String(), "\n"), "\n") {
		if hasControl(line) || line == "" || !strings.ContainsRune("IWEF", rune(line[0])) {
			t.Errorf("log line %q: holds a control character or is not a klog line", line)
		}
	}
}
