// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"errors"
	"io"
	"testing"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/cli"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/cli/clitest"
)

// TestDocCommands: every capacity command line in README.md and docs/ passes
// run's steps before the probe starts (parse and config).
func TestDocCommands(t *testing.T) {
	clitest.CheckDocCommands(t, "capacity", func(args []string) error {
		o := NewOptions()
		fs := cli.FlagSet("capacity", o.Flags())
		fs.SetOutput(io.Discard)
		if done, err := cli.Parse(fs, args); done || err != nil {
			return errors.Join(errors.New("parse stopped"), err)
		}
		_, err := o.Config()
		return err
	})
}
