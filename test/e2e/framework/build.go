// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ModulePath is the project's Go module path; RepoRoot looks for it.
const ModulePath = "github.com/inference-metrics-adapter/inference-metrics-adapter"

// ErrNotWritten means a command's directory holds no Go files yet.
var ErrNotWritten = errors.New("not written yet")

// RepoRoot walks up from the working directory to the project's go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(strings.TrimSpace(string(b)), "module "+ModulePath+"\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod for module %s above the working directory", ModulePath)
		}
		dir = parent
	}
}

// BuildCommand runs `go build -o outDir/name ./cmd/name` in root and returns
// the binary's path. It returns an error wrapping ErrNotWritten when
// cmd/name holds no Go files.
func BuildCommand(ctx context.Context, root, outDir, name string) (string, error) {
	files, _ := filepath.Glob(filepath.Join(root, "cmd", name, "*.go"))
	if len(files) == 0 {
		return "", fmt.Errorf("cmd/%s: %w", name, ErrNotWritten)
	}
	out := filepath.Join(outDir, name)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/"+name)
	cmd.Dir = root
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build ./cmd/%s: %w\n%s", name, err, buf.String())
	}
	return out, nil
}
