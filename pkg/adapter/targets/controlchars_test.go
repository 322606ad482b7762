// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package targets

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/agentpage"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/escape/escapetest"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/store"
)

// The path annotation goes into the scrape URL, and so into every scrape
// error, "Scrape failing" log line and stored 404 reason about the pod: a
// path with a byte that is not valid in a URL path is refused, and the
// refusal quotes it.
func TestPathAnnotationRefusesBytesNotValidInAURLPath(t *testing.T) {
	cases := []struct {
		name string
		path string
		ok   bool
	}{
		{"plain", "/metrics", true},
		{"nested", "/v1/stats/prometheus", true},
		{"query", "/metrics?format=prometheus&name[]=x", false}, // '[' is not a URL byte
		{"query of URL bytes", "/metrics?format=prometheus", true},
		{"sub-delims and colon", "/a:b@c!$&'()*+,;=-._~", true},
		{"percent-encoded", "/a%20b%2F", true},
		{"newline", "/metrics\nI1202 10:00:00.000000       1 forged.go:1] \"Scrape recovered\"", false},
		{"carriage return", "/metrics\r", false},
		{"ESC", "/metrics\x1b[2J\x1b]0;owned\x07", false},
		{"BEL", "/metrics\a", false},
		{"NUL", "/metrics\x00", false},
		{"tab", "/met\trics", false},
		{"DEL", "/metrics\x7f", false},
		{"space", "/my metrics", false},
		{"C1 control (CSI)", "/metrics\u009b2J", false},
		{"right-to-left override", "/metrics\u202e", false},
		{"invalid UTF-8", "/metrics\xff\xfe", false},
		{"non-ASCII letter", "/métriques", false},
		{"fragment", "/metrics#x", false},
		{"backslash", `/metrics\x`, false},
		{"quote", `/metrics"`, false},
		{"bad percent escape", "/metrics%zz", false},
		{"cut percent escape", "/metrics%2", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Endpoint(testPod("p", map[string]string{AnnotationPort: "8000", AnnotationPath: tc.path}))
			if tc.ok {
				if err != nil || got != "http://10.0.0.1:8000"+tc.path {
					t.Fatalf("Endpoint = %q, %v; want the path kept", got, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Endpoint = %q; want the path %q refused", got, tc.path)
			}
			if escapetest.HasControl(err.Error()) {
				t.Fatalf("the error holds a control character or invalid UTF-8: %q", err.Error())
			}
			if !strings.Contains(err.Error(), AnnotationPath) {
				t.Fatalf("the error %q does not name the annotation", err)
			}
		})
	}
}

// logLinesOK fails the test when a log line holds a control character or
// does not start with klog's header (a forged line).
func logLinesOK(t *testing.T, out string) {
	t.Helper()
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if escapetest.HasControl(line) || len(line) < 1 || !strings.ContainsRune("IWEF", rune(line[0])) {
			t.Errorf("log line %q: holds a control character or is not a klog line", line)
		}
	}
}

// A gpu-agent's page names the pods it reports on; a name the cluster does
// not know is the page's text, and the line that logs its refusal quotes
// it.
func TestAgentReportAboutAnUnknownPodIsLoggedEscaped(t *testing.T) {
	logs := escapetest.CaptureLogs(t, "2")
	agent := agentPod("ima", "agent-n1", "n1", true)
	gate := NewAgentGate(AgentTrust{Selector: agentSel, Namespace: "ima"}, corelisters.NewPodLister(podIndex(t, agent)), store.New(), prometheus.NewPedanticRegistry())
	for _, tc := range []struct{ namespace, pod string }{
		{"prod", "x\nI1202 10:00:00.000000       1 forged.go:1] \"Scrape recovered\""},
		{"prod\x1b[2J", "y\x07"},
		{"prod", "z\u009b31m\u202e\xff"},
	} {
		gate.RecordAgent(types.NamespacedName{Namespace: "ima", Name: "agent-n1"}, time.Unix(1000, 0), []agentpage.PodGPU{{Namespace: tc.namespace, Pod: tc.pod, GPUs: 1}}, nil)
	}
	klog.Flush()
	out := logs.String()
	if got := strings.Count(out, "Ignoring a gpu-agent's report about a pod"); got != 3 {
		t.Fatalf("%d refusals logged, want 3:\n%s", got, out)
	}
	logLinesOK(t, out)
}
