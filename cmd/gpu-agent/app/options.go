// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Package app is the gpu-agent command: its flags (Options, in the sections
// --help prints), their checks (Validate), the logging configuration, the
// resolved Config, and Run.
package app

import (
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"time"

	cliflag "k8s.io/component-base/cli/flag"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/nodeagent/gpuagent"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/nodeagent/nvml"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/nodeagent/podresources"
)

// Options are the gpu-agent's flags.
type Options struct {
	ListenAddress        string
	Interval             time.Duration
	PodResourcesSocket   string
	PodResourcesTimeout  time.Duration
	ResourceNames        []string
	NVMLLibraryPath      string
	NVMLMaxRetryInterval time.Duration
	TestingFakeNVML      string
	MaxConnections       int

	// Logging is klog's configuration: --logging-format, -v, --vmodule.
	Logging *logsapi.LoggingConfiguration
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{
		ListenAddress:        ":9410",
		Interval:             5 * time.Second,
		PodResourcesSocket:   podresources.DefaultSocket,
		PodResourcesTimeout:  5 * time.Second,
		ResourceNames:        []string{"nvidia.com/gpu"},
		NVMLMaxRetryInterval: 5 * time.Minute,
		MaxConnections:       gpuagent.DefaultServerLimits().MaxConnections,
		Logging:              logsapi.NewLoggingConfiguration(),
	}
}

// Flags returns the agent's flags bound to o, in the sections --help
// prints: serving, collection, pod resources, NVML, then logging
// (k8s.io/component-base/logs: --logging-format text or json, -v,
// --vmodule). Call it once per Options.
func (o *Options) Flags() cliflag.NamedFlagSets {
	var fss cliflag.NamedFlagSets
	serving := fss.FlagSet("serving")
	serving.StringVar(&o.ListenAddress, "listen-address", o.ListenAddress,
		"Address to serve /metrics and /healthz on.")
	serving.IntVar(&o.MaxConnections, "max-connections", o.MaxConnections,
		"Most HTTP connections served at once; more wait until one closes. Requests, answers and idle connections have time limits (docs/gpu-agent.md).")

	collection := fss.FlagSet("collection")
	collection.DurationVar(&o.Interval, "interval", o.Interval,
		"Time between collections (NVML read and pod-resources List); also the window of the GPM SM activity. 1s to 5m (from 100ms with --testing-fake-nvml, for time-compressed tests).")

	pods := fss.FlagSet("pod resources")
	pods.StringVar(&o.PodResourcesSocket, "pod-resources-socket", o.PodResourcesSocket,
		"Unix socket of the kubelet pod-resources API.")
	pods.DurationVar(&o.PodResourcesTimeout, "pod-resources-timeout", o.PodResourcesTimeout,
		"Timeout of one pod-resources List call.")
	pods.StringSliceVar(&o.ResourceNames, "resource-names", o.ResourceNames,
		"Extended resources whose device IDs are GPU or MIG UUIDs; an entry ending in * matches by prefix (e.g. nvidia.com/mig-*).")

	gpus := fss.FlagSet("NVML")
	gpus.StringVar(&o.NVMLLibraryPath, "nvml-library-path", o.NVMLLibraryPath,
		"Path of libnvidia-ml.so.1 to load; empty means the dynamic loader's search path.")
	gpus.DurationVar(&o.NVMLMaxRetryInterval, "nvml-max-retry-interval", o.NVMLMaxRetryInterval,
		"Longest wait between NVML retries after it fails (no library, no driver, no GPUs); the wait starts at --interval and doubles.")
	gpus.StringVar(&o.TestingFakeNVML, "testing-fake-nvml", o.TestingFakeNVML,
		"FOR TESTING ONLY: serve a fake NVML backend instead of the real library, one of "+strings.Join(nvml.FakeProfiles(), ", ")+". The page labels it backend=\"testing-fake-nvml/<profile>\".")

	logging := fss.FlagSet("logging")
	logsapi.AddFlags(o.Logging, logging)
	// Split output streams need the LoggingAlphaOptions feature gate, which
	// the agent does not offer (as the adapter): --help does not list them.
	for _, name := range []string{"log-text-split-stream", "log-text-info-buffer-size", "log-json-split-stream", "log-json-info-buffer-size"} {
		_ = logging.MarkHidden(name)
	}
	return fss
}

// Validate checks the options, each error naming its flag.
func (o *Options) Validate() error {
	var errs []string
	if _, _, err := net.SplitHostPort(o.ListenAddress); err != nil {
		errs = append(errs, fmt.Sprintf("--listen-address %q: %v", o.ListenAddress, err))
	}
	minInterval := time.Second
	if o.TestingFakeNVML != "" {
		minInterval = nvml.MinGPMInterval // time-compressed tests on a fake backend
	}
	if o.Interval < minInterval || o.Interval > 5*time.Minute {
		errs = append(errs, fmt.Sprintf("--interval %s: must be between %s and 5m", o.Interval, minInterval))
	}
	if o.MaxConnections < 1 || o.MaxConnections > 1024 {
		errs = append(errs, fmt.Sprintf("--max-connections %d: must be between 1 and 1024", o.MaxConnections))
	}
	if !filepath.IsAbs(o.PodResourcesSocket) {
		errs = append(errs, fmt.Sprintf("--pod-resources-socket %q: must be an absolute path", o.PodResourcesSocket))
	}
	if o.PodResourcesTimeout <= 0 || o.PodResourcesTimeout > time.Minute {
		errs = append(errs, fmt.Sprintf("--pod-resources-timeout %s: must be above 0 and at most 1m", o.PodResourcesTimeout))
	}
	if len(o.ResourceNames) == 0 {
		errs = append(errs, "--resource-names: at least one resource is needed")
	}
	for _, r := range o.ResourceNames {
		if r == "" || r == "*" || strings.Contains(strings.TrimSuffix(r, "*"), "*") {
			errs = append(errs, fmt.Sprintf("--resource-names %q: want a resource name, optionally ending in *", r))
		}
	}
	if o.NVMLMaxRetryInterval < o.Interval {
		errs = append(errs, fmt.Sprintf("--nvml-max-retry-interval %s: must be at least --interval (%s)", o.NVMLMaxRetryInterval, o.Interval))
	}
	if o.TestingFakeNVML != "" {
		known := false
		for _, p := range nvml.FakeProfiles() {
			known = known || p == o.TestingFakeNVML
		}
		if !known {
			errs = append(errs, fmt.Sprintf("--testing-fake-nvml %q: want one of %s", o.TestingFakeNVML, strings.Join(nvml.FakeProfiles(), ", ")))
		}
		if o.NVMLLibraryPath != "" {
			errs = append(errs, "--testing-fake-nvml and --nvml-library-path exclude each other")
		}
	}
	for _, err := range logsapi.Validate(o.Logging, nil, nil) {
		errs = append(errs, err.Error())
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid flags:\n  %s", strings.Join(errs, "\n  "))
	}
	return nil
}
