// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"errors"
	"io"
	"path/filepath"
	"testing"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/cmd/inference-metrics-adapter/app/options"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/cli"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/cli/clitest"
)

// TestDocCommands: every inference-metrics-adapter command line in README.md
// and docs/ passes Main's steps up to the server's start (parse, Complete,
// Validate, Config) as a user outside a cluster would run it: no
// POD_NAMESPACE and no service account.
func TestDocCommands(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "")
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("KUBECONFIG", filepath.Join(home, "none"))
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	clitest.CheckDocCommands(t, "inference-metrics-adapter", acceptFlags)
}

// acceptFlags takes args through Main's steps before server.Run.
func acceptFlags(args []string) error {
	o := options.NewOptions()
	fs := cli.FlagSet("inference-metrics-adapter", o.Flags())
	fs.SetOutput(io.Discard)
	if done, err := cli.Parse(fs, args); done || err != nil {
		return errors.Join(errors.New("parse stopped"), err)
	}
	o.Complete(fs)
	if err := o.Validate(); err != nil {
		return err
	}
	_, err := o.Config()
	return err
}
