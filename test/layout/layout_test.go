// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Package layout holds the import rules that keep the repository's three
// products apart: the adapter (cmd/inference-metrics-adapter, pkg/adapter),
// the node agent (cmd/gpu-agent, pkg/nodeagent) and the tools (the other
// commands, pkg/tools). pkg/cli is shared by every command.
package layout

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"
)

const module = "github.com/inference-metrics-adapter/inference-metrics-adapter"

// rule says that no package reached from the packages under root (itself
// included, imports followed transitively within the module) may lie under
// one of forbidden. Paths are relative to the module.
type rule struct {
	name      string
	root      string
	forbidden []string
}

// rules are the import rules. A command may import pkg/ and its own
// subpackages only; a product's packages never reach another product's.
var rules = []rule{
	{"the adapter binary carries no tool and no node-agent code", "cmd/inference-metrics-adapter", []string{"pkg/tools", "pkg/nodeagent", "test", "cmd/gpu-agent", "cmd/kubectl-inference", "cmd/capacity", "cmd/inference-sim", "cmd/loadgen"}},
	{"the gpu-agent binary carries no adapter and no tool code", "cmd/gpu-agent", []string{"pkg/adapter", "pkg/tools", "test", "cmd/inference-metrics-adapter", "cmd/kubectl-inference", "cmd/capacity", "cmd/inference-sim", "cmd/loadgen"}},
	{"the adapter's packages import no tool and no node-agent package", "pkg/adapter", []string{"pkg/tools", "pkg/nodeagent", "cmd", "test"}},
	{"the node agent's packages import no adapter and no tool package", "pkg/nodeagent", []string{"pkg/adapter", "pkg/tools", "cmd", "test"}},
	{"the tools' packages import no command and no test program", "pkg/tools", []string{"cmd", "test"}},
	{"pkg/cli, shared by every command, imports no product", "pkg/cli", []string{"pkg/adapter", "pkg/nodeagent", "pkg/tools", "cmd", "test"}},
	{"the plugin imports no other command", "cmd/kubectl-inference", []string{"cmd/inference-metrics-adapter", "cmd/gpu-agent", "cmd/capacity", "cmd/inference-sim", "cmd/loadgen"}},
	{"capacity imports no other command", "cmd/capacity", []string{"cmd/inference-metrics-adapter", "cmd/gpu-agent", "cmd/kubectl-inference", "cmd/inference-sim", "cmd/loadgen"}},
	{"inference-sim imports no other command", "cmd/inference-sim", []string{"cmd/inference-metrics-adapter", "cmd/gpu-agent", "cmd/kubectl-inference", "cmd/capacity", "cmd/loadgen"}},
	{"loadgen imports no other command", "cmd/loadgen", []string{"cmd/inference-metrics-adapter", "cmd/gpu-agent", "cmd/kubectl-inference", "cmd/capacity", "cmd/inference-sim"}},
}

// under reports whether path is dir or lies below it.
func under(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, dir+"/")
}

// violations returns, for each rule, every chain root → … → p where p is
// forbidden. graph maps a module-relative package path to the module's
// packages it imports (non-test imports).
func violations(graph map[string][]string, rs []rule) []string {
	var out []string
	for _, r := range rs {
		// Breadth-first from every package under root, keeping the parent
		// to print the chain.
		parent := map[string]string{}
		var queue []string
		for p := range graph {
			if under(p, r.root) {
				parent[p] = ""
				queue = append(queue, p)
			}
		}
		sort.Strings(queue)
		for len(queue) > 0 {
			p := queue[0]
			queue = queue[1:]
			for _, f := range r.forbidden {
				if under(p, f) {
					chain := []string{p}
					for q := parent[p]; q != ""; q = parent[q] {
						chain = append([]string{q}, chain...)
					}
					out = append(out, fmt.Sprintf("%s: %s", r.name, strings.Join(chain, " → ")))
					break
				}
			}
			for _, q := range graph[p] {
				if _, seen := parent[q]; !seen {
					parent[q] = p
					queue = append(queue, q)
				}
			}
		}
	}
	return out
}

// moduleGraph lists every package of the module with its imports inside the
// module, from go list.
func moduleGraph(t *testing.T) map[string][]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, module+"/...")
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v: %s", err, stderr.String())
	}
	graph := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		p := strings.TrimPrefix(fields[0], module+"/")
		graph[p] = nil
		for _, imp := range fields[1:] {
			if rel, ok := strings.CutPrefix(imp, module+"/"); ok {
				graph[p] = append(graph[p], rel)
			}
		}
	}
	return graph
}

// TestVerifyImportRules checks the module's real import graph against the
// rules, and that every rule's root exists (a rule over a moved or renamed
// directory would otherwise pass by checking nothing).
func TestVerifyImportRules(t *testing.T) {
	graph := moduleGraph(t)
	for _, r := range rules {
		found := false
		for p := range graph {
			if under(p, r.root) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("rule %q: no package under %s", r.name, r.root)
		}
	}
	for _, v := range violations(graph, rules) {
		t.Error(v)
	}
}

// TestViolations checks the rule walker on small graphs: a direct and a
// transitive reach of a forbidden package are reported with their chain,
// a sibling whose name only starts the same is not.
func TestViolations(t *testing.T) {
	r := []rule{{"adapter carries no tools", "cmd/a", []string{"pkg/tools"}}}
	tests := []struct {
		name  string
		graph map[string][]string
		want  []string
	}{
		{"clean", map[string][]string{"cmd/a": {"pkg/adapter/x"}, "pkg/adapter/x": nil, "pkg/tools/y": nil}, nil},
		{"direct", map[string][]string{"cmd/a": {"pkg/tools/y"}, "pkg/tools/y": nil},
			[]string{"adapter carries no tools: cmd/a → pkg/tools/y"}},
		{"transitive", map[string][]string{"cmd/a": {"pkg/adapter/x"}, "pkg/adapter/x": {"pkg/tools/y"}, "pkg/tools/y": nil},
			[]string{"adapter carries no tools: cmd/a → pkg/adapter/x → pkg/tools/y"}},
		{"subpackage of the root", map[string][]string{"cmd/a/app": {"pkg/tools/y"}, "pkg/tools/y": nil},
			[]string{"adapter carries no tools: cmd/a/app → pkg/tools/y"}},
		{"prefix is not a parent", map[string][]string{"cmd/a": {"pkg/toolsy"}, "pkg/toolsy": nil, "cmd/ab": {"pkg/tools/y"}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := violations(tt.graph, r)
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("violations = %q, want %q", got, tt.want)
			}
		})
	}
}
