// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/cli/clitest"
)

// TestDocsIndexLinksEveryPage: docs/README.md, reachable from README.md,
// links every page in docs/.
func TestDocsIndexLinksEveryPage(t *testing.T) {
	root := repoRoot(t)
	if !slices.Contains(linkTargets(t, root, "README.md"), "docs/README.md") {
		t.Errorf("README.md does not link docs/README.md, the index of the docs")
	}
	indexed := linkTargets(t, root, "docs/README.md")
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) < 2 {
		t.Fatalf("found %d pages in docs/", len(pages))
	}
	for _, p := range pages {
		rel, _ := filepath.Rel(root, p)
		if rel != "docs/README.md" && !slices.Contains(indexed, rel) {
			t.Errorf("docs/README.md does not link %s: add a line for it", rel)
		}
	}
}

// TestDocLinks: every relative link in README.md, CONTRIBUTING.md and
// docs/*.md names a file or directory that exists and, where it names a
// heading (page.md#anchor, or #anchor on the page itself), a heading that
// exists.
func TestDocLinks(t *testing.T) {
	root := repoRoot(t)
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append([]string{filepath.Join(root, "README.md"), filepath.Join(root, "CONTRIBUTING.md")}, pages...)
	anchors := map[string]map[string]bool{}
	checked := 0
	for _, p := range pages {
		rel, _ := filepath.Rel(root, p)
		for _, l := range links(t, p) {
			target, anchor, _ := strings.Cut(l.dest, "#")
			file := p
			if target != "" {
				file = filepath.Join(filepath.Dir(p), target)
				if _, err := os.Stat(file); err != nil {
					t.Errorf("%s:%d: link %q: %v", rel, l.line, l.dest, err)
					continue
				}
			}
			checked++
			if anchor == "" || !strings.HasSuffix(file, ".md") {
				continue
			}
			if anchors[file] == nil {
				anchors[file] = headingAnchors(t, file)
			}
			if !anchors[file][anchor] {
				t.Errorf("%s:%d: link %q: no heading of %s has the anchor %q", rel, l.line, l.dest, filepath.Base(file), anchor)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative link found in the docs")
	}
}

// TestHeadingAnchor: the anchors GitHub gives headings.
func TestHeadingAnchor(t *testing.T) {
	tests := []struct{ heading, want string }{
		{"Fleet benchmark", "fleet-benchmark"},
		{"Parsing one page (`pkg/adapter/parse`)", "parsing-one-page-pkgadapterparse"},
		{"Resyncs that skip a steady fleet, and memory (2026-12-01, later)", "resyncs-that-skip-a-steady-fleet-and-memory-2026-12-01-later"},
		{"Images without a registry: `make images-local`", "images-without-a-registry-make-images-local"},
		{"The API port's NetworkPolicy", "the-api-ports-networkpolicy"},
		{"snake_case and CAPS", "snake_case-and-caps"},
	}
	for _, tc := range tests {
		if got := headingAnchor(tc.heading); got != tc.want {
			t.Errorf("headingAnchor(%q) = %q, want %q", tc.heading, got, tc.want)
		}
	}
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := clitest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

type link struct {
	dest string
	line int
}

// inlineLink matches a markdown inline link's destination: ](dest).
var inlineLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// links returns the relative links of the page at path, outside fenced
// blocks and code spans.
func links(t *testing.T, path string) []link {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []link
	fenced := false
	for i, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range inlineLink.FindAllStringSubmatch(withoutCodeSpans(line), -1) {
			dest := m[1]
			if strings.Contains(dest, "://") || strings.HasPrefix(dest, "mailto:") {
				continue
			}
			out = append(out, link{dest: dest, line: i + 1})
		}
	}
	return out
}

// linkTargets returns the files the page at rel (relative to root) links,
// relative to root.
func linkTargets(t *testing.T, root, rel string) []string {
	t.Helper()
	var out []string
	for _, l := range links(t, filepath.Join(root, rel)) {
		target, _, _ := strings.Cut(l.dest, "#")
		if target == "" {
			continue
		}
		abs := filepath.Join(root, filepath.Dir(rel), target)
		r, err := filepath.Rel(root, abs)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// withoutCodeSpans blanks the `code spans` of a line.
func withoutCodeSpans(line string) string {
	parts := strings.Split(line, "`")
	for i := 1; i < len(parts); i += 2 {
		parts[i] = ""
	}
	return strings.Join(parts, "`")
}

// headingAnchors returns the anchors of the page's headings, as GitHub
// makes them (a repeated anchor gets -1, -2, ...).
func headingAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		heading := strings.TrimSpace(strings.TrimLeft(line, "#"))
		a := headingAnchor(heading)
		if n := seen[a]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors
}

// headingAnchor is GitHub's anchor for a heading: lower case, spaces to
// hyphens, and every character but letters, digits, _ and - dropped.
func headingAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
