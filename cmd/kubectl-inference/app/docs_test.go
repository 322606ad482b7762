// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestDocsNameEveryFlag: docs/kubectl-plugin.md names every flag of each
// command's own section of --help, and --kubeconfig and --request-timeout.
func TestDocsNameEveryFlag(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/kubectl-plugin.md")
	if err != nil {
		t.Fatal(err)
	}
	flagName := regexp.MustCompile(`^\s+(?:-\w, )?(--[a-z0-9-]+)`)
	for _, cmd := range []string{"contrast", "top"} {
		var stdout, stderr bytes.Buffer
		if code := Main([]string{cmd, "--help"}, &stdout, &stderr); code != 0 {
			t.Fatalf("%s --help: exit %d", cmd, code)
		}
		own, _, _ := strings.Cut(stdout.String(), "Kubeconfig flags")
		names := []string{"--kubeconfig", "--request-timeout"}
		for _, line := range strings.Split(own, "\n") {
			if m := flagName.FindStringSubmatch(line); m != nil {
				names = append(names, m[1])
			}
		}
		if len(names) < 5 {
			t.Fatalf("%s --help: found only %v", cmd, names)
		}
		for _, n := range names {
			if !bytes.Contains(doc, []byte("`"+n+"`")) {
				t.Errorf("docs/kubectl-plugin.md does not name %s's flag `%s`", cmd, n)
			}
		}
	}
}
