// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"errors"
	"fmt"
	"io"
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
	return cli.Main("loadgen", args, stdout, stderr, run)
}

// run parses args, builds the load configuration, sends the load and
// prints the summary; a bad command line is a cli.UsageError.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o := NewOptions()
	if done, err := cli.ParseSections("loadgen", usage, o.Flags(), args, stdout, stderr); done || err != nil {
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
