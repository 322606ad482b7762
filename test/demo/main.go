// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Command demo is `make demo`: on one machine, with nothing but this
// repository, it starts a real control plane, a one-replica Deployment of
// simulated vLLM servers, the inference-metrics-adapter and an HPA on
// inference_queue_size, ramps load up and down, prints a live table of what
// the HPA sees and does, and at the end writes a chart and a CSV of the run.
// Every process it starts is stopped by PID before it exits.
//
// It needs IMA_E2E_BIN (the control-plane binaries, from
// test/tools/build.sh); its flags --duration and --out (options.go) take
// their defaults from DEMO_DURATION and DEMO_OUT. See docs/demo.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	cliflag "k8s.io/component-base/cli/flag"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/cli"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/test/e2e/framework"
)

func main() {
	ctx, stop := framework.ProgramContext(context.Background())
	err := command(ctx, os.Args[1:], os.Getenv, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(cli.ExitCode(err)) // 2 for a usage error, 1 for a failed run
	}
}

// command reads the settings' defaults from getenv, parses args over them,
// validates them and runs the demo. A problem with the settings is a
// cli.UsageError.
func command(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	o, envErr := optionsFromEnv(getenv)
	fss := o.flags()
	fs := cli.FlagSet("demo", fss)
	fs.SetOutput(stdout)
	fs.Usage = func() {
		fmt.Fprint(stdout, helpHeader)
		cliflag.PrintSections(stdout, fss, 0)
	}
	check := func() []error {
		errs := []error{o.validate()}
		if !fs.Changed("duration") { // a bad DEMO_DURATION matters only when it is used
			errs = append(errs, envErr)
		}
		if err := errors.Join(errs...); err != nil {
			return []error{err}
		}
		return nil
	}
	if done, err := cli.ParseAndCheck(fs, args, check); done || err != nil {
		return framework.SingleDashHint(fs, args, err)
	}
	return run(ctx, o.config(), stdout)
}
