// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package provider

import (
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
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

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/answercache"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/store"
)

// TestAnswerCacheNeverServesPastMaxAge: the provider tells the answer cache
// the time of every value it answers with, so that a kept answer is not
// served once its oldest value is older than --max-age, even within the
// cache's TTL: the question is answered afresh, here with a 404.
func TestAnswerCacheNeverServesPastMaxAge(t *testing.T) {
	const maxAge = 15 * time.Second
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	app := map[string]string{"app": "llm"}
	st := store.New()
	// a's value is 14.5 s old: fresh now, too old in 600 ms.
	st.Record(types.NamespacedName{Namespace: "ns", Name: "a"}, now.Add(-14500*time.Millisecond), page(model("llama", 3, 24, 0.42)), nil)
	st.Record(types.NamespacedName{Namespace: "ns", Name: "b"}, now.Add(-time.Second), page(model("llama", 5, 10, 0.1)), nil)
	idx := func() cache.Indexer {
		return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	}
	pi, di, si := idx(), idx(), idx()
	for _, p := range []*corev1.Pod{pod("a", app, true, true, nil), pod("b", app, true, true, nil)} {
		if err := pi.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := di.Add(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "llm"}, Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: app}}}); err != nil {
		t.Fatal(err)
	}
	clk := testclock.NewFakeClock(now)
	prov := New(Config{MaxAge: maxAge, Window: 5 * time.Second},
		Listers{Pods: corelisters.NewPodLister(pi), Deployments: appslisters.NewDeploymentLister(di), StatefulSets: appslisters.NewStatefulSetLister(si)},
		st, &recordingDemand{}, clk)
	srv := httptest.NewServer(answercache.Wrap(answercache.Config{TTL: time.Second, MaxAge: maxAge}, handler(t, prov), nil, clk))
	t.Cleanup(srv.Close)

	base := "/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/"
	cases := []struct {
		name       string
		path       string
		later      int               // status 600 ms later
		laterItems map[string]string // values 600 ms later, when 200
	}{
		{name: "pods by selector", path: base + "pods/*/inference_queue_size?labelSelector=" + url.QueryEscape("app=llm"), later: http.StatusOK, laterItems: map[string]string{"ns/b": "5"}},
		{name: "pod by name", path: base + "pods/a/inference_queue_size", later: http.StatusNotFound},
		{name: "deployment", path: base + "deployments.apps/llm/inference_queue_size", later: http.StatusNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk.SetTime(now)
			if code, body := get(t, srv, tc.path); code != http.StatusOK {
				t.Fatalf("first answer: %d %s", code, body)
			}
			clk.SetTime(now.Add(600 * time.Millisecond))
			code, body := get(t, srv, tc.path)
			if code != tc.later {
				t.Fatalf("600 ms later: %d %s, want %d: a kept answer was served with a value older than --max-age", code, body, tc.later)
			}
			if tc.laterItems != nil {
				if got := itemValues(t, body); !maps.Equal(got, tc.laterItems) {
					t.Errorf("600 ms later: values %v, want %v", got, tc.laterItems)
				}
			}
		})
	}
}
