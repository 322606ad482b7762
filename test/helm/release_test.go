// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package helm

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

const stampScript = "../../hack/stamp-chart.sh"

// copyChart copies the chart into a new temporary directory and returns the
// copy's path: the stamp script edits the chart in place.
func copyChart(t *testing.T) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "inference-metrics-adapter")
	if err := os.CopyFS(dst, os.DirFS(chartDir)); err != nil {
		t.Fatalf("copy the chart: %v", err)
	}
	return dst
}

// stamp runs hack/stamp-chart.sh as the release workflow does, with REGISTRY
// set to registry (empty: unset).
func stamp(t *testing.T, registry string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{stampScript}, args...)...)
	cmd.Env = append(os.Environ(), "REGISTRY="+registry)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// containerImage returns the image of the first container of the only object
// of kind in objs.
func containerImage(t *testing.T, objs []object, kind string) string {
	t.Helper()
	of := byKind(objs, kind)
	if len(of) != 1 {
		t.Fatalf("%d %ss rendered, want 1", len(of), kind)
	}
	containers := list(get(of[0], "spec", "template", "spec", "containers"))
	if len(containers) == 0 {
		t.Fatalf("%s %s has no containers", kind, of[0].name())
	}
	c, _ := containers[0].(map[string]any)
	return str(c, "image")
}

// TestVerifyStampChart stamps a copy of the chart the way the release workflow
// does and checks what a user of the released chart gets: the chart's version
// and appVersion, the adapter's and the gpu-agent's images (repository and
// tag), a chart that lints, and the package name `helm push` uploads.
func TestVerifyStampChart(t *testing.T) {
	helm := helmBinary(t)
	tests := []struct {
		name, tag, registry string
		wantVersion         string
		wantAdapter         string
		wantAgent           string
	}{
		{
			name:        "release, default registry",
			tag:         "v1.2.3",
			wantVersion: "1.2.3",
			wantAdapter: "ghcr.io/inference-metrics-adapter/inference-metrics-adapter:1.2.3",
			wantAgent:   "ghcr.io/inference-metrics-adapter/gpu-agent:1.2.3",
		},
		{
			name:        "prerelease, registry from the repository variable",
			tag:         "v0.4.0-rc.1",
			registry:    "registry.example.com:5000/team/ima",
			wantVersion: "0.4.0-rc.1",
			wantAdapter: "registry.example.com:5000/team/ima/inference-metrics-adapter:0.4.0-rc.1",
			wantAgent:   "registry.example.com:5000/team/ima/gpu-agent:0.4.0-rc.1",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			chart := copyChart(t)
			if out, err := stamp(t, tc.registry, tc.tag, chart); err != nil {
				t.Fatalf("stamp-chart.sh %s: %v\n%s", tc.tag, err, out)
			}

			shown, err := runHelm(t, helm, "show", "chart", chart)
			if err != nil {
				t.Fatal(err)
			}
			var meta struct {
				Version    string `json:"version"`
				AppVersion string `json:"appVersion"`
			}
			if err := yaml.Unmarshal([]byte(shown), &meta); err != nil {
				t.Fatalf("helm show chart: %v\n%s", err, shown)
			}
			if meta.Version != tc.wantVersion || meta.AppVersion != tc.wantVersion {
				t.Errorf("stamped chart has version %q appVersion %q, want both %q", meta.Version, meta.AppVersion, tc.wantVersion)
			}

			rendered, err := runHelm(t, helm, append([]string{"template", release, chart, "--namespace", namespace,
				"--kube-version", kubeVersion, "--set", "gpuAgent.enabled=true"}, requiredValues...)...)
			if err != nil {
				t.Fatal(err)
			}
			objs := decode(t, rendered)
			if got := containerImage(t, objs, "Deployment"); got != tc.wantAdapter {
				t.Errorf("adapter image %q, want %q", got, tc.wantAdapter)
			}
			if got := containerImage(t, objs, "DaemonSet"); got != tc.wantAgent {
				t.Errorf("gpu-agent image %q, want %q", got, tc.wantAgent)
			}

			if out, err := runHelm(t, helm, append([]string{"lint", chart}, requiredValues...)...); err != nil {
				t.Errorf("helm lint of the stamped chart: %v\n%s", err, out)
			}
			dist := t.TempDir()
			if _, err := runHelm(t, helm, "package", chart, "--destination", dist); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(dist, "inference-metrics-adapter-"+tc.wantVersion+".tgz")); err != nil {
				t.Errorf("helm package did not write the file the release workflow pushes: %v", err)
			}
		})
	}
}

// TestVerifyStampChartRefuses checks that a tag that is not a release version, or a
// registry that is not an image repository prefix, fails the release before
// anything is pushed and leaves the chart as it was.
func TestVerifyStampChartRefuses(t *testing.T) {
	tests := []struct {
		name     string
		args     []string // the script's arguments; "CHART" stands for the copy's path
		registry string
	}{
		{name: "no v", args: []string{"1.2.3", "CHART"}},
		{name: "two numbers", args: []string{"v1.2", "CHART"}},
		{name: "a word", args: []string{"vlatest", "CHART"}},
		{name: "leading zero", args: []string{"v01.2.3", "CHART"}},
		{name: "trailing text", args: []string{"v1.2.3 x", "CHART"}},
		{name: "branch name", args: []string{"main", "CHART"}},
		{name: "upper-case registry", args: []string{"v1.2.3", "CHART"}, registry: "ghcr.io/Org"},
		{name: "registry with a trailing slash", args: []string{"v1.2.3", "CHART"}, registry: "ghcr.io/org/"},
		{name: "registry with a tag", args: []string{"v1.2.3", "CHART"}, registry: "ghcr.io/org:v1"},
		{name: "no chart directory", args: []string{"v1.2.3"}},
		{name: "not a chart", args: []string{"v1.2.3", "CHART/templates"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			chart := copyChart(t)
			files := []string{"Chart.yaml", "values.yaml"}
			before := map[string][]byte{}
			for _, f := range files {
				b, err := os.ReadFile(filepath.Join(chart, f))
				if err != nil {
					t.Fatal(err)
				}
				before[f] = b
			}
			var args []string
			for _, a := range tc.args {
				args = append(args, strings.Replace(a, "CHART", chart, 1))
			}
			out, err := stamp(t, tc.registry, args...)
			if err == nil {
				t.Fatalf("stamp-chart.sh %q with REGISTRY=%q succeeded, want a refusal:\n%s", tc.args, tc.registry, out)
			}
			for _, f := range files {
				after, rerr := os.ReadFile(filepath.Join(chart, f))
				if rerr != nil {
					t.Fatal(rerr)
				}
				if !bytes.Equal(before[f], after) {
					t.Errorf("refused stamp changed %s", f)
				}
			}
		})
	}
}
