// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/targets"
)

// The informers' transforms keep of each object only what the adapter
// reads, so that what a tenant writes into a Deployment, a StatefulSet or a
// pod (a pod template, annotations, managed fields, status: about 1.5 MiB
// an object) does not stay in the adapter's memory. Each builds a new
// object rather than clearing fields of the decoded one, so that nothing
// else stays reachable, and each is idempotent (client-go's contract): a
// slim object comes out equal.
//
// client-go does not pass cache.DeletedFinalStateUnknown tombstones to a
// transform today (their object is already in the cache, transformed); if
// one comes, the object inside is slimmed the same way.

// workloadMeta is what the adapter reads of a Deployment's or a
// StatefulSet's metadata: its name and namespace (the object asked about,
// the names of an answer), its labels (questions about the workloads a
// label selector picks), and the UID and resourceVersion the informer
// keeps track of.
func workloadMeta(m *metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:            m.Name,
		Namespace:       m.Namespace,
		UID:             m.UID,
		ResourceVersion: m.ResourceVersion,
		Labels:          m.Labels,
	}
}

// slimDeployment keeps of a Deployment its workloadMeta and its pod
// selector (provider.objectSelector), the only part of its spec the adapter
// reads: not the pod template, replicas or status (the replicas of an
// answer are its pods, counted from the pod cache). A new field read
// anywhere in the adapter must be added here; TestInformerTransformsKeepOnlyWhatIsRead
// lists them.
func slimDeployment(obj interface{}) (interface{}, error) {
	switch d := obj.(type) {
	case *appsv1.Deployment:
		return &appsv1.Deployment{
			TypeMeta:   d.TypeMeta,
			ObjectMeta: workloadMeta(&d.ObjectMeta),
			Spec:       appsv1.DeploymentSpec{Selector: d.Spec.Selector},
		}, nil
	case cache.DeletedFinalStateUnknown:
		return inTombstone(d, slimDeployment)
	}
	return obj, nil
}

// slimStatefulSet is slimDeployment for a StatefulSet.
func slimStatefulSet(obj interface{}) (interface{}, error) {
	switch s := obj.(type) {
	case *appsv1.StatefulSet:
		return &appsv1.StatefulSet{
			TypeMeta:   s.TypeMeta,
			ObjectMeta: workloadMeta(&s.ObjectMeta),
			Spec:       appsv1.StatefulSetSpec{Selector: s.Spec.Selector},
		}, nil
	case cache.DeletedFinalStateUnknown:
		return inTombstone(s, slimStatefulSet)
	}
	return obj, nil
}

// inTombstone returns t with its object transformed by transform.
func inTombstone(t cache.DeletedFinalStateUnknown, transform cache.TransformFunc) (interface{}, error) {
	if t.Obj == nil {
		return t, nil
	}
	obj, err := transform(t.Obj)
	if err != nil {
		return nil, err
	}
	return cache.DeletedFinalStateUnknown{Key: t.Key, Obj: obj}, nil
}

// podAnnotationsRead are the pod annotations the adapter reads (package
// targets names them); slimPod drops every other. A new one must be added
// here; TestSlimPodKeepsEveryAnnotationTheAdapterReads finds the reads in
// the code.
func podAnnotationsRead() []string {
	return []string{
		targets.AnnotationPort,
		targets.AnnotationPath,
		targets.AnnotationScrape,
		targets.AnnotationServer,
		targets.AnnotationMaxBatchSize,
		targets.AnnotationFrontDoor,
		targets.AnnotationScheme,
		targets.AnnotationTLSServerName,
		targets.AnnotationScrapeAuth,
	}
}

// readAnnotations returns the annotations of m that the adapter reads: m
// itself when it holds no other, nil when it holds none.
func readAnnotations(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	keys := podAnnotationsRead()
	n := 0
	for _, k := range keys {
		if _, ok := m[k]; ok {
			n++
		}
	}
	if n == len(m) {
		return m
	}
	if n == 0 {
		return nil
	}
	out := make(map[string]string, n)
	for _, k := range keys {
		if v, ok := m[k]; ok {
			out[k] = v
		}
	}
	return out
}
