// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package provider

import (
	"fmt"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	testclock "k8s.io/utils/clock/testing"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/store"
)

// fakeLWSs is a LeaderWorkerSetLister over a map.
type fakeLWSs map[types.NamespacedName]*LeaderWorkerSet

func (f fakeLWSs) Get(ns, name string) (*LeaderWorkerSet, error) {
	if l, ok := f[types.NamespacedName{Namespace: ns, Name: name}]; ok {
		return l, nil
	}
	return nil, apierrors.NewNotFound(leaderWorkerSetsGR, name)
}

func (f fakeLWSs) List(ns string, sel labels.Selector) ([]*LeaderWorkerSet, error) {
	var out []*LeaderWorkerSet
	for k, l := range f {
		if k.Namespace == ns && sel.Matches(labels.Set(l.Labels)) {
			out = append(out, l)
		}
	}
	return out, nil
}

// lwsPod is a pod of group g, worker w, of the LWS name, as the LWS
// controller labels it.
func lwsPod(name, lws string, g, w int, running, ready bool) *corev1.Pod {
	return pod(name, map[string]string{
		LWSNameLabel:        lws,
		LWSGroupIndexLabel:  fmt.Sprint(g),
		LWSWorkerIndexLabel: fmt.Sprint(w),
	}, running, ready, nil)
}

// lwsServer serves a provider over pods and lwss (nil: not watched).
func lwsServer(t *testing.T, now time.Time, st *store.Store, pods []*corev1.Pod, lwss LeaderWorkerSetLister) (*Provider, func(path string) (int, string)) {
	t.Helper()
	pi := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, p := range pods {
		if err := pi.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	list := Listers{Pods: corelisters.NewPodLister(pi)}
	if lwss != nil {
		list.LeaderWorkerSets = lwss
	}
	prov := New(Config{MaxAge: 15 * time.Second, Window: 5 * time.Second}, list, st, &recordingDemand{}, testclock.NewFakePassiveClock(now))
	srv := httptest.NewServer(handler(t, prov))
	t.Cleanup(srv.Close)
	return prov, func(path string) (int, string) { return get(t, srv, path) }
}

// TestLeaderWorkerSetGroups: a LeaderWorkerSet's replicas are its groups,
// read from each group's serving pod (the leader, or the worker the
// annotation names): a group whose serving pod is gone or not Ready is one
// starting replica, whatever its workers do; workers are never read.
func TestLeaderWorkerSetGroups(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	fresh := now.Add(-time.Second)
	st := store.New()
	record := func(name string, q, b float64) {
		st.Record(types.NamespacedName{Namespace: "ns", Name: name}, fresh, page(model("m", q, b, 0.5)), nil)
	}
	// full: two complete Ready groups.
	record("full-0", 6, 2)
	record("full-0-1", 100, 100) // a worker: never read
	record("full-1", 2, 2)
	// gone: group 0 whole, group 1's leader gone (workers only), group 2
	// partial (its leader Ready, a worker missing).
	record("gone-0", 9, 3)
	record("gone-2", 3, 3)
	// starting: the leader not Ready yet; a leader Pending.
	// worker: the annotation makes worker 1 the serving pod.
	record("wk-0", 50, 50)
	record("wk-0-1", 4, 4)
	record("wk-1-1", 2, 2)
	terminating := func(p *corev1.Pod) *corev1.Pod {
		ts := metav1.NewTime(now)
		p.DeletionTimestamp = &ts
		return p
	}
	pods := []*corev1.Pod{
		lwsPod("full-0", "full", 0, 0, true, true), lwsPod("full-0-1", "full", 0, 1, true, true),
		lwsPod("full-1", "full", 1, 0, true, true), lwsPod("full-1-1", "full", 1, 1, true, true),
		lwsPod("gone-0", "gone", 0, 0, true, true), lwsPod("gone-0-1", "gone", 0, 1, true, true),
		lwsPod("gone-1-1", "gone", 1, 1, true, true), lwsPod("gone-1-2", "gone", 1, 2, true, true),
		lwsPod("gone-2", "gone", 2, 0, true, true), lwsPod("gone-2-1", "gone", 2, 1, true, true),
		terminating(lwsPod("gone-3", "gone", 3, 0, true, true)), lwsPod("gone-3-1", "gone", 3, 1, true, true),
		terminating(lwsPod("gone-4", "gone", 4, 0, true, true)), terminating(lwsPod("gone-4-1", "gone", 4, 1, true, true)),
		lwsPod("start-0", "start", 0, 0, true, false), lwsPod("start-1", "start", 1, 0, false, false), lwsPod("start-1-1", "start", 1, 1, true, true),
		lwsPod("wk-0", "wk", 0, 0, true, true), lwsPod("wk-0-1", "wk", 0, 1, true, true),
		lwsPod("wk-1", "wk", 1, 0, true, true), lwsPod("wk-1-1", "wk", 1, 1, true, true),
		lwsPod("wk-2", "wk", 2, 0, true, true),
		lwsPod("bad-0", "bad", 0, 0, true, true),
		// a Deployment's pod with the same app is nobody's group.
		pod("other", map[string]string{"app": "full"}, true, true, nil),
	}
	lws := func(name, idx string) *LeaderWorkerSet {
		return &LeaderWorkerSet{Namespace: "ns", Name: name, Labels: map[string]string{"tier": "gpu"}, ServingWorkerIndex: idx}
	}
	lwss := fakeLWSs{}
	for _, l := range []*LeaderWorkerSet{lws("full", ""), lws("gone", ""), lws("start", ""), lws("wk", "1"), lws("bad", "leader")} {
		lwss[types.NamespacedName{Namespace: "ns", Name: l.Name}] = l
	}
	_, get := lwsServer(t, now, st, pods, lwss)
	path := func(name, metric string) string {
		return inNS + "leaderworkersets.leaderworkerset.x-k8s.io/" + name + "/" + metric
	}
	cases := []struct {
		name    string
		path    string
		code    int
		want    string
		wantErr string
	}{
		{"two Ready groups read from their leaders: (8 + 4) / 2", path("full", catalog.DemandPerReplica), 200, "map[ns/full:6]", ""},
		{"a group whose leader is gone counts once, as starting; a partial group counts by its leader; terminating leaders' groups do not count twice: (12 + 6) / 4",
			path("gone", catalog.DemandPerReplica), 200, "map[ns/gone:4500m]", ""},
		{"no group Ready: unknown, not 0", path("start", catalog.DemandPerReplica), 404, "", "no pod is Ready (2 starting)"},
		{"the annotation's worker serves: (8 + 4) / 3 groups, the third without its worker 1 starting", path("wk", catalog.DemandPerReplica), 200, "map[ns/wk:4]", ""},
		{"a signal sums the serving pods only", path("full", "inference_queue_size"), 200, "map[ns/full:8]", ""},
		{"a signal with the annotation's worker", path("wk", "inference_queue_size"), 200, "map[ns/wk:6]", ""},
		{"the forecast resolves the LWS and records its groups' demand (one sample: too short a history yet)", path("full", catalog.DemandForecastPerReplica), 404, "", "ns/full: auto forecast over a horizon of 5s: the forecast's history has 1 samples"},
		{"a bad annotation says so", path("bad", catalog.DemandPerReplica), 404, "", "is not a worker index"},
		{"an unknown LWS", path("nothing", catalog.DemandPerReplica), 404, "", "nothing"},
		{"the short resource name", inNS + "leaderworkersets/full/" + catalog.DemandPerReplica, 200, "map[ns/full:6]", ""},
		{"by selector", inNS + "leaderworkersets.leaderworkerset.x-k8s.io/*/" + catalog.DemandPerReplica + "?labelSelector=" + url.QueryEscape("tier=gpu"), 200,
			"map[ns/full:6 ns/gone:4500m ns/wk:4]", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, body := get(tc.path)
			if code != tc.code {
				t.Fatalf("status %d, want %d; body %s", code, tc.code, body)
			}
			if tc.code != 200 {
				if !strings.Contains(body, tc.wantErr) {
					t.Fatalf("body %s does not say %q", body, tc.wantErr)
				}
				return
			}
			if got := fmt.Sprint(itemValues(t, body)); got != tc.want {
				t.Fatalf("values %s, want %s\n%s", got, tc.want, body)
			}
			if !strings.Contains(body, `"kind":"LeaderWorkerSet"`) || !strings.Contains(body, `"apiVersion":"leaderworkerset.x-k8s.io/v1"`) {
				t.Errorf("the value does not describe a LeaderWorkerSet: %s", body)
			}
		})
	}
}

// notYetLWSs is a LeaderWorkerSetLister that reads none yet (the server's
// lister before the CRD is served).
type notYetLWSs struct{ reason string }

func (n notYetLWSs) Get(string, string) (*LeaderWorkerSet, error) {
	return nil, &LeaderWorkerSetsNotWatchedError{Reason: n.reason}
}

func (n notYetLWSs) List(string, labels.Selector) ([]*LeaderWorkerSet, error) {
	return nil, &LeaderWorkerSetsNotWatchedError{Reason: n.reason}
}

// TestLeaderWorkerSetNotWatched: without --leader-worker-sets (no lister),
// or with a lister that reads none yet (the CRD not served), every
// LeaderWorkerSet question is a 404 that says why, and discovery does not
// list them without a lister; with one, discovery does.
func TestLeaderWorkerSetNotWatched(t *testing.T) {
	now := time.Now()
	pods := []*corev1.Pod{lwsPod("a-0", "a", 0, 0, true, true)}
	paths := []string{
		inNS + "leaderworkersets.leaderworkerset.x-k8s.io/a/" + catalog.DemandPerReplica,
		inNS + "leaderworkersets.leaderworkerset.x-k8s.io/a/" + catalog.DemandForecastPerReplica,
		inNS + "leaderworkersets.leaderworkerset.x-k8s.io/a/inference_queue_size",
		inNS + "leaderworkersets.leaderworkerset.x-k8s.io/*/inference_queue_size?labelSelector=tier%3Dgpu",
		inNS + "leaderworkersets.leaderworkerset.x-k8s.io/*/" + catalog.DemandPerReplica + "?labelSelector=tier%3Dgpu",
	}
	for _, tc := range []struct {
		name string
		lwss LeaderWorkerSetLister
		want string
	}{
		{"without --leader-worker-sets", nil, "it runs without --leader-worker-sets"},
		{"CRD not served yet", notYetLWSs{"their CRD is not served yet; the adapter checks again every 30s"}, "are not watched yet: their CRD is not served yet; the adapter checks again every 30s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, get := lwsServer(t, now, store.New(), pods, tc.lwss)
			for _, path := range paths {
				code, body := get(path)
				if code != 404 || !strings.Contains(body, tc.want) || strings.Contains(body, "estart") {
					t.Errorf("%s: status %d, body %s; want a 404 that says %q, and no restart advice", path, code, body, tc.want)
				}
			}
		})
	}
	_, get := lwsServer(t, now, store.New(), pods, nil)
	code, body := get(v1beta2)
	if code != 200 || strings.Contains(body, "leaderworkersets") {
		t.Errorf("discovery without the CRD: status %d, lists leaderworkersets: %v", code, strings.Contains(body, "leaderworkersets"))
	}
	_, get = lwsServer(t, now, store.New(), pods, fakeLWSs{})
	code, body = get(v1beta2)
	if code != 200 || !strings.Contains(body, `"leaderworkersets.leaderworkerset.x-k8s.io/`+catalog.DemandPerReplica+`"`) {
		t.Errorf("discovery with the CRD: status %d, does not list leaderworkersets' %s: %s", code, catalog.DemandPerReplica, body)
	}
}

// TestLWSSelectors: the serving pods are the leader by default, the
// annotation's worker otherwise; a negative or non-numeric index is refused.
func TestLWSSelectors(t *testing.T) {
	for _, tc := range []struct {
		idx, want, wantErr string
	}{
		{"", "leaderworkerset.sigs.k8s.io/name=m,leaderworkerset.sigs.k8s.io/worker-index=0", ""},
		{"2", "leaderworkerset.sigs.k8s.io/name=m,leaderworkerset.sigs.k8s.io/worker-index=2", ""},
		{"02", "leaderworkerset.sigs.k8s.io/name=m,leaderworkerset.sigs.k8s.io/worker-index=2", ""},
		{"-1", "", "not a worker index"},
		{"leader", "", "not a worker index"},
	} {
		_, serving, err := lwsSelectors(&LeaderWorkerSet{Namespace: "ns", Name: "m", ServingWorkerIndex: tc.idx})
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: err %v, want %q", tc.idx, err, tc.wantErr)
			}
			continue
		}
		if err != nil || serving.String() != tc.want {
			t.Errorf("%q: %v, %v; want %s", tc.idx, serving, err, tc.want)
		}
	}
}
