// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"time"

	cliflag "k8s.io/component-base/cli/flag"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/test/e2e/framework"
)

// helpHeader heads --help, above the flags printed section by section.
const helpHeader = `Usage: go run ./test/soak [flags]   (or: make soak, SOAK_DURATION=2h make soak, make soak-short)

Runs the adapter under pod churn, broken model-server pages and control-plane and adapter faults on a real control plane, judges it from what the HPA sees and prints the fault table. Needs IMA_E2E_BIN, the directory test/tools/build.sh prints (make soak sets it). See docs/operations.md#faults-and-recovery.
`

// minDuration is the shortest soak: one cycle of every fault fits in it.
const minDuration = time.Minute

// options are the command-line flags of the soak.
type options struct {
	binDir   string
	duration time.Duration
	seed     uint64
	keep     bool
}

// newOptions returns the defaults, with binDir, the control-plane binaries'
// directory, from the environment.
func newOptions(binDir string) *options {
	return &options{binDir: binDir, duration: 30 * time.Minute}
}

// complete fills in what the flags leave to the run: a --seed of 0 becomes
// now's nanoseconds.
func (o *options) complete(now time.Time) {
	if o.seed == 0 {
		o.seed = uint64(now.UnixNano())
	}
}

// flags returns the flags in --help's sections.
func (o *options) flags() cliflag.NamedFlagSets {
	var fss cliflag.NamedFlagSets
	soak := fss.FlagSet("soak")
	soak.DurationVar(&o.duration, "duration", o.duration, fmt.Sprintf("How long faults are injected, at least %s (setup, settling and teardown come on top).", minDuration))
	soak.Uint64Var(&o.seed, "seed", o.seed, "Seed of the churn and of the choice of broken pods; 0: the start time in nanoseconds (the seed used is printed at the start and the end).")
	output := fss.FlagSet("output")
	output.BoolVar(&o.keep, "keep", o.keep, "Keep the run's directory (certificates, logs) even on success.")
	return fss
}

// validate lists every problem with the options at once.
func (o *options) validate() error {
	var errs []error
	if err := framework.RequireBinDir(o.binDir, "soak"); err != nil {
		errs = append(errs, err)
	}
	if o.duration < minDuration {
		errs = append(errs, fmt.Errorf("--duration must be at least %s, got %s", minDuration, o.duration))
	}
	return errors.Join(errs...)
}

// nonNil is err as the list cli.ParseAndCheck takes: empty when err is nil.
func nonNil(err error) []error {
	if err == nil {
		return nil
	}
	return []error{err}
}
