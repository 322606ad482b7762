// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"
)

// Environment variables the demo reads.
const (
	envBin      = "IMA_E2E_BIN"
	envDuration = "DEMO_DURATION"
	envOut      = "DEMO_OUT"
)

// Defaults and bounds.
const (
	defaultDuration = 4 * time.Minute
	minDuration     = 30 * time.Second
	defaultOut      = "demo-out"
)

// options are the demo's settings as given.
type options struct {
	binDir   string
	duration time.Duration
	outDir   string
}

// optionsFromEnv reads the settings; unset ones take their defaults.
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

// validate reports every problem at once.
func (o options) validate() error {
	var errs []error
	if o.binDir == "" {
		errs = append(errs, fmt.Errorf("%s is not set: run `make demo`, or `%s=$(test/tools/build.sh | tail -n1) go run ./test/demo`", envBin, envBin))
	}
	if o.duration < minDuration {
		errs = append(errs, fmt.Errorf("%s must be at least %s so that the HPA has time to react, got %s", envDuration, minDuration, o.duration))
	}
	if o.outDir == "" {
		errs = append(errs, fmt.Errorf("%s must not be empty", envOut))
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
