// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Command inference-metrics-adapter serves inference servers' queue size,
// batch size and KV-cache usage, scraped directly from their /metrics pages,
// through the Kubernetes custom metrics API.
package main

import (
	"os"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/cmd/inference-metrics-adapter/app"
)

func main() {
	os.Exit(app.Main(os.Args[1:], os.Stdout, os.Stderr))
}
