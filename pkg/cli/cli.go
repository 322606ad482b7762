// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Package cli holds the flag-parsing step shared by the project's binaries:
// parse, treat --help as a clean exit, refuse stray arguments, and tell a
// usage error (exit status 2) from a failure (exit status 1).
package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/pflag"
)

// Parse parses args into fs. It returns done=true, with no error, when the
// user asked for --help (pflag has printed the usage), and an error for bad
// flags or for arguments that are not flags.
// Its errors are UsageErrors.
func Parse(fs *pflag.FlagSet, args []string) (done bool, err error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return true, nil
		}
		return false, Usage(err)
	}
	if fs.NArg() > 0 {
		return false, Usage(fmt.Errorf("unexpected arguments: %v", fs.Args()))
	}
	return false, nil
}

// UsageError is a problem with the command line (a bad flag, a bad value,
// flags that contradict each other, a stray argument): the command exits
// with status 2 for it, as Kubernetes components and most Unix tools do,
// and 1 for any other failure.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Usage marks err as a UsageError; nil stays nil.
func Usage(err error) error {
	if err == nil {
		return nil
	}
	return &UsageError{Err: err}
}

// ExitCode is the exit status for err: 0 for nil, 2 for a UsageError, 1
// for anything else.
func ExitCode(err error) int {
	var u *UsageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &u):
		return 2
	default:
		return 1
	}
}
