// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package kedascaler_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	testclock "k8s.io/utils/clock/testing"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	pb "github.com/kedacore/keda/v2/pkg/scalers/externalscaler"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/kedascaler"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/provider"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/scrape"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/store"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/targets"
)

// A podSelector whose requirements only exclude (!zzz, x!=y, x notin (..))
// matches every pod of the namespace but a few: it is refused as an empty
// one is, before anything is read or scraped.
func TestPodSelectorMatchingEverythingIsRefused(t *testing.T) {
	e := fleet(t)
	tests := []struct {
		selector string
		refused  bool
	}{
		{selector: "!zzz", refused: true},
		{selector: "zzz notin (a,b)", refused: true},
		{selector: "app!=nothing", refused: true},
		{selector: "!zzz,app!=x,tier notin (cpu)", refused: true},
		{selector: "app=llm", refused: false},
		{selector: "app,!zzz", refused: false},
		{selector: "app in (llm),tier!=cpu", refused: false},
	}
	for _, tt := range tests {
		t.Run(tt.selector, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			r := ref("team-a", md("metricName", "inference_queue_size", "targetValue", "5", "podSelector", tt.selector))
			_, err1 := e.client.GetMetricSpec(ctx, r)
			_, err2 := e.client.GetMetrics(ctx, &pb.GetMetricsRequest{ScaledObjectRef: r})
			_, err3 := e.client.IsActive(ctx, r)
			for i, err := range []error{err1, err2, err3} {
				got := status.Code(err) == codes.InvalidArgument && strings.Contains(status.Convert(err).Message(), "podSelector")
				if got != tt.refused {
					t.Errorf("call %d: got %v; want refused (InvalidArgument naming podSelector) %v", i, err, tt.refused)
				}
			}
		})
	}
}

// The NotFound a KEDA caller gets says how many pods lack a value and why,
// but names none of the namespace's pods and none of their addresses: the
// caller asked about a workload, not about those pods.
func TestNotFoundNamesNoPodsOrAddresses(t *testing.T) {
	lbl := func(app string) map[string]string { return map[string]string{"app": app} }
	e := serve(t, newScaler(t, []fakePod{
		{ns: "team-a", name: "victim-good-pod", labels: lbl("mixed"), page: vllmPage(1, 1, 0.1), scraped: true},
		{ns: "team-a", name: "victim-broken-pod", labels: lbl("mixed"), scraped: true},
		{ns: "team-a", name: "victim-cold-pod", labels: lbl("cold"), page: vllmPage(1, 1, 0.1)},
		{ns: "team-a", name: "victim-old-pod", labels: lbl("old"), page: vllmPage(1, 1, 0.1), stale: true},
		{ns: "team-a", name: "victim-door-pod", labels: lbl("router"), annotations: map[string]string{"inference-metrics-adapter/front-door-for": "door"}},
	}, []*appsv1.Deployment{
		deployment("team-a", "mixed", lbl("mixed")),
		deployment("team-a", "cold", lbl("cold")),
	}))
	tests := []struct {
		name string
		md   map[string]string
		want string // the count and reason the message must give
	}{
		{name: "deployment with a failed scrape", md: md("metricName", "inference_queue_size", "targetValue", "5", "deployment", "mixed"), want: "1 scrape failed"},
		{name: "deployment never scraped", md: md("metricName", "inference_queue_size", "targetValue", "5", "deployment", "cold"), want: "1 not scraped yet"},
		{name: "demand of a deployment never scraped", md: md("metricName", "inference_demand_per_replica", "targetValue", "5", "deployment", "cold"), want: "1 not scraped yet"},
		{name: "selector with a failed scrape", md: md("metricName", "inference_queue_size", "targetValue", "5", "podSelector", "app=mixed"), want: "1 scrape failed"},
		{name: "selector with a stale scrape", md: md("metricName", "inference_queue_size", "targetValue", "5", "podSelector", "app=old"), want: "1 stale"},
		{name: "front door never scraped", md: md("metricName", "inference_front_door_pending_requests", "targetValue", "5", "service", "door"), want: "1 not scraped yet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := e.client.GetMetrics(ctx, &pb.GetMetricsRequest{ScaledObjectRef: ref("team-a", tt.md)})
			msg := status.Convert(err).Message()
			if status.Code(err) != codes.NotFound || !strings.Contains(msg, tt.want) {
				t.Errorf("got %v; want NotFound saying %q", err, tt.want)
			}
			for _, secret := range []string{"victim-", "127.0.0.1"} {
				if strings.Contains(msg, secret) {
					t.Errorf("the message names %q: %s", secret, msg)
				}
			}
		})
	}
}

// recordingScraper is the tracker's scraper: it keeps the last target set.
type recordingScraper struct {
	mu sync.Mutex
	ts []scrape.Target
}

func (r *recordingScraper) SetTargets(ts []scrape.Target) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ts = ts
}

func (r *recordingScraper) ScrapeNow(context.Context, []scrape.Target) {}

func (r *recordingScraper) targets() map[string]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	got := map[string]bool{}
	for _, t := range r.ts {
		got[t.Pod.String()] = true
	}
	return got
}

// trackedEnv is a scaler over the real provider and a real target tracker,
// so that a test sees the demand its calls leave.
type trackedEnv struct {
	*env
	tracker *targets.Tracker
	scraper *recordingScraper
	prov    *provider.Provider
}

func newTrackedEnv(t *testing.T, cfg kedascaler.Config, pods []fakePod, deps []*appsv1.Deployment) *trackedEnv {
	t.Helper()
	now := time.Now()
	pi := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	di := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, p := range pods {
		pod := runningPod(p.ns, p.name, p.labels)
		pod.Spec.Containers = []corev1.Container{{Name: "server", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8000}}}}
		if err := pi.Add(pod); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range deps {
		if err := di.Add(d); err != nil {
			t.Fatal(err)
		}
	}
	st := store.New()
	rec := &recordingScraper{}
	clk := testclock.NewFakePassiveClock(now)
	tr := targets.New(targets.Config{DemandTTL: time.Hour, Resync: time.Hour, MaxSelectorsPerNamespace: targets.DefaultMaxSelectorsPerNamespace, MaxSelectors: targets.DefaultMaxSelectors},
		corelisters.NewPodLister(pi), rec, st, clk)
	prov := provider.New(provider.Config{MaxAge: 15 * time.Second, Window: 5 * time.Second},
		provider.Listers{
			Pods:         corelisters.NewPodLister(pi),
			Deployments:  appslisters.NewDeploymentLister(di),
			StatefulSets: appslisters.NewStatefulSetLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})),
		}, st, tr, clk)
	return &trackedEnv{env: serve(t, kedascaler.New(cfg, prov, prov.External())), tracker: tr, scraper: rec, prov: prov}
}

// An HPA's selector, asked through the custom metrics API, stays demand
// however many selectors a KEDA caller asks about in the same namespace:
// the scaler's port keeps its demand in a pool of its own, so that it
// cannot evict the HPA's and leave the HPA's pods unscraped.
func TestKEDACallerCannotEvictAnHPAsDemand(t *testing.T) {
	e := newTrackedEnv(t, openConfig(), []fakePod{
		{ns: "team-a", name: "victim", labels: map[string]string{"app": "victim"}},
	}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The HPA asks about its pods through custom.metrics.k8s.io.
	_, _ = e.prov.GetMetricBySelector(ctx, "team-a", labels.SelectorFromSet(labels.Set{"app": "victim"}),
		cmprovider.CustomMetricInfo{GroupResource: schema.GroupResource{Resource: "pods"}, Namespaced: true, Metric: "inference_queue_size"}, nil)
	e.tracker.Reconcile()
	if !e.scraper.targets()["team-a/victim"] {
		t.Fatalf("the HPA's pod is no target after its question: %v", e.scraper.targets())
	}
	// A KEDA caller asks about twice the per-namespace bound of selectors
	// that match nothing.
	for i := range 2 * targets.DefaultMaxSelectorsPerNamespace {
		_, err := e.client.GetMetrics(ctx, &pb.GetMetricsRequest{ScaledObjectRef: ref("team-a",
			md("metricName", "inference_queue_size", "targetValue", "5", "podSelector", fmt.Sprintf("app=nothing-%d", i)))})
		if status.Code(err) != codes.NotFound {
			t.Fatalf("selector %d: got %v, want NotFound (no pods)", i, err)
		}
	}
	e.tracker.Reconcile()
	if !e.scraper.targets()["team-a/victim"] {
		t.Errorf("after the KEDA caller's selectors the HPA's pod is no longer a target: its demand was evicted")
	}
}

// A scaler built without an explicit opt-out refuses callers that present
// no client certificate, whatever they ask.
func TestUnauthenticatedCallerRefusedByDefault(t *testing.T) {
	tr := newTrackedEnv(t, kedascaler.Config{StreamInterval: time.Second}, []fakePod{
		{ns: "team-a", name: "a1", labels: map[string]string{"app": "llm"}},
	}, []*appsv1.Deployment{deployment("team-a", "llm", map[string]string{"app": "llm"})})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r := ref("team-a", md("metricName", "inference_queue_size", "targetValue", "5", "podSelector", "app=llm"))
	_, err1 := tr.client.GetMetricSpec(ctx, r)
	_, err2 := tr.client.GetMetrics(ctx, &pb.GetMetricsRequest{ScaledObjectRef: r})
	_, err3 := tr.client.IsActive(ctx, r)
	stream, err := tr.client.StreamIsActive(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	_, err4 := stream.Recv()
	for i, err := range []error{err1, err2, err3, err4} {
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("call %d: got %v, want Unauthenticated", i, err)
		}
	}
	tr.tracker.Reconcile()
	if got := tr.scraper.targets(); len(got) != 0 {
		t.Errorf("a refused caller's question made targets: %v", got)
	}
}
