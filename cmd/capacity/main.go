// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Command capacity measures what one replica of an OpenAI-compatible model
// server (vLLM, inference-sim, ...) sustains under latency SLOs, and
// recommends an HPA from it. It is its own binary, not a subcommand of the
// adapter: it is a client-side benchmark that users run from a laptop or a
// job against one replica, and needs none of the adapter's Kubernetes
// machinery. See docs/capacity.md.
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
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "capacity:", err)
		os.Exit(cli.ExitCode(err)) // 2 for bad flags
	}
}
