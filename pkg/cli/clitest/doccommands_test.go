// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package clitest

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestParseDocCommands: which lines of a page are command lines for a
// binary, and the words each gives it.
func TestParseDocCommands(t *testing.T) {
	const page = "intro `bin/sim --not-a-block`\n" +
		"```sh\n" +
		"make build   # bin/sim is built here\n" +
		"bin/sim --listen 127.0.0.5:8000 \\\n" +
		"  --slo 'ttft:p90<=1s' --path ~/x \"~/y\"   # a comment\n" +
		"FOO=1 ./bin/sim -n 2 && curl -s x | bin/sim --pipe\n" +
		"go run ./cmd/sim --go-run\n" +
		"kubectl sim top -n default\n" +
		"bin/simulator --other\n" +
		"```\n" +
		"```\n" +
		"bin/sim --in-output-block\n" +
		"```\n" +
		"```yaml\n" +
		"bin/sim --in-yaml\n" +
		"```\n" +
		"```console\n" +
		"$ bin/sim --prompted\n" +
		"bin/sim --output-line\n" +
		"```\n"
	tests := []struct {
		binary string
		want   []DocCommand
	}{
		{"sim", []DocCommand{
			{Where: "p.md:4", Args: []string{"--listen", "127.0.0.5:8000", "--slo", "ttft:p90<=1s", "--path", "/home/u/x", "~/y"}},
			{Where: "p.md:6", Args: []string{"-n", "2"}},
			{Where: "p.md:6", Args: []string{"--pipe"}},
			{Where: "p.md:7", Args: []string{"--go-run"}},
			{Where: "p.md:18", Args: []string{"--prompted"}},
		}},
		{"kubectl-sim", []DocCommand{{Where: "p.md:8", Args: []string{"top", "-n", "default"}}}},
		{"simulator", []DocCommand{{Where: "p.md:9", Args: []string{"--other"}}}},
		{"absent", nil},
	}
	for _, tc := range tests {
		t.Run(tc.binary, func(t *testing.T) {
			got := ParseDocCommands(page, "p.md", tc.binary, "/home/u")
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// docCommandTests names, for each binary in cmd/ whose command lines the
// docs show, the package whose test checks them with CheckDocCommands.
var docCommandTests = map[string]string{
	"inference-metrics-adapter": "cmd/inference-metrics-adapter/app",
	"kubectl-inference":         "cmd/kubectl-inference/app",
	"inference-sim":             "cmd/inference-sim/app",
	"loadgen":                   "cmd/loadgen/app",
	"capacity":                  "cmd/capacity/app",
}

// TestEveryDocumentedBinaryIsChecked: a command line the docs show for a
// binary whose package has no docs-commands test would go unchecked.
func TestEveryDocumentedBinaryIsChecked(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Join(root, "cmd"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if pkg, ok := docCommandTests[e.Name()]; ok {
			if _, err := os.Stat(filepath.Join(root, pkg)); err != nil {
				t.Errorf("%s's command lines are checked in %s: %v", e.Name(), pkg, err)
			}
			continue
		}
		if cmds := DocCommands(t, e.Name()); len(cmds) > 0 {
			t.Errorf("the docs show %d command lines for %s (first at %s), and no test checks them: call CheckDocCommands in its package's tests and add it to docCommandTests",
				len(cmds), e.Name(), cmds[0].Where)
		}
	}
}
