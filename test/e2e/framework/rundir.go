// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/klog/v2"
)

// RunDir is a test program's run directory (make fleet, make soak): the
// certificates, the binaries built for the run, the processes' logs, and
// klog's own output in one file.
type RunDir struct {
	Dir string
	log *os.File
}

// NewRunDir creates a fresh temporary directory ima-<name>-* and sends
// klog's output (the harness's and client-go's) to <name>.log in it, so
// that the program's own output stays readable.
func NewRunDir(name string) (*RunDir, error) {
	dir, err := os.MkdirTemp("", "ima-"+name+"-")
	if err != nil {
		return nil, fmt.Errorf("create run directory: %w", err)
	}
	f, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, fmt.Errorf("create log: %w", err)
	}
	if err := LogTo(f); err != nil {
		f.Close()
		return nil, err
	}
	return &RunDir{Dir: dir, log: f}, nil
}

// Build builds cmd/<name> of the repository into the run directory's bin/
// and returns the binary's path.
func (r *RunDir) Build(ctx context.Context, name string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(r.Dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", bin, err)
	}
	return BuildCommand(ctx, root, bin, name)
}

// Close ends the run whose result is err: teardown (which stops the run's
// processes) runs first, then klog is flushed and its file closed. The
// directory is kept, and say tells where, when the run or its teardown
// failed or keep is set; otherwise it is removed. Close returns err joined
// with whatever failed here.
func (r *RunDir) Close(err error, keep bool, teardown func() error, say func(string, ...any)) error {
	err = errors.Join(err, teardown())
	klog.Flush()
	if cerr := r.log.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("close log: %w", cerr))
	}
	if err != nil || keep {
		say("files kept in %s (process logs in %s/logs)", r.Dir, r.Dir)
		return err
	}
	if rerr := os.RemoveAll(r.Dir); rerr != nil {
		return fmt.Errorf("remove %s: %w", r.Dir, rerr)
	}
	return nil
}
