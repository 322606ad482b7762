// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Command fleet is `make fleet`: a benchmark of the adapter against a fleet
// of fake vLLM pods, through the real aggregator. It starts etcd,
// kube-apiserver and kube-controller-manager (the e2e framework), serves N
// fake pods on loopback addresses 127.2.x.y:8000 from one or more child
// processes of its own binary (each page is the vLLM V1 fixture of
// pkg/adapter/parse/testdata with the pod's own vllm:num_requests_waiting, which
// changes on command), creates N Running pods in the API server, starts the
// adapter registered through its APIService, and measures:
//
//   - freshness: from a pod's value change to the first N-pod answer
//     through the aggregator that shows it;
//   - the adapter's CPU per pod-scrape and its RSS over a quiet window;
//   - answer latency with 1, 10, 50, ... concurrent clients, for three
//     questions: the N-pod list (a Pods metric, as an HPA asks it; its
//     answer grows with N), the sum over the N pods (an External metric;
//     one value), and the floor (a Namespace that kube-apiserver answers
//     from its cache, with no aggregator and no adapter: the least any
//     answer costs on the machine), each asked for in JSON accepting gzip
//     (as kubectl asks) and in protobuf without compression (as the HPA
//     controller asks);
//   - the scrapes per pod per second the fleet received.
//
// Every process it starts is stopped by PID before it exits. Its flags
// are in options.go (go run ./test/fleet --help); see
// docs/performance.md#fleet-benchmark.
package main

import (
	"context"
	"fmt"
	"io"
	"os"

	cliflag "k8s.io/component-base/cli/flag"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/cli"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/test/e2e/framework"
)

// cgroupRoot is where cgroup hierarchies are mounted.
const cgroupRoot = "/sys/fs/cgroup"

func main() {
	ctx, stop := framework.ProgramContext(context.Background())
	err := command(ctx, os.Args[1:], os.Getenv(framework.BinEnv), os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		os.Exit(cli.ExitCode(err)) // 2 for a usage error, 1 for a failed run
	}
}

// command parses args, validates them and runs the benchmark (or, with the
// internal --serve-* flags, a fake-fleet child process); binDir is the
// control-plane binaries' directory. A problem with args is a
// cli.UsageError.
func command(ctx context.Context, args []string, binDir string, stdout io.Writer) error {
	o := newOptions(binDir)
	fss := o.flags()
	fs := o.flagSet(fss)
	fs.SetOutput(stdout)
	fs.Usage = func() {
		fmt.Fprint(stdout, helpHeader)
		cliflag.PrintSections(stdout, fss, 0)
	}
	if done, err := cli.ParseAndCheck(fs, args, o.check); done || err != nil {
		return framework.SingleDashHint(fs, args, err)
	}
	if o.isChild() {
		return serveFleet(ctx, o.child)
	}
	return run(ctx, *o, stdout)
}
