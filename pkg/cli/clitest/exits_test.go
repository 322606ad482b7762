// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package clitest

import (
	"fmt"
	"io"
	"strings"
	"testing"
)

// TestExitDiff: what CheckExits reports for a wrong exit status and for a
// stderr that lacks a part wanted.
func TestExitDiff(t *testing.T) {
	// main exits with the status its first argument names and writes the
	// rest on stderr.
	main := func(args []string, _, stderr io.Writer) int {
		var code int
		_, _ = fmt.Sscan(args[0], &code)
		fmt.Fprint(stderr, strings.Join(args[1:], " "))
		return code
	}
	tests := []struct {
		name string
		tc   ExitCase
		want string // a part of the report; empty for none
	}{
		{"as wanted", ExitCase{Args: []string{"2", "bad", "flags"}, Code: 2, Stderr: []string{"bad", "flags"}}, ""},
		{"nothing wanted on stderr", ExitCase{Args: []string{"0"}, Code: 0}, ""},
		{"another status", ExitCase{Args: []string{"1", "bad"}, Code: 2, Stderr: []string{"bad"}}, `exit 1, want 2; stderr "bad"`},
		{"a part missing", ExitCase{Args: []string{"2", "bad"}, Code: 2, Stderr: []string{"bad", "flags"}}, `stderr lacks "flags"; stderr "bad"`},
		{"both", ExitCase{Args: []string{"0"}, Code: 2, Stderr: []string{"bad"}}, `exit 0, want 2, stderr lacks "bad"`},
	}
	for _, tt := range tests {
		got := exitDiff(main, tt.tc)
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("%s: exitDiff = %q, want %q", tt.name, got, tt.want)
		}
	}
}
