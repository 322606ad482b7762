// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
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
// and watch them in every watched namespace, nothing is watched (no lister,
// no informer to fail and keep the adapter unready); with both, the metadata informer's lister gives the
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
		wantA, wantB bool
	}{
		{"CRD absent", nil, nil, "", false, false, false},
		{"group served without the resource", []*metav1.APIResourceList{{GroupVersion: "leaderworkerset.x-k8s.io/v1", APIResources: []metav1.APIResource{{Name: "other"}}}}, nil, "", false, false, false},
		{"all namespaces", served, nil, "", true, true, true},
		{"--namespaces a", served, []string{"a"}, "", true, true, false},
		{"no RBAC", served, nil, "*", false, false, false},
		{"no RBAC in one of --namespaces", served, []string{"a", "b"}, "b", false, false, false},
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
			l, err := w.watchLeaderWorkerSets(context.Background(), d, may, mc, tc.namespaces)
			if err != nil {
				t.Fatal(err)
			}
			if (l != nil) != tc.watched || (len(w.metaFactories) > 0) != tc.watched {
				t.Fatalf("watched: lister %v, %d factories; want %v", l != nil, len(w.metaFactories), tc.watched)
			}
			if !tc.watched {
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
