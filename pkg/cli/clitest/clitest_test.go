// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package clitest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestCheck: every case gets fresh options, and a table whose cases all
// hold passes.
func TestCheck(t *testing.T) {
	var seen []string
	setup := func() (*pflag.FlagSet, func() error) {
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		n := fs.Int("n", 1, "how many")
		return fs, func() error {
			seen = append(seen, fs.Lookup("n").Value.String())
			if *n < 1 {
				return errors.New("n must be at least 1")
			}
			return nil
		}
	}
	Check(t, []Case{
		{Name: "default", Args: nil},
		{Name: "set", Args: []string{"--n", "3"}},
		{Name: "bad", Args: []string{"--n", "0"}, WantErr: "at least 1"},
	}, setup)
	if strings.Join(seen, ",") != "1,3,0" {
		t.Errorf("the steps saw n = %v, want 1, 3, 0 (fresh options per case)", seen)
	}
}

// TestMismatch: what Check reports for each way an error can differ.
func TestMismatch(t *testing.T) {
	boom := errors.New("boom: n must be at least 1")
	tests := []struct {
		name string
		err  error
		want string
		says string // part of the report; empty: none
	}{
		{"valid", nil, "", ""},
		{"the error wanted", boom, "at least 1", ""},
		{"unexpected error", boom, "", "unexpected error: boom"},
		{"no error", nil, "at least 1", `no error, want one containing "at least 1"`},
		{"another error", boom, "at most 2", `error boom: n must be at least 1, want one containing "at most 2"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := mismatch(tc.err, tc.want)
			if (tc.says == "") != (got == "") || !strings.Contains(got, tc.says) {
				t.Errorf("mismatch = %q, want %q", got, tc.says)
			}
		})
	}
}

func TestBlockDiff(t *testing.T) {
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	fs.Int("n", 1, "how many")
	usages := fs.FlagUsages()
	tests := []struct {
		name, doc, says string
	}{
		{"same", "# tool\n\n<!-- tool flags -->\n```\n" + usages + "```\n", ""},
		{"stale", "<!-- tool flags -->\n```\n      --n int   how few\n```\n", "differs from --help"},
		{"no block", "# tool\n", "no tool flags block"},
		{"another tool's block", "<!-- other flags -->\n```\n" + usages + "```\n", "no tool flags block"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := blockDiff(tc.doc, "tool", usages)
			if (tc.says == "") != (got == "") || !strings.Contains(got, tc.says) {
				t.Errorf("blockDiff = %q, want %q", got, tc.says)
			}
		})
	}
	path := filepath.Join(t.TempDir(), "doc.md")
	if err := os.WriteFile(path, []byte(tests[0].doc), 0o600); err != nil {
		t.Fatal(err)
	}
	DocsListFlags(t, path, "tool", fs)
}
