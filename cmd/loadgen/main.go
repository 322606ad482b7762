// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Command loadgen drives an OpenAI-compatible server (inference-sim, vLLM)
// with open-loop Poisson load and prints TTFT, inter-token and end-to-end
// latency percentiles. See docs/inference-sim.md.
package main

import (
	"os"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/cmd/loadgen/app"
)

func main() {
	os.Exit(app.Main(os.Args[1:], os.Stdout, os.Stderr))
}
