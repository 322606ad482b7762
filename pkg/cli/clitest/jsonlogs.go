// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package clitest

import (
	"bufio"
	"encoding/json"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// JSONLogsTimeout bounds each wait of CheckJSONLogs: for the entry ready
// accepts, and for the exit after SIGTERM.
const JSONLogsTimeout = 15 * time.Second

// CheckJSONLogs checks a command that logs JSON (--logging-format=json):
// it starts cmd (typically the test binary run as the command, with
// --logging-format=json) and reads its stderr, every line of which, from
// the start to the exit, must be a JSON object. It passes each entry to
// ready until ready returns true (fatal if the process exits first or
// JSONLogsTimeout passes), calls whileUp with the process still running,
// then sends SIGTERM and fails unless the process exits with status 0
// within JSONLogsTimeout. It returns every entry, for checks of the
// lines logged on the way out. The process is killed if the test stops
// early.
func CheckJSONLogs(t testing.TB, cmd *exec.Cmd, ready func(entry map[string]any) bool, whileUp func()) []map[string]any {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1000)
	exited := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default: // the test stopped reading
			}
		}
		close(lines)
		exited <- cmd.Wait()
	}()
	waited := false
	defer func() {
		if !waited {
			_ = cmd.Process.Kill()
			t.Logf("killed %s: %v", cmd.Path, <-exited)
		}
	}()

	var all []string
	var entries []map[string]any
	// entry parses a log line; the test fails on one that is not JSON.
	entry := func(l string) map[string]any {
		all = append(all, l)
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Errorf("stderr line is not JSON (%v): %s", err, l)
			return nil
		}
		entries = append(entries, m)
		return m
	}
	timeout := time.After(JSONLogsTimeout)
	for up := false; !up; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("%s exited early; stderr:\n%s", cmd.Path, strings.Join(all, "\n"))
			}
			if m := entry(l); m != nil {
				up = ready(m)
			}
		case <-timeout:
			t.Fatalf("no ready line within %s; stderr:\n%s", JSONLogsTimeout, strings.Join(all, "\n"))
		}
	}
	whileUp()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	timeout = time.After(JSONLogsTimeout)
	for open := true; open; {
		select {
		case l, ok := <-lines:
			if open = ok; ok {
				entry(l)
			}
		case <-timeout:
			t.Fatalf("no exit within %s of SIGTERM; stderr:\n%s", JSONLogsTimeout, strings.Join(all, "\n"))
		}
	}
	select {
	case err := <-exited:
		waited = true
		if err != nil {
			t.Errorf("exit after SIGTERM: %v; stderr:\n%s", err, strings.Join(all, "\n"))
		}
	case <-timeout:
		t.Fatalf("no exit within %s of SIGTERM; stderr:\n%s", JSONLogsTimeout, strings.Join(all, "\n"))
	}
	return entries
}
