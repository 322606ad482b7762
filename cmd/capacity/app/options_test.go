// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"encoding/json"
	"flag"
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
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/capacity"
)

// recorded is a probe's --json output, recorded on the shootout's code trace.
const recorded = "../../../pkg/tools/capacity/testdata/probe-code-trace.json"

func TestConfig(t *testing.T) {
	dir := t.TempDir()
	mix := filepath.Join(dir, "mix.jsonl")
	if err := os.WriteFile(mix, []byte("{\"prompt\": \"hi\", \"max_tokens\": 8}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.json")
	if err := os.WriteFile(empty, []byte(`{"steps": []}`), 0o600); err != nil {
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
		{Name: "recipe options", Args: []string{"--rates", "1", "--output", "keda", "--workload-kind", "StatefulSet", "--model-load-time", "5m", "--keda-scaler-address", "ima.ops.svc:9443"}},
		{Name: "method with the HPA", Args: []string{"--rates", "1", "--forecast-method", "staffing", "--output", "hpa"}},
		{Name: "bad output", Args: []string{"--rates", "1", "--output", "yaml"}, WantErr: `output must be one of hpa, keda, both, single-metric, got "yaml"`},
		{Name: "bad kind", Args: []string{"--rates", "1", "--workload-kind", "ReplicaSet"}, WantErr: `workload kind must be Deployment or StatefulSet, got "ReplicaSet"`},
		{Name: "empty kind", Args: []string{"--rates", "1", "--workload-kind", ""}, WantErr: "workload-kind must be Deployment or StatefulSet"},
		{Name: "zero load time", Args: []string{"--rates", "1", "--model-load-time", "0s"}, WantErr: "model-load-time must be more than 0: give the measured time"},
		{Name: "load time past the window", Args: []string{"--rates", "1", "--model-load-time", "45m"}, WantErr: "at most 3600s), got 45m0s"},
		{Name: "bad method", Args: []string{"--rates", "1", "--forecast-method", "prophet"}, WantErr: `one of envelope, holt, staffing, auto, got "prophet"`},
		{Name: "method with KEDA", Args: []string{"--rates", "1", "--forecast-method", "holt", "--output", "both"}, WantErr: `forecast-method "holt" cannot go into a ScaledObject`},
		{Name: "empty scaler address", Args: []string{"--rates", "1", "--keda-scaler-address", ""}, WantErr: "keda-scaler-address must not be empty"},
		{Name: "from json", Args: []string{"--from-json", recorded}},
		{Name: "from json and a plan", Args: []string{"--from-json", recorded, "--ramp", "1:2:1"}, WantErr: "give no --rates or --ramp"},
		{Name: "from json missing", Args: []string{"--from-json", filepath.Join(dir, "none.json")}, WantErr: "from-json: open"},
		{Name: "from json not a run", Args: []string{"--from-json", mix}, WantErr: "not a capacity --json file"},
		{Name: "from json without steps", Args: []string{"--from-json", empty}, WantErr: "no steps in it"},
		{Name: "from json, bad options too", Args: []string{"--from-json", recorded, "--output", "x", "--min-replicas", "0"}, WantErr: "min-replicas <= max-replicas"},
	}, func() (*pflag.FlagSet, func() error) {
		o := NewOptions()
		return cli.FlagSet("capacity", o.Flags()), func() error { _, err := o.Config(); return err }
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

var update = flag.Bool("update", false, "rewrite the docs' flag block from --help")

// TestDocsListTheFlags fails when the docs page's capacity flag block differs
// from --help; go test ./cmd/capacity/app -update rewrites it.
func TestDocsListTheFlags(t *testing.T) {
	if *update {
		if err := clitest.WriteSections("../../../docs/capacity.md", "capacity", NewOptions().Flags()); err != nil {
			t.Fatal(err)
		}
	}
	clitest.DocsListSections(t, "../../../docs/capacity.md", "capacity", NewOptions().Flags())
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
		o := NewOptions()
		return cli.FlagSet("capacity", o.Flags()), func() error { _, err := o.Config(); return err }
	})
}

// TestRunFromRecorded: --from-json derives the recommendation from a
// recorded run, and --output picks the manifest written to stdout or to
// --hpa-out.
func TestRunFromRecorded(t *testing.T) {
	for _, tc := range []struct {
		output string
		want   []string
		absent []string
	}{
		{"hpa", []string{"kind: HorizontalPodAutoscaler", "name: " + capacity.MetricDemandForecast, `value: "2.983"`, `averageValue: "1"`},
			[]string{"kind: ScaledObject"}},
		{"keda", []string{"kind: ScaledObject", `targetValue: "2.983"`, "metricType: Value"}, []string{"kind: HorizontalPodAutoscaler"}},
		{"both", []string{"apply the HPA or the ScaledObject, not both", "kind: HorizontalPodAutoscaler", "\n---\n", "kind: ScaledObject"}, nil},
		{"single-metric", []string{"kind: HorizontalPodAutoscaler", "name: inference_batch_size", `averageValue: "2193m"`},
			[]string{capacity.MetricDemandForecast + "\n"}},
	} {
		t.Run(tc.output, func(t *testing.T) {
			dir := t.TempDir()
			for _, toFile := range []bool{false, true} {
				args := []string{"--from-json", recorded, "--hpa-name", "model", "--max-replicas", "8", "--output", tc.output, "--json", filepath.Join(dir, "again.json")}
				if toFile {
					args = append(args, "--hpa-out", filepath.Join(dir, "out.yaml"))
				}
				var out, errOut strings.Builder
				if err := run(context.Background(), args, &out, &errOut); err != nil {
					t.Fatalf("run %q: %v", args, err)
				}
				manifest := out.String()
				if toFile {
					b, err := os.ReadFile(filepath.Join(dir, "out.yaml"))
					if err != nil {
						t.Fatal(err)
					}
					manifest = string(b)
					if strings.Contains(out.String(), "apiVersion:") {
						t.Errorf("with --hpa-out the manifest is on stdout too:\n%s", out.String())
					}
				}
				for _, want := range tc.want {
					if !strings.Contains(manifest, want) {
						t.Errorf("--output %s (file %v) lacks %q:\n%s", tc.output, toFile, want, manifest)
					}
				}
				for _, no := range tc.absent {
					if strings.Contains(manifest, no) {
						t.Errorf("--output %s (file %v) has %q:\n%s", tc.output, toFile, no, manifest)
					}
				}
				for _, want := range []string{"CAPACITY", "recommended HPA (the recipe): " + capacity.MetricDemandForecast + " Value 2.983 per replica",
					"  - forecast: ", "  - guard: ", "  - scale down: a stabilization window of 300 s", "single-metric HPA (--output single-metric): inference_batch_size"} {
					if !strings.Contains(out.String(), want) {
						t.Errorf("the table lacks %q:\n%s", want, out.String())
					}
				}
			}
			b, err := os.ReadFile(filepath.Join(dir, "again.json"))
			if err != nil {
				t.Fatal(err)
			}
			var rep capacity.Report
			if err := json.Unmarshal(b, &rep); err != nil || rep.Recipe == nil || rep.Recipe.ForecastQuantity != "2.983" || len(rep.Steps) != 9 {
				t.Errorf("--json of the recorded run: %v, recipe %+v", err, rep.Recipe)
			}
		})
	}
}
