// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"bytes"
	"strings"
	"testing"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/escape/escapetest"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/kubectlplugin/kubectlplugintest"
)

// An error's text from the API (the adapter's reason, which quotes tenant
// text, or whatever serves the metrics API) is printed escaped: it cannot
// drive the terminal or forge a line of output.
func TestAPIErrorsArePrintedEscaped(t *testing.T) {
	const evil = "\x1b]0;owned\x07\x1b[2J\x1b[31m\nforged\u009b31m\u202e\xff"
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"contrast", []string{"contrast", "-l", "app=llm"}},
		{"top", []string{"top"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := kubectlplugintest.New(t)
			lbls := map[string]string{"app": "llm"}
			s.Deployments = append(s.Deployments, kubectlplugintest.Deployment("llm", lbls, lbls))
			s.Pods = append(s.Pods, kubectlplugintest.Pod("llm-a", lbls, 1))
			s.Fail, s.FailMessage = 503, "overloaded: "+evil
			var stdout, stderr bytes.Buffer
			args := append(tc.args, "--kubeconfig", s.Kubeconfig(t, t.TempDir()), "--request-timeout=5s")
			if code := Main(args, &stdout, &stderr); code != 1 {
				t.Fatalf("exit %d, want 1; stderr %q", code, &stderr)
			}
			out := strings.TrimSuffix(stderr.String(), "\n")
			if escapetest.HasControl(out) || !strings.Contains(out, "overloaded: ") {
				t.Fatalf("stderr %q: want the API's message, escaped, on one line", out)
			}
		})
	}
}
