// Package cli holds the flag-parsing step shared by the project's small
// binaries (inference-sim, loadgen, capacity): parse, treat --help as a
// clean exit, and refuse stray arguments.
package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/pflag"
)

// Parse parses args into fs. It returns done=true, with no error, when the
// user asked for --help (pflag has printed the usage), and an error for bad
// flags or for arguments that are not flags.
func Parse(fs *pflag.FlagSet, args []string) (done bool, err error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return true, nil
		}
		return false, err
	}
	if fs.NArg() > 0 {
		return false, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	return false, nil
}
