package app

import (
	"bytes"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/options"
)

var update = flag.Bool("update", false, "rewrite docs/flags.md from --help")

const (
	flagsDoc  = "../../docs/flags.md"
	beginMark = "<!-- BEGIN GENERATED: inference-metrics-adapter --help -->\n```text\n"
	endMark   = "```\n<!-- END GENERATED -->"
)

// TestFlagsDocMatchesHelp fails when docs/flags.md does not quote --help
// exactly. Run `go test ./pkg/app -update` to rewrite the quoted block.
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
	t.Fatalf("docs/flags.md does not match --help; run: go test ./pkg/app -update")
}

func TestBadFlagsExitWithClearError(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--scrape-interval=1s", "--scrape-timeout=2s"}, "--scrape-timeout (2s) must not exceed --scrape-interval (1s)"},
		{[]string{"--no-such-flag"}, "unknown flag: --no-such-flag"},
		{[]string{"stray"}, "unexpected arguments"},
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
	fs := NewFlagSet(o)
	for _, name := range []string{"scrape-interval", "scrape-timeout", "max-age", "max-body-size", "scrape-concurrency", "first-scrape-concurrency", "max-selectors", "max-selectors-per-namespace", "shutdown-delay", "scrape-gzip", "namespaces", "demand-ttl", "first-scrape-timeout", "gpu-agent-selector", "gpu-agent-namespace", "enable-external-metrics", "kubeconfig", "server-config"} {
		if fs.Lookup(name) == nil {
			t.Errorf("flag --%s does not exist", name)
		}
		if !strings.Contains(string(doc), "| `--"+name+"`") {
			t.Errorf("docs/flags.md has no table row for --%s", name)
		}
	}
}
