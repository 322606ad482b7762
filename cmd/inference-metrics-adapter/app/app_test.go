// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/cmd/inference-metrics-adapter/app/options"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/cli"
)

var update = flag.Bool("update", false, "rewrite docs/flags.md from --help")

const (
	flagsDoc  = "../../../docs/flags.md"
	beginMark = "<!-- BEGIN GENERATED: inference-metrics-adapter --help -->\n```text\n"
	endMark   = "```\n<!-- END GENERATED -->"
)

// TestFlagsDocMatchesHelp fails when docs/flags.md does not quote --help
// exactly. Run `go test ./cmd/inference-metrics-adapter/app -update` to rewrite the quoted block.
func TestFlagsDocMatchesHelp(t *testing.T) {
	var out bytes.Buffer
	if code := Main([]string{"--help"}, &out, &out); code != 0 {
		t.Fatalf("--help exited %d: %s", code, out.String())
	}
	help := out.String()
	doc, err := os.ReadFile(flagsDoc)
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	i, j := strings.Index(s, beginMark), strings.Index(s, endMark)
	if i < 0 || j < i {
		t.Fatalf("%s lacks the generated block markers", flagsDoc)
	}
	current := s[i+len(beginMark) : j]
	if current == help {
		return
	}
	if *update {
		if err := os.WriteFile(flagsDoc, []byte(s[:i+len(beginMark)]+help+s[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("docs/flags.md does not match --help; run: go test ./cmd/inference-metrics-adapter/app -update")
}

func TestBadFlagsExitWithClearError(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--scrape-interval=1s", "--scrape-timeout=2s"}, "--scrape-timeout (2s) must not exceed --scrape-interval (1s)"},
		{[]string{"--no-such-flag"}, "unknown flag: --no-such-flag"},
		{[]string{"stray"}, "unexpected arguments"},
		{[]string{"--logging-format=xml"}, "Unsupported log format"},
		{[]string{"--vmodule=x=2", "--logging-format=json"}, "Only supported for text log format"},
	}
	for _, tc := range cases {
		var stdout, stderr bytes.Buffer
		if code := Main(tc.args, &stdout, &stderr); code != 2 {
			t.Errorf("%v: exit %d, want 2", tc.args, code)
		}
		if !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: stderr %q lacks %q", tc.args, stderr.String(), tc.want)
		}
	}
}

func TestEveryOwnFlagIsDocumentedInProse(t *testing.T) {
	doc, err := os.ReadFile(flagsDoc)
	if err != nil {
		t.Fatal(err)
	}
	o := options.NewOptions()
	fs := cli.FlagSet("inference-metrics-adapter", o.Flags())
	for _, name := range []string{"scrape-interval", "scrape-timeout", "max-age", "max-body-size", "scrape-concurrency", "scrape-concurrency-per-namespace", "first-scrape-concurrency", "max-selectors", "max-selectors-per-namespace", "shutdown-delay", "scrape-gzip", "namespaces", "demand-ttl", "first-scrape-timeout", "gpu-agent-selector", "gpu-agent-namespace", "enable-external-metrics", "kubeconfig", "server-config", "forecast-method", "forecast-window", "forecast-horizon", "forecast-z", "forecast-holt-alpha", "forecast-holt-beta", "forecast-max-workloads"} {
		if fs.Lookup(name) == nil {
			t.Errorf("flag --%s does not exist", name)
		}
		if !strings.Contains(string(doc), "| `--"+name+"`") {
			t.Errorf("docs/flags.md has no table row for --%s", name)
		}
	}
}

// TestEveryProblemListedAtOnce checks that a bad logging flag is reported
// with the adapter's own bad flags, not alone.
func TestEveryProblemListedAtOnce(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := Main([]string{"--scrape-concurrency=0", "--logging-format=xml", "--gpu-agent-selector="}, &stdout, &stderr); code != 2 {
		t.Fatalf("exit %d, want 2", code)
	}
	for _, want := range []string{"--scrape-concurrency must be at least 1", "Unsupported log format"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr %q lacks %q", stderr.String(), want)
		}
	}
}

// TestHelpListsSectionsInOrder checks that --help shows the adapter's own
// flags first, in a section per concern, then the API server's, then
// logging's, each flag once.
func TestHelpListsSectionsInOrder(t *testing.T) {
	var out bytes.Buffer
	if code := Main([]string{"--help"}, &out, &out); code != 0 {
		t.Fatalf("--help exited %d", code)
	}
	help := out.String()
	sections := []struct {
		title string
		flags []string
	}{
		{"Scraping flags:", []string{"--scrape-interval", "--max-body-size", "--first-scrape-timeout", "--server-config", "--scrape-ca-file", "--scrape-client-key-file"}},
		{"Targets and demand flags:", []string{"--kubeconfig", "--namespaces", "--demand-ttl", "--max-selectors"}},
		{"Answers flags:", []string{"--max-age", "--slo-window", "--role-label", "--answer-cache-ttl", "--enable-external-metrics"}},
		{"GPU agent flags:", []string{"--gpu-agent-selector", "--gpu-agent-namespace"}},
		{"Forecast flags:", []string{"--forecast-method", "--forecast-max-workloads"}},
		{"KEDA flags:", []string{"--keda-scaler-address", "--keda-scaler-max-streams"}},
		{"API server secure serving flags:", []string{"--secure-port"}},
		{"API server authentication flags:", []string{"--authentication-kubeconfig"}},
		{"API server authorization flags:", []string{"--authorization-kubeconfig"}},
		{"API server audit flags:", []string{"--audit-policy-file"}},
		{"API server features flags:", []string{"--profiling"}},
		{"API server Kubernetes client flags:", []string{"--lister-kubeconfig"}},
		{"Logging flags:", []string{"--logging-format"}},
	}
	last := -1
	for i, s := range sections {
		at := strings.Index(help, "\n"+s.title+"\n")
		if at < 0 {
			t.Fatalf("--help has no section %q:\n%s", s.title, help)
		}
		if at < last {
			t.Errorf("section %q comes before %q", s.title, sections[i-1].title)
		}
		last = at
		end := len(help)
		if i+1 < len(sections) {
			if next := strings.Index(help, "\n"+sections[i+1].title+"\n"); next > at {
				end = next
			}
		}
		for _, f := range s.flags {
			// A name ends at a space, or at a bool flag's [=true|false].
			if !strings.Contains(help[at:end], "\n      "+f+" ") && !strings.Contains(help[at:end], "\n      "+f+"[") {
				t.Errorf("section %q lacks %s", s.title, f)
			}
		}
	}
	for _, name := range []string{"      --scrape-interval ", "  -v, --v ", "      --secure-port "} {
		if n := strings.Count(help, "\n"+name); n != 1 {
			t.Errorf("%q appears %d times in --help, want once", name, n)
		}
	}
}

// runMainEnv makes the test binary run Main with its arguments instead of
// the tests, so that a test can run the adapter in a process of its own:
// the logging configuration can be applied only once per process.
const runMainEnv = "INFERENCE_METRICS_ADAPTER_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// TestLoggingFormatJSON runs the adapter with --logging-format=json and a
// kubeconfig that names no file: it logs its start and the failure as JSON
// objects, one per line, and exits 1.
func TestLoggingFormatJSON(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "--logging-format=json", "--v=1",
		"--kubeconfig="+filepath.Join(dir, "missing-kubeconfig"),
		"--gpu-agent-selector=", "--cert-dir="+dir, "--secure-port=0")
	cmd.Env = append(os.Environ(), runMainEnv+"=1", "GOMEMLIMIT=", "MEMORY_LIMIT_BYTES=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("exit: %v, want status 1; stderr:\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	var msgs []string
	for _, line := range lines {
		var entry struct {
			Msg string `json:"msg"`
			Err string `json:"err"`
		}
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Fatalf("log line %q is not a JSON object: %v", line, err)
		}
		msgs = append(msgs, entry.Msg)
	}
	for _, want := range []string{"Go memory limit", "Adapter stopped"} {
		found := false
		for _, m := range msgs {
			found = found || m == want
		}
		if !found {
			t.Errorf("no JSON log line with msg %q; got %q", want, msgs)
		}
	}
}
