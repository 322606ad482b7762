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

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	testclock "k8s.io/utils/clock/testing"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/parse"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/store"
)

// demandServer serves a provider over pods, deployments and statefulsets
// (one workload object per app label, of the same name) and st.
func demandServer(t *testing.T, now time.Time, st *store.Store, pods []*corev1.Pod, deployments, statefulsets []string) (*httptest.Server, *recordingDemand) {
	t.Helper()
	idx := func() cache.Indexer {
		return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	}
	pi, di, si := idx(), idx(), idx()
	add := func(i cache.Indexer, obj any) {
		if err := i.Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range pods {
		add(pi, p)
	}
	sel := func(app string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
	}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{"tier": "gpu"}}
	}
	for _, n := range deployments {
		add(di, &appsv1.Deployment{ObjectMeta: meta(n), Spec: appsv1.DeploymentSpec{Selector: sel(n)}})
	}
	for _, n := range statefulsets {
		add(si, &appsv1.StatefulSet{ObjectMeta: meta(n), Spec: appsv1.StatefulSetSpec{Selector: sel(n)}})
	}
	dem := &recordingDemand{}
	prov := New(Config{MaxAge: 15 * time.Second, Window: 5 * time.Second},
		Listers{Pods: corelisters.NewPodLister(pi), Deployments: appslisters.NewDeploymentLister(di), StatefulSets: appslisters.NewStatefulSetLister(si)},
		st, dem, testclock.NewFakePassiveClock(now))
	srv := httptest.NewServer(handler(t, prov))
	t.Cleanup(srv.Close)
	return srv, dem
}

// TestDemandPerReplica: inference_demand_per_replica is the workload's
// queue plus running over its pods with a fresh value, divided by its Ready
// plus starting pods; absent (404) when a Ready pod has no fresh value or
// when no pod is Ready.
func TestDemandPerReplica(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	fresh, old := now.Add(-2*time.Second), now.Add(-time.Minute)
	st := store.New()
	record := func(name string, at time.Time, models ...parse.Model) {
		st.Record(types.NamespacedName{Namespace: "ns", Name: name}, at, page(models...), nil)
	}
	// model(name, queue, running, kv)
	record("ready-a", fresh, model("m", 3, 4, 0.1))
	record("ready-b", fresh, model("m", 1, 2, 0.1))
	record("cold-ready", fresh, model("m", 10, 2, 0.1))
	record("term-ready", fresh, model("m", 6, 0, 0.1))
	record("term-gone", fresh, model("m", 50, 50, 0.1)) // terminating: neither demand nor replica
	record("over-ready", fresh, model("m", 2, 2, 0.1))
	record("over-busy", fresh, model("m", 8, 4, 0.1)) // not Ready (overloaded), fresh value
	record("stale-fresh", fresh, model("m", 1, 1, 0.1))
	record("stale-old", old, model("m", 1, 1, 0.1))
	record("nobusy-ready", fresh, parse.Model{Name: "m", Has: catalog.Set(0).Add(catalog.QueueSize), Values: [catalog.NumServing]float64{5}})
	record("allcold-busy", fresh, model("m", 9, 4, 0.1))
	record("multi-a", fresh, model("llama", 4, 4, 0.1), model("lora", 100, 100, 0.1))
	record("shadow-new", fresh, model("m", 6, 2, 0.1))
	record("shadow-old", fresh, model("m", 6, 2, 0.1))
	record("sts-0", fresh, model("m", 5, 4, 0.1))
	record("frac-a", fresh, model("m", 7, 3, 0.1))

	p := func(name, app string, running, ready bool) *corev1.Pod {
		return pod(name, map[string]string{"app": app}, running, ready, nil)
	}
	terminating := func(pp *corev1.Pod) *corev1.Pod {
		ts := metav1.NewTime(now.Add(-time.Second))
		pp.DeletionTimestamp = &ts
		return pp
	}
	phase := func(pp *corev1.Pod, ph corev1.PodPhase) *corev1.Pod { pp.Status.Phase = ph; return pp }
	pods := []*corev1.Pod{
		p("ready-a", "ready", true, true), p("ready-b", "ready", true, true),
		p("cold-ready", "cold", true, true), p("cold-pending", "cold", false, false), p("cold-loading", "cold", true, false),
		p("term-ready", "term", true, true), terminating(p("term-gone", "term", true, true)),
		phase(p("term-failed", "term", true, false), corev1.PodFailed), phase(p("term-done", "term", true, false), corev1.PodSucceeded),
		p("over-ready", "over", true, true), p("over-busy", "over", true, false),
		p("stale-fresh", "stale", true, true), p("stale-old", "stale", true, true),
		p("nobusy-ready", "nobusy", true, true),
		p("allcold-a", "allcold", true, false), p("allcold-b", "allcold", false, false), p("allcold-busy", "allcold", true, false),
		p("unscraped-ready", "unscraped", true, true), p("unscraped-loading", "unscraped", true, false),
		p("multi-a", "multi", true, true),
		p("shadow-new", "shadow", true, true), p("shadow-old", "shadow", true, true),
		p("sts-0", "sts", true, true), p("sts-1", "sts", false, false),
		p("frac-a", "frac", true, true), p("frac-b", "frac", false, false), p("frac-c", "frac", false, false),
	}
	srv, dem := demandServer(t, now, st, pods,
		[]string{"ready", "cold", "term", "over", "stale", "nobusy", "allcold", "unscraped", "empty", "multi", "shadow", "frac"}, []string{"sts"})
	dem.shadowed = map[types.NamespacedName]types.NamespacedName{{Namespace: "ns", Name: "shadow-old"}: {Namespace: "ns", Name: "shadow-new"}}

	deploy := func(name string) string { return inNS + "deployments.apps/" + name + "/" + catalog.DemandPerReplica }
	cases := []struct {
		name    string
		path    string
		code    int
		want    string // itemValues, for 200
		wantErr string // in the body, for 404
	}{
		{"ready pods: (3+4 + 1+2) / 2", deploy("ready"), 200, "map[ns/ready:5]", ""},
		{"a Pending and a loading pod are starting replicas: (10+2) / 3", deploy("cold"), 200, "map[ns/cold:4]", ""},
		{"terminating, Failed and Succeeded pods are not replicas", deploy("term"), 200, "map[ns/term:6]", ""},
		{"a not-Ready pod with a fresh value adds its demand: (4 + 12) / 2", deploy("over"), 200, "map[ns/over:8]", ""},
		{"a stale Ready pod makes it absent, never a partial sum", deploy("stale"), 404, "", "1 of 2 ready pods have no queue and running value (the demand needs every ready pod): 1 stale"},
		{"a Ready pod without a running series makes it absent", deploy("nobusy"), 404, "", "has no series for inference_batch_size"},
		{"no Ready pod while pods start: unknown, not 0", deploy("allcold"), 404, "", "no pod is Ready (3 starting), so the demand is unknown"},
		{"a Ready pod not scraped yet makes it absent", deploy("unscraped"), 404, "", "1 of 1 ready pods have no queue and running value"},
		{"no pods", deploy("empty"), 404, "", `no pods match \"app=empty\"`},
		{"the metric selector picks models", deploy("multi") + "?metricLabelSelector=" + url.QueryEscape("model_name=llama"), 200, "map[ns/multi:8]", ""},
		{"every model without a selector", deploy("multi"), 200, "map[ns/multi:208]", ""},
		{"a pod whose IP a newer pod took is neither demand nor replica", deploy("shadow"), 200, "map[ns/shadow:8]", ""},
		{"statefulsets: (5+4) / 2", inNS + "statefulsets.apps/sts/" + catalog.DemandPerReplica, 200, "map[ns/sts:4500m]", ""},
		{"fractions keep milli precision: 10 / 3", deploy("frac"), 200, "map[ns/frac:3333m]", ""},
		{"by selector: every matching workload with a value", inNS + "deployments.apps/*/" + catalog.DemandPerReplica + "?labelSelector=" + url.QueryEscape("tier=gpu"), 200,
			"map[ns/cold:4 ns/frac:3333m ns/multi:208 ns/over:8 ns/ready:5 ns/shadow:8 ns/term:6]", ""},
		{"not served for pods", inNS + "pods/ready-a/" + catalog.DemandPerReplica, 404, "", "served for deployments and statefulsets"},
		{"not served for pods by selector", inNS + "pods/*/" + catalog.DemandPerReplica + "?labelSelector=app%3Dready", 404, "", "served for deployments and statefulsets"},
		{"not across all namespaces", v1beta2 + "deployments.apps/*/" + catalog.DemandPerReplica, 400, "", "ask within a namespace"},
		{"an unknown workload", deploy("nothing"), 404, "", "nothing"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, body := get(t, srv, tc.path)
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
			if !strings.Contains(body, `"name":"`+catalog.DemandPerReplica+`"`) {
				t.Errorf("the value does not carry the metric's name: %s", body)
			}
		})
	}
}

// TestDemandPerReplicaTimestamp: the value carries the oldest contributing
// scrape, so a consumer sees how old the demand is.
func TestDemandPerReplicaTimestamp(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	older, newer := now.Add(-4*time.Second), now.Add(-time.Second)
	st := store.New()
	st.Record(types.NamespacedName{Namespace: "ns", Name: "a"}, older, page(model("m", 1, 1, 0)), nil)
	st.Record(types.NamespacedName{Namespace: "ns", Name: "b"}, newer, page(model("m", 1, 1, 0)), nil)
	app := map[string]string{"app": "llm"}
	srv, _ := demandServer(t, now, st, []*corev1.Pod{pod("a", app, true, true, nil), pod("b", app, true, true, nil)}, []string{"llm"}, nil)
	code, body := get(t, srv, inNS+"deployments.apps/llm/"+catalog.DemandPerReplica)
	if code != 200 {
		t.Fatalf("status %d: %s", code, body)
	}
	if want := older.Format(time.RFC3339); !strings.Contains(body, `"timestamp":"`+want+`"`) {
		t.Fatalf("want the oldest scrape %s as the timestamp: %s", want, body)
	}
}

// TestDiscoveryListsDemandPerReplica: the metric is discoverable for the
// workload kinds it is served for, and only those.
func TestDiscoveryListsDemandPerReplica(t *testing.T) {
	srv, _ := demandServer(t, time.Now(), store.New(), nil, nil, nil)
	code, body := get(t, srv, v1beta2)
	if code != 200 {
		t.Fatalf("status %d: %s", code, body)
	}
	for _, tc := range []struct {
		resource string
		listed   bool
	}{{"deployments.apps/", true}, {"statefulsets.apps/", true}, {"pods/", false}} {
		if got := strings.Contains(body, `"`+tc.resource+catalog.DemandPerReplica+`"`); got != tc.listed {
			t.Errorf("discovery lists %s%s: %v, want %v", tc.resource, catalog.DemandPerReplica, got, tc.listed)
		}
	}
}
