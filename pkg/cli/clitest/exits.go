// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package clitest

import (
	"fmt"
	"strings"
	"testing"
)

// ExitCase is a command line, the exit status a command's Main must return
// for it, and the parts its stderr must hold.
type ExitCase struct {
	Name   string
	Args   []string
	Code   int
	Stderr []string
}

// CheckExits runs main with each case's Args in a subtest and fails unless
// it returns the case's Code with every part of Stderr on stderr.
func CheckExits(t *testing.T, main Main, cases []ExitCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			if problem := exitDiff(main, tc); problem != "" {
				t.Errorf("%q: %s", tc.Args, problem)
			}
		})
	}
}

// exitDiff says how main's exit status and stderr for tc.Args differ from
// tc's; empty when they do not.
func exitDiff(main Main, tc ExitCase) string {
	var out, errOut strings.Builder
	code := main(tc.Args, &out, &errOut)
	var problems []string
	if code != tc.Code {
		problems = append(problems, fmt.Sprintf("exit %d, want %d", code, tc.Code))
	}
	for _, w := range tc.Stderr {
		if !strings.Contains(errOut.String(), w) {
			problems = append(problems, fmt.Sprintf("stderr lacks %q", w))
		}
	}
	if len(problems) == 0 {
		return ""
	}
	return fmt.Sprintf("%s; stderr %q", strings.Join(problems, ", "), errOut.String())
}
