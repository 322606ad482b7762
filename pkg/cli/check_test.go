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

func TestParseAndCheck(t *testing.T) {
	cases := []struct {
		name     string
		args     []string
		wantDone bool
		wantErr  []string // parts of the message, in order; none: no error
		notErr   string   // a part the message must not have
	}{
		{name: "valid", args: []string{"--rate=3"}},
		{name: "help", args: []string{"--help", "--rate=-1"}, wantDone: true},
		{name: "unparsable flag alone", args: []string{"--nope", "--rate=-1"}, wantErr: []string{"unknown flag: --nope"}, notErr: "--rate"},
		{name: "a problem", args: []string{"--rate=-1"}, wantErr: []string{"invalid flags:\n", "--rate -1 must not be negative"}},
		{name: "every problem at once", args: []string{"--rate=-1", "extra"}, wantErr: []string{"invalid flags:\n", "--rate -1 must not be negative\n", "unexpected arguments: [extra]"}},
		{name: "stray arguments alone", args: []string{"a", "b"}, wantErr: []string{"invalid flags:\nunexpected arguments: [a b]"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
			fs.SetOutput(io.Discard)
			rate := fs.Int("rate", 1, "")
			check := func() []error {
				if *rate < 0 {
					return []error{fmt.Errorf("--rate %d must not be negative", *rate)}
				}
				return nil
			}
			done, err := ParseAndCheck(fs, tc.args, check)
			if done != tc.wantDone {
				t.Errorf("done = %v, want %v", done, tc.wantDone)
			}
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			var u *UsageError
			if !errors.As(err, &u) || ExitCode(err) != 2 {
				t.Errorf("%v is not a usage error", err)
			}
			msg, at := err.Error(), 0
			for _, w := range tc.wantErr {
				i := strings.Index(msg[at:], w)
				if i < 0 {
					t.Fatalf("error %q lacks %q after byte %d", msg, w, at)
				}
				at += i + len(w)
			}
			if tc.notErr != "" && strings.Contains(msg, tc.notErr) {
				t.Errorf("error %q has %q", msg, tc.notErr)
			}
		})
	}
}
