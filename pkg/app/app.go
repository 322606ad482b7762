// Package app is the adapter's command: flags, then options.Validate, then
// options.Config, then server.Run until SIGTERM or SIGINT; and its contrast
// subcommand, which prints GPU activity next to the serving signals.
package app

import (
	"context"
	goflag "flag"
	"fmt"
	"io"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
	"k8s.io/component-base/logs"
	"k8s.io/klog/v2"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/options"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/server"
)

// NewFlagSet returns the adapter's flags bound to o, including klog's.
func NewFlagSet(o *options.Options) *pflag.FlagSet {
	fs := pflag.NewFlagSet("inference-metrics-adapter", pflag.ContinueOnError)
	fs.SortFlags = true
	o.AddFlags(fs)
	gfs := goflag.NewFlagSet("klog", goflag.ContinueOnError)
	klog.InitFlags(gfs)
	fs.AddGoFlagSet(gfs)
	return fs
}

// Main runs the adapter with args and returns the process exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "contrast" {
		return contrastMain(args[1:], stdout, stderr)
	}
	o := options.NewOptions()
	fs := NewFlagSet(o)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stdout, "Usage: inference-metrics-adapter [flags]\n       inference-metrics-adapter contrast -n NAMESPACE -l SELECTOR [flags]\n\nServes inference servers' queue size, batch size and KV-cache usage through custom.metrics.k8s.io.\nThe contrast command shows GPU activity next to those signals, per pod.\n\nFlags:\n%s", fs.FlagUsages())
	}
	if err := fs.Parse(args); err != nil {
		if err == pflag.ErrHelp {
			return 0
		}
		fmt.Fprintf(stderr, "error: %v\nRun with --help for usage.\n", err)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "error: unexpected arguments %q\n", fs.Args())
		return 2
	}
	logs.InitLogs()
	defer logs.FlushLogs()
	setMemoryLimit()
	if err := o.Validate(); err != nil {
		fmt.Fprintf(stderr, "error: invalid flags:\n%v\n", err)
		return 2
	}
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
