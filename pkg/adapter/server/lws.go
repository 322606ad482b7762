// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/provider"
)

// LeaderWorkerSets are a CRD that may not be installed: the adapter looks
// for the resource once at start (discovery) and, only when it is served,
// watches the objects' metadata (a metadata-only informer: no LWS API
// types, and a small cache). Without the CRD it watches nothing, so there is
// no failing watch to retry, and the provider answers LWS questions with a
// 404 that says why.

var leaderWorkerSetsGVR = schema.GroupVersionResource{Group: provider.LeaderWorkerSetGroup, Version: provider.LeaderWorkerSetVersion, Resource: "leaderworkersets"}

// leaderWorkerSetsServed reports whether the API server serves
// leaderworkersets.leaderworkerset.x-k8s.io/v1; an error is returned only
// when discovery itself failed (not when the group is absent).
func leaderWorkerSetsServed(d discovery.DiscoveryInterface) (bool, error) {
	rs, err := d.ServerResourcesForGroupVersion(leaderWorkerSetsGVR.GroupVersion().String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discovering %s: %w", leaderWorkerSetsGVR.GroupVersion(), err)
	}
	for _, r := range rs.APIResources {
		if r.Name == leaderWorkerSetsGVR.Resource {
			return true, nil
		}
	}
	return false, nil
}

// slimLWS keeps of a LeaderWorkerSet's metadata what the adapter reads:
// name, namespace, labels (selector questions), the serving-worker-index
// annotation, and what the informer keeps track of.
func slimLWS(obj interface{}) (interface{}, error) {
	switch m := obj.(type) {
	case *metav1.PartialObjectMetadata:
		out := &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta, ObjectMeta: workloadMeta(&m.ObjectMeta)}
		if v, ok := m.Annotations[provider.AnnotationServingWorkerIndex]; ok {
			out.Annotations = map[string]string{provider.AnnotationServingWorkerIndex: v}
		}
		return out, nil
	case cache.DeletedFinalStateUnknown:
		return inTombstone(m, slimLWS)
	}
	return obj, nil
}

// lwsLister is provider.LeaderWorkerSetLister over the metadata informers
// of the watched namespaces ("" for all).
type lwsLister map[string]cache.GenericLister

func (m lwsLister) lister(ns string) (cache.GenericNamespaceLister, bool) {
	if l, ok := m[metav1.NamespaceAll]; ok {
		return l.ByNamespace(ns), true
	}
	l, ok := m[ns]
	if !ok {
		return nil, false
	}
	return l.ByNamespace(ns), true
}

func (m lwsLister) Get(ns, name string) (*provider.LeaderWorkerSet, error) {
	l, ok := m.lister(ns)
	if !ok {
		return nil, apierrors.NewNotFound(leaderWorkerSetsGVR.GroupResource(), name)
	}
	obj, err := l.Get(name)
	if err != nil {
		return nil, err
	}
	return lwsOf(obj)
}

func (m lwsLister) List(ns string, sel labels.Selector) ([]*provider.LeaderWorkerSet, error) {
	l, ok := m.lister(ns)
	if !ok {
		return nil, nil
	}
	objs, err := l.List(sel)
	if err != nil {
		return nil, err
	}
	out := make([]*provider.LeaderWorkerSet, 0, len(objs))
	for _, o := range objs {
		l, err := lwsOf(o)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}

func lwsOf(obj interface{}) (*provider.LeaderWorkerSet, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return nil, fmt.Errorf("leaderworkerset cache holds a %T", obj)
	}
	return &provider.LeaderWorkerSet{Namespace: m.Namespace, Name: m.Name, Labels: m.Labels, ServingWorkerIndex: m.Annotations[provider.AnnotationServingWorkerIndex]}, nil
}

// accessReviewer asks whether the adapter may verb leaderworkersets in
// namespace ("" for all): a SelfSubjectAccessReview (selfAccess).
type accessReviewer func(ctx context.Context, namespace, verb string) (bool, error)

// selfAccess is accessReviewer through the API server's
// SelfSubjectAccessReviews.
func selfAccess(c kubernetes.Interface) accessReviewer {
	return func(ctx context.Context, namespace, verb string) (bool, error) {
		r, err := c.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: namespace, Verb: verb, Group: leaderWorkerSetsGVR.Group, Resource: leaderWorkerSetsGVR.Resource,
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			return false, fmt.Errorf("reviewing access to %s: %w", leaderWorkerSetsGVR.GroupResource(), err)
		}
		return r.Status.Allowed, nil
	}
}

// watchLeaderWorkerSets adds metadata informers for LeaderWorkerSets to w
// when d says their CRD is installed and may says the adapter may list and
// watch them in every namespace it watches, and returns their lister; nil
// (and a log line) otherwise: an informer without the CRD or the RBAC
// would retry a failing watch for ever and never sync, keeping the adapter
// unready.
func (w *watched) watchLeaderWorkerSets(ctx context.Context, d discovery.DiscoveryInterface, may accessReviewer, client metadata.Interface, namespaces []string) (provider.LeaderWorkerSetLister, error) {
	served, err := leaderWorkerSetsServed(d)
	if err != nil {
		return nil, err
	}
	if !served {
		klog.InfoS("LeaderWorkerSets are not served by the API server (is their CRD installed?): not watching them; questions about them are answered 404. Restart the adapter after installing the CRD", "resource", leaderWorkerSetsGVR.String())
		return nil, nil
	}
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	for _, ns := range namespaces {
		for _, verb := range []string{"list", "watch"} {
			ok, err := may(ctx, ns, verb)
			if err != nil {
				return nil, err
			}
			if !ok {
				klog.InfoS("The adapter may not list and watch LeaderWorkerSets (the chart's leaderWorkerSet.enabled grants it): not watching them; questions about them are answered 404", "resource", leaderWorkerSetsGVR.String(), "namespace", ns, "verb", verb)
				return nil, nil
			}
		}
	}
	l := lwsLister{}
	for _, ns := range namespaces {
		f := metadatainformer.NewFilteredSharedInformerFactory(client, 0, ns, nil)
		gi := f.ForResource(leaderWorkerSetsGVR)
		if err := gi.Informer().SetTransform(slimLWS); err != nil {
			return nil, fmt.Errorf("slimming cached leaderworkersets: %w", err)
		}
		w.synced = append(w.synced, gi.Informer().HasSynced)
		w.metaFactories = append(w.metaFactories, f)
		l[ns] = gi.Lister()
	}
	klog.InfoS("Watching LeaderWorkerSets", "resource", leaderWorkerSetsGVR.String(), "namespaces", namespaces)
	return l, nil
}
