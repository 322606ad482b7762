// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/targets"
)

// TestSlimPodSharesAlikeParts: two pods of one ReplicaSet share their
// labels, annotations, owner references, ports and Ready condition in the
// cache; a pod that differs in any of them gets its own, with its own
// values.
func TestSlimPodSharesAlikeParts(t *testing.T) {
	sp := newSharedParts()
	slim := func(p *corev1.Pod) *corev1.Pod {
		t.Helper()
		obj, err := sp.slimPod(p)
		if err != nil {
			t.Fatal(err)
		}
		return obj.(*corev1.Pod)
	}
	a, b := slim(fullPod(0)), slim(fullPod(1))
	other := fullPod(2)
	other.Labels = map[string]string{"app": "vllm", "pod-template-hash": "0000000"}
	other.Annotations = map[string]string{targets.AnnotationMaxBatchSize: "8"}
	other.OwnerReferences[0].UID = "another-replicaset"
	other.Spec.Containers[1].Ports[0].ContainerPort = 9000
	other.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
	c := slim(other)

	parts := []struct {
		name string
		of   func(p *corev1.Pod) any
	}{
		{"labels", func(p *corev1.Pod) any { return p.Labels }},
		{"annotations", func(p *corev1.Pod) any { return p.Annotations }},
		{"owner references", func(p *corev1.Pod) any { return p.OwnerReferences }},
		{"containers", func(p *corev1.Pod) any { return p.Spec.Containers }},
		{"Ready condition", func(p *corev1.Pod) any { return p.Status.Conditions }},
	}
	same := func(x, y any) bool { return reflect.ValueOf(x).UnsafePointer() == reflect.ValueOf(y).UnsafePointer() }
	for _, part := range parts {
		if !same(part.of(a), part.of(b)) {
			t.Errorf("%s: two alike pods hold two copies", part.name)
		}
		if same(part.of(a), part.of(c)) || reflect.DeepEqual(part.of(a), part.of(c)) {
			t.Errorf("%s: a pod that differs shares the others' (%v)", part.name, part.of(c))
		}
	}
	if got := c.Spec.Containers[0].Ports[0].ContainerPort; got != 9000 {
		t.Errorf("the differing pod's port = %d, want 9000", got)
	}
	if c.Labels["pod-template-hash"] != "0000000" || c.Annotations[targets.AnnotationMaxBatchSize] != "8" || c.OwnerReferences[0].UID != "another-replicaset" || c.Status.Conditions[0].Status != corev1.ConditionFalse {
		t.Errorf("the differing pod lost its own values: %v %v %v %v", c.Labels, c.Annotations, c.OwnerReferences, c.Status.Conditions)
	}
}

// TestSharedPartsKeyCoversOwnerReference: the owner reference's key names
// every field of metav1.OwnerReference; a new field must be added to it, or
// two references that differ only there would be shared.
func TestSharedPartsKeyCoversOwnerReference(t *testing.T) {
	if n := reflect.TypeFor[metav1.OwnerReference]().NumField(); n != 6 {
		t.Fatalf("metav1.OwnerReference has %d fields; sharedParts.ownerRefs keys 6: add the new one", n)
	}
	sp := newSharedParts()
	yes, no := true, false
	ref := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "r", UID: "u", Controller: &yes}
	differs := []func(r *metav1.OwnerReference){
		func(r *metav1.OwnerReference) { r.APIVersion = "apps/v2" },
		func(r *metav1.OwnerReference) { r.Kind = "StatefulSet" },
		func(r *metav1.OwnerReference) { r.Name = "s" },
		func(r *metav1.OwnerReference) { r.UID = "v" },
		func(r *metav1.OwnerReference) { r.Controller = &no },
		func(r *metav1.OwnerReference) { r.Controller = nil },
		func(r *metav1.OwnerReference) { r.BlockOwnerDeletion = &yes },
	}
	first := sp.ownerRefs([]metav1.OwnerReference{ref})
	for i, change := range differs {
		r := ref
		change(&r)
		if got := sp.ownerRefs([]metav1.OwnerReference{r}); !reflect.DeepEqual(got, []metav1.OwnerReference{r}) || &got[0] == &first[0] {
			t.Errorf("change %d: got %v, want its own %v", i, got, r)
		}
	}
}

// TestSharedPartsBounded: a table never holds more than maxShared entries,
// and a part longer than maxSharedKey is kept unshared.
func TestSharedPartsBounded(t *testing.T) {
	sp := newSharedParts()
	for i := range 3 * maxShared {
		m := map[string]string{"app": fmt.Sprint(i)}
		if got := sp.stringMap(sp.labels, m); !reflect.DeepEqual(got, m) {
			t.Fatalf("labels %v came back as %v", m, got)
		}
		if len(sp.labels) > maxShared {
			t.Fatalf("%d entries after %d distinct label sets, want at most %d", len(sp.labels), i+1, maxShared)
		}
	}
	huge := map[string]string{"note": strings.Repeat("x", maxSharedKey)}
	before := len(sp.annotations)
	if got := sp.stringMap(sp.annotations, huge); reflect.ValueOf(got).UnsafePointer() != reflect.ValueOf(huge).UnsafePointer() {
		t.Errorf("an annotation over %d bytes was not kept as is", maxSharedKey)
	}
	if len(sp.annotations) != before {
		t.Errorf("an annotation over %d bytes was stored", maxSharedKey)
	}
}

// TestSharedPartsNoCrossPodAliasing: annotation values, and owner
// references' names, may hold any byte, NUL included (the API server checks
// only their keys and sizes). A tenant whose pod's part is crafted so that
// its key encodes like another pod's must not have that part handed to the
// other pod: the victim would then read the tenant's annotations (its port,
// path, server or opt-in lost) or owner references.
func TestSharedPartsNoCrossPodAliasing(t *testing.T) {
	yes := true
	tests := []struct {
		name          string
		attacker, pod *corev1.Pod
		part          func(p *corev1.Pod) any
	}{
		{
			name: "annotations",
			attacker: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
				"inference-metrics-adapter/server": "vllm\x00prometheus.io/port\x008000",
			}}},
			pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
				"inference-metrics-adapter/server": "vllm", "prometheus.io/port": "8000",
			}}},
			part: func(p *corev1.Pod) any { return p.Annotations },
		},
		{
			name: "owner references",
			attacker: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{
				{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "r\x00u\x00true\x00-\x00apps/v1\x00ReplicaSet\x00s", UID: "v", Controller: &yes},
			}}},
			pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{
				{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "r", UID: "u", Controller: &yes},
				{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "s", UID: "v", Controller: &yes},
			}}},
			part: func(p *corev1.Pod) any { return p.OwnerReferences },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sp := newSharedParts()
			if _, err := sp.slimPod(tc.attacker); err != nil { // first into the table
				t.Fatal(err)
			}
			obj, err := sp.slimPod(tc.pod)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := tc.part(obj.(*corev1.Pod)), tc.part(tc.pod); !reflect.DeepEqual(got, want) {
				t.Errorf("the pod's %s are %q, want its own %q", tc.name, got, want)
			}
		})
	}
}

// TestSharedReadyConditionKeepsItsTime: pods that turned Ready in different
// seconds keep their own transition time (the forecast's automatic horizon
// reads it), pods of the same second share one copy.
func TestSharedReadyConditionKeepsItsTime(t *testing.T) {
	sp := newSharedParts()
	at := func(sec int64) *corev1.Pod {
		p := fullPod(0)
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Unix(sec, 0)}}
		return p
	}
	a, b, c := sp.readyCondition(at(100)), sp.readyCondition(at(100)), sp.readyCondition(at(160))
	if &a[0] != &b[0] {
		t.Error("two pods Ready in the same second hold two copies")
	}
	if got := c[0].LastTransitionTime.Unix(); got != 160 {
		t.Errorf("the later pod's Ready time = %d, want 160", got)
	}
	if got := a[0].LastTransitionTime.Unix(); got != 100 {
		t.Errorf("the earlier pod's Ready time = %d, want 100 (overwritten by the later one)", got)
	}
}
