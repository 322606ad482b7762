// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"testing"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/cli/clitest"
)

// TestHelp: --help prints the usage and then the flags in their sections,
// each flag once, on stdout, and exits 0; an unknown flag exits 2.
func TestHelp(t *testing.T) {
	clitest.CheckSectionedHelp(t, Main, NewOptions().Flags(), []string{"Server flags:", "Engine flags:", "Front door flags:", "Logging flags:"})
}
