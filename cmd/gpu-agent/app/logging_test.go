// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/cli"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/cli/clitest"
)

// The agent as a process with --logging-format=json, on the fake H100
// backend and without a kubelet: every line it writes to stderr, from the
// start to the exit after SIGTERM, is a JSON object, and the start-up lines
// carry their values as keys (the fake backend's warning, the address).
// Was wrong: the agent had klog's text output only, unlike the adapter.
func TestProcessLogsJSON(t *testing.T) {
	cmd := exec.Command(os.Args[0],
		"--logging-format=json",
		"--listen-address=127.0.0.1:0",
		"--interval=1s",
		"--testing-fake-nvml=h100-busy",
		"--pod-resources-socket="+filepath.Join(t.TempDir(), "no-kubelet.sock"),
	)
	cmd.Env = append(os.Environ(), "GPU_AGENT_RUN_MAIN=1")
	var addr string
	sawFake := false
	entries := clitest.CheckJSONLogs(t, cmd, func(m map[string]any) bool {
		switch m["msg"] {
		case "Serving":
			addr, _ = m["address"].(string)
			if m["backend"] != "testing-fake-nvml/h100-busy" {
				t.Errorf("Serving line's backend %v", m["backend"])
			}
		case "TESTING ONLY: serving a FAKE NVML backend; the GPU values on this page are not real":
			sawFake = true
		}
		return addr != "" && sawFake
	}, func() {
		if code, body := get(t, "http://"+addr+"/healthz"); code != 200 {
			t.Errorf("/healthz %d %s", code, body)
		}
	})
	sawStopped := false
	for _, m := range entries {
		sawStopped = sawStopped || m["msg"] == "Stopped"
	}
	if !sawStopped {
		t.Errorf("no Stopped line among %d JSON lines", len(entries))
	}
}

// A bad logging flag is a usage error (exit 2), listed with the agent's
// other bad flags, before anything is started or logged.
func TestBadLoggingFlags(t *testing.T) {
	clitest.CheckExits(t, Main, []clitest.ExitCase{
		{Name: "unknown format", Args: []string{"--logging-format=xml"}, Code: 2, Stderr: []string{"Unsupported log format"}},
		{Name: "vmodule with json", Args: []string{"--logging-format=json", "--vmodule=run=2"}, Code: 2, Stderr: []string{"Only supported for text log format"}},
		{Name: "with another bad flag", Args: []string{"--logging-format=xml", "--interval=0s"}, Code: 2, Stderr: []string{"Unsupported log format", "--interval 0s"}},
	})
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
	fs := cli.FlagSet("gpu-agent", NewOptions().Flags())
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

// TestHelp: --help prints what cli.ParseSections prints for the other
// commands (the usage, then each flag once in its section) and nothing on
// stderr, and exits 0; an unknown flag exits 2. Its text is Usage, which
// docs/gpu-agent.md quotes.
func TestHelp(t *testing.T) {
	fss := NewOptions().Flags()
	clitest.CheckSectionedHelp(t, Main, fss, []string{"Serving flags:", "Collection flags:", "Pod resources flags:", "NVML flags:", "Logging flags:"})
	var stdout, stderr bytes.Buffer
	Main([]string{"--help"}, &stdout, &stderr)
	if got, want := stdout.String(), Usage(fss); got != want {
		t.Errorf("--help printed:\n%s\nwant Usage:\n%s", got, want)
	}
}
