// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package kubectlplugin

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/escape/escapetest"
)

// evil is tenant text that would drive a terminal: set its title, clear
// it, colour it, forge a line, reverse the text, and a byte that is not
// UTF-8.
const evil = "\x1b]0;owned\x07\x1b[2J\x1b[31m\nforged\u009b31m\u202e\xff"

// rawHTTP answers every request on 127.0.0.1 with resp, written as it is,
// and closes the connection; it stops when the test ends.
func rawHTTP(t *testing.T, resp string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil || line == "\r\n" {
						break
					}
				}
				_, _ = io.WriteString(c, resp)
			})
		}
	})
	t.Cleanup(func() {
		_ = l.Close()
		wg.Wait()
	})
	return "http://" + l.Addr().String()
}

// An OpenCost answer's status line is the server's text: its reason phrase
// is quoted in the error `kubectl inference top` prints.
func TestOpenCostReasonPhraseIsQuoted(t *testing.T) {
	for _, tc := range []struct {
		name, statusLine string
		wantIn           string
	}{
		{"reason phrase with escapes", "HTTP/1.1 502 \x1b]0;owned\x07\x1b[2J\x1b[31mBad\u009b31m\u202e\xff", "502"},
		{"plain reason phrase", "HTTP/1.1 503 Service Unavailable", `503 "Service Unavailable"`},
		{"no reason phrase", "HTTP/1.1 500", "500"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := rawHTTP(t, tc.statusLine+"\r\nContent-Length: 4\r\nConnection: close\r\n\r\nnope")
			oc := &OpenCost{URL: url, Window: "1h", Client: &http.Client{Timeout: 5 * time.Second}}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := oc.DeploymentCosts(ctx, "team-a")
			if err == nil {
				t.Fatal("no error")
			}
			if msg := err.Error(); escapetest.HasControl(msg) || !strings.Contains(msg, tc.wantIn) {
				t.Fatalf("error %q: want no control character and %q in it", msg, tc.wantIn)
			}
		})
	}
}

// Pod and Deployment names come from the API (and from tenants): the
// tables print them escaped, so a name cannot drive the terminal or break
// the table into forged rows.
func TestTablesEscapeNames(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write func(w io.Writer) error
	}{
		{"contrast", func(w io.Writer) error {
			return Write(w, []Row{{Pod: "llm-" + evil, GPUs: 1, Values: map[catalog.Signal]float64{catalog.QueueSize: 1}}})
		}},
		{"top", func(w io.Writer) error {
			return WriteTop(w, []Summary{Summarize(Workload{Name: "llm-" + evil}, SLO{}, 0)}, SLO{}, Pricing{})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			if err := tc.write(&b); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
			if len(lines) != 2 {
				t.Fatalf("want a header and one row, got %d lines:\n%q", len(lines), b.String())
			}
			for _, l := range lines {
				if escapetest.HasControl(l) {
					t.Errorf("line holds a control character or invalid UTF-8: %q", l)
				}
			}
			if !strings.HasPrefix(lines[1], `llm-\x1b]0;owned\a\x1b[2J`) {
				t.Errorf("row %q: want the name escaped, not dropped", lines[1])
			}
		})
	}
}
