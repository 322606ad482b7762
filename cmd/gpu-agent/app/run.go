// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/cli"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/nodeagent/gpuagent"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/nodeagent/nvml"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/nodeagent/podresources"
)

// shutdownTimeout bounds how long Run waits for in-flight requests on exit.
const shutdownTimeout = 5 * time.Second

// Config is the agent, resolved from valid Options and ready to run.
type Config struct {
	// Listener holds at most Limits.MaxConnections connections at once.
	Listener net.Listener
	Limits   gpuagent.ServerLimits
	Reader   *nvml.Reader
	Pods     *podresources.Client
	Agent    *gpuagent.Agent
	Registry *prometheus.Registry
}

// Config resolves the options: it binds the listen address (so a port in
// use fails here, not later) behind the connection limit, and builds the NVML reader, the pod-resources
// client and the agent.
func (o *Options) Config() (*Config, error) {
	var reader *nvml.Reader
	if o.TestingFakeNVML != "" {
		r, err := nvml.NewFakeReader(o.TestingFakeNVML, nil)
		if err != nil {
			return nil, err
		}
		reader = r
	} else {
		reader = nvml.NewReader(o.NVMLLibraryPath)
	}
	pods, err := podresources.NewClient(o.PodResourcesSocket, o.PodResourcesTimeout)
	if err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", o.ListenAddress)
	if err != nil {
		pods.Close()
		return nil, fmt.Errorf("listen on %s: %w", o.ListenAddress, err)
	}
	agent := gpuagent.New(gpuagent.Config{
		GPUs:             reader,
		Backend:          reader.Backend(),
		Pods:             pods,
		ResourceNames:    o.ResourceNames,
		Interval:         o.Interval,
		MaxRetryInterval: o.NVMLMaxRetryInterval,
	})
	reg := prometheus.NewRegistry()
	if err := reg.Register(agent); err != nil {
		lis.Close()
		pods.Close()
		return nil, fmt.Errorf("register agent metrics: %w", err)
	}
	limits := gpuagent.DefaultServerLimits()
	limits.MaxConnections = o.MaxConnections
	return &Config{Listener: gpuagent.LimitListener(lis, limits.MaxConnections), Limits: limits, Reader: reader, Pods: pods, Agent: agent, Registry: reg}, nil
}

// Run collects and serves until ctx is done, then shuts down in order:
// HTTP server, collection loop, pod-resources client, NVML.
func Run(ctx context.Context, c *Config) error {
	defer c.Reader.Close()
	defer c.Pods.Close()

	if b := c.Reader.Backend(); b != "nvml" {
		klog.InfoS("TESTING ONLY: serving a FAKE NVML backend; the GPU values on this page are not real", "backend", b)
	}
	srv := gpuagent.NewServer(c.Agent.Handler(c.Registry), c.Limits)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = c.Agent.Run(ctx)
	}()
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(c.Listener) }()
	klog.InfoS("Serving", "address", c.Listener.Addr().String(), "backend", c.Reader.Backend())

	var err error
	select {
	case <-ctx.Done():
	case err = <-serveErr:
		err = fmt.Errorf("serve: %w", err)
	}
	cancel()
	shutdownCtx, done := context.WithTimeout(context.Background(), shutdownTimeout)
	defer done()
	if serr := srv.Shutdown(shutdownCtx); serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		klog.ErrorS(serr, "HTTP server shutdown")
	}
	wg.Wait()
	klog.InfoS("Stopped")
	return err
}

// usage heads --help, above the flags printed section by section.
const usage = `Usage: gpu-agent [flags]

Serves GPU activity per pod on /metrics, read through NVML and attributed with the kubelet's pod-resources API.
`

// Main runs the command with args and returns its exit code: 0 after a
// signal-initiated shutdown or --help, 2 for bad flags, 1 for other errors.
// Its steps: flags, Validate, the logging configuration (applied once per
// process, before anything logs), Config, then Run until SIGTERM or SIGINT.
func Main(args []string, stdout, stderr io.Writer) int {
	o := NewOptions()
	if done, err := cli.ParseSections("gpu-agent", usage, o.Flags(), args, stdout, stderr); done {
		return 0
	} else if err != nil {
		fmt.Fprintf(stderr, "%v\nRun gpu-agent --help for the flags.\n", err)
		return cli.ExitCode(err)
	}
	if err := o.Validate(); err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	if err := logsapi.ValidateAndApply(o.Logging, nil); err != nil {
		fmt.Fprintf(stderr, "invalid flags:\n  %v\n", err)
		return 2
	}
	logs.InitLogs()
	defer logs.FlushLogs()
	cfg, err := o.Config()
	if err != nil {
		klog.ErrorS(err, "Cannot start")
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := Run(ctx, cfg); err != nil {
		klog.ErrorS(err, "Stopped with an error")
		return 1
	}
	return 0
}

// Usage is the --help text, the usage and then the flags section by
// section, as cli.ParseSections prints it; docs/gpu-agent.md quotes it
// verbatim.
func Usage(fss cliflag.NamedFlagSets) string {
	return usage + "\n" + cli.Sections(fss)
}
