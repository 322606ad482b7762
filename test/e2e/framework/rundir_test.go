// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

// A run's directory is removed after a clean run and kept (and said where)
// after a failed run, a failed teardown, or with keep; teardown always runs,
// and klog's output lands in <name>.log meanwhile.
func TestRunDir(t *testing.T) {
	t.Cleanup(func() { klog.SetOutput(os.Stderr); klog.LogToStderr(true) })
	runErr, downErr := errors.New("run failed"), errors.New("teardown failed")
	tests := []struct {
		name     string
		err      error
		keep     bool
		teardown error
		wantKept bool
		wantErrs []error
	}{
		{name: "clean run removes the directory"},
		{name: "keep keeps it", keep: true, wantKept: true},
		{name: "failed run keeps it", err: runErr, wantKept: true, wantErrs: []error{runErr}},
		{name: "failed teardown keeps it", teardown: downErr, wantKept: true, wantErrs: []error{downErr}},
		{name: "both errors are returned", err: runErr, teardown: downErr, wantKept: true, wantErrs: []error{runErr, downErr}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := NewRunDir("rundirtest")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(r.Dir) })
			if !strings.HasPrefix(filepath.Base(r.Dir), "ima-rundirtest-") {
				t.Errorf("run directory %s, want ima-rundirtest-*", r.Dir)
			}
			klog.Info("marker line")
			tornDown := false
			var said []string
			err = r.Close(tc.err, tc.keep,
				func() error { tornDown = true; return tc.teardown },
				func(format string, args ...any) { said = append(said, fmt.Sprintf(format, args...)) })
			if !tornDown {
				t.Error("teardown did not run")
			}
			for _, want := range tc.wantErrs {
				if !errors.Is(err, want) {
					t.Errorf("Close() = %v, want it to carry %v", err, want)
				}
			}
			if len(tc.wantErrs) == 0 && err != nil {
				t.Errorf("Close() = %v, want nil", err)
			}
			_, statErr := os.Stat(r.Dir)
			if kept := statErr == nil; kept != tc.wantKept {
				t.Fatalf("directory kept: %v (stat: %v), want %v", kept, statErr, tc.wantKept)
			}
			if !tc.wantKept {
				if len(said) != 0 {
					t.Errorf("said %q for a removed directory", said)
				}
				return
			}
			if len(said) != 1 || !strings.Contains(said[0], r.Dir) {
				t.Errorf("said %q, want one line naming %s", said, r.Dir)
			}
			log, err := os.ReadFile(filepath.Join(r.Dir, "rundirtest.log"))
			if err != nil || !strings.Contains(string(log), "marker line") {
				t.Errorf("klog's file: %q, %v; want the marker line", log, err)
			}
		})
	}
}
