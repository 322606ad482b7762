// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package provider

import (
	"context"
	"encoding/json"
	"net/http/httptest"
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

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/escape/escapetest"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/scrape"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/store"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/targets"
)

var _ NotScrapedReasoner = (*targets.Tracker)(nil)

type noScraper struct{}

func (noScraper) SetTargets([]scrape.Target)                 {}
func (noScraper) ScrapeNow(context.Context, []scrape.Target) {}

// TestNotFoundSaysWhyAPodIsNotScraped: a pod the tracker leaves out for a
// bad or forbidden annotation answers 404 with the reason ("not scraped:
// ..."), asked by name or by selector, printable and naming where the
// setting came from; a good pod never scraped still answers "not scraped
// yet". The provider runs over the real tracker.
// Was wrong: such a pod answered "not scraped yet" forever, its reason only
// in the log at -v=2.
func TestNotFoundSaysWhyAPodIsNotScraped(t *testing.T) {
	app := map[string]string{"app": "m"}
	plain := pod("plain", app, true, true, map[string]string{targets.AnnotationScrapeAuth: "bearer"})
	good := pod("good", app, true, true, nil)
	evil := pod("evil", map[string]string{"app": "evil"}, true, true, map[string]string{targets.AnnotationServer: "x\x1b[2J\u202e\nforged"})
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, p := range []*corev1.Pod{plain, good, evil} {
		if err := idx.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	empty := func() cache.Indexer {
		return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	}
	deps := empty()
	if err := deps.Add(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m"}, Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: app}}}); err != nil {
		t.Fatal(err)
	}
	pods := corelisters.NewPodLister(idx)
	st := store.New()
	clk := testclock.NewFakePassiveClock(time.Now())
	tr := targets.New(targets.Config{DemandTTL: time.Minute, Resync: time.Second}, pods, noScraper{}, st, clk)
	prov := New(Config{MaxAge: 15 * time.Second, Window: 5 * time.Second},
		Listers{Pods: pods, Deployments: appslisters.NewDeploymentLister(deps), StatefulSets: appslisters.NewStatefulSetLister(empty())},
		st, tr, clk)
	srv := httptest.NewServer(handler(t, prov))
	t.Cleanup(srv.Close)

	const bearer = "not scraped: annotation inference-metrics-adapter/scrape-auth=bearer: the bearer token is only sent over https"
	for _, tc := range []struct {
		name, path string
		want       []string
		notWant    []string
	}{
		{name: "by name", path: "/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/pods/plain/inference_queue_size",
			want: []string{"pod ns/plain: " + bearer}, notWant: []string{"not scraped yet"}},
		{name: "by selector", path: "/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/pods/*/inference_queue_size?labelSelector=app%3Dm",
			want: []string{"plain: " + bearer, "good: not scraped yet"}},
		{name: "a good pod is not scraped yet", path: "/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/pods/good/inference_queue_size",
			want: []string{"pod ns/good: not scraped yet"}, notWant: []string{"not scraped: "}},
		{name: "hostile annotation", path: "/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/pods/evil/inference_batch_fill",
			want: []string{`pod ns/evil: not scraped: annotation inference-metrics-adapter/server="x\x1b[2J\u202e\nforged": unknown server`}},
		{name: "a Deployment's pods", path: "/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/deployments.apps/m/inference_queue_size",
			want: []string{"plain: " + bearer}},
		{name: "a Deployment's demand per replica", path: "/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/deployments.apps/m/inference_demand_per_replica",
			want: []string{"plain: " + bearer}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := get(t, srv, tc.path)
			var status struct{ Message string }
			if err := json.Unmarshal([]byte(body), &status); err != nil {
				t.Fatalf("status %d body %s: %v", code, body, err)
			}
			if code != 404 {
				t.Fatalf("status %d body %s: want 404", code, body)
			}
			t.Logf("404 %s", status.Message)
			for _, w := range tc.want {
				if !strings.Contains(status.Message, w) {
					t.Errorf("message %q, want it to contain %q", status.Message, w)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(status.Message, w) {
					t.Errorf("message %q contains %q", status.Message, w)
				}
			}
			if escapetest.HasControl(status.Message) {
				t.Errorf("message %q holds control characters", status.Message)
			}
		})
	}
	// The tracker leaves the bad pods out once it reconciles: they stay
	// unscraped, and the reason stays with them.
	tr.Reconcile()
	if st.Scraped(types.NamespacedName{Namespace: "ns", Name: "plain"}) {
		t.Fatal("plain was scraped")
	}
}
