// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package targets

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	testclock "k8s.io/utils/clock/testing"
)

// A pod recreated under the same name (a StatefulSet pod, a new UID) is
// forgotten by the store once, so that its rates start over instead of
// counting from the old pod's counters; it stays a target.
func TestReplacedPodIsForgotten(t *testing.T) {
	port := corev1.ContainerPort{Name: "http", ContainerPort: 8000}
	a := testPod("a", map[string]string{AnnotationScrape: "true"}, port)
	a.UID = "uid-1"
	idx := podIndex(t, a)
	setter, ret := &recSetter{}, &retained{}
	tr := New(Config{DemandTTL: time.Minute, Resync: time.Second}, corelisters.NewPodLister(idx), testScraper{setter, &recProber{}}, testStore{knownSet{}, ret}, testclock.NewFakePassiveClock(time.Unix(1000, 0)))

	for i, step := range []struct {
		uid  types.UID
		kept string
	}{
		{"uid-1", "[a]"},
		{"uid-2", "[]"}, // replaced: forgotten once
		{"uid-2", "[a]"},
	} {
		b := a.DeepCopy()
		b.UID = step.uid
		if err := idx.Update(b); err != nil {
			t.Fatal(err)
		}
		tr.Reconcile()
		if got := names(setter.last); got != "[a]" {
			t.Errorf("step %d: targets %s, want [a]", i, got)
		}
		if got := fmt.Sprint(ret.kept); got != step.kept {
			t.Errorf("step %d (uid %s): store kept %s, want %s", i, step.uid, got, step.kept)
		}
	}
}
