// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package clitest

import (
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	cliflag "k8s.io/component-base/cli/flag"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/cli"
)

// DocsListSections is DocsListFlags for a command whose --help lists its
// flags in named sections: the docs page's block after "<!-- name flags -->"
// must be exactly cli.Sections(fss).
func DocsListSections(t *testing.T, path, name string, fss cliflag.NamedFlagSets) {
	t.Helper()
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading docs: %v", err)
	}
	if problem := blockDiff(string(doc), name, cli.Sections(fss)); problem != "" {
		t.Errorf("%s: %s", path, problem)
	}
}

// WriteSections rewrites the block DocsListSections checks in the docs page
// at path to cli.Sections(fss), leaving the rest of the page as it is: the
// -update of a command's docs test.
func WriteSections(path, name string, fss cliflag.NamedFlagSets) error {
	doc, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading docs: %w", err)
	}
	mark := "<!-- " + name + " flags -->\n```\n"
	before, after, ok := strings.Cut(string(doc), mark)
	if !ok {
		return fmt.Errorf("%s: no %s flags block (a line <!-- %s flags --> and a line ```)", path, name, name)
	}
	_, rest, ok := strings.Cut(after, "```")
	if !ok {
		return fmt.Errorf("%s: the %s flags block does not end", path, name)
	}
	page := before + mark + cli.Sections(fss) + "```" + rest
	if err := os.WriteFile(path, []byte(page), 0o644); err != nil {
		return fmt.Errorf("writing docs: %w", err)
	}
	return nil
}

// Main is a command's entry point: it runs with args and returns the
// process exit code.
type Main func(args []string, stdout, stderr io.Writer) int

// CheckSectionedHelp fails the test unless main, run with --help, exits 0
// and prints on stdout (nothing on stderr) a usage text and then exactly
// cli.Sections(fss), with the section headers sections ("Server flags:",
// ...) in that order and every flag of fss that is not hidden on one line,
// once; and unless an unknown flag exits 2 with the error on stderr and
// nothing on stdout.
func CheckSectionedHelp(t *testing.T, main Main, fss cliflag.NamedFlagSets, sections []string) {
	t.Helper()
	var out, errOut strings.Builder
	if code := main([]string{"--help"}, &out, &errOut); code != 0 || errOut.Len() > 0 {
		t.Fatalf("--help: exit %d, stderr %q; want 0 and nothing", code, errOut.String())
	}
	if problem := helpDiff(out.String(), fss, sections); problem != "" {
		t.Errorf("--help: %s", problem)
	}
	out.Reset()
	errOut.Reset()
	if code := main([]string{"--no-such-flag"}, &out, &errOut); code != 2 || out.Len() > 0 ||
		!strings.Contains(errOut.String(), "unknown flag: --no-such-flag") {
		t.Errorf("--no-such-flag: exit %d, stdout %q, stderr %q; want 2, nothing and the error", code, out.String(), errOut.String())
	}
}

// helpDiff says how help differs from a usage text followed by fss's
// sections, titled sections in order, each flag listed once; empty when it
// does not.
func helpDiff(help string, fss cliflag.NamedFlagSets, sections []string) string {
	listing := cli.Sections(fss)
	usage, ok := strings.CutSuffix(help, listing)
	switch {
	case !ok:
		return fmt.Sprintf("does not end with the flag sections:\n%s\ngot:\n%s", listing, help)
	case strings.TrimSpace(usage) == "":
		return "no usage text above the flags"
	}
	var titles []string
	for _, line := range strings.Split(listing, "\n") {
		if strings.HasSuffix(line, " flags:") && !strings.HasPrefix(line, " ") {
			titles = append(titles, line)
		}
	}
	if strings.Join(titles, "|") != strings.Join(sections, "|") {
		return fmt.Sprintf("sections %q, want %q", titles, sections)
	}
	var problems []string
	cli.FlagSet("", fss).VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return // --help does not list it
		}
		line := regexp.MustCompile(`(?m)^ +(-[a-z], )?--` + regexp.QuoteMeta(f.Name) + ` `)
		if n := len(line.FindAllString(listing, -1)); n != 1 {
			problems = append(problems, fmt.Sprintf("--%s listed %d times", f.Name, n))
		}
	})
	return strings.Join(problems, "; ")
}
