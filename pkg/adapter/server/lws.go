// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

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

// LeaderWorkerSets are a CRD that may not be installed, or installed after
// the adapter starts: the adapter looks for the resource at start
// (discovery) and, when it is served and the adapter may list and watch it,
// watches the objects' metadata (a metadata-only informer: no LWS API
// types, and a small cache). Otherwise it watches nothing (no failing watch
// to retry, no unsynced informer keeping it unready) and looks again every
// --leader-worker-sets-recheck (lwsWatch.run, one goroutine); once both
// hold it starts the informers, waits for them to sync, and from then on
// the provider's lister reads them. Until then the provider answers LWS
// questions with a 404 that says why.

// DefaultLeaderWorkerSetsRecheck is how often the adapter looks for the
// LeaderWorkerSet CRD (and its RBAC) while it watches none.
const DefaultLeaderWorkerSetsRecheck = 30 * time.Second

// lwsSyncTimeout bounds the wait for late LeaderWorkerSet informers to
// sync; past it they are stopped and the next check starts again.
const lwsSyncTimeout = 30 * time.Second

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

// lwsReason says why the adapter cannot watch LeaderWorkerSets now: their
// CRD is not served, or it may not list and watch them in one of the
// namespaces ("" when it can). An error is returned only when discovery or
// the access review failed.
func lwsReason(ctx context.Context, d discovery.DiscoveryInterface, may accessReviewer, namespaces []string) (string, error) {
	served, err := leaderWorkerSetsServed(d)
	if err != nil {
		return "", err
	}
	if !served {
		return "their CRD is not served by the API server (is the LeaderWorkerSet operator installed?)", nil
	}
	for _, ns := range namespaces {
		for _, verb := range []string{"list", "watch"} {
			ok, err := may(ctx, ns, verb)
			if err != nil {
				return "", err
			}
			if !ok {
				where := "in namespace " + ns
				if ns == metav1.NamespaceAll {
					where = "in all namespaces"
				}
				return fmt.Sprintf("the adapter may not %s them %s (the chart's leaderWorkerSet.enabled grants it)", verb, where), nil
			}
		}
	}
	return "", nil
}

// lwsInformers makes the metadata informers of LeaderWorkerSets in
// namespaces, and their lister; nothing is started.
func lwsInformers(client metadata.Interface, namespaces []string) (lwsLister, []metadatainformer.SharedInformerFactory, []cache.InformerSynced, error) {
	l := lwsLister{}
	var factories []metadatainformer.SharedInformerFactory
	var synced []cache.InformerSynced
	for _, ns := range namespaces {
		f := metadatainformer.NewFilteredSharedInformerFactory(client, 0, ns, nil)
		gi := f.ForResource(leaderWorkerSetsGVR)
		if err := gi.Informer().SetTransform(slimLWS); err != nil {
			return nil, nil, nil, fmt.Errorf("slimming cached leaderworkersets: %w", err)
		}
		synced = append(synced, gi.Informer().HasSynced)
		factories = append(factories, f)
		l[ns] = gi.Lister()
	}
	return l, factories, synced, nil
}

// lwsWatch is the provider's LeaderWorkerSet lister while the adapter
// watches none yet: Get and List answer a LeaderWorkerSetsNotWatchedError
// that says why (a 404) until run has found the CRD served, the access
// allowed and the informers synced, and read through their lister from
// then on.
type lwsWatch struct {
	lister atomic.Pointer[lwsLister]
	reason atomic.Pointer[string]

	discovery  discovery.DiscoveryInterface
	may        accessReviewer
	client     metadata.Interface
	namespaces []string
	period     time.Duration
	// syncTimeout bounds each wait for the informers to sync.
	syncTimeout time.Duration
	// factories are the informers run started, shut down when it returns.
	factories []metadatainformer.SharedInformerFactory
}

func (w *lwsWatch) current() (lwsLister, error) {
	if l := w.lister.Load(); l != nil {
		return *l, nil
	}
	return nil, &provider.LeaderWorkerSetsNotWatchedError{Reason: *w.reason.Load() + fmt.Sprintf("; the adapter checks again every %s", w.period)}
}

func (w *lwsWatch) setReason(r string) { w.reason.Store(&r) }

// Get is provider.LeaderWorkerSetLister's.
func (w *lwsWatch) Get(ns, name string) (*provider.LeaderWorkerSet, error) {
	l, err := w.current()
	if err != nil {
		return nil, err
	}
	return l.Get(ns, name)
}

// List is provider.LeaderWorkerSetLister's.
func (w *lwsWatch) List(ns string, sel labels.Selector) ([]*provider.LeaderWorkerSet, error) {
	l, err := w.current()
	if err != nil {
		return nil, err
	}
	return l.List(ns, sel)
}

// run checks every period, until ctx is done or the informers are
// synced, whether LeaderWorkerSets can be watched now; once they can it
// starts their informers, waits (bounded) for them to sync, and swaps in
// their lister. It returns when ctx is done, after shutting down the
// informers it started.
func (w *lwsWatch) run(ctx context.Context) {
	defer func() {
		for _, f := range w.factories {
			f.Shutdown()
		}
	}()
	t := time.NewTicker(w.period)
	defer t.Stop()
	for w.lister.Load() == nil {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		w.check(ctx)
	}
	<-ctx.Done()
}

// check is one of run's checks: discovery and access review, then the
// informers and their sync.
func (w *lwsWatch) check(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, w.period)
	reason, err := lwsReason(cctx, w.discovery, w.may, w.namespaces)
	cancel()
	if err != nil {
		klog.ErrorS(err, "Looking for LeaderWorkerSets failed; trying again", "resource", leaderWorkerSetsGVR.String(), "period", w.period)
		return
	}
	if reason != "" {
		if reason != *w.reason.Load() {
			klog.InfoS("Not watching LeaderWorkerSets yet", "resource", leaderWorkerSetsGVR.String(), "reason", reason, "period", w.period)
		}
		w.setReason(reason)
		return
	}
	l, factories, synced, err := lwsInformers(w.client, w.namespaces)
	if err != nil {
		klog.ErrorS(err, "Setting up LeaderWorkerSet informers failed; trying again", "period", w.period)
		return
	}
	sctx, cancel := context.WithTimeout(ctx, w.syncTimeout)
	defer cancel()
	for _, f := range factories {
		f.Start(ctx.Done())
	}
	if !cache.WaitForCacheSync(sctx.Done(), synced...) {
		for _, f := range factories {
			f.Shutdown()
		}
		if ctx.Err() == nil {
			klog.InfoS("LeaderWorkerSet informers did not sync; stopped them, trying again", "resource", leaderWorkerSetsGVR.String(), "timeout", w.syncTimeout, "period", w.period)
			w.setReason(fmt.Sprintf("their informers did not sync within %s", w.syncTimeout))
		}
		return
	}
	w.factories = factories
	w.lister.Store(&l)
	klog.InfoS("Watching LeaderWorkerSets", "resource", leaderWorkerSetsGVR.String(), "namespaces", w.namespaces)
}

// watchLeaderWorkerSets returns the provider's LeaderWorkerSet lister.
// When d says their CRD is installed and may says the adapter may list and
// watch them in every namespace it watches, it adds their metadata
// informers to w (started by run and counted in /readyz) and returns their
// lister, and a nil lwsWatch. Otherwise it returns an lwsWatch, which is
// the lister too: it answers 404 with the reason, and its run looks again
// every period. An informer without the CRD or the RBAC would retry a
// failing watch for ever and never sync, keeping the adapter unready.
func (w *watched) watchLeaderWorkerSets(ctx context.Context, d discovery.DiscoveryInterface, may accessReviewer, client metadata.Interface, namespaces []string, period time.Duration) (provider.LeaderWorkerSetLister, *lwsWatch, error) {
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	if period <= 0 {
		period = DefaultLeaderWorkerSetsRecheck
	}
	reason, err := lwsReason(ctx, d, may, namespaces)
	if err != nil {
		return nil, nil, err
	}
	if reason != "" {
		klog.InfoS("Not watching LeaderWorkerSets yet: questions about them are answered 404 until the adapter finds it can", "resource", leaderWorkerSetsGVR.String(), "reason", reason, "period", period)
		lw := &lwsWatch{discovery: d, may: may, client: client, namespaces: namespaces, period: period, syncTimeout: lwsSyncTimeout}
		lw.setReason(reason)
		return lw, lw, nil
	}
	l, factories, synced, err := lwsInformers(client, namespaces)
	if err != nil {
		return nil, nil, err
	}
	w.synced = append(w.synced, synced...)
	w.metaFactories = append(w.metaFactories, factories...)
	klog.InfoS("Watching LeaderWorkerSets", "resource", leaderWorkerSetsGVR.String(), "namespaces", namespaces)
	return l, nil, nil
}
