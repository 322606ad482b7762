// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
)

// TestStartAdapterFailureReturnsError checks that an adapter that exits at
// start is reported as an error, with what was started stopped, rather
// than a panic in the clean-up (a regression: the clean-up used the nil
// result).
func TestStartAdapterFailureReturnsError(t *testing.T) {
	dir := t.TempDir()
	ca, err := NewCA("test-admin-ca")
	if err != nil {
		t.Fatal(err)
	}
	admin, err := ca.Issue(CertSpec{CommonName: "admin", Client: true})
	if err != nil {
		t.Fatal(err)
	}
	cp := &ControlPlane{Dir: dir, LogDir: dir, Admin: admin, Dynamic: dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())}
	exits := filepath.Join(dir, "exits")
	if err := os.WriteFile(exits, []byte("#!/bin/sh\necho refusing to start: memory limit too small >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	a, err := StartAdapter(context.Background(), cp, AdapterConfig{Binary: exits, Namespace: "ns", Service: "svc", Kubeconfig: filepath.Join(dir, "none")})
	if err == nil || a != nil {
		t.Fatalf("StartAdapter = %v, %v; want no adapter and an error", a, err)
	}
	for _, want := range []string{"svc exited", "refusing to start: memory limit too small"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}
