// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/cli"
)

var update = flag.Bool("update", false, "rewrite docs/shootout.md's flag block from --help")

// parseArgs is parseFlags for the tests: --help is discarded.
func parseArgs(args []string, getenv func(string) string) (config, error) {
	cfg, _, err := parseFlags(args, getenv, io.Discard)
	return cfg, err
}

const (
	shootoutDoc = "../../docs/shootout.md"
	beginHelp   = "<!-- BEGIN GENERATED: shootout --help -->\n```text\n"
	endHelp     = "```\n<!-- END GENERATED -->"
)

// TestDocsListFlags: docs/shootout.md quotes --help exactly. Run
// `go test ./test/shootout -run TestDocsListFlags -update` to rewrite the
// quoted block.
func TestDocsListFlags(t *testing.T) {
	var out bytes.Buffer
	if err := runMain(context.Background(), []string{"--help"}, func(string) string { return "" }, &out); err != nil {
		t.Fatalf("--help: %v", err)
	}
	help := out.String()
	for _, section := range []string{"Traffic flags:", "Policies flags:", "Fleet flags:", "Time and SLO flags:", "Runs and reports flags:"} {
		if !strings.Contains(help, section) {
			t.Errorf("--help has no section %q:\n%s", section, help)
		}
	}
	raw, err := os.ReadFile(shootoutDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	i, j := strings.Index(doc, beginHelp), strings.Index(doc, endHelp)
	if i < 0 || j < i {
		t.Fatalf("%s lacks the generated --help block markers", shootoutDoc)
	}
	current := doc[i+len(beginHelp) : j]
	if current == help {
		return
	}
	if *update {
		if err := os.WriteFile(shootoutDoc, []byte(doc[:i+len(beginHelp)]+help+doc[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("docs/shootout.md's flags differ from --help (-help +docs); run go test ./test/shootout -run TestDocsListFlags -update:\n%s", cmp.Diff(help, current))
}

// TestCommandLine: --help exits cleanly, and a bad command line is a usage
// error (exit status 2) that lists every problem at once.
func TestCommandLine(t *testing.T) {
	getenv := func(string) string { return "/bin" }
	for _, tc := range []struct {
		name     string
		args     []string
		wantCode int
		want     []string // parts of the error, every one
	}{
		{name: "help", args: []string{"--help"}},
		{name: "single-dash flag", args: []string{"-sweep", "gpu=1,2,3,4"}, wantCode: 2, want: []string{"-sweep", "flags take two dashes: --sweep"}},
		{name: "unknown flag", args: []string{"--no-such-flag"}, wantCode: 2, want: []string{"unknown flag: --no-such-flag"}},
		{name: "stray argument", args: []string{"--repeats", "1", "extra"}, wantCode: 2, want: []string{"unexpected arguments"}},
		{name: "every problem listed", args: []string{"--repeats", "0", "--compress", "0.5", "--picker", "random", "--sweep", "cpu=1,2,3,4", "--sweep", "gpu=1,2"},
			wantCode: 2, want: []string{"--repeats must be 1 to 100", "--compress must be at least 1", "--picker must be", `--sweep "cpu=1,2,3,4": unknown family "cpu"`, `--sweep "gpu=1,2": 2 targets`}},
		{name: "merge without render", args: []string{"--merge", "a.json,b.json"}, wantCode: 2, want: []string{"--merge needs --render"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := runMain(context.Background(), tc.args, getenv, &out)
			if code := cli.ExitCode(err); code != tc.wantCode {
				t.Fatalf("exit status %d (%v), want %d", code, err, tc.wantCode)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if tc.wantCode == 0 && !strings.Contains(out.String(), "--sweep stringArray") {
				t.Errorf("--help does not list --sweep:\n%s", out.String())
			}
		})
	}
}

// TestRepeatableFlags: --sweep, --trace and --merge may be repeated;
// --trace and --merge also take comma-separated lists.
func TestRepeatableFlags(t *testing.T) {
	getenv := func(string) string { return "/bin" }
	cfg, err := parseArgs([]string{"--trace", "a.csv,b.csv", "--trace", "c.csv", "--sweep", "queue=1,2,3,5", "--sweep", "fixed=1,2,4,8"}, getenv)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a.csv", "b.csv", "c.csv"}, cfg.traces); diff != "" {
		t.Errorf("traces (-want +got):\n%s", diff)
	}
	if len(cfg.pols) != 8 {
		t.Errorf("two sweeps: %d policies, want 8", len(cfg.pols))
	}
	cfg, err = parseArgs([]string{"--render", "--merge", "a.json", "--merge", "b.json,c.json"}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a.json", "b.json", "c.json"}, cfg.merge); diff != "" {
		t.Errorf("merge (-want +got):\n%s", diff)
	}
}

// TestMaxInFlight: --max-in-flight 0 takes what the open-file limit
// allows (four files per open request after the reserve, shared by the
// side-by-side slots); a larger value than the limit allows, a negative
// one or a limit too low for one request per replica is a clear error.
func TestMaxInFlight(t *testing.T) {
	for _, tc := range []struct {
		name       string
		flag       int
		files      uint64
		filesErr   error
		sideBySide int
		want       int
		wantErr    string
	}{
		{name: "from the limit", files: 20000, sideBySide: 1, want: (20000 - 1024) / 4},
		{name: "from the limit, four slots", files: 20000, sideBySide: 4, want: (20000 - 1024) / 4 / 4},
		{name: "given, within the limit", flag: 1000, files: 20000, sideBySide: 1, want: 1000},
		{name: "given, past the limit", flag: 5000, files: 20000, sideBySide: 1, wantErr: "--max-in-flight 5000 needs more open files than the limit (ulimit -n) 20000 allows: at most 4744 here"},
		{name: "negative", flag: -1, files: 20000, sideBySide: 1, wantErr: "--max-in-flight must be at least 0"},
		{name: "limit too low", files: 1024 + 4*7, sideBySide: 1, wantErr: "the open-file limit (ulimit -n) is 1052: too low"},
		{name: "limit unknown", filesErr: errors.New("boom"), sideBySide: 1, wantErr: "reading the open-file limit: boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := newOptions()
			o.maxInFlight = tc.flag
			o.openFiles = func() (uint64, error) { return tc.files, tc.filesErr }
			cfg := config{sideBySide: tc.sideBySide, maxReplicas: 8}
			err := o.setMaxInFlight(&cfg)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || cfg.maxInFlight != tc.want {
				t.Fatalf("max in flight %d, %v; want %d", cfg.maxInFlight, err, tc.want)
			}
		})
	}
}

// TestRenderNeedsNoFileLimit: --render replays nothing, so the open-file
// limit is not read and cannot fail it.
func TestRenderNeedsNoFileLimit(t *testing.T) {
	o := newOptions()
	o.render = true
	o.openFiles = func() (uint64, error) { return 0, errors.New("boom") }
	if _, err := o.config(func(string) string { return "" }); err != nil {
		t.Fatalf("--render: %v", err)
	}
}

// shootoutFlagsRE finds the flags of `make shootout SHOOTOUT_FLAGS="..."`
// and of `go run ./test/shootout ...` on a shell line.
var (
	shootoutFlagsRE = regexp.MustCompile(`SHOOTOUT_FLAGS="([^"]*)"`)
	goRunRE         = regexp.MustCompile(`go run \./test/shootout((?: [^#]*)?)`)
	assignRE        = regexp.MustCompile(`^([A-Z_]+)="([^"]*)"$`)
	forRE           = regexp.MustCompile(`^for (\w+) in (\S+)`)
	varRE           = regexp.MustCompile(`\$(\w+)`)
)

// TestDocCommands: every shootout command line in README.md,
// CONTRIBUTING.md and docs/*.md (not the historical records in
// docs/shootout-runs) passes the shootout's parse and validation, run from
// the repository's root as make shootout runs it.
func TestDocCommands(t *testing.T) {
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../../README.md", "../../CONTRIBUTING.md")
	type command struct{ where, flags string }
	var cmds []command
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(raw), "\n")
		inShell := false
		vars := map[string]string{}
		for i := 0; i < len(lines); i++ {
			line := strings.TrimSpace(lines[i])
			if strings.HasPrefix(line, "```") {
				inShell = !inShell && (line == "```sh" || line == "```bash" || line == "```shell")
				vars = map[string]string{}
				continue
			}
			if !inShell {
				continue
			}
			first := i
			for strings.HasSuffix(line, "\\") && i+1 < len(lines) {
				i++
				line = strings.TrimSuffix(line, "\\") + " " + strings.TrimSpace(lines[i])
			}
			if m := assignRE.FindStringSubmatch(line); m != nil {
				vars[m[1]] = m[2]
				continue
			}
			if m := forRE.FindStringSubmatch(line); m != nil {
				vars[m[1]] = m[2]
			}
			expand := func(s string) string {
				return varRE.ReplaceAllStringFunc(s, func(v string) string { return vars[v[1:]] })
			}
			where := filepath.Base(f) + ":" + strconv.Itoa(first+1)
			for _, m := range shootoutFlagsRE.FindAllStringSubmatch(line, -1) {
				cmds = append(cmds, command{where, expand(m[1])})
			}
			for _, m := range goRunRE.FindAllStringSubmatch(line, -1) {
				cmds = append(cmds, command{where, expand(m[1])})
			}
		}
	}
	if len(cmds) < 5 {
		t.Fatalf("found %d shootout command lines in the docs, want the examples of docs/shootout.md", len(cmds))
	}
	t.Chdir("../..")
	for _, c := range cmds {
		args := shellWords(c.flags)
		if len(args) == 1 && (args[0] == "-h" || args[0] == "--help") {
			continue
		}
		if _, err := parseArgs(args, func(string) string { return "/bin" }); err != nil {
			t.Errorf("%s: shootout %s: %v", c.where, c.flags, err)
		}
	}
}

// shellWords splits s at blanks, keeping what single quotes enclose
// together and removing the quotes.
func shellWords(s string) []string {
	var words []string
	var w strings.Builder
	in, quoted := false, false
	for _, r := range s {
		switch {
		case r == '\'':
			quoted, in = !quoted, true
		case (r == ' ' || r == '\t') && !quoted:
			if in {
				words = append(words, w.String())
			}
			w.Reset()
			in = false
		default:
			w.WriteRune(r)
			in = true
		}
	}
	if in {
		words = append(words, w.String())
	}
	return words
}
