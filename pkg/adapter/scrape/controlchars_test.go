// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package scrape

import (
	"context"
	"strings"
	"testing"

	"k8s.io/klog/v2"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/escape/escapetest"
)

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
			if escapetest.HasControl(msg) {
				t.Errorf("the error holds a control character or invalid UTF-8: %q", msg)
			}
			if got := logURL(url); escapetest.HasControl(got) {
				t.Errorf("the URL logged beside it holds a control character or invalid UTF-8: %q", got)
			}
		})
	}
}

// The "Scrape failing" line is logged at the default verbosity: a target
// URL with a newline or an ESC in it (pkg/adapter/targets refuses such a path
// annotation, this is the scraper's own guard) cannot forge a log line.
func TestScrapeFailingLogLineHoldsNoControlCharacters(t *testing.T) {
	logs := escapetest.CaptureLogs(t, "2")
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
		if escapetest.HasControl(line) || line == "" || !strings.ContainsRune("IWEF", rune(line[0])) {
			t.Errorf("log line %q: holds a control character or is not a klog line", line)
		}
	}
}
