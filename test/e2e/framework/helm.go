// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// What the chart tests (test/helm, and test/e2e's install, upgrade and
// monitoring tests) share about the Helm chart.
const (
	// BinEnv names the environment variable with the directory that
	// test/tools/build.sh prints: etcd, kube-apiserver,
	// kube-controller-manager and helm.
	BinEnv = "IMA_E2E_BIN"
	// ChartPath is the chart's directory relative to the repository root.
	ChartPath = "deploy/helm/inference-metrics-adapter"
	// HelmRelease is the release name the tests install and render as.
	HelmRelease = "inference-metrics-adapter"
	// ChartNamespace is the namespace the tests render the chart in.
	ChartNamespace = "inference-metrics-adapter"
	// KubeVersion is the control plane's version, helm's --kube-version.
	KubeVersion = "1.37.2"
)

// ChartDir returns the chart's directory in the repository.
func ChartDir() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, ChartPath), nil
}

// ChartCIValues returns the path of the chart's ci/<name>-values.yaml.
func ChartCIValues(chartDir, name string) string {
	return filepath.Join(chartDir, "ci", name+"-values.yaml")
}

// HelmBinary returns the helm executable in binDir (the directory BinEnv
// names), or an error saying how to get one.
func HelmBinary(binDir string) (string, error) {
	if binDir == "" {
		return "", fmt.Errorf("%s is not set: set it to the directory test/tools/build.sh prints", BinEnv)
	}
	h := filepath.Join(binDir, "helm")
	if _, err := os.Stat(h); err != nil {
		return "", fmt.Errorf("%s=%s has no helm: %w", BinEnv, binDir, err)
	}
	return h, nil
}

// RunHelm runs helm with args, bounded by ctx, with env added to this
// process's environment, and returns its standard output. The error quotes
// the command and both outputs.
func RunHelm(ctx context.Context, helm string, env []string, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, helm, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}
