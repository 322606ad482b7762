// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	cliflag "k8s.io/component-base/cli/flag"
)

// TestMainExitCodes: Main hands run its arguments and writers, prints run's error
// after the command's name, and exits 0, 2 for a usage error, 1 for any
// other error; SIGINT and SIGTERM cancel run's context.
func TestMainExitCodes(t *testing.T) {
	// signalled sends sig to this process and returns nil once run's
	// context is cancelled (an error if it is not within 10s).
	signalled := func(sig syscall.Signal) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			if err := syscall.Kill(syscall.Getpid(), sig); err != nil {
				return err
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(10 * time.Second):
				return fmt.Errorf("%v did not cancel the context", sig)
			}
		}
	}
	cases := []struct {
		name       string
		run        func(ctx context.Context) error
		wantCode   int
		wantStderr string
	}{
		{name: "success", run: func(context.Context) error { return nil }, wantCode: 0},
		{name: "a failure", run: func(context.Context) error { return errors.New("cannot reach the endpoint") }, wantCode: 1, wantStderr: "tool: cannot reach the endpoint\n"},
		{name: "a usage error", run: func(context.Context) error { return Usage(errors.New("--rate must be positive")) }, wantCode: 2, wantStderr: "tool: --rate must be positive\n"},
		{name: "a wrapped usage error", run: func(context.Context) error { return fmt.Errorf("options: %w", Usage(errors.New("bad"))) }, wantCode: 2, wantStderr: "tool: options: bad\n"},
		{name: "SIGINT cancels the context", run: signalled(syscall.SIGINT), wantCode: 0},
		{name: "SIGTERM cancels the context", run: signalled(syscall.SIGTERM), wantCode: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			args := []string{"--rate=3", "x"}
			code := Main("tool", args, &stdout, &stderr, func(ctx context.Context, gotArgs []string, out, errOut io.Writer) error {
				if strings.Join(gotArgs, " ") != strings.Join(args, " ") {
					t.Errorf("run got args %q, want %q", gotArgs, args)
				}
				fmt.Fprint(out, "out")
				if ctx.Err() != nil {
					t.Errorf("run's context is done before it starts: %v", ctx.Err())
				}
				return tc.run(ctx)
			})
			if code != tc.wantCode || stderr.String() != tc.wantStderr {
				t.Errorf("Main = %d with stderr %q, want %d with %q", code, stderr.String(), tc.wantCode, tc.wantStderr)
			}
			if stdout.String() != "out" {
				t.Errorf("run's stdout is %q, want out", stdout.String())
			}
		})
	}
}

// TestParseSections: --help prints the usage and the sections on stdout;
// a bad flag, a bad value and a stray argument are usage errors; the
// values land in fss's flags.
func TestParseSections(t *testing.T) {
	const usage = "Usage: tool [flags]\n"
	cases := []struct {
		name     string
		args     []string
		wantDone bool
		wantErr  string
		wantRate float64
		wantOut  bool // --help's text on stdout
	}{
		{name: "defaults", wantRate: 1},
		{name: "a value", args: []string{"--rate=3"}, wantRate: 3},
		{name: "--help", args: []string{"--help"}, wantDone: true, wantRate: 1, wantOut: true},
		{name: "-h", args: []string{"-h"}, wantDone: true, wantRate: 1, wantOut: true},
		{name: "an unknown flag", args: []string{"--nope"}, wantErr: "unknown flag: --nope", wantRate: 1},
		{name: "a bad value", args: []string{"--rate=x"}, wantErr: `invalid argument "x"`, wantRate: 1},
		{name: "a stray argument", args: []string{"--rate=2", "extra"}, wantErr: "unexpected arguments: [extra]", wantRate: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var fss cliflag.NamedFlagSets
			rate := fss.FlagSet("load").Float64("rate", 1, "Requests per second.")
			var stdout, stderr strings.Builder
			done, err := ParseSections("tool", usage, fss, tc.args, &stdout, &stderr)
			if done != tc.wantDone || (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("%q: done=%v err=%v; want done=%v err %q", tc.args, done, err, tc.wantDone, tc.wantErr)
			}
			if err != nil && ExitCode(err) != 2 {
				t.Errorf("%q: %v is not a usage error", tc.args, err)
			}
			if *rate != tc.wantRate {
				t.Errorf("%q: rate %v, want %v", tc.args, *rate, tc.wantRate)
			}
			want := ""
			if tc.wantOut {
				want = usage + "\n" + Sections(fss)
			}
			if stdout.String() != want {
				t.Errorf("%q: stdout %q, want %q", tc.args, stdout.String(), want)
			}
		})
	}
}
