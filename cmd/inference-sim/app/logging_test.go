// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runMainEnv makes the test binary run Main with its arguments instead of
// the tests, so that a test can start the simulator as a process.
const runMainEnv = "INFERENCE_SIM_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// TestProcessLogsJSON: the simulator as a process with
// --logging-format=json writes only JSON objects to stderr, from the start
// to its exit after SIGTERM, its Serving line carrying the address as a key.
// Was wrong: it had klog's text output only, unlike the adapter and the
// gpu-agent, though it runs as a pod.
func TestProcessLogsJSON(t *testing.T) {
	cmd := exec.Command(os.Args[0], "--logging-format=json", "--listen=127.0.0.1:0", "--model=m")
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	lines := make(chan string, 1000)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default: // the test stopped reading
			}
		}
		close(lines)
	}()
	var all []string
	// entry parses a log line; the test fails on one that is not JSON.
	entry := func(l string) map[string]any {
		all = append(all, l)
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Errorf("stderr line is not JSON (%v): %s", err, l)
		}
		return m
	}
	addr := ""
	timeout := time.After(15 * time.Second)
	for addr == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the simulator exited early; stderr:\n%s", strings.Join(all, "\n"))
			}
			if m := entry(l); m["msg"] == "Serving" {
				addr, _ = m["address"].(string)
			}
		case <-timeout:
			t.Fatalf("no Serving line with an address within 15s; stderr:\n%s", strings.Join(all, "\n"))
		}
	}
	resp, err := http.Get("http://" + addr + "/health")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/health answered %d, want 200", resp.StatusCode)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for l := range lines {
		entry(l)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v; stderr:\n%s", err, strings.Join(all, "\n"))
		}
	case <-time.After(15 * time.Second):
		t.Error("no exit within 15s of SIGTERM")
	}
}

// TestBadLoggingFlags: a bad logging flag is a usage error (exit status 2),
// listed with the simulator's other bad flags.
func TestBadLoggingFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"unknown format", []string{"--logging-format=xml"}, []string{"Unsupported log format"}},
		{"vmodule with json", []string{"--logging-format=json", "--vmodule=server=2"}, []string{"Only supported for text log format"}},
		{"with another bad flag", []string{"--logging-format=xml", "--max-num-seqs=0"}, []string{"Unsupported log format", "max-num-seqs must be at least 1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut strings.Builder
			if code := Main(append(tc.args, "--listen=127.0.0.1:1"), &out, &errOut); code != 2 {
				t.Errorf("exit %d, want 2; stderr %q", code, errOut.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut.String(), w) {
					t.Errorf("stderr %q lacks %q", errOut.String(), w)
				}
			}
		})
	}
}
