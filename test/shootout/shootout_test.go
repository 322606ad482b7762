package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// TestShootoutSmoke is the short form of `make shootout` that `make test`
// runs: the first 10 minutes of the code trace (one burst), compressed
// ×15, with two policies (queue-3 and gpu-80). It checks that the run
// exits cleanly, writes the report files, that each policy's HPA read its
// metric and scaled at least once, and that the summary was computed from
// the per-request records. It needs IMA_E2E_BIN (see docs/e2e.md) and
// takes about 3 minutes on 2 cores.
func TestShootoutSmoke(t *testing.T) {
	bin := os.Getenv(envBin)
	if bin == "" {
		t.Skipf("needs %s, the directory with etcd, kube-apiserver and kube-controller-manager: "+
			"%s=$(test/tools/build.sh | tail -n1) go test ./test/shootout", envBin, envBin)
	}
	if runtime.GOOS != "linux" {
		t.Skip("pods get loopback addresses 127.0.0.N, which needs Linux")
	}
	dir := t.TempDir()
	exe := filepath.Join(dir, "shootout")
	if out, err := exec.Command("go", "build", "-o", exe, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out := filepath.Join(dir, "out")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "-trace", "../../testdata/traces/azure-llm-2023-code.csv.gz",
		"-duration", "10m", "-policies", "queue-3,gpu-80", "-out", out)
	cmd.Env = append(os.Environ(), envBin+"="+bin)
	cmd.WaitDelay = 10 * time.Second
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stdout
	err := cmd.Run()
	t.Logf("shootout output:\n%s", stdout.String())
	if err != nil {
		t.Fatalf("shootout: %v", err)
	}
	for _, f := range []string{"azure-llm-2023-code.json", "azure-llm-2023-code.csv", "azure-llm-2023-code-requests.csv", "azure-llm-2023-code.svg"} {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: missing or empty (%v)", f, err)
		}
	}
	raw, err := os.ReadFile(filepath.Join(out, "azure-llm-2023-code.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep report
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatalf("report JSON: %v", err)
	}
	if len(rep.Runs) != 2 {
		t.Fatalf("report has %d runs, want 2", len(rep.Runs))
	}
	for _, run := range rep.Runs {
		s := run.Summary
		if !s.MetricRead {
			t.Errorf("%s: the HPA never reported a value of %s", run.Policy.Name, run.Policy.Metric)
		}
		if s.ScaleEvents < 1 || s.MaxReplicas < 2 {
			t.Errorf("%s: %d scale events, at most %d replicas; want the HPA to scale up at least once", run.Policy.Name, s.ScaleEvents, s.MaxReplicas)
		}
		if s.Requests != rep.Requests || s.Good < 1 || s.ReplicaHours <= 0 {
			t.Errorf("%s: %d requests (of %d replayed), %d good, %.3f GPU-hours", run.Policy.Name, s.Requests, rep.Requests, s.Good, s.ReplicaHours)
		}
	}
}
