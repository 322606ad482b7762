// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// The agent as a process with --logging-format=json, on the fake H100
// backend and without a kubelet: every line it writes to stderr, from the
// start to the exit after SIGTERM, is a JSON object, and the start-up lines
// carry their values as keys (the fake backend's warning, the address).
// Was wrong: the agent had klog's text output only, unlike the adapter.
func TestProcessLogsJSON(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0],
		"--logging-format=json",
		"--listen-address=127.0.0.1:0",
		"--interval=1s",
		"--testing-fake-nvml=h100-busy",
		"--pod-resources-socket="+filepath.Join(dir, "no-kubelet.sock"),
	)
	cmd.Env = append(os.Environ(), "GPU_AGENT_RUN_MAIN=1")
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
		}
	}()
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
	var addr string
	sawFake := false
	timeout := time.After(15 * time.Second)
	for addr == "" || !sawFake {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("agent exited early; stderr:\n%s", strings.Join(all, "\n"))
			}
			m := entry(l)
			switch m["msg"] {
			case "Serving":
				addr, _ = m["address"].(string)
				if m["backend"] != "testing-fake-nvml/h100-busy" {
					t.Errorf("Serving line's backend %v", m["backend"])
				}
			case "TESTING ONLY: serving a FAKE NVML backend; the GPU values on this page are not real":
				sawFake = true
			}
		case <-timeout:
			t.Fatalf("no Serving address and fake-backend warning within 15s; stderr:\n%s", strings.Join(all, "\n"))
		}
	}
	if code, body := get(t, "http://"+addr+"/healthz"); code != 200 {
		t.Errorf("/healthz %d %s", code, body)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	sawStopped := false
	for l := range lines {
		if m := entry(l); m["msg"] == "Stopped" {
			sawStopped = true
		}
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("no exit within 10s of SIGTERM")
	}
	if !sawStopped {
		t.Errorf("no Stopped line; stderr:\n%s", strings.Join(all, "\n"))
	}
}

// A bad logging flag is a usage error (exit 2), listed with the agent's
// other bad flags, before anything is started or logged.
func TestBadLoggingFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"unknown format", []string{"--logging-format=xml"}, []string{"Unsupported log format"}},
		{"vmodule with json", []string{"--logging-format=json", "--vmodule=run=2"}, []string{"Only supported for text log format"}},
		{"with another bad flag", []string{"--logging-format=xml", "--interval=0s"}, []string{"Unsupported log format", "--interval 0s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := Main(tt.args, &stdout, &stderr); code != 2 {
				t.Errorf("exit %d, want 2; stderr %q", code, stderr.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr %q lacks %q", stderr.String(), w)
				}
			}
		})
	}
}

// --help prints the flags in sections, each flag once, logging's last.
func TestHelpSectioned(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := Main([]string{"--help"}, &stdout, &stderr); code != 0 {
		t.Fatalf("--help exited %d: %s", code, stderr.String())
	}
	help := stdout.String()
	sections := []struct{ title, flag string }{
		{"Serving flags:", "--listen-address"},
		{"Collection flags:", "--interval"},
		{"Pod resources flags:", "--pod-resources-socket"},
		{"NVML flags:", "--nvml-library-path"},
		{"Logging flags:", "--logging-format"},
	}
	last := -1
	for i, s := range sections {
		at := strings.Index(help, "\n"+s.title+"\n")
		if at < 0 {
			t.Fatalf("--help has no section %q:\n%s", s.title, help)
		}
		if at < last {
			t.Errorf("section %q comes before %q", s.title, sections[i-1].title)
		}
		last = at
		end := len(help)
		if i+1 < len(sections) {
			if next := strings.Index(help, "\n"+sections[i+1].title+"\n"); next > at {
				end = next
			}
		}
		if !strings.Contains(help[at:end], "      "+s.flag+" ") {
			t.Errorf("section %q lacks %s", s.title, s.flag)
		}
	}
	fs := newFlagSet(NewOptions().Flags())
	n := 0
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		n++
		c := strings.Count(help, "\n      --"+f.Name+" ")
		if f.Shorthand != "" {
			c += strings.Count(help, "\n  -"+f.Shorthand+", --"+f.Name+" ")
		}
		if c != 1 {
			t.Errorf("--%s appears %d times in --help, want once", f.Name, c)
		}
	})
	if n < 13 {
		t.Errorf("only %d flags", n)
	}
}
