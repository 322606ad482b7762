// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Package e2e holds the end-to-end tests: the adapter registered as
// custom.metrics.k8s.io on a real kube-apiserver, kube-controller-manager's
// HPA controller scaling Deployments of simulated model servers on its
// answers. They run only when IMA_E2E_BIN names the directory with etcd,
// kube-apiserver, kube-controller-manager and helm (test/tools/build.sh
// prints it); see docs/e2e.md.
package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/test/e2e/framework"
)

// binEnv names the directory with the control-plane binaries and helm.
const binEnv = framework.BinEnv

// env is the environment TestMain set up; nil when binEnv is unset.
var env *framework.Environment

func TestMain(m *testing.M) {
	if len(os.Args) == 2 && os.Args[1] == postRenderArg {
		// helm runs this binary as a post-renderer (see checkUpgrade).
		if err := postRenderServiceToLoopback(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	bin := os.Getenv(binEnv)
	if bin == "" {
		return m.Run() // every test skips, saying why
	}
	root, err := framework.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	start := time.Now()
	e, err := framework.Setup(context.Background(), root, bin)
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: setup failed: %v\n", err)
		if e != nil {
			framework.DumpLogs(os.Stderr, e.Dir+"/logs", 40)
			fmt.Fprintf(os.Stderr, "e2e: files kept in %s\n", e.Dir)
		}
		return 1
	}
	fmt.Fprintf(os.Stderr, "e2e: environment ready in %s (API server %s, files in %s)\n",
		time.Since(start).Round(100*time.Millisecond), e.ControlPlane.URL, e.Dir)
	if u := e.Unavailable(); u != "" {
		fmt.Fprintf(os.Stderr, "e2e: not running: %s\n", u)
	}
	env = e
	code := m.Run()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := e.Teardown(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: teardown: %v\n", err)
		code = 1
	}
	if code != 0 {
		framework.DumpLogs(os.Stderr, e.ControlPlane.LogDir, 40)
		fmt.Fprintf(os.Stderr, "e2e: files kept in %s\n", e.Dir)
		return code
	}
	if err := os.RemoveAll(e.Dir); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: remove %s: %v\n", e.Dir, err)
	}
	return code
}

// requireEnv returns the environment, skipping t when the suite was not
// given the control-plane binaries or a needed component is not written yet.
func requireEnv(t *testing.T, components ...string) *framework.Environment {
	t.Helper()
	if env == nil {
		t.Skipf("end-to-end tests need %s, the directory with etcd, kube-apiserver, kube-controller-manager and helm: "+
			"run `make e2e`, or `%s=$(test/tools/build.sh | tail -n1) go test ./test/e2e/...`", binEnv, binEnv)
	}
	env.Require(t, components...)
	return env
}
