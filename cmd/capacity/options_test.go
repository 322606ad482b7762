package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/cli"
)

func TestConfig(t *testing.T) {
	dir := t.TempDir()
	mix := filepath.Join(dir, "mix.jsonl")
	if err := os.WriteFile(mix, []byte("{\"prompt\": \"hi\", \"max_tokens\": 8}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(bad, []byte("{\"prompt\": \"hi\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"rates", []string{"--rates", "1,2,3"}, ""},
		{"ramp and mix", []string{"--ramp", "1:10:1", "--prompts", mix, "--price-per-gpu-hour", "2.5", "--gpus-per-replica", "8"}, ""},
		{"no plan", nil, "exactly one of --rates and --ramp"},
		{"both plans", []string{"--rates", "1", "--ramp", "1:2:1"}, "exactly one"},
		{"bad slo", []string{"--rates", "1", "--slo", "ttft<=1s"}, "kind must be"},
		{"bad mix", []string{"--rates", "1", "--prompts", bad}, "line 1: want \"max_tokens\""},
		{"missing mix", []string{"--rates", "1", "--prompts", filepath.Join(dir, "none")}, "no such file"},
		{"bad metric", []string{"--rates", "1", "--hpa-metric", "gpu_utilization"}, "hpa-metric must be"},
		{"bad margin", []string{"--rates", "1", "--margin", "1"}, "margin must be in [0, 1)"},
		{"bad replicas", []string{"--rates", "1", "--min-replicas", "3", "--max-replicas", "2"}, "min-replicas <= max-replicas"},
		{"bad url", []string{"--rates", "1", "--url", "127.0.0.1:8000"}, "url must start with http://"},
		{"bad gpus", []string{"--rates", "1", "--gpus-per-replica", "0"}, "gpus per replica"},
		{"bad length", []string{"--rates", "1", "--prompt-len", "uniform:9:3"}, "length distribution"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := newOptions()
			if err := o.flags().Parse(tc.args); err != nil {
				t.Fatalf("parse: %v", err)
			}
			_, err := o.config()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestRunUnreachableAndUnknownModel: the command fails with a clear message
// before sending any load.
func TestRunUnreachableAndUnknownModel(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	_ = ln.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"data": []map[string]string{{"id": "served-model"}}})
	}))
	defer srv.Close()
	for _, tc := range []struct{ url, want string }{
		{closed, "cannot reach the endpoint " + closed},
		{srv.URL, `does not serve model "meta-llama/Llama-3.1-8B-Instruct"; it lists ["served-model"]`},
	} {
		var out, errOut strings.Builder
		err := run(context.Background(), []string{"--url", tc.url, "--rates", "1"}, &out, &errOut)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run against %s: %v, want %q", tc.url, err, tc.want)
		}
		if code := cli.ExitCode(err); code != 1 {
			t.Errorf("run against %s: exit status %d, want 1 (a failure, not a usage error)", tc.url, code)
		}
	}
	var out, errOut strings.Builder
	if err := run(context.Background(), []string{"--rates", "nope"}, &out, &errOut); cli.ExitCode(err) != 2 {
		t.Errorf("run --rates nope = %v: exit status %d, want 2", err, cli.ExitCode(err))
	}
}

func TestDocsListTheFlags(t *testing.T) {
	doc, err := os.ReadFile("../../docs/capacity.md")
	if err != nil {
		t.Fatalf("reading docs: %v", err)
	}
	_, after, ok := strings.Cut(string(doc), "<!-- capacity flags -->\n```\n")
	if !ok {
		t.Fatalf("docs have no capacity flags block")
	}
	block, _, _ := strings.Cut(after, "```")
	if want := newOptions().flags().FlagUsages(); block != want {
		t.Errorf("docs flag block differs from --help; want:\n%s\ngot:\n%s", want, block)
	}
}
