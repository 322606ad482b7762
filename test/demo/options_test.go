// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/cli"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/cli/clitest"
)

func TestFlags(t *testing.T) {
	clitest.Check(t, []clitest.Case{
		{Name: "defaults"},
		{Name: "every flag", Args: []string{"--duration=3m", "--out=/tmp/run1"}},
		{Name: "short", Args: []string{"--duration", "10s"}, WantErr: "--duration (DEMO_DURATION) must be at least 30s"},
		{Name: "no out", Args: []string{"--out="}, WantErr: "--out (DEMO_OUT) must not be empty"},
	}, func() (*pflag.FlagSet, func() error) {
		o, err := optionsFromEnv(func(k string) string { return map[string]string{envBin: "/bin"}[k] })
		if err != nil {
			t.Fatal(err)
		}
		return cli.FlagSet("demo", o.flags()), func() error { return o.validate() }
	})
}

// TestCommand: the flags override DEMO_DURATION and DEMO_OUT; --help
// succeeds and lists the flags by section; a bad flag, the old single-dash
// form, a stray argument or an invalid setting is a usage error (exit
// status 2) that lists every problem, before anything starts.
func TestCommand(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		env      map[string]string
		wantCode int
		wantErr  []string
	}{
		{"help", []string{"--help"}, nil, 0, nil},
		{"unknown flag", []string{"--replicas=3"}, map[string]string{envBin: "/b"}, 2, []string{"unknown flag: --replicas"}},
		{"single dash", []string{"-duration", "1m"}, map[string]string{envBin: "/b"}, 2, []string{"(flags take two dashes: --duration)"}},
		{"stray argument", []string{"1m"}, map[string]string{envBin: "/b"}, 2, []string{"unexpected arguments"}},
		{"every problem", []string{"--out="}, map[string]string{envDuration: "10s"}, 2,
			[]string{"IMA_E2E_BIN is not set: run `make demo`", "--duration (DEMO_DURATION) must be at least 30s", "--out (DEMO_OUT) must not be empty"}},
		{"bad environment", nil, map[string]string{envBin: "/b", envDuration: "4"}, 2, []string{`DEMO_DURATION="4" is not a duration`}},
		{"flag over a short environment", []string{"--duration=10s"}, map[string]string{envBin: "/b", envDuration: "4"}, 2,
			[]string{"--duration (DEMO_DURATION) must be at least 30s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := command(context.Background(), tc.args, func(k string) string { return tc.env[k] }, &out)
			if got := cli.ExitCode(err); got != tc.wantCode {
				t.Fatalf("exit code %d (%v), want %d", got, err, tc.wantCode)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %v, want one containing %q", err, want)
				}
			}
			if tc.name == "flag over a short environment" && strings.Contains(err.Error(), "is not a duration") {
				t.Errorf("error %v: DEMO_DURATION is not used when --duration is given", err)
			}
			if tc.wantCode != 0 {
				return
			}
			for _, want := range []string{"Usage: go run ./test/demo", "Demo flags:", "--duration duration", "--out string"} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("--help does not show %q:\n%s", want, out.String())
				}
			}
		})
	}
}
