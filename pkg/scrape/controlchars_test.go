package scrape

import (
	"context"
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
