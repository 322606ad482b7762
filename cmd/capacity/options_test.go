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

	"github.com/spf13/pflag"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/cli"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/cli/clitest"
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
	clitest.Check(t, []clitest.Case{
		{Name: "rates", Args: []string{"--rates", "1,2,3"}},
		{Name: "ramp and mix", Args: []string{"--ramp", "1:10:1", "--prompts", mix, "--price-per-gpu-hour", "2.5", "--gpus-per-replica", "8"}},
		{Name: "no plan", WantErr: "exactly one of --rates and --ramp"},
		{Name: "both plans", Args: []string{"--rates", "1", "--ramp", "1:2:1"}, WantErr: "exactly one"},
		{Name: "bad slo", Args: []string{"--rates", "1", "--slo", "ttft<=1s"}, WantErr: "kind must be"},
		{Name: "bad mix", Args: []string{"--rates", "1", "--prompts", bad}, WantErr: "line 1: want \"max_tokens\""},
		{Name: "missing mix", Args: []string{"--rates", "1", "--prompts", filepath.Join(dir, "none")}, WantErr: "no such file"},
		{Name: "bad metric", Args: []string{"--rates", "1", "--hpa-metric", "gpu_utilization"}, WantErr: "hpa-metric must be"},
		{Name: "bad margin", Args: []string{"--rates", "1", "--margin", "1"}, WantErr: "margin must be in [0, 1)"},
		{Name: "bad replicas", Args: []string{"--rates", "1", "--min-replicas", "3", "--max-replicas", "2"}, WantErr: "min-replicas <= max-replicas"},
		{Name: "bad url", Args: []string{"--rates", "1", "--url", "127.0.0.1:8000"}, WantErr: "url must start with http://"},
		{Name: "bad gpus", Args: []string{"--rates", "1", "--gpus-per-replica", "0"}, WantErr: "gpus per replica"},
		{Name: "bad length", Args: []string{"--rates", "1", "--prompt-len", "uniform:9:3"}, WantErr: "length distribution"},
	}, func() (*pflag.FlagSet, func() error) {
		o := newOptions()
		return o.flags(), func() error { _, err := o.config(); return err }
	})
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
	clitest.DocsListFlags(t, "../../docs/capacity.md", "capacity", newOptions().flags())
}

// TestConfigRejectsNonFinite: NaN or infinite numbers are usage errors: a
// NaN price made every step's cost NaN, which --json cannot encode, and an
// infinite peak rate overflowed maxReplicas to minReplicas.
func TestConfigRejectsNonFinite(t *testing.T) {
	clitest.Check(t, []clitest.Case{
		{Name: "NaN price", Args: []string{"--rates", "1", "--price-per-gpu-hour", "NaN"}, WantErr: "price"},
		{Name: "infinite price", Args: []string{"--rates", "1", "--price-per-gpu-hour", "Inf"}, WantErr: "price"},
		{Name: "NaN peak rate", Args: []string{"--rates", "1", "--peak-rate", "NaN"}, WantErr: "peak-rate"},
		{Name: "infinite peak rate", Args: []string{"--rates", "1", "--peak-rate", "+Inf"}, WantErr: "peak-rate"},
		{Name: "infinite time scale", Args: []string{"--rates", "1", "--time-scale", "Inf"}, WantErr: "time"},
	}, func() (*pflag.FlagSet, func() error) {
		o := newOptions()
		return o.flags(), func() error { _, err := o.config(); return err }
	})
}
