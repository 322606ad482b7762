// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package provider

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	testclock "k8s.io/utils/clock/testing"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/store"
)

// A question about a latency percentile turns the histograms on for the
// pods it covers only: asking in namespace a (by selector, by name, about
// a Deployment, as an external metric, as KEDA does through the same
// methods) leaves the pods of namespace b, and the other workloads of a,
// parsed without histograms.
func TestLatencyQuestionTurnsHistogramsOnForItsPodsOnly(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	llm := map[string]string{"app": "llm"}
	other := map[string]string{"app": "other"}
	inNS := func(ns string, p *corev1.Pod) *corev1.Pod { p.Namespace = ns; return p }
	pods := []*corev1.Pod{
		inNS("a", pod("llm-0", llm, true, true, nil)),
		inNS("a", pod("llm-1", llm, true, true, nil)),
		inNS("a", pod("other-0", other, true, true, nil)),
		inNS("b", pod("llm-0", llm, true, true, nil)),
		inNS("b", pod("other-0", other, true, true, nil)),
	}
	deps := []*appsv1.Deployment{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "llm"}, Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: llm}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "llm"}, Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: llm}}},
	}
	p90 := catalog.TimeToFirstTokenP90.Name()
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		metric string
		ask    func(p *Provider, metric string)
		want   []string // namespace/name of the pods whose histograms are parsed
	}{
		{"pods by selector", p90, func(p *Provider, m string) {
			_, _ = p.GetMetricBySelector(ctx, "a", labels.SelectorFromSet(llm), cmprovider.CustomMetricInfo{GroupResource: podsGR, Namespaced: true, Metric: m}, labels.Everything())
		}, []string{"a/llm-0", "a/llm-1"}},
		{"a pod by name", p90, func(p *Provider, m string) {
			_, _ = p.GetMetricByName(ctx, types.NamespacedName{Namespace: "a", Name: "llm-1"}, cmprovider.CustomMetricInfo{GroupResource: podsGR, Namespaced: true, Metric: m}, labels.Everything())
		}, []string{"a/llm-1"}},
		{"a Deployment", p90, func(p *Provider, m string) {
			_, _ = p.GetMetricByName(ctx, types.NamespacedName{Namespace: "a", Name: "llm"}, cmprovider.CustomMetricInfo{GroupResource: deploymentsGR, Namespaced: true, Metric: m}, labels.Everything())
		}, []string{"a/llm-0", "a/llm-1"}},
		{"Deployments by selector", p90, func(p *Provider, m string) {
			_, _ = p.GetMetricBySelector(ctx, "a", labels.Everything(), cmprovider.CustomMetricInfo{GroupResource: deploymentsGR, Namespaced: true, Metric: m}, labels.Everything())
		}, []string{"a/llm-0", "a/llm-1"}},
		{"an external metric", p90, func(p *Provider, m string) {
			_, _ = p.External().GetExternalMetric(ctx, "a", labels.SelectorFromSet(llm), cmprovider.ExternalMetricInfo{Metric: m})
		}, []string{"a/llm-0", "a/llm-1"}},
		{"a rate asks nothing", catalog.GenerationTokensPerSecond.Name(), func(p *Provider, m string) {
			_, _ = p.GetMetricBySelector(ctx, "a", labels.SelectorFromSet(llm), cmprovider.CustomMetricInfo{GroupResource: podsGR, Namespaced: true, Metric: m}, labels.Everything())
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			idx := func() cache.Indexer {
				return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
			}
			pi, di := idx(), idx()
			for _, p := range pods {
				if err := pi.Add(p); err != nil {
					t.Fatal(err)
				}
			}
			for _, d := range deps {
				if err := di.Add(d); err != nil {
					t.Fatal(err)
				}
			}
			clk := testclock.NewFakeClock(now)
			demand := NewLatencyDemand(10*time.Minute, clk)
			prov := New(Config{MaxAge: 15 * time.Second, Window: 5 * time.Second, Latency: demand},
				Listers{Pods: corelisters.NewPodLister(pi), Deployments: appslisters.NewDeploymentLister(di), StatefulSets: appslisters.NewStatefulSetLister(idx())},
				store.New(), &recordingDemand{}, clk)
			tc.ask(prov, tc.metric)
			want := map[string]bool{}
			for _, w := range tc.want {
				want[w] = true
			}
			for _, p := range pods {
				key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
				if got := demand.WantedFor(key); got != want[key.String()] {
					t.Errorf("histograms of pod %s parsed: %v, want %v", key, got, want[key.String()])
				}
			}
		})
	}
}
