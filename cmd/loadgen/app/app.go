// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"syscall"
	"time"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/cli"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/loadgen"
)

// usage heads --help, above the flags printed section by section.
const usage = `Usage: loadgen [flags]

Drives an OpenAI-compatible server (inference-sim, vLLM) with open-loop Poisson load and prints TTFT, inter-token and end-to-end latency percentiles. See docs/inference-sim.md.
`

// Main sends the load until it is done or SIGINT or SIGTERM, and returns
// the process exit code: 2 for a bad command line, 1 for a failure.
func Main(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	err := run(ctx, args, stdout, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "loadgen:", err)
	}
	return cli.ExitCode(err)
}

// run parses args, builds the load configuration, sends the load and
// prints the summary; a bad command line is a cli.UsageError.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o := NewOptions()
	fss := o.Flags()
	fs := cli.FlagSet("loadgen", fss)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stdout, usage+"\n"+cli.Sections(fss)) }
	if done, err := cli.Parse(fs, args); done || err != nil {
		return err
	}
	cfg, err := o.Config()
	if err != nil {
		return cli.Usage(err)
	}
	rep, err := loadgen.Run(ctx, cfg)
	if rep != nil {
		if werr := loadgen.Summarize(rep).Write(stdout); werr != nil {
			return werr
		}
		_, _ = fmt.Fprintf(stdout, "wall time %s\n", rep.Wall.Round(time.Millisecond))
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
