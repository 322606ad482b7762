// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package clitest

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// fakeLoggerEnv makes the test binary a fake command that logs as its
// value says, instead of running the tests.
const fakeLoggerEnv = "CLITEST_FAKE_LOGGER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(fakeLoggerEnv); mode != "" {
		os.Exit(fakeLogger(mode))
	}
	os.Exit(m.Run())
}

// fakeLogger logs a Serving line, waits for SIGTERM and logs Stopped;
// mode "early" exits 1 before it serves, "text" writes a text line on the
// way out, "fail" exits 3 after SIGTERM.
func fakeLogger(mode string) int {
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	fmt.Fprintln(os.Stderr, `{"msg":"Starting"}`)
	if mode == "early" {
		return 1
	}
	fmt.Fprintln(os.Stderr, `{"msg":"Serving","address":"127.0.0.1:1"}`)
	<-term
	if mode == "text" {
		fmt.Fprintln(os.Stderr, "I1202 22:00:00.000000 1 main.go:1] Stopped")
		return 0
	}
	fmt.Fprintln(os.Stderr, `{"msg":"Stopped"}`)
	if mode == "fail" {
		return 3
	}
	return 0
}

// recorder is a testing.TB that records failures; Fatalf ends the
// goroutine, as testing.T's does.
type recorder struct {
	testing.TB
	mu       sync.Mutex
	failures []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatalf(format string, args ...any) { r.Errorf(format, args...); runtime.Goexit() }
func (r *recorder) Fatal(args ...any)                 { r.Errorf("%s", fmt.Sprint(args...)); runtime.Goexit() }

// TestCheckJSONLogs: a command whose every line is JSON and that exits 0
// after SIGTERM passes, with whileUp called once it is ready and every
// entry returned; a text line, an early exit and a failed exit fail.
func TestCheckJSONLogs(t *testing.T) {
	cases := []struct {
		mode        string
		wantFailure string // a part of the one failure wanted; empty for none
		wantUp      bool
	}{
		{mode: "json", wantUp: true},
		{mode: "text", wantFailure: "stderr line is not JSON", wantUp: true},
		{mode: "early", wantFailure: "exited early"},
		{mode: "fail", wantFailure: "exit after SIGTERM: exit status 3", wantUp: true},
	}
	for _, tc := range cases {
		t.Run(tc.mode, func(t *testing.T) {
			cmd := exec.Command(os.Args[0])
			cmd.Env = append(os.Environ(), fakeLoggerEnv+"="+tc.mode)
			r := &recorder{TB: t}
			var addr string
			up := false
			var entries []map[string]any
			done := make(chan struct{})
			go func() {
				defer close(done)
				entries = CheckJSONLogs(r, cmd, func(m map[string]any) bool {
					addr, _ = m["address"].(string)
					return m["msg"] == "Serving"
				}, func() { up = true })
			}()
			<-done
			if up != tc.wantUp || (up && addr != "127.0.0.1:1") {
				t.Errorf("whileUp called: %v with address %q; want %v", up, addr, tc.wantUp)
			}
			switch {
			case tc.wantFailure == "" && len(r.failures) != 0:
				t.Errorf("failures %q, want none", r.failures)
			case tc.wantFailure != "" && (len(r.failures) != 1 || !strings.Contains(r.failures[0], tc.wantFailure)):
				t.Errorf("failures %q, want one containing %q", r.failures, tc.wantFailure)
			}
			if tc.mode == "json" {
				var msgs []string
				for _, m := range entries {
					msgs = append(msgs, fmt.Sprint(m["msg"]))
				}
				if got := strings.Join(msgs, ","); got != "Starting,Serving,Stopped" {
					t.Errorf("entries %s, want Starting,Serving,Stopped", got)
				}
			}
		})
	}
}
