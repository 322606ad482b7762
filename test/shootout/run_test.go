// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestRemoveNamespace: after a run its namespace is deleted and waited
// for; after an interrupt it is left to the tear-down at once, since the
// kubelet stand-in has stopped and its pods would never finish.
func TestRemoveNamespace(t *testing.T) {
	tests := []struct {
		name        string
		interrupted bool
		stuck       bool // the namespace stays, as with no kubelet to stop its pods
		wantErr     string
		wantDelete  bool
	}{
		{name: "after a run: deleted and gone", wantDelete: true},
		{name: "after a run: never gone", stuck: true, wantErr: "not gone", wantDelete: true},
		{name: "interrupted: left to the tear-down", interrupted: true, stuck: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shootout-x"}})
			if tc.stuck {
				c.PrependReactor("delete", "namespaces", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, nil // accepted, and the namespace stays (Terminating)
				})
			}
			ctx, cancel := context.WithCancel(context.Background())
			if tc.interrupted {
				cancel()
			}
			defer cancel()
			err := removeNamespace(ctx, c, "shootout-x", 500*time.Millisecond)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("removeNamespace: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("removeNamespace error %v, want %q", err, tc.wantErr)
			}
			deleted := false
			for _, a := range c.Actions() {
				if a.GetVerb() == "delete" && a.GetResource().Resource == "namespaces" {
					deleted = true
				}
			}
			if deleted != tc.wantDelete {
				t.Errorf("namespace delete sent %v, want %v", deleted, tc.wantDelete)
			}
		})
	}
}
