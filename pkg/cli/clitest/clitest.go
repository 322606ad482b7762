// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Package clitest holds the checks that the commands' option tests share:
// a table of command lines with the error each should give, and the flag
// block a command's docs page must copy from --help.
package clitest

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// Case is one command line and the error it must give: WantErr is a part
// of the message, empty when the command line is valid.
type Case struct {
	Name    string
	Args    []string
	WantErr string
}

// Check runs each case in a subtest: setup makes fresh options and returns
// their flag set and the step that turns them into a configuration (or an
// error); Args are parsed into the flag set, which must succeed, and then
// the step's error is compared with WantErr.
func Check(t *testing.T, cases []Case, setup func() (*pflag.FlagSet, func() error)) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			fs, step := setup()
			if err := fs.Parse(tc.Args); err != nil {
				t.Fatalf("parse %q: %v", tc.Args, err)
			}
			if problem := mismatch(step(), tc.WantErr); problem != "" {
				t.Errorf("%q: %s", tc.Args, problem)
			}
		})
	}
}

// mismatch says how err differs from the error wanted (a part of its
// message, or none when want is empty); empty when it does not.
func mismatch(err error, want string) string {
	switch {
	case want == "" && err != nil:
		return fmt.Sprintf("unexpected error: %v", err)
	case want != "" && err == nil:
		return fmt.Sprintf("no error, want one containing %q", want)
	case want != "" && !strings.Contains(err.Error(), want):
		return fmt.Sprintf("error %v, want one containing %q", err, want)
	}
	return ""
}

// DocsListFlags fails the test unless the docs page at path holds, after
// the line "<!-- name flags -->" and a line "```", exactly fs's --help
// flag listing, up to the closing "```".
func DocsListFlags(t *testing.T, path, name string, fs *pflag.FlagSet) {
	t.Helper()
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading docs: %v", err)
	}
	if problem := blockDiff(string(doc), name, fs.FlagUsages()); problem != "" {
		t.Errorf("%s: %s", path, problem)
	}
}

// blockDiff says how doc's flag block for name differs from usages; empty
// when it is the same.
func blockDiff(doc, name, usages string) string {
	_, after, ok := strings.Cut(doc, "<!-- "+name+" flags -->\n```\n")
	if !ok {
		return fmt.Sprintf("no %s flags block (a line <!-- %s flags --> and a line ```)", name, name)
	}
	block, _, _ := strings.Cut(after, "```")
	if block != usages {
		return fmt.Sprintf("the %s flag block differs from --help; want:\n%s\ngot:\n%s", name, usages, block)
	}
	return ""
}
