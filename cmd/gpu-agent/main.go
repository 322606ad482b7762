// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Command gpu-agent is the node agent of inference-metrics-adapter: it reads
// GPU activity through NVML, attributes GPUs to pods through the kubelet
// pod-resources API, and serves both on /metrics. See docs/gpu-agent.md.
package main

import (
	"os"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/cmd/gpu-agent/app"
)

func main() {
	os.Exit(app.Main(os.Args[1:], os.Stdout, os.Stderr))
}
