// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Command loadgen drives an OpenAI-compatible server (inference-sim, vLLM)
// with open-loop Poisson load and prints TTFT, inter-token and end-to-end
// latency percentiles. See docs/inference-sim.md.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(cli.ExitCode(err)) // 2 for bad flags
	}
}
