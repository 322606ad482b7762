// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package provider

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	testclock "k8s.io/utils/clock/testing"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/answercache"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/store"
)

// fleet returns a provider over n Running, Ready pods labelled app=llm, each
// with a fresh value.
func fleet(b *testing.B, n int) *Provider {
	b.Helper()
	now := time.Unix(10000, 0)
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	st := store.New()
	for i := range n {
		p := pod(fmt.Sprintf("llm-%04d", i), map[string]string{"app": "llm", "pod-template-hash": "abc"}, true, true, nil)
		if err := idx.Add(p); err != nil {
			b.Fatal(err)
		}
		st.Record(types.NamespacedName{Namespace: "ns", Name: p.Name}, now.Add(-time.Second), page(model("m", float64(i%7), 8, 0.4)), nil)
	}
	empty := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	return New(Config{MaxAge: 15 * time.Second, Window: time.Second},
		Listers{Pods: corelisters.NewPodLister(idx), Deployments: appslisters.NewDeploymentLister(empty), StatefulSets: appslisters.NewStatefulSetLister(empty)},
		st, noDemand{}, testclock.NewFakePassiveClock(now))
}

type noDemand struct{}

func (noDemand) Want(context.Context, string, labels.Selector, []*corev1.Pod) {}

func (noDemand) WantPod(context.Context, *corev1.Pod) {}

func (noDemand) Shadowed(types.NamespacedName) (types.NamespacedName, bool) {
	return types.NamespacedName{}, false
}

var queueInfo = cmprovider.CustomMetricInfo{GroupResource: schema.GroupResource{Resource: "pods"}, Namespaced: true, Metric: "inference_queue_size"}

// BenchmarkList1000 is the provider's work for one HPA question about
// 1,000 pods, answered from the informer cache and the store.
func BenchmarkList1000(b *testing.B) {
	p := fleet(b, 1000)
	sel := labels.SelectorFromSet(labels.Set{"app": "llm"})
	b.ReportAllocs()
	for b.Loop() {
		l, err := p.GetMetricBySelector(context.Background(), "ns", sel, queueInfo, labels.Everything())
		if err != nil || len(l.Items) != 1000 {
			b.Fatalf("%v items, %v", len(l.Items), err)
		}
	}
}

// BenchmarkList1000HTTP answers the same question through the library's
// HTTP handler (routing, conversion, JSON, gzip) with 1, 10 and 50
// concurrent clients, without and with the answer cache in front (as the
// adapter runs it: --answer-cache-ttl, 1s at the default 5s interval); ns/op
// is the CPU and wall time per answer over all clients.
func BenchmarkList1000HTTP(b *testing.B) {
	for _, clients := range []int{1, 10, 50} {
		for _, ttl := range []time.Duration{0, time.Second} {
			name := fmt.Sprintf("clients=%d/cache=off", clients)
			if ttl > 0 {
				name = fmt.Sprintf("clients=%d/cache=%s", clients, ttl)
			}
			b.Run(name, func(b *testing.B) { benchList1000HTTP(b, clients, ttl) })
		}
	}
}

func benchList1000HTTP(b *testing.B, clients int, ttl time.Duration) {
	p := fleet(b, 1000)
	h := answercache.Wrap(answercache.Config{TTL: ttl, MaxAge: p.cfg.MaxAge}, handler(b, p), nil, p.clock)
	srv := httptest.NewServer(h)
	b.Cleanup(srv.Close)
	url := srv.URL + "/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/pods/*/inference_queue_size?labelSelector=app%3Dllm"
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients + 1}}
	b.ReportAllocs()
	b.ResetTimer()
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		lat []time.Duration
	)
	work := make(chan struct{})
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range work {
				start := time.Now()
				resp, err := client.Get(url)
				if err != nil {
					b.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Errorf("status %d", resp.StatusCode)
				}
				d := time.Since(start)
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}
		}()
	}
	for range b.N {
		work <- struct{}{}
	}
	close(work)
	wg.Wait()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)*99/100])/1e6, "p99-ms")
	b.ReportMetric(float64(lat[len(lat)/2])/1e6, "p50-ms")
}

// BenchmarkForecastAnswer is one answer of the demand forecast (auto) for a
// Deployment of one pod with 21 samples of history: the estimate, the
// value and the count of the answer by method and estimator.
// BenchmarkForecastCount is that count alone, to read as a share of it.
func BenchmarkForecastAnswer(b *testing.B) {
	f := burstyThenSteady(b, time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC), DefaultForecastConfig())
	sel := labels.Everything()
	info := cmprovider.CustomMetricInfo{GroupResource: deploymentsGR, Namespaced: true, Metric: "inference_demand_forecast_per_replica"}
	name := types.NamespacedName{Namespace: "ns", Name: "llm"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.prov.GetMetricByName(context.Background(), name, info, sel); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkForecastCount(b *testing.B) {
	p := New(Config{MaxAge: 15 * time.Second, Window: time.Second}, Listers{}, store.New(), noDemand{}, testclock.NewFakePassiveClock(time.Now()))
	b.ReportAllocs()
	for b.Loop() {
		p.forecasts.WithLabelValues("auto", "staffing").Inc()
	}
}
