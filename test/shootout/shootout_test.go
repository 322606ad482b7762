// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/loadgen"
)

// TestShootoutSmoke is the short form of `make shootout` that `make test`
// runs: the first 7 minutes of the code trace (531 requests in its fourth
// minute), compressed ×15, one repeat, a 1-minute warm-up, with four
// policies: queue-3 (a Pods metric), demand-3 (the Object metric
// inference_demand_per_replica at a Value of 3), queue-gpu (an HPA on
// two Pods metrics, the queue and GPU utilization) and oracle (the
// clairvoyant schedule at 3 requests per second per replica). It checks
// that the run exits cleanly, writes the report files, that each HPA read
// every one of its metrics and scaled at least once, that the oracle's
// Deployment followed its schedule, that the pods' signals were sampled,
// and that the summary was computed from the per-request records. It
// needs IMA_E2E_BIN (see docs/e2e.md) and takes about 3 minutes on 2
// cores (28 minutes of trace replayed in 112 s).
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
	cmd := exec.CommandContext(ctx, exe, "--trace", "../../testdata/traces/azure-llm-2023-code.csv.gz",
		"--duration", "7m", "--warmup", "1m", "--repeats", "1",
		"--policies", "queue-3,demand-3=inference_demand_per_replica:3,queue-gpu=inference_queue_size:3+gpu_utilization:0.8,oracle=oracle:3", "--out", out)
	cmd.Env = append(os.Environ(), envBin+"="+bin)
	cmd.WaitDelay = 10 * time.Second
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stdout
	err := cmd.Run()
	t.Logf("shootout output:\n%s", stdout.String())
	if err != nil {
		t.Fatalf("shootout: %v", err)
	}
	for _, f := range []string{"azure-llm-2023-code.json", "azure-llm-2023-code.csv", "azure-llm-2023-code-requests.csv", "azure-llm-2023-code.svg",
		"azure-llm-2023-code-summary.json", "azure-llm-2023-code-frontier.svg"} {
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
	if len(rep.Runs) != 4 || len(rep.Points) != 4 {
		t.Fatalf("report has %d runs and %d points, want 4 of each", len(rep.Runs), len(rep.Points))
	}
	// The oracle's schedule, from the same 7 minutes of the trace.
	trace, err := loadgen.ReadTraceFile("../../testdata/traces/azure-llm-2023-code.csv.gz")
	if err != nil {
		t.Fatal(err)
	}
	trace = slices.DeleteFunc(trace, func(r loadgen.TraceRequest) bool { return r.At > 7*time.Minute })
	steps := oracle{Capacity: 3}.schedule(trace, oracleLead(newTiming(15, time.Minute)), 1, 8)
	for _, run := range rep.Runs {
		s := run.Summary
		if run.Policy.Oracle != nil {
			checkOracleFollowed(t, run, steps)
		}
		for _, m := range run.Policy.metrics() {
			if !slices.Contains(s.MetricsRead, metricKey(m)) {
				t.Errorf("%s: the HPA never reported a value of %s (it read %v)", run.Policy.Name, metricKey(m), s.MetricsRead)
			}
		}
		pods := 0
		for _, smp := range run.Samples {
			for _, ps := range smp.Pods {
				if ps.Queue != nil && ps.Batch != nil && ps.KV != nil && ps.GPU != nil {
					pods++
				}
			}
		}
		if pods == 0 {
			t.Errorf("%s: no sample of a pod's queue, batch, KV cache and GPU utilization", run.Policy.Name)
		}
		if s.AfterWarmup.Requests == 0 || s.AfterWarmup.Requests >= s.Requests || s.AfterWarmup.GPUHours <= 0 {
			t.Errorf("%s: after the warm-up %d of %d requests, %.3f GPU-hours", run.Policy.Name, s.AfterWarmup.Requests, s.Requests, s.AfterWarmup.GPUHours)
		}
		if s.ScaleEvents < 1 || s.MaxReplicas < 2 {
			t.Errorf("%s: %d scale events, at most %d replicas; want the fleet to scale up at least once", run.Policy.Name, s.ScaleEvents, s.MaxReplicas)
		}
		if s.Requests != rep.Requests || s.Good < 1 || s.ReplicaHours <= 0 {
			t.Errorf("%s: %d requests (of %d replayed), %d good, %.3f GPU-hours", run.Policy.Name, s.Requests, rep.Requests, s.Good, s.ReplicaHours)
		}
	}
}

// checkOracleFollowed checks that the oracle's Deployment asked for each
// count of its schedule (steps, more than one), in the schedule's order.
func checkOracleFollowed(t *testing.T, run runResult, steps []oracleStep) {
	t.Helper()
	if len(steps) < 2 {
		t.Fatalf("%s: the schedule has %d steps, want a change to check", run.Policy.Name, len(steps))
	}
	var desired []int
	for _, smp := range run.Samples {
		if len(desired) == 0 || desired[len(desired)-1] != smp.Desired {
			desired = append(desired, smp.Desired)
		}
	}
	var want []int
	for _, s := range steps {
		want = append(want, s.Replicas)
	}
	// Every step in order; the sampling can miss none (a step lasts at
	// least a minute simulated, 4 s wall, against a 250 ms sample), but
	// the replay ends before the schedule's last step down.
	if !slices.Equal(desired, want[:min(len(want), len(desired))]) || len(desired) < len(want)-1 {
		t.Errorf("%s: desired replicas went %v, want the schedule's %v", run.Policy.Name, desired, want)
	}
	for _, smp := range run.Samples {
		if len(smp.HPA) > 0 {
			t.Errorf("%s: an HPA was read at %s; the oracle has none", run.Policy.Name, smp.T)
			break
		}
	}
}
