// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"fmt"
	"io"
	"net"

	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/cli"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/sim"
)

// usage heads --help, above the flags printed section by section.
const usage = `Usage: inference-sim [flags]

A vLLM-compatible model server simulator: it speaks the OpenAI completions API, queues and batches like vLLM's scheduler on a virtual clock, and serves vLLM's /metrics (or TGI's, SGLang's). With --front-door-backend it is a router instead, holding requests while its backend has no healthy endpoint. See docs/inference-sim.md.
`

// Main serves until SIGINT or SIGTERM and returns the process exit code:
// 2 for a bad command line, 1 for a failure.
func Main(args []string, stdout, stderr io.Writer) int {
	return cli.Main("inference-sim", args, stdout, stderr, run)
}

// run parses args, validates them, configures logging and serves until ctx
// is done; a bad command line is a cli.UsageError.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, done, err := parse(args, stdout, stderr)
	if done || err != nil {
		return err
	}
	if err := o.Validate(); err != nil {
		return cli.Usage(err)
	}
	// Logging is configured once per process, after every flag is known to
	// be valid and before anything logs.
	if err := logsapi.ValidateAndApply(o.logging, nil); err != nil {
		return cli.Usage(err)
	}
	logs.InitLogs()
	defer logs.FlushLogs()
	if o.frontDoor.Backend != "" {
		return runFrontDoor(ctx, o)
	}
	srv, err := sim.NewServer(o.sim, sim.NewScaledClock(o.sim.TimeScale))
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("listening: %w", err)
	}
	klog.InfoS("Serving", "address", ln.Addr().String(), "models", o.sim.ModelNames(), "metricsFormat", o.sim.MetricsFormat,
		"timeScale", o.sim.TimeScale, "profile", o.profile, "loadTime", o.sim.LoadTime, "capacityAt512x128", o.sim.Capacity(512, 128))
	return srv.Serve(ctx, ln, o.shutdownTimeout)
}

// runFrontDoor serves o as a front door (--front-door-backend) until ctx is done.
func runFrontDoor(ctx context.Context, o *Options) error {
	cfg := o.frontDoor
	cfg.Model = o.sim.Model
	fd, err := sim.NewFrontDoor(cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("listening: %w", err)
	}
	klog.InfoS("Serving as a front door", "address", ln.Addr().String(), "backend", cfg.Backend, "model", cfg.Model, "pool", cfg.Pool, "maxHold", cfg.MaxHold)
	return fd.Serve(ctx, ln, o.shutdownTimeout)
}
