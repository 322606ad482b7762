// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package targets

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// The KEDA port's demand is bounded apart from the APIs': however many
// entries one pool holds, per namespace or in all, the other's stay, and
// each pool keeps to its own bounds.
func TestDemandPoolsAreBoundedApart(t *testing.T) {
	now := time.Now()
	hpa := demandKey{pool: PoolAPI, s: "app=hpa"}
	tests := []struct {
		name       string
		namespaces []string // the KEDA entries' namespaces
		perNS      int
		total      int
		wantKEDA   int // KEDA entries left in all
	}{
		{name: "over the per-namespace bound", namespaces: []string{"team-a"}, perNS: 3, total: 100, wantKEDA: 3},
		{name: "over the total bound", namespaces: []string{"team-b", "team-c", "team-d"}, perNS: 3, total: 4, wantKEDA: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDemandSet(tt.perNS, tt.total)
			d.ask("team-a", hpa, labels.SelectorFromSet(labels.Set{"app": "hpa"}), now)
			for _, ns := range tt.namespaces {
				for i := range 10 {
					s := fmt.Sprintf("app=keda-%d", i)
					d.ask(ns, demandKey{pool: PoolKEDA, s: s}, labels.SelectorFromSet(labels.Set{"app": fmt.Sprintf("keda-%d", i)}), now)
				}
			}
			if _, ok := d.ns["team-a"].byKey[hpa]; !ok {
				t.Errorf("the HPA's selector was evicted by the KEDA pool")
			}
			if d.n[PoolAPI] != 1 || d.n[PoolKEDA] != tt.wantKEDA {
				t.Errorf("pools hold %d API and %d KEDA entries, want 1 and %d", d.n[PoolAPI], d.n[PoolKEDA], tt.wantKEDA)
			}
			for ns, nd := range d.ns {
				if n := nd.lru[PoolKEDA].Len(); n > tt.perNS {
					t.Errorf("namespace %s holds %d KEDA entries, more than %d", ns, n, tt.perNS)
				}
			}
		})
	}
}

// A pod is wanted by either pool's entries, and expiry empties both.
func TestDemandPoolsWantAndExpire(t *testing.T) {
	now := time.Now()
	d := newDemandSet(4, 8)
	pod := func(name, app string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{"app": app}}}
	}
	d.ask("ns", demandKey{pool: PoolKEDA, s: "app=k"}, labels.SelectorFromSet(labels.Set{"app": "k"}), now)
	d.ask("ns", demandKey{pool: PoolKEDA, pod: true, s: "byname"}, nil, now)
	d.ask("ns", demandKey{pool: PoolAPI, s: "app=h"}, labels.SelectorFromSet(labels.Set{"app": "h"}), now.Add(time.Minute))
	for _, tt := range []struct {
		pod  *corev1.Pod
		want bool
	}{
		{pod: pod("k1", "k"), want: true},
		{pod: pod("h1", "h"), want: true},
		{pod: pod("byname", "other"), want: true},
		{pod: pod("o1", "other"), want: false},
	} {
		if got := d.wants(tt.pod); got != tt.want {
			t.Errorf("wants(%s) = %v, want %v", tt.pod.Name, got, tt.want)
		}
	}
	if !d.expire(now.Add(time.Second)) || d.len("ns") != 1 || d.n[PoolKEDA] != 0 {
		t.Errorf("after expiring the KEDA entries: %d entries in ns, %d KEDA", d.len("ns"), d.n[PoolKEDA])
	}
	if !d.expire(now.Add(2*time.Minute)) || d.len("") != 0 || d.ns["ns"] != nil {
		t.Errorf("after expiring everything: %d entries", d.len(""))
	}
	if poolOf(context.Background()) != PoolAPI || poolOf(WithPool(context.Background(), PoolKEDA)) != PoolKEDA {
		t.Error("a context's pool is PoolAPI unless WithPool sets another")
	}
}
