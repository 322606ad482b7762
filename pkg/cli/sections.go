// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"strings"

	"github.com/spf13/pflag"
	cliflag "k8s.io/component-base/cli/flag"
)

// FlagSet returns one flag set named name that holds every flag of fss, for
// Parse.
func FlagSet(name string, fss cliflag.NamedFlagSets) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	for _, section := range fss.Order {
		fs.AddFlagSet(fss.FlagSets[section])
	}
	return fs
}

// Sections is the flag listing of --help: fss section by section, as
// cliflag.PrintSections prints it (sorted by name within a section), one
// line per flag whatever the terminal (so that a docs page can quote it
// exactly), without the blank line PrintSections starts with.
func Sections(fss cliflag.NamedFlagSets) string {
	var b strings.Builder
	cliflag.PrintSections(&b, fss, 0)
	return strings.TrimPrefix(b.String(), "\n")
}
