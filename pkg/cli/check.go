// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/pflag"
)

// ParseAndCheck parses args into fs as Parse does and then runs check,
// which lists what is wrong with the parsed values. A flag that cannot be
// parsed is reported alone; otherwise every problem is reported at once,
// stray arguments among them, as one UsageError whose message starts
// "invalid flags:" and lists them a line each. done is true, with no
// error, after --help.
func ParseAndCheck(fs *pflag.FlagSet, args []string, check func() []error) (done bool, err error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return true, nil
		}
		return false, Usage(err)
	}
	var errs []error
	if check != nil {
		errs = check()
	}
	if fs.NArg() > 0 {
		errs = append(errs, fmt.Errorf("unexpected arguments: %v", fs.Args()))
	}
	if len(errs) == 0 {
		return false, nil
	}
	return false, Usage(fmt.Errorf("invalid flags:\n%w", errors.Join(errs...)))
}
