// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package clitest

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	cliflag "k8s.io/component-base/cli/flag"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/cli"
)

// twoSections is a command's flags in two sections, "server" and "load".
func twoSections() cliflag.NamedFlagSets {
	var fss cliflag.NamedFlagSets
	fss.FlagSet("server").String("url", "http://127.0.0.1:8000", "Base URL; see --rate.")
	fss.FlagSet("load").Float64("rate", 1, "Requests per second.")
	fss.FlagSet("load").Int("n", 1, "How many.")
	fss.FlagSet("load").Bool("hidden", false, "Not listed.")
	_ = fss.FlagSet("load").MarkHidden("hidden")
	return fss
}

// TestHelpDiff: what CheckSectionedHelp reports for each way --help can
// differ from the sections wanted.
func TestHelpDiff(t *testing.T) {
	fss := twoSections()
	listing := cli.Sections(fss)
	dup := twoSections()
	dup.FlagSet("server").Int("n", 1, "How many, again.")
	tests := []struct {
		name     string
		help     string
		fss      cliflag.NamedFlagSets
		sections []string
		says     string // part of the report; empty: none
	}{
		{"as wanted", "Usage: tool\n\n" + listing, fss, []string{"Server flags:", "Load flags:"}, ""},
		{"no usage text", listing, fss, []string{"Server flags:", "Load flags:"}, "no usage text"},
		{"unsectioned", "Usage: tool\n\n" + cli.FlagSet("tool", fss).FlagUsages(), fss, []string{"Server flags:", "Load flags:"}, "does not end with the flag sections"},
		{"sections in another order", "Usage: tool\n\n" + listing, fss, []string{"Load flags:", "Server flags:"}, "sections"},
		{"a flag in two sections", "Usage: tool\n\n" + cli.Sections(dup), dup, []string{"Server flags:", "Load flags:"}, "--n listed 2 times"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := helpDiff(tc.help, tc.fss, tc.sections)
			if (tc.says == "") != (got == "") || !strings.Contains(got, tc.says) {
				t.Errorf("helpDiff = %q, want %q", got, tc.says)
			}
		})
	}
}

// TestCheckSectionedHelp: a command that prints its usage and sections on
// --help and refuses an unknown flag with status 2 passes.
func TestCheckSectionedHelp(t *testing.T) {
	fss := twoSections()
	main := func(args []string, stdout, stderr io.Writer) int {
		fs := cli.FlagSet("tool", fss)
		fs.SetOutput(stderr)
		fs.Usage = func() { fmt.Fprint(stdout, "Usage: tool [flags]\n\n"+cli.Sections(fss)) }
		done, err := cli.Parse(fs, args)
		if err != nil && !done {
			fmt.Fprintln(stderr, "tool:", err)
		}
		return cli.ExitCode(err)
	}
	CheckSectionedHelp(t, main, fss, []string{"Server flags:", "Load flags:"})
}

// TestWriteSections: WriteSections rewrites a stale block, and only it, to
// the block DocsListSections wants.
func TestWriteSections(t *testing.T) {
	fss := twoSections()
	path := filepath.Join(t.TempDir(), "doc.md")
	const stale = "# tool\n\n<!-- tool flags -->\n```\n      --n int   how few\n```\n\nMore prose.\n"
	if err := os.WriteFile(path, []byte(stale), 0o600); err != nil {
		t.Fatal(err)
	}
	if problem := blockDiff(stale, "tool", cli.Sections(fss)); !strings.Contains(problem, "differs from --help") {
		t.Fatalf("blockDiff of the stale page = %q", problem)
	}
	if err := WriteSections(path, "tool", fss); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := "# tool\n\n<!-- tool flags -->\n```\n" + cli.Sections(fss) + "```\n\nMore prose.\n"; string(b) != want {
		t.Errorf("rewritten page:\n%s\nwant:\n%s", b, want)
	}
	DocsListSections(t, path, "tool", fss)
	if err := WriteSections(filepath.Join(t.TempDir(), "none.md"), "tool", fss); err == nil {
		t.Error("WriteSections of a missing page: no error")
	}
}
