// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package options

import (
	"fmt"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// defaultRoleLabel is --role-label's default: llm-d's pod label
// (provider.DefaultRoleLabel).
const defaultRoleLabel = "llm-d.ai/role"

// validateRoleLabel checks --role-label: a label key (an optional DNS
// prefix and a name), or empty for the default.
func validateRoleLabel(key string) error {
	if key == "" {
		return nil
	}
	bad := fmt.Errorf("--role-label %q must be a label key, e.g. llm-d.ai/role", key)
	sel, err := labels.Parse(key)
	if err != nil {
		return bad
	}
	reqs, _ := sel.Requirements()
	if len(reqs) != 1 || reqs[0].Operator() != selection.Exists || reqs[0].Key() != key {
		return bad
	}
	return nil
}
