// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	cliflag "k8s.io/component-base/cli/flag"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/test/e2e/framework"
)

// Environment variables the demo reads: the control-plane binaries'
// directory, and the defaults of --duration and --out (make demo passes
// them on).
const (
	envBin      = framework.BinEnv
	envDuration = "DEMO_DURATION"
	envOut      = "DEMO_OUT"
)

// Defaults and bounds.
const (
	defaultDuration = 4 * time.Minute
	minDuration     = 30 * time.Second
	defaultOut      = "demo-out"
)

// helpHeader heads --help, above the flags printed section by section.
const helpHeader = `Usage: go run ./test/demo [flags]   (or: make demo, DEMO_DURATION=3m make demo)

Starts a real control plane, a Deployment of simulated vLLM servers, the adapter and an HPA on inference_queue_size, ramps load up and down, prints what the HPA sees and does, and writes a chart and a CSV of the run. Needs IMA_E2E_BIN, the directory test/tools/build.sh prints (make demo sets it). See docs/demo.md.
`

// options are the demo's settings as given.
type options struct {
	binDir   string
	duration time.Duration
	outDir   string
}

// optionsFromEnv reads the settings' defaults from the environment; unset
// ones take the built-in defaults.
func optionsFromEnv(getenv func(string) string) (options, error) {
	o := options{binDir: getenv(envBin), duration: defaultDuration, outDir: defaultOut}
	if v := getenv(envDuration); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return o, fmt.Errorf("%s=%q is not a duration (e.g. 4m, 90s): %w", envDuration, v, err)
		}
		o.duration = d
	}
	if v := getenv(envOut); v != "" {
		o.outDir = v
	}
	return o, nil
}

// flags returns the flags in --help's sections, their defaults o's.
func (o *options) flags() cliflag.NamedFlagSets {
	var fss cliflag.NamedFlagSets
	demo := fss.FlagSet("demo")
	demo.DurationVar(&o.duration, "duration", o.duration, fmt.Sprintf("How long the load runs, at least %s; setup and teardown come on top. %s, when set, is the default.", minDuration, envDuration))
	demo.StringVar(&o.outDir, "out", o.outDir, fmt.Sprintf("Directory for demo.svg, demo.csv and demo.log. %s, when set, is the default.", envOut))
	return fss
}

// validate reports every problem at once.
func (o options) validate() error {
	var errs []error
	if err := framework.RequireBinDir(o.binDir, "demo"); err != nil {
		errs = append(errs, err)
	}
	if o.duration < minDuration {
		errs = append(errs, fmt.Errorf("--duration (%s) must be at least %s so that the HPA has time to react, got %s", envDuration, minDuration, o.duration))
	}
	if o.outDir == "" {
		errs = append(errs, fmt.Errorf("--out (%s) must not be empty", envOut))
	}
	return errors.Join(errs...)
}

// config is what run needs.
type config struct {
	binDir   string
	duration time.Duration
	csvPath  string
	svgPath  string
	logPath  string
}

func (o options) config() config {
	return config{
		binDir:   o.binDir,
		duration: o.duration,
		csvPath:  filepath.Join(o.outDir, "demo.csv"),
		svgPath:  filepath.Join(o.outDir, "demo.svg"),
		logPath:  filepath.Join(o.outDir, "demo.log"),
	}
}
