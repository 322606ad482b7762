// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Command demo is `make demo`: on one machine, with nothing but this
// repository, it starts a real control plane, a one-replica Deployment of
// simulated vLLM servers, the inference-metrics-adapter and an HPA on
// inference_queue_size, ramps load up and down, prints a live table of what
// the HPA sees and does, and at the end writes a chart and a CSV of the run.
// Every process it starts is stopped by PID before it exits.
//
// It reads its settings from the environment: IMA_E2E_BIN (the control-plane
// binaries, from test/tools/build.sh), DEMO_DURATION and DEMO_OUT. See
// docs/demo.md.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	opts, err := optionsFromEnv(os.Getenv)
	if err == nil {
		err = opts.validate()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() { <-ctx.Done(); stop() }() // a second Ctrl-C ends the demo at once
	if err := run(ctx, opts.config(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		stop()
		os.Exit(1)
	}
}
