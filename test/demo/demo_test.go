// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestDemo runs the demo binary for 50 s, as `make demo` would with
// DEMO_DURATION=50s, and checks that it exits cleanly, leaves no process
// behind, writes the chart and the CSV, and that the HPA scaled the
// Deployment past one replica. It needs IMA_E2E_BIN (see docs/e2e.md).
func TestDemo(t *testing.T) {
	bin := os.Getenv(envBin)
	if bin == "" {
		t.Skipf("needs %s, the directory with etcd, kube-apiserver and kube-controller-manager: "+
			"%s=$(test/tools/build.sh | tail -n1) go test ./test/demo", envBin, envBin)
	}
	if runtime.GOOS != "linux" {
		t.Skip("pods get loopback addresses 127.0.0.N, which needs Linux")
	}
	dir := t.TempDir()
	demo := filepath.Join(dir, "demo")
	build := exec.Command("go", "build", "-o", demo, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	outDir := filepath.Join(dir, "out")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, demo)
	cmd.Env = append(os.Environ(), envBin+"="+bin, envDuration+"=50s", envOut+"="+outDir)
	cmd.WaitDelay = 10 * time.Second
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stdout
	err := cmd.Run()
	t.Logf("demo output:\n%s", stdout.String())
	if err != nil {
		t.Fatalf("demo: %v", err)
	}
	out := stdout.String()
	if !strings.Contains(out, "demo: no child processes left") {
		t.Errorf("the demo did not report its child-process check clean")
	}
	if m := regexp.MustCompile(`files in (\S+)`).FindStringSubmatch(out); m == nil {
		t.Errorf("the demo did not say where its files are")
	} else if left := processesMentioning(t, m[1]); len(left) > 0 {
		t.Errorf("processes of the run still running: %v", left)
	}

	for _, f := range []string{"demo.svg", "demo.csv"} {
		if st, err := os.Stat(filepath.Join(outDir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: missing or empty (%v)", f, err)
		}
	}
	b, err := os.ReadFile(filepath.Join(outDir, "demo.csv"))
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil {
		t.Fatalf("demo.csv: %v", err)
	}
	ready := slices.Index(csvHeader, "ready_pods")
	peak := 0
	for _, r := range recs[1:] {
		n, _ := strconv.Atoi(r[ready])
		peak = max(peak, n)
	}
	if len(recs) < 10 {
		t.Errorf("demo.csv has %d rows, want one per %s over 50s", len(recs)-1, sampleEvery)
	}
	if peak < 2 {
		t.Errorf("the Deployment never had more than %d ready pods; the HPA did not scale up", peak)
	}
}

// processesMentioning lists running processes whose command line holds s.
func processesMentioning(t *testing.T, s string) []string {
	t.Helper()
	paths, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var out []string
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, []byte(s)) {
			continue
		}
		out = append(out, filepath.Base(filepath.Dir(p))+" "+strings.ReplaceAll(string(b), "\x00", " "))
	}
	return out
}
