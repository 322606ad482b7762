// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"errors"
	"io"
	"testing"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/cli/clitest"
)

// TestDocCommands: every inference-sim command line in README.md and docs/
// passes run's steps before it listens (parse, with --profile, and validate).
func TestDocCommands(t *testing.T) {
	clitest.CheckDocCommands(t, "inference-sim", func(args []string) error {
		o, done, err := parse(args, io.Discard, io.Discard)
		if done || err != nil {
			return errors.Join(errors.New("parse stopped"), err)
		}
		return o.Validate()
	})
}
