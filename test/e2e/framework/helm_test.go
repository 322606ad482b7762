// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestHelmBinary(t *testing.T) {
	withHelm := t.TempDir()
	helm := filepath.Join(withHelm, "helm")
	if err := os.WriteFile(helm, []byte("#!/bin/sh\necho \"args: $*\"; echo \"env: $IMA_TEST_VAR\"; [ \"$1\" != fail ] || { echo oops >&2; exit 3; }\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, dir, want, wantErr string
	}{
		{name: "unset", dir: "", wantErr: BinEnv + " is not set"},
		{name: "no helm", dir: t.TempDir(), wantErr: "has no helm"},
		{name: "helm", dir: withHelm, want: helm},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := HelmBinary(tc.dir)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("HelmBinary = %q, %v; want %q", got, err, tc.want)
			}
		})
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := RunHelm(ctx, helm, []string{"IMA_TEST_VAR=set"}, "template", "x")
	if err != nil || out != "args: template x\nenv: set\n" {
		t.Errorf("RunHelm = %q, %v; want the arguments and the added environment", out, err)
	}
	if _, err := RunHelm(ctx, helm, nil, "fail"); err == nil || !strings.Contains(err.Error(), "oops") || !strings.Contains(err.Error(), "helm fail") {
		t.Errorf("a failing helm: err = %v, want the command and its stderr", err)
	}
}
