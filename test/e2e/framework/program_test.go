// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/cli"
)

func TestRequireBinDir(t *testing.T) {
	if err := RequireBinDir("/tools/bin", "soak"); err != nil {
		t.Errorf("RequireBinDir with a directory: %v", err)
	}
	err := RequireBinDir("", "fleet")
	want := "IMA_E2E_BIN is not set: run `make fleet`, or `IMA_E2E_BIN=$(./test/tools/build.sh | tail -n1) go run ./test/fleet`"
	if err == nil || err.Error() != want {
		t.Errorf("RequireBinDir without one = %v, want %q", err, want)
	}
}

// TestUnthrottled: the copy has client-go's rate limiter out of reach and
// leaves the original as it was.
func TestUnthrottled(t *testing.T) {
	orig := &rest.Config{Host: "https://127.0.0.1:6443", QPS: 5, Burst: 10, Timeout: time.Second}
	c := Unthrottled(orig)
	if c.QPS < 1e6 || c.Burst < 1e6 || c.Host != orig.Host || c.Timeout != orig.Timeout {
		t.Errorf("Unthrottled = QPS %v burst %d host %q timeout %s", c.QPS, c.Burst, c.Host, c.Timeout)
	}
	if orig.QPS != 5 || orig.Burst != 10 {
		t.Errorf("the original changed: QPS %v burst %d", orig.QPS, orig.Burst)
	}
}

// TestProgramContext: the first SIGINT cancels the context instead of
// ending the process (a test program then tears down what it started).
func TestProgramContext(t *testing.T) {
	ctx, stop := ProgramContext(context.Background())
	defer stop()
	self, err := os.FindProcess(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if err := self.Signal(os.Interrupt); err != nil {
		t.Skipf("cannot send SIGINT here: %v", err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("SIGINT did not cancel the context")
	}
	if !strings.Contains(context.Cause(ctx).Error(), "interrupt") {
		t.Errorf("cause %v, want the interrupt", context.Cause(ctx))
	}
}

// TestSingleDashHint: a parse error over an argument that names a known
// flag with one dash says to take two; other errors are left alone.
func TestSingleDashHint(t *testing.T) {
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	fs.Int("pods", 1, "")
	fs.Duration("duration", 0, "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-pods", "10"}, "(flags take two dashes: --pods)"},
		{[]string{"--pods=1", "-duration=1m"}, "(flags take two dashes: --duration)"},
		{[]string{"-nodes", "3"}, ""},
		{[]string{"--nodes=3"}, ""},
	} {
		err := SingleDashHint(fs, tc.args, errors.New("bad"))
		if got := strings.TrimPrefix(err.Error(), "bad"); strings.TrimSpace(got) != tc.want {
			t.Errorf("%q: %v, want bad %s", tc.args, err, tc.want)
		}
		if tc.want != "" && cli.ExitCode(err) != 2 {
			t.Errorf("%q: exit code %d, want 2", tc.args, cli.ExitCode(err))
		}
	}
	if SingleDashHint(fs, []string{"-pods"}, nil) != nil {
		t.Error("no error became one")
	}
}
