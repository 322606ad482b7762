// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Package app is the adapter's command: flags, then options.Complete and
// options.Validate, then the logging configuration, then options.Config, then
// server.Run until SIGTERM or SIGINT.
package app

import (
	"context"
	"fmt"
	"io"
	"os/signal"
	"syscall"

	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/cmd/inference-metrics-adapter/app/options"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/server"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/cli"
)

// usage heads --help, above the flags printed section by section.
const usage = `Usage: inference-metrics-adapter [flags]

Serves inference servers' queue size, batch size, KV-cache usage, token and request rates and latency percentiles through custom.metrics.k8s.io.
GPU activity next to those signals, per pod: kubectl inference contrast (the kubectl-inference plugin).
`

// Main runs the adapter with args and returns the process exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "contrast" {
		// The command lives in the kubectl-inference plugin, so that the
		// adapter's binary carries none of the tools' code.
		fmt.Fprintln(stderr, "error: the contrast command is the kubectl-inference plugin's: run `kubectl inference contrast -n NAMESPACE -l SELECTOR` (or the kubectl-inference binary)")
		return 2
	}
	o := options.NewOptions()
	fss := o.Flags()
	fs := cli.FlagSet("inference-metrics-adapter", fss)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stdout, usage+"\n"+cli.Sections(fss))
	}
	if done, err := cli.Parse(fs, args); done {
		return 0
	} else if err != nil {
		fmt.Fprintf(stderr, "error: %v\nRun with --help for usage.\n", err)
		return cli.ExitCode(err)
	}
	o.Complete(fs)
	logMemoryLimit := setMemoryLimit()
	if err := o.Validate(); err != nil {
		fmt.Fprintf(stderr, "error: invalid flags:\n%v\n", err)
		return 2
	}
	// Logging is configured once per process, after every flag is known to
	// be valid and before anything logs.
	if err := logsapi.ValidateAndApply(o.Logging, nil); err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return 2
	}
	logs.InitLogs()
	defer logs.FlushLogs()
	logMemoryLimit()
	cfg, err := o.Config()
	if err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := server.Run(ctx, cfg); err != nil {
		klog.ErrorS(err, "Adapter stopped")
		return 1
	}
	return 0
}
