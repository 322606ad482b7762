// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Command inference-sim is a vLLM-compatible model server simulator: it
// speaks the OpenAI completions API, queues and batches like vLLM's
// scheduler on a virtual clock, and serves vLLM's /metrics. With
// --front-door-backend it is a router instead, holding requests while its
// backend has no healthy endpoint. See docs/inference-sim.md.
package main

import (
	"os"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/cmd/inference-sim/app"
)

func main() {
	os.Exit(app.Main(os.Args[1:], os.Stdout, os.Stderr))
}
