package server

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/provider"
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

func (m podListers) Pods(ns string) corelisters.PodNamespaceLister {
	if l, ok := m[ns]; ok {
		return l.Pods(ns)
	}
	return corelisters.NewPodLister(emptyIndexer()).Pods(ns)
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
}

// stripPod drops what the adapter never reads, to keep the cache small.
func stripPod(obj interface{}) (interface{}, error) {
	if p, ok := obj.(*corev1.Pod); ok {
		p.ManagedFields = nil
		p.Spec.Volumes = nil
		p.Spec.InitContainers = nil
		for i := range p.Spec.Containers {
			c := &p.Spec.Containers[i]
			c.Env, c.EnvFrom, c.VolumeMounts, c.Command, c.Args = nil, nil, nil, nil, nil
			c.LivenessProbe, c.ReadinessProbe, c.StartupProbe = nil, nil, nil
		}
		p.Status.ContainerStatuses = nil
		p.Status.InitContainerStatuses = nil
	}
	return obj, nil
}

func newWatched(newFactory func(ns string) informers.SharedInformerFactory, namespaces []string) (*watched, error) {
	if len(namespaces) == 0 {
		namespaces = []string{""}
	}
	w := &watched{}
	pl, dl, sl := podListers{}, deploymentListers{}, statefulSetListers{}
	for _, ns := range namespaces {
		f := newFactory(ns)
		pi := f.Core().V1().Pods()
		if err := pi.Informer().SetTransform(stripPod); err != nil {
			return nil, err
		}
		di := f.Apps().V1().Deployments()
		si := f.Apps().V1().StatefulSets()
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
