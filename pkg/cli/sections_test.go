// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"io"
	"testing"

	cliflag "k8s.io/component-base/cli/flag"
)

// TestSections: the flags are parsed from one set and listed in their
// sections, in the sections' order, without a leading blank line.
func TestSections(t *testing.T) {
	var fss cliflag.NamedFlagSets
	url := fss.FlagSet("server").String("url", "http://127.0.0.1:8000", "Base URL.")
	rate := fss.FlagSet("load").Float64("rate", 1, "Requests per second.")
	fs := FlagSet("tool", fss)
	fs.SetOutput(io.Discard)
	if done, err := Parse(fs, []string{"--rate=3", "--url", "http://127.0.0.2:8000"}); done || err != nil {
		t.Fatalf("Parse = %v, %v", done, err)
	}
	if *rate != 3 || *url != "http://127.0.0.2:8000" {
		t.Errorf("parsed rate %v and url %q into the sections' flags, want 3 and http://127.0.0.2:8000", *rate, *url)
	}
	const want = "Server flags:\n\n" +
		"      --url string   Base URL. (default \"http://127.0.0.1:8000\")\n" +
		"\nLoad flags:\n\n" +
		"      --rate float   Requests per second. (default 1)\n"
	if got := Sections(fss); got != want {
		t.Errorf("Sections =\n%s\nwant\n%s", got, want)
	}
}
