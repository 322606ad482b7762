// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Command kubectl-inference is a kubectl plugin: `kubectl inference
// contrast` shows, per pod, GPU activity next to the model server's own
// saturation signals, and `kubectl inference top` shows, per Deployment,
// GPUs allocated, how busy they are and the useful output they produce —
// all read through the custom metrics API as the HPA reads it. See
// docs/kubectl-plugin.md.
package main

import (
	"os"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/cmd/kubectl-inference/app"
)

func main() {
	os.Exit(app.Main(os.Args[1:], os.Stdout, os.Stderr))
}
