// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Package escape makes tenant text safe to print: pod, Deployment, model
// and namespace names, scraped servers' error texts and reason phrases all
// come from tenants, and reach logs, API error messages and terminals
// (kubectl, kubectl describe hpa, KEDA's events). It is shared by the
// adapter (pkg/adapter/provider) and the kubectl plugin (pkg/tools/kubectlplugin), which
// share nothing else but pkg/adapter/catalog.
package escape

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Printable returns s with every rune that is not printable (control
// characters such as newline and ESC, C1 controls, bidirectional
// overrides, other format characters) and every byte that is not valid
// UTF-8 written as a Go escape (\n, \x1b, \u202e, \xff); printable text,
// quotes included, is kept as it is, and printable ASCII is returned
// without a copy.
func Printable(s string) string {
	i := 0
	for i < len(s) && s[i] >= ' ' && s[i] < 0x7f {
		i++
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case strconv.IsPrint(r):
			b.WriteString(s[i : i+size])
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += size
	}
	return b.String()
}
