// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/cli/clitest"
)

// TestDocCommands: every `kubectl inference` command line in README.md and
// docs/ gets past flag validation: with no kubeconfig to be found (an empty
// HOME, KUBECONFIG naming no file, not in a cluster) Main stops right after
// it, at loading the kubeconfig, with exit 1 (a refused flag is exit 2).
func TestDocCommands(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("KUBECONFIG", filepath.Join(home, "none"))
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	clitest.CheckDocCommands(t, "kubectl-inference", func(args []string) error {
		var stderr strings.Builder
		if code := Main(args, io.Discard, &stderr); code != 1 || !strings.Contains(stderr.String(), "loading kubeconfig") {
			return fmt.Errorf("exit %d, not 1 at loading the kubeconfig: %s", code, stderr.String())
		}
		return nil
	})
}
