// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestParse(t *testing.T) {
	cases := []struct {
		args     []string
		wantDone bool
		wantErr  string
	}{
		{args: []string{"--rate=3"}},
		{args: []string{"--help"}, wantDone: true},
		{args: []string{"--nope"}, wantErr: "unknown flag: --nope"},
		{args: []string{"--rate=3", "extra"}, wantErr: "unexpected arguments: [extra]"},
	}
	for _, tc := range cases {
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.Int("rate", 1, "")
		done, err := Parse(fs, tc.args)
		if done != tc.wantDone || (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%v: done=%v err=%v; want done=%v err %q", tc.args, done, err, tc.wantDone, tc.wantErr)
		}
	}
}

func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want int
	}{
		{"no error", nil, 0},
		{"a failure", errors.New("cannot reach the endpoint"), 1},
		{"a usage error", Usage(errors.New("--rate must be positive")), 2},
		{"a wrapped usage error", fmt.Errorf("options: %w", Usage(errors.New("bad"))), 2},
		{"Usage(nil) stays nil", Usage(nil), 0},
	} {
		if got := ExitCode(tc.err); got != tc.want {
			t.Errorf("%s: ExitCode = %d, want %d", tc.name, got, tc.want)
		}
	}
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if _, err := Parse(fs, []string{"--nope"}); ExitCode(err) != 2 {
		t.Errorf("Parse's error %v is not a usage error", err)
	}
}
