// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	fakediscovery "k8s.io/client-go/discovery/fake"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/provider"
)

func lwsMeta(ns, name string, lbls, ann map[string]string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "leaderworkerset.x-k8s.io/v1", Kind: "LeaderWorkerSet"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls, Annotations: ann},
	}
}

// TestWatchLeaderWorkerSets: without the CRD, or without the RBAC to list
// and watch them in every watched namespace, nothing is watched yet (no
// informer to fail and keep the adapter unready; the lister answers a
// not-watched error that says why and when the adapter looks again); with both, the metadata informer's lister gives the
// provider each LWS's name, labels and serving worker index, and nothing
// else of its annotations is kept.
func TestWatchLeaderWorkerSets(t *testing.T) {
	objs := []runtime.Object{
		lwsMeta("a", "llm", map[string]string{"tier": "gpu"}, map[string]string{provider.AnnotationServingWorkerIndex: "1", "big": strings.Repeat("x", 1000)}),
		lwsMeta("b", "other", nil, nil),
	}
	served := []*metav1.APIResourceList{{GroupVersion: "leaderworkerset.x-k8s.io/v1", APIResources: []metav1.APIResource{{Name: "leaderworkersets"}}}}
	for _, tc := range []struct {
		name         string
		resources    []*metav1.APIResourceList
		namespaces   []string
		denied       string // a namespace where list and watch are denied, "*" for all
		watched      bool
		reason       string // of the 404 when not watched
		wantA, wantB bool
	}{
		{"CRD absent", nil, nil, "", false, "CRD is not served", false, false},
		{"group served without the resource", []*metav1.APIResourceList{{GroupVersion: "leaderworkerset.x-k8s.io/v1", APIResources: []metav1.APIResource{{Name: "other"}}}}, nil, "", false, "CRD is not served", false, false},
		{"all namespaces", served, nil, "", true, "", true, true},
		{"--namespaces a", served, []string{"a"}, "", true, "", true, false},
		{"no RBAC", served, nil, "*", false, "may not list them in all namespaces", false, false},
		{"no RBAC in one of --namespaces", served, []string{"a", "b"}, "b", false, "may not list them in namespace b", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: tc.resources}}
			scheme := metadatafake.NewTestScheme()
			gv := leaderWorkerSetsGVR.GroupVersion()
			scheme.AddKnownTypeWithName(gv.WithKind("LeaderWorkerSet"), &metav1.PartialObjectMetadata{})
			scheme.AddKnownTypeWithName(gv.WithKind("LeaderWorkerSetList"), &metav1.PartialObjectMetadataList{})
			mc := metadatafake.NewSimpleMetadataClient(scheme, objs...)
			w := &watched{}
			may := func(_ context.Context, ns, verb string) (bool, error) {
				if verb != "list" && verb != "watch" {
					t.Errorf("reviewed %q, want list and watch", verb)
				}
				return tc.denied == "" || (tc.denied != "*" && tc.denied != ns), nil
			}
			l, late, err := w.watchLeaderWorkerSets(context.Background(), d, may, mc, tc.namespaces, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if l == nil || (late == nil) != tc.watched || (len(w.metaFactories) > 0) != tc.watched {
				t.Fatalf("watched: lister %v, late %v, %d factories; want watched %v", l != nil, late != nil, len(w.metaFactories), tc.watched)
			}
			if !tc.watched {
				_, err := l.Get("a", "llm")
				var nw *provider.LeaderWorkerSetsNotWatchedError
				if !errors.As(err, &nw) || !strings.Contains(err.Error(), tc.reason) || !strings.Contains(err.Error(), "checks again every 1m0s") {
					t.Errorf("get before watching: %v; want a not-watched error saying %q and the period", err, tc.reason)
				}
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for _, f := range w.metaFactories {
				f.Start(ctx.Done())
			}
			defer func() {
				cancel()
				for _, f := range w.metaFactories {
					f.Shutdown()
				}
			}()
			if !cache.WaitForCacheSync(ctx.Done(), w.synced...) {
				t.Fatal("not synced")
			}
			got, err := l.Get("a", "llm")
			if tc.wantA != (err == nil) {
				t.Fatalf("get a/llm: %v, %v", got, err)
			}
			if got.ServingWorkerIndex != "1" || got.Labels["tier"] != "gpu" {
				t.Errorf("a/llm read as %+v", got)
			}
			if _, err := l.Get("b", "other"); tc.wantB != (err == nil) {
				t.Errorf("get b/other: err %v, want found %v", err, tc.wantB)
			}
			list, err := l.List("a", labels.SelectorFromSet(labels.Set{"tier": "gpu"}))
			if err != nil || len(list) != 1 || list[0].Name != "llm" {
				t.Errorf("list a tier=gpu: %v, %v", list, err)
			}
			slim, err := slimLWS(objs[0])
			if err != nil {
				t.Fatal(err)
			}
			if a := slim.(*metav1.PartialObjectMetadata).Annotations; len(a) != 1 {
				t.Errorf("the slim LWS keeps annotations %v; want only %s", a, provider.AnnotationServingWorkerIndex)
			}
		})
	}
}

// TestSelfAccess: the review asks about leaderworkersets of
// leaderworkerset.x-k8s.io, in the namespace and with the verb given, and
// returns the API server's verdict.
func TestSelfAccess(t *testing.T) {
	c := k8sfake.NewClientset()
	var asked []string
	c.PrependReactor("create", "selfsubjectaccessreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
		r := a.(clienttesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview)
		ra := r.Spec.ResourceAttributes
		asked = append(asked, ra.Group+"/"+ra.Resource+" "+ra.Verb+" in "+ra.Namespace)
		r.Status.Allowed = ra.Namespace == "ok"
		return true, r, nil
	})
	may := selfAccess(c)
	for _, tc := range []struct {
		ns   string
		want bool
	}{{"ok", true}, {"other", false}} {
		got, err := may(context.Background(), tc.ns, "watch")
		if err != nil || got != tc.want {
			t.Errorf("%s: %v, %v; want %v", tc.ns, got, err, tc.want)
		}
	}
	if want := "leaderworkerset.x-k8s.io/leaderworkersets watch in ok"; len(asked) != 2 || asked[0] != want {
		t.Errorf("asked %v, want first %q", asked, want)
	}
}

// TestLeaderWorkerSetsInstalledLater: started before the CRD is served, the
// lister answers a not-watched error saying so and how often the adapter
// looks again; a discovery error changes nothing; once discovery serves the
// resource the next check starts the informers and the lister answers, and
// the checks stop; cancelling the context stops the loop, whether it found
// them or not.
func TestLeaderWorkerSetsInstalledLater(t *testing.T) {
	const period = 20 * time.Millisecond
	for _, tc := range []struct {
		name    string
		install bool // serve the CRD after a while
	}{
		{"installed later", true},
		{"never installed", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var state atomic.Int32 // 0: not served, 1: discovery fails, 2: served
			var checks atomic.Int32
			d := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: []*metav1.APIResourceList{{GroupVersion: "leaderworkerset.x-k8s.io/v1", APIResources: []metav1.APIResource{{Name: "leaderworkersets"}}}}}}
			d.PrependReactor("get", "resource", func(clienttesting.Action) (bool, runtime.Object, error) {
				checks.Add(1)
				switch state.Load() {
				case 0:
					return true, nil, apierrors.NewNotFound(leaderWorkerSetsGVR.GroupResource(), "")
				case 1:
					return true, nil, errors.New("connection refused")
				}
				return false, nil, nil
			})
			scheme := metadatafake.NewTestScheme()
			gv := leaderWorkerSetsGVR.GroupVersion()
			scheme.AddKnownTypeWithName(gv.WithKind("LeaderWorkerSet"), &metav1.PartialObjectMetadata{})
			scheme.AddKnownTypeWithName(gv.WithKind("LeaderWorkerSetList"), &metav1.PartialObjectMetadataList{})
			mc := metadatafake.NewSimpleMetadataClient(scheme, lwsMeta("a", "llm", nil, map[string]string{provider.AnnotationServingWorkerIndex: "1"}))
			may := func(context.Context, string, string) (bool, error) { return true, nil }
			w := &watched{}
			l, late, err := w.watchLeaderWorkerSets(context.Background(), d, may, mc, nil, period)
			if err != nil {
				t.Fatal(err)
			}
			if late == nil || len(w.metaFactories) != 0 || len(w.synced) != 0 {
				t.Fatalf("not served at start: late %v, %d factories and %d synced in /readyz; want a late watch and none", late != nil, len(w.metaFactories), len(w.synced))
			}
			notYet := func(when string) {
				t.Helper()
				_, err := l.Get("a", "llm")
				var nw *provider.LeaderWorkerSetsNotWatchedError
				if !errors.As(err, &nw) || !strings.Contains(err.Error(), "CRD is not served") || !strings.Contains(err.Error(), "checks again every 20ms") || strings.Contains(err.Error(), "estart") {
					t.Fatalf("%s: get a/llm: %v; want not served yet, checked again every 20ms, no restart advice", when, err)
				}
				if _, err := l.List("a", labels.Everything()); !errors.As(err, &nw) {
					t.Fatalf("%s: list: %v; want not watched", when, err)
				}
			}
			notYet("at start")

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan struct{})
			go func() { defer close(done); late.run(ctx) }()
			waitChecks := func(n int32) {
				t.Helper()
				from := checks.Load()
				deadline := time.Now().Add(5 * time.Second)
				for checks.Load() < from+n {
					if time.Now().After(deadline) {
						t.Fatalf("%d checks in 5s, want %d more", checks.Load()-from, n)
					}
					time.Sleep(period / 4)
				}
			}
			waitChecks(3)
			notYet("not served, checked again")
			state.Store(1)
			waitChecks(3)
			notYet("discovery failing")

			if tc.install {
				state.Store(2)
				start := time.Now()
				var got *provider.LeaderWorkerSet
				for {
					if got, err = l.Get("a", "llm"); err == nil {
						break
					}
					if time.Since(start) > 5*time.Second {
						t.Fatalf("served for 5s, still %v", err)
					}
					time.Sleep(period / 4)
				}
				if got.Name != "llm" || got.ServingWorkerIndex != "1" {
					t.Errorf("a/llm read as %+v", got)
				}
				if list, err := l.List("a", labels.Everything()); err != nil || len(list) != 1 {
					t.Errorf("list a: %v, %v", list, err)
				}
				t.Logf("answered %s after the CRD was served (period %s)", time.Since(start).Round(time.Millisecond), period)
				// Found: no more checks.
				n := checks.Load()
				time.Sleep(5 * period)
				if more := checks.Load() - n; more != 0 {
					t.Errorf("%d discovery checks after the informers synced; want none", more)
				}
			}
			cancel()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("the loop did not stop within 5s of the context's cancellation")
			}
			n := checks.Load()
			time.Sleep(3 * period)
			if more := checks.Load() - n; more != 0 {
				t.Errorf("%d checks after the loop stopped", more)
			}
		})
	}
}
