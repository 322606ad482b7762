// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"context"
	"fmt"
	"io"
	"os/signal"
	"syscall"

	cliflag "k8s.io/component-base/cli/flag"
)

// Main is a small command's Main: it calls run with args, stdout, stderr
// and a context that SIGINT or SIGTERM cancels, prints run's error on
// stderr after "name: ", and returns the process exit code for it
// (ExitCode: 0 for nil, as after --help; 2 for a UsageError; 1 otherwise).
func Main(name string, args []string, stdout, stderr io.Writer, run func(ctx context.Context, args []string, stdout, stderr io.Writer) error) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	err := run(ctx, args, stdout, stderr)
	if err != nil {
		fmt.Fprintln(stderr, name+":", err)
	}
	return ExitCode(err)
}

// ParseSections parses args, as Parse does, into one flag set named name
// that holds every flag of fss. --help prints usage, a blank line and
// Sections(fss) on stdout and returns done=true; pflag writes its own
// messages to stderr.
func ParseSections(name, usage string, fss cliflag.NamedFlagSets, args []string, stdout, stderr io.Writer) (done bool, err error) {
	fs := FlagSet(name, fss)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stdout, usage+"\n"+Sections(fss)) }
	return Parse(fs, args)
}
