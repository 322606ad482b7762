// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package targets

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	testclock "k8s.io/utils/clock/testing"
)

// TestTrackerScrapesFrontDoors: a pod annotated as a Service's front door is
// a target without any question about it; an empty annotation is no front
// door; a front door that is not Running is not scraped.
func TestTrackerScrapesFrontDoors(t *testing.T) {
	port := corev1.ContainerPort{Name: "http", ContainerPort: 8000}
	router := testPod("a", map[string]string{AnnotationFrontDoor: "my-model"}, port)
	blank := testPod("b", map[string]string{AnnotationFrontDoor: " "}, port)
	pending := testPod("pending", map[string]string{AnnotationFrontDoor: "my-model"}, port)
	pending.Status = corev1.PodStatus{Phase: corev1.PodPending}
	idx := podIndex(t, router, blank, pending)
	setter := &recSetter{}
	tr := New(Config{DemandTTL: time.Minute, Resync: time.Second}, corelisters.NewPodLister(idx), testScraper{setter, &recProber{}}, testStore{knownSet{}, &retained{}}, testclock.NewFakePassiveClock(time.Unix(1000, 0)))
	tr.Reconcile()
	if got := names(setter.last); got != "[a]" {
		t.Fatalf("targets %s, want only the Running front door a", got)
	}
}

func TestFrontDoorFor(t *testing.T) {
	tests := []struct {
		annotations map[string]string
		want        string
		ok          bool
	}{
		{nil, "", false},
		{map[string]string{AnnotationFrontDoor: ""}, "", false},
		{map[string]string{AnnotationFrontDoor: " svc "}, "svc", true},
		{map[string]string{AnnotationScrape: "true"}, "", false},
	}
	for _, tt := range tests {
		got, ok := FrontDoorFor(testPod("p", tt.annotations))
		if got != tt.want || ok != tt.ok {
			t.Errorf("%v: got %q, %v; want %q, %v", tt.annotations, got, ok, tt.want, tt.ok)
		}
	}
}
