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
	"os"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/cmd/capacity/app"
)

func main() {
	os.Exit(app.Main(os.Args[1:], os.Stdout, os.Stderr))
}
