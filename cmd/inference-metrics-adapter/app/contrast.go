// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"io"

	kubectlapp "github.com/inference-metrics-adapter/inference-metrics-adapter/cmd/kubectl-inference/app"
)

// contrastMain implements `inference-metrics-adapter contrast`, the same
// command as `kubectl inference contrast` (cmd/kubectl-inference), kept for
// those who run the adapter's binary.
func contrastMain(args []string, stdout, stderr io.Writer) int {
	return kubectlapp.Contrast("inference-metrics-adapter contrast", args, stdout, stderr)
}
