// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/cli"
)

// RequireBinDir checks dir, the control-plane binaries' directory (BinEnv's
// value) of the test program `make <program>` (test/<program>): empty, it
// returns an error that says how to set it.
func RequireBinDir(dir, program string) error {
	if dir == "" {
		return fmt.Errorf("%s is not set: run `make %s`, or `%s=$(./test/tools/build.sh | tail -n1) go run ./test/%s`",
			BinEnv, program, BinEnv, program)
	}
	return nil
}

// ProgramContext is the context a test program runs under: the first
// SIGINT or SIGTERM cancels it, so that the program tears down what it
// started; a second one ends the program at once (the signals' default
// action is restored). stop releases the signals.
func ProgramContext(parent context.Context) (ctx context.Context, stop context.CancelFunc) {
	ctx, stop = signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	go func() { <-ctx.Done(); stop() }()
	return ctx, stop
}

// Unthrottled returns a copy of cfg without client-go's rate limiter (QPS
// and burst out of reach), for a test program whose own request rate is
// what it measures or drives.
func Unthrottled(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = 1e6, 1e6
	return c
}

// SingleDashHint adds to err, a parse error of fs over args, the flag that
// an argument names with one dash (-pods for --pods), as the test
// programs' flags were before they took two. A nil err stays nil.
func SingleDashHint(fs *pflag.FlagSet, args []string, err error) error {
	if err == nil {
		return nil
	}
	for _, a := range args {
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "-"), "=")
		if strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && len(name) > 1 && fs.Lookup(name) != nil {
			return cli.Usage(fmt.Errorf("%w (flags take two dashes: --%s)", err, name))
		}
	}
	return err
}
