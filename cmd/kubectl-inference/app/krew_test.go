// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// krewPlugin is the part of krew's Plugin manifest (v1alpha2) checked here.
type krewPlugin struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string `json:"version"`
		ShortDescription string `json:"shortDescription"`
		Platforms        []struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			URI    string `json:"uri"`
			SHA256 string `json:"sha256"`
			Files  []struct {
				From string `json:"from"`
				To   string `json:"to"`
			} `json:"files"`
			Bin string `json:"bin"`
		} `json:"platforms"`
	} `json:"spec"`
}

const manifestPath = "../../../plugins/krew/inference.yaml"

func readManifest(t *testing.T, b []byte) krewPlugin {
	t.Helper()
	var p krewPlugin
	if err := yaml.Unmarshal(b, &p); err != nil {
		t.Fatalf("manifest: %v", err)
	}
	return p
}

// TestKrewManifest: the manifest names this binary and, per platform, the
// archive hack/release-binaries.sh builds, with placeholders a release
// fills in.
func TestKrewManifest(t *testing.T) {
	b, err := os.ReadFile(manifestPath)
	if err != nil {
		t.Fatal(err)
	}
	p := readManifest(t, b)
	if p.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || p.Kind != "Plugin" || p.Metadata.Name != "inference" {
		t.Errorf("manifest header: %s %s %s", p.APIVersion, p.Kind, p.Metadata.Name)
	}
	if p.Spec.Version != "VERSION" || p.Spec.ShortDescription == "" || len(p.Spec.Platforms) == 0 {
		t.Errorf("spec: version %q, %d platforms", p.Spec.Version, len(p.Spec.Platforms))
	}
	for _, pl := range p.Spec.Platforms {
		os, arch := pl.Selector.MatchLabels["os"], pl.Selector.MatchLabels["arch"]
		archive := fmt.Sprintf("/releases/download/VERSION/kubectl-inference-VERSION-%s-%s.tar.gz", os, arch)
		if !strings.HasSuffix(pl.URI, archive) {
			t.Errorf("%s/%s: uri %s, want it to end in %s", os, arch, pl.URI, archive)
		}
		if want := "SHA256_" + strings.ToUpper(os+"_"+arch); pl.SHA256 != want {
			t.Errorf("%s/%s: sha256 %q, want the placeholder %s", os, arch, pl.SHA256, want)
		}
		if pl.Bin != "kubectl-inference" || len(pl.Files) == 0 || pl.Files[0].From != "kubectl-inference-*/kubectl-inference" {
			t.Errorf("%s/%s: bin %q, files %+v", os, arch, pl.Bin, pl.Files)
		}
	}
}

// TestStampKrew: hack/stamp-krew.sh fills every placeholder from a
// SHA256SUMS file, and refuses one that lacks a platform.
func TestStampKrew(t *testing.T) {
	dir := t.TempDir()
	sums := filepath.Join(dir, "SHA256SUMS")
	var lines []string
	for i, platform := range []string{"linux-amd64", "linux-arm64"} {
		lines = append(lines, fmt.Sprintf("%064x  kubectl-inference-v1.2.3-%s.tar.gz", i+1, platform))
	}
	if err := os.WriteFile(sums, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("../../../hack/stamp-krew.sh", "v1.2.3", sums).Output()
	if err != nil {
		t.Fatalf("stamp-krew.sh: %v", err)
	}
	if regexp.MustCompile(`VERSION|SHA256_`).Match(out) {
		t.Errorf("placeholders left:\n%s", out)
	}
	p := readManifest(t, out)
	hex := regexp.MustCompile(`^[0-9a-f]{64}$`)
	for _, pl := range p.Spec.Platforms {
		if !hex.MatchString(pl.SHA256) || !strings.Contains(pl.URI, "/v1.2.3/kubectl-inference-v1.2.3-") {
			t.Errorf("stamped platform: %s %s", pl.URI, pl.SHA256)
		}
	}
	if p.Spec.Version != "v1.2.3" {
		t.Errorf("version %q", p.Spec.Version)
	}
	if err := os.WriteFile(sums, []byte(lines[0]+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("../../../hack/stamp-krew.sh", "v1.2.3", sums).CombinedOutput(); err == nil || !strings.Contains(string(out), "no sha256 for kubectl-inference-v1.2.3-linux-arm64.tar.gz") {
		t.Errorf("a missing platform: err %v, output %s", err, out)
	}
}
