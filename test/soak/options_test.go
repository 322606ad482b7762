// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
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
		{Name: "make soak-short", Args: []string{"--duration", "2m30s"}},
		{Name: "every flag", Args: []string{"--duration=2h", "--seed=7", "--keep"}},
		{Name: "short", Args: []string{"--duration=59s"}, WantErr: "--duration must be at least 1m0s, got 59s"},
	}, func() (*pflag.FlagSet, func() error) {
		o := newOptions("/bin")
		return cli.FlagSet("soak", o.flags()), o.validate
	})
}

// TestOptionsListEveryProblem: a usage error names the missing
// control-plane directory and a bad --duration at once.
func TestOptionsListEveryProblem(t *testing.T) {
	o := newOptions("")
	o.duration = time.Second
	err := o.validate()
	for _, want := range []string{"IMA_E2E_BIN is not set: run `make soak`", "--duration must be at least"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("validate = %v, want it to list %q", err, want)
		}
	}
}

// TestSeed: --seed 0 (the default) takes the start time, any other seed
// is kept, so that a soak can be run again with the seed it printed.
func TestSeed(t *testing.T) {
	now := time.Unix(100, 5)
	for _, tc := range []struct {
		args []string
		want uint64
	}{{nil, uint64(now.UnixNano())}, {[]string{"--seed=0"}, uint64(now.UnixNano())}, {[]string{"--seed=42"}, 42}} {
		o := newOptions("/bin")
		if err := cli.FlagSet("soak", o.flags()).Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		o.complete(now)
		if o.seed != tc.want {
			t.Errorf("%q: seed %d, want %d", tc.args, o.seed, tc.want)
		}
	}
}

// TestCommandExitCodes: --help succeeds and lists the flags by section; a
// bad flag, the old single-dash form, a stray argument or an invalid value
// is a usage error (exit status 2), before anything starts.
func TestCommandExitCodes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		binDir   string
		wantCode int
		wantErr  string
	}{
		{"help", []string{"--help"}, "", 0, ""},
		{"unknown flag", []string{"--faults=none"}, "/bin", 2, "unknown flag: --faults"},
		{"single dash", []string{"-duration", "2m30s"}, "/bin", 2, "(flags take two dashes: --duration)"},
		{"stray argument", []string{"2m"}, "/bin", 2, "unexpected arguments"},
		{"stray argument and a short soak", []string{"--duration=30s", "2m"}, "/bin", 2, "--duration must be at least 1m0s, got 30s\nunexpected arguments: [2m]"},
		{"bad value", []string{"--duration=long"}, "/bin", 2, "invalid argument"},
		{"short", []string{"--duration=30s"}, "/bin", 2, "--duration must be at least"},
		{"no control plane", nil, "", 2, "IMA_E2E_BIN is not set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := command(context.Background(), tc.args, tc.binDir, time.Now(), &out)
			if got := cli.ExitCode(err); got != tc.wantCode {
				t.Fatalf("exit code %d (%v), want %d", got, err, tc.wantCode)
			}
			if tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %v, want one containing %q", err, tc.wantErr)
			}
			if tc.wantCode != 0 {
				return
			}
			for _, want := range []string{"Usage: go run ./test/soak", "Soak flags:", "Output flags:", "--duration duration", "--seed uint", "--keep"} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("--help does not show %q:\n%s", want, out.String())
				}
			}
		})
	}
}
