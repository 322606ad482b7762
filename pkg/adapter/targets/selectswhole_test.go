// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package targets

import (
	"testing"

	"k8s.io/apimachinery/pkg/labels"
)

func TestSelectsWholeNamespace(t *testing.T) {
	tests := []struct {
		selector string
		want     bool
	}{
		{selector: "", want: true},
		{selector: "!zzz", want: true},
		{selector: "app!=x", want: true},
		{selector: "tier notin (cpu,gpu)", want: true},
		{selector: "!a,b!=c,d notin (e)", want: true},
		{selector: "app=llm", want: false},
		{selector: "app", want: false},
		{selector: "app,!zzz", want: false},
		{selector: "app in (llm),tier!=cpu", want: false},
		{selector: "replicas>1", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.selector, func(t *testing.T) {
			sel, err := labels.Parse(tt.selector)
			if err != nil {
				t.Fatal(err)
			}
			if got := SelectsWholeNamespace(sel); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
	if !SelectsWholeNamespace(nil) || !SelectsWholeNamespace(labels.Everything()) {
		t.Error("nil and Everything() must select the whole namespace")
	}
	if SelectsWholeNamespace(labels.Nothing()) {
		t.Error("Nothing() selects no pod")
	}
}
