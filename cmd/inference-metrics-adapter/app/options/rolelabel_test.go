// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package options

import (
	"strings"
	"testing"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/provider"
)

// TestRoleLabel: --role-label defaults to llm-d's label, the provider's
// default too; a value that is not a label key is refused, naming the flag.
func TestRoleLabel(t *testing.T) {
	if defaultRoleLabel != provider.DefaultRoleLabel {
		t.Errorf("--role-label defaults to %q, the provider to %q", defaultRoleLabel, provider.DefaultRoleLabel)
	}
	for _, tc := range []struct {
		key string
		ok  bool
	}{
		{"", true}, {"llm-d.ai/role", true}, {"role", true}, {"example.com/pd-stage", true},
		{"a=b", false}, {"a,b", false}, {"!role", false}, {"bad key", false}, {"-role", false},
		{"x/y/z", false}, {strings.Repeat("r", 64), false},
	} {
		err := validateRoleLabel(tc.key)
		if (err == nil) != tc.ok || (err != nil && !strings.Contains(err.Error(), "--role-label")) {
			t.Errorf("validateRoleLabel(%q) = %v; want ok=%v, an error naming --role-label", tc.key, err, tc.ok)
		}
	}
}
