// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/provider"
)

// The adapter watches either all namespaces (one informer factory) or the
// namespaces named by --namespaces (one factory each, so that namespaced
// RBAC suffices). These listers present several factories as one.

func emptyIndexer() cache.Indexer {
	return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
}

type podListers map[string]corelisters.PodLister

func (m podListers) List(sel labels.Selector) ([]*corev1.Pod, error) {
	var out []*corev1.Pod
	for _, l := range m {
		ps, err := l.List(sel)
		if err != nil {
			return nil, err
		}
		out = append(out, ps...)
	}
	return out, nil
}

// Pods returns the lister of namespace ns; for metav1.NamespaceAll (a
// question across all namespaces), the pods of every watched namespace.
func (m podListers) Pods(ns string) corelisters.PodNamespaceLister {
	if ns == metav1.NamespaceAll {
		return allPods{m}
	}
	if l, ok := m[ns]; ok {
		return l.Pods(ns)
	}
	return corelisters.NewPodLister(emptyIndexer()).Pods(ns)
}

// allPods is podListers' namespace lister for all namespaces: it lists the
// pods of every watched namespace, and like client-go's lister for
// NamespaceAll, gets none by name.
type allPods struct{ m podListers }

func (a allPods) List(sel labels.Selector) ([]*corev1.Pod, error) { return a.m.List(sel) }

func (a allPods) Get(name string) (*corev1.Pod, error) {
	return nil, apierrors.NewNotFound(corev1.Resource("pod"), name)
}

type deploymentListers map[string]appslisters.DeploymentLister

func (m deploymentListers) Deployments(ns string) appslisters.DeploymentNamespaceLister {
	if l, ok := m[ns]; ok {
		return l.Deployments(ns)
	}
	return appslisters.NewDeploymentLister(emptyIndexer()).Deployments(ns)
}

type statefulSetListers map[string]appslisters.StatefulSetLister

func (m statefulSetListers) StatefulSets(ns string) appslisters.StatefulSetNamespaceLister {
	if l, ok := m[ns]; ok {
		return l.StatefulSets(ns)
	}
	return appslisters.NewStatefulSetLister(emptyIndexer()).StatefulSets(ns)
}

// watched holds the informer factories and the merged listers over them.
type watched struct {
	factories    []informers.SharedInformerFactory
	synced       []cache.InformerSynced
	pods         corelisters.PodLister
	deployments  provider.DeploymentLister
	statefulsets provider.StatefulSetLister
	podInformers []cache.SharedIndexInformer
	// metaFactories are the LeaderWorkerSets' metadata informers (lws.go).
	metaFactories []metadatainformer.SharedInformerFactory
}

// slimPod keeps of a pod only what the adapter reads, to keep the informer's
// cache small: a cluster of 10,000 pods holds 10,000 of them. It builds a new
// pod rather than clearing fields of the decoded one, so that nothing the
// adapter does not read (tolerations, images, resources, probes, statuses,
// managed fields) stays reachable. What is kept:
//
//   - metadata: name, namespace, UID, resourceVersion, labels, the
//     annotations the adapter reads (podAnnotationsRead; a tenant's other
//     annotations, up to 256 KiB a pod, are dropped), owner references,
//     creation and deletion timestamps (targets, the gpu-agent's trust, the
//     choice between pods sharing an IP);
//   - spec: the node, hostNetwork, and each container that declares ports,
//     with its name and the ports' names and numbers (the scrape port);
//   - status: phase, pod IP and the Ready condition's status (Running, Ready).
//
// A new field read anywhere in the adapter must be added here; the test
// TestSlimPodKeepsWhatTheAdapterReads lists them. Parts that many pods hold
// alike (labels, annotations, owner references, the containers' ports, the
// Ready condition) are shared between the pods that hold them (sharedParts).
// A tombstone's pod is slimmed too (see inTombstone).
func (sp *sharedParts) slimPod(obj interface{}) (interface{}, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			return inTombstone(t, sp.slimPod)
		}
		return obj, nil
	}
	return &corev1.Pod{
		TypeMeta: p.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:              p.Name,
			Namespace:         p.Namespace,
			UID:               p.UID,
			ResourceVersion:   p.ResourceVersion,
			Labels:            sp.stringMap(sp.labels, p.Labels),
			Annotations:       sp.stringMap(sp.annotations, readAnnotations(p.Annotations)),
			OwnerReferences:   sp.ownerRefs(p.OwnerReferences),
			CreationTimestamp: p.CreationTimestamp,
			DeletionTimestamp: p.DeletionTimestamp,
		},
		Spec: corev1.PodSpec{
			NodeName:    p.Spec.NodeName,
			HostNetwork: p.Spec.HostNetwork,
			Containers:  sp.portContainers(p),
		},
		Status: corev1.PodStatus{
			Phase:      p.Status.Phase,
			PodIP:      p.Status.PodIP,
			Conditions: sp.readyCondition(p),
		},
	}, nil
}

func newWatched(newFactory func(ns string) informers.SharedInformerFactory, namespaces []string) (*watched, error) {
	if len(namespaces) == 0 {
		namespaces = []string{""}
	}
	w := &watched{}
	shared := newSharedParts() // one for all the factories' pod informers
	pl, dl, sl := podListers{}, deploymentListers{}, statefulSetListers{}
	for _, ns := range namespaces {
		f := newFactory(ns)
		pi := f.Core().V1().Pods()
		if err := pi.Informer().SetTransform(shared.slimPod); err != nil {
			return nil, fmt.Errorf("slimming cached pods: %w", err)
		}
		di := f.Apps().V1().Deployments()
		if err := di.Informer().SetTransform(slimDeployment); err != nil {
			return nil, fmt.Errorf("slimming cached deployments: %w", err)
		}
		si := f.Apps().V1().StatefulSets()
		if err := si.Informer().SetTransform(slimStatefulSet); err != nil {
			return nil, fmt.Errorf("slimming cached statefulsets: %w", err)
		}
		w.synced = append(w.synced, pi.Informer().HasSynced, di.Informer().HasSynced, si.Informer().HasSynced)
		w.podInformers = append(w.podInformers, pi.Informer())
		w.factories = append(w.factories, f)
		pl[ns], dl[ns], sl[ns] = pi.Lister(), di.Lister(), si.Lister()
	}
	if len(namespaces) == 1 && namespaces[0] == "" {
		w.pods, w.deployments, w.statefulsets = pl[""], dl[""], sl[""]
	} else {
		w.pods, w.deployments, w.statefulsets = pl, dl, sl
	}
	return w, nil
}
