// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package options

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestMain gives the package's tests an adapter namespace, as a pod has:
// with GPU metrics on (the default), Validate needs one.
func TestMain(m *testing.M) {
	if os.Getenv("POD_NAMESPACE") == "" {
		os.Setenv("POD_NAMESPACE", "adapter")
	}
	os.Exit(m.Run())
}

// The agent namespace is never "any": it defaults to the adapter's own
// namespace, and Validate fails clearly when that is unknown.
// Was wrong: by default agent-labelled pods in any namespace were trusted.
func TestAgentNamespaceDefaultsToOwn(t *testing.T) {
	dir := t.TempDir()
	nsFile := filepath.Join(dir, "namespace")
	if err := os.WriteFile(nsFile, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		env     string
		file    string
		args    []string
		want    string // the resolved namespace
		wantErr string
	}{
		{name: "flag wins", env: "env-ns", file: nsFile, args: []string{"--gpu-agent-namespace=gpu"}, want: "gpu"},
		{name: "POD_NAMESPACE", env: "env-ns", file: nsFile, want: "env-ns"},
		{name: "service account file", file: nsFile, want: "from-file"},
		{name: "unknown", file: filepath.Join(dir, "missing"), wantErr: "--gpu-agent-namespace is empty and the adapter's own namespace is unknown"},
		{name: "GPU metrics off", file: filepath.Join(dir, "missing"), args: []string{"--gpu-agent-selector="}, want: ""},
		{name: "bad demand bounds", env: "env-ns", args: []string{"--max-selectors-per-namespace=10", "--max-selectors=5"}, wantErr: "--max-selectors (5) must be at least --max-selectors-per-namespace (10)"},
		{name: "no demand", env: "env-ns", args: []string{"--max-selectors-per-namespace=0"}, wantErr: "--max-selectors-per-namespace must be at least 1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("POD_NAMESPACE", tc.env)
			o := NewOptions()
			o.namespaceFile = tc.file
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			o.AddFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := o.Validate()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Validate() = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := o.Config()
			if err != nil {
				t.Fatal(err)
			}
			if cfg.GPUAgentNamespace != tc.want {
				t.Fatalf("agent namespace %q, want %q", cfg.GPUAgentNamespace, tc.want)
			}
			if cfg.MaxSelectorsPerNamespace != 64 || cfg.MaxSelectors != 2048 {
				t.Fatalf("demand bounds %d/%d, want the defaults 64/2048", cfg.MaxSelectorsPerNamespace, cfg.MaxSelectors)
			}
		})
	}
}
