// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package escape

import "testing"

func TestPrintable(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{`pod ns/a: failed: scrape "x"`, `pod ns/a: failed: scrape "x"`},
		{"modèle 日本", "modèle 日本"},
		{"a\nb", `a\nb`},
		{"\x1b[2J\x07", `\x1b[2J\a`},
		{"\t", `\t`},
		{"\u009b", `\u009b`},
		{"\u202e", `\u202e`},
		{"\xff", `\xff`},
		{"\x7f", `\x7f`},
		{"ok\x1b", `ok\x1b`},
	} {
		if got := Printable(tc.in); got != tc.want {
			t.Errorf("Printable(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
