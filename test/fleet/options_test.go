// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/cli"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/cli/clitest"
)

func TestOptions(t *testing.T) {
	clitest.Check(t, []clitest.Case{
		{Name: "defaults"},
		{Name: "the README's fleet", Args: []string{"--pods", "10000", "--interval", "5s"}},
		{Name: "every flag", Args: []string{"--pods=100", "--procs=2", "--interval=2s", "--adapter-args=--answer-cache-ttl=0 --v=2",
			"--adapter-env=GOGC=50", "--memory-limit=200Mi", "--enforce-memory-limit", "--trials=3", "--quiet=5s",
			"--clients=1,10", "--questions=list,direct", "--encodings=protobuf", "--load-duration=2s", "--pace=100ms",
			"--profile=/tmp/p", "--keep", "--scrape-scheme=https"}},
		{Name: "too many pods", Args: []string{"--pods", "62501"}, WantErr: "--pods must be in 1..62500, got 62501"},
		{Name: "no pods", Args: []string{"--pods", "0"}, WantErr: "--pods must be in 1..62500"},
		{Name: "fast interval", Args: []string{"--interval", "50ms"}, WantErr: "--interval must be at least 100ms"},
		{Name: "no trials", Args: []string{"--trials", "0"}, WantErr: "--trials must be at least 1"},
		{Name: "negative procs", Args: []string{"--procs", "-1"}, WantErr: "--procs must not be negative"},
		{Name: "short quiet", Args: []string{"--quiet", "500ms"}, WantErr: "--quiet and --load-duration must be at least 1s"},
		{Name: "pace past the run", Args: []string{"--pace", "10s"}, WantErr: "--pace must be 0 (back to back) or shorter than --load-duration (10s)"},
		{Name: "bad clients", Args: []string{"--clients", "1,x"}, WantErr: `--clients: "x" is not a positive number`},
		{Name: "bad question", Args: []string{"--questions", "list,max"}, WantErr: `--questions: "max" is not one of`},
		{Name: "bad encoding", Args: []string{"--encodings", "yaml"}, WantErr: `--encodings: "yaml" is not one of`},
		{Name: "bad adapter env", Args: []string{"--adapter-env", "GOGC"}, WantErr: `--adapter-env: "GOGC" is not KEY=VALUE`},
		{Name: "bad memory limit", Args: []string{"--memory-limit", "lots"}, WantErr: `--memory-limit "lots" is not a positive quantity`},
		{Name: "bad scrape scheme", Args: []string{"--scrape-scheme", "tls"}, WantErr: `--scrape-scheme must be http or https, got "tls"`},
		{Name: "cgroup without a limit", Args: []string{"--enforce-memory-limit"}, WantErr: "--enforce-memory-limit needs --memory-limit"},
	}, func() (*pflag.FlagSet, func() error) {
		o := newOptions("/bin")
		return o.flagSet(o.flags()), o.validate
	})
}

// TestOptionsListEveryProblem: a usage error names every bad flag at once,
// the missing control-plane directory among them.
func TestOptionsListEveryProblem(t *testing.T) {
	o := newOptions("")
	if err := o.flagSet(o.flags()).Parse([]string{"--pods=0", "--clients=0", "--encodings=xml", "--trials=0"}); err != nil {
		t.Fatal(err)
	}
	err := o.validate()
	if err == nil {
		t.Fatal("validate accepted four bad flags and no IMA_E2E_BIN")
	}
	for _, want := range []string{"IMA_E2E_BIN is not set: run `make fleet`", "--pods must be", `--clients: "0"`, `--encodings: "xml"`, "--trials must be"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("validate = %v, want it to list %q", err, want)
		}
	}
}

// TestOptionsSettings: validate turns the flags into the run's settings.
func TestOptionsSettings(t *testing.T) {
	o := newOptions("/bin")
	args := []string{"--pods=6000", "--clients=5, 20", "--questions=floor,list", "--adapter-args=--v=2 --answer-cache-ttl=0", "--adapter-env=GOGC=50", "--memory-limit=1Gi"}
	if err := o.flagSet(o.flags()).Parse(args); err != nil {
		t.Fatal(err)
	}
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	if o.procs != 3 { // one per podsPerProc pods, rounded up
		t.Errorf("procs = %d, want 3", o.procs)
	}
	if !slices.Equal(o.clients, []int{5, 20}) || !slices.Equal(o.questions, []question{questionFloor, questionList}) ||
		!slices.Equal(o.encodings, []encoding{encodingJSON, encodingProtobuf}) {
		t.Errorf("clients %v, questions %v, encodings %v", o.clients, o.questions, o.encodings)
	}
	if !slices.Equal(o.adapterArgs, []string{"--v=2", "--answer-cache-ttl=0"}) {
		t.Errorf("adapter args %q", o.adapterArgs)
	}
	if env := o.adapterEnv(); !slices.Equal(env, []string{"GOGC=50", "MEMORY_LIMIT_BYTES=1073741824"}) {
		t.Errorf("adapter env %q", env)
	}
	if o.interval != time.Second || o.isChild() {
		t.Errorf("interval %s, child %v: want the defaults", o.interval, o.isChild())
	}
}

// TestCommandExitCodes: --help succeeds and lists the flags by section
// (the child's internal flags hidden); a bad flag, the old single-dash
// form, a stray argument or a bad value is a usage error (exit status 2),
// before anything starts.
func TestCommandExitCodes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		binDir   string
		wantCode int
		wantErr  string
	}{
		{"help", []string{"--help"}, "", 0, ""},
		{"unknown flag", []string{"--nodes=3"}, "/bin", 2, "unknown flag: --nodes"},
		{"single dash", []string{"-pods", "10"}, "/bin", 2, "(flags take two dashes: --pods)"},
		{"stray argument", []string{"10"}, "/bin", 2, "unexpected arguments"},
		{"bad value", []string{"--pods=x"}, "/bin", 2, "invalid argument"},
		{"invalid", []string{"--pods=0"}, "/bin", 2, "--pods must be"},
		{"no control plane", nil, "", 2, "IMA_E2E_BIN is not set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := command(context.Background(), tc.args, tc.binDir, &out)
			if got := cli.ExitCode(err); got != tc.wantCode {
				t.Fatalf("exit code %d (%v), want %d", got, err, tc.wantCode)
			}
			if tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %v, want one containing %q", err, tc.wantErr)
			}
			if tc.wantCode != 0 {
				return
			}
			help := out.String()
			for _, want := range []string{"Usage: go run ./test/fleet", "Fleet flags:", "Adapter flags:", "Freshness and CPU flags:",
				"Answer latency flags:", "Output flags:", "--pods int", "--enforce-memory-limit"} {
				if !strings.Contains(help, want) {
					t.Errorf("--help does not show %q:\n%s", want, help)
				}
			}
			if strings.Contains(help, "serve-") {
				t.Errorf("--help shows the child's internal flags:\n%s", help)
			}
		})
	}
}

// TestDocFleetFlags: every FLEET_FLAGS="..." that README.md and docs/ show
// (make fleet's flags, a line break inside the quotes allowed) parses and
// validates, so that a command line copied from the docs runs.
func TestDocFleetFlags(t *testing.T) {
	root, err := clitest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join(root, "README.md"), filepath.Join(root, "CONTRIBUTING.md"))
	flagsRE := regexp.MustCompile(`FLEET_FLAGS="([^"]*)"`)
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.ReplaceAll(string(b), "\n", " ")
		for _, m := range flagsRE.FindAllStringSubmatch(text, -1) {
			n++
			o := newOptions("/bin")
			if err := o.flagSet(o.flags()).Parse(strings.Fields(m[1])); err != nil {
				t.Errorf("%s: FLEET_FLAGS=%q: %v", filepath.Base(f), m[1], err)
				continue
			}
			if err := o.validate(); err != nil {
				t.Errorf("%s: FLEET_FLAGS=%q: %v", filepath.Base(f), m[1], err)
			}
		}
	}
	if n == 0 {
		t.Fatal("no FLEET_FLAGS in README.md, CONTRIBUTING.md or docs/*.md")
	}
}
