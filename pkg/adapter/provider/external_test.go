// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package provider

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/emicklei/go-restful/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	genericapi "k8s.io/apiserver/pkg/endpoints"
	genericapifilters "k8s.io/apiserver/pkg/endpoints/filters"
	genericapiserver "k8s.io/apiserver/pkg/server"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/metrics/pkg/apis/external_metrics"
	testclock "k8s.io/utils/clock/testing"
	cmapiserver "sigs.k8s.io/custom-metrics-apiserver/pkg/apiserver"
	"sigs.k8s.io/custom-metrics-apiserver/pkg/apiserver/installer"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"
	emstorage "sigs.k8s.io/custom-metrics-apiserver/pkg/registry/external_metrics"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/store"
)

func externalHandler(t *testing.T, prov cmprovider.ExternalMetricsProvider) http.Handler {
	t.Helper()
	groupInfo := genericapiserver.NewDefaultAPIGroupInfo(external_metrics.GroupName, cmapiserver.Scheme, runtime.NewParameterCodec(cmapiserver.Scheme), cmapiserver.Codecs)
	gv := groupInfo.PrioritizedVersions[0]
	container := restful.NewContainer()
	container.Router(restful.CurlyRouter{})
	group := &installer.MetricsAPIGroupVersion{
		DynamicStorage: emstorage.NewREST(prov),
		APIGroupVersion: &genericapi.APIGroupVersion{
			Root: genericapiserver.APIGroupPrefix, GroupVersion: gv, MetaGroupVersion: groupInfo.MetaGroupVersion,
			ParameterCodec: groupInfo.ParameterCodec, Serializer: groupInfo.NegotiatedSerializer,
			Creater: groupInfo.Scheme, Convertor: groupInfo.Scheme, UnsafeConvertor: runtime.UnsafeObjectConvertor(groupInfo.Scheme),
			Typer: groupInfo.Scheme, Namer: runtime.Namer(meta.NewAccessor()),
		},
		ResourceLister: cmprovider.NewExternalMetricResourceLister(prov),
		Handlers:       &installer.EMHandlers{},
	}
	if err := group.InstallREST(container); err != nil {
		t.Fatal(err)
	}
	return genericapifilters.WithRequestInfo(container, genericapiserver.NewRequestInfoResolver(&genericapiserver.Config{}))
}

func TestExternalMetricsAPI(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	at := now.Add(-time.Second)
	st := store.New()
	st.Record(types.NamespacedName{Namespace: "ns", Name: "a"}, at, page(model("llama", 3, 24, 0.42), model("lora1", 2, 1, 0.5)), nil)
	st.Record(types.NamespacedName{Namespace: "ns", Name: "b"}, at, page(model("llama", 5, 10, 0.1)), nil)
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, p := range []*corev1.Pod{
		pod("a", map[string]string{"app": "llm"}, true, true, nil),
		pod("b", map[string]string{"app": "llm"}, true, true, nil),
		pod("c", map[string]string{"app": "cold"}, true, true, nil),
	} {
		if err := idx.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	empty := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	prov := New(Config{MaxAge: 15 * time.Second, Window: 5 * time.Second},
		Listers{Pods: corelisters.NewPodLister(idx), Deployments: appslisters.NewDeploymentLister(empty), StatefulSets: appslisters.NewStatefulSetLister(empty)},
		st, nil, testclock.NewFakePassiveClock(now))
	srv := httptest.NewServer(externalHandler(t, prov.External()))
	defer srv.Close()

	cases := []struct {
		name, metric, selector string
		code                   int
		want, wantErr          string
	}{
		{name: "queue summed over pods and models", metric: "inference_queue_size", selector: "app=llm", code: 200, want: "10"},
		{name: "one model", metric: "inference_queue_size", selector: "app=llm,model_name=llama", code: 200, want: "8"},
		{name: "kv maxed", metric: "inference_kv_cache_usage", selector: "app=llm", code: 200, want: "500m"},
		{name: "a pod without a value makes it a 404", metric: "inference_queue_size", selector: "app=cold", code: 404, wantErr: "1 of 1 ready pods"},
		{name: "no pods", metric: "inference_queue_size", selector: "app=none", code: 404, wantErr: "no pods match"},
		{name: "selector without pods refused", metric: "inference_queue_size", selector: "model_name=llama", code: 400, wantErr: "needs a metric selector that picks pods"},
		{name: "negations only refused", metric: "inference_queue_size", selector: "!zzz", code: 400, wantErr: "needs a metric selector that picks pods"},
		{name: "model and negations only refused", metric: "inference_queue_size", selector: "model_name=llama,app!=x,tier notin (cpu)", code: 400, wantErr: "needs a metric selector that picks pods"},
		{name: "unknown metric", metric: "tokens", selector: "app=llm", code: 404, wantErr: "unknown metric"},
		{name: "a selector over the bound refused", metric: "inference_queue_size", selector: hugeIn("app", "llm", 20000), code: 400, wantErr: "metric selector is"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := srv.Client().Get(srv.URL + "/apis/external.metrics.k8s.io/v1beta1/namespaces/ns/" + tc.metric + "?labelSelector=" + url.QueryEscape(tc.selector))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body struct {
				Items []struct {
					MetricName   string
					MetricLabels map[string]string
					Timestamp    time.Time
					Value        string
				}
				Message string
			}
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.code {
				t.Fatalf("status %d, want %d: %+v", resp.StatusCode, tc.code, body)
			}
			if tc.code != 200 {
				if !strings.Contains(body.Message, tc.wantErr) {
					t.Fatalf("message %q lacks %q", body.Message, tc.wantErr)
				}
				return
			}
			if len(body.Items) != 1 || body.Items[0].Value != tc.want || !body.Items[0].Timestamp.Equal(at) || body.Items[0].MetricLabels["app"] != "llm" {
				t.Fatalf("items %+v, want one value %s at %s", body.Items, tc.want, at)
			}
		})
	}
}

// TestExternalPercentileWindowSeconds: an external latency percentile
// covers --slo-window, as its custom-metrics twin says; its windowSeconds
// is that window, not the scrape interval.
func TestExternalPercentileWindowSeconds(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	st := store.New()
	st.Record(types.NamespacedName{Namespace: "ns", Name: "a"}, now.Add(-12*time.Second), page(sloModel("llama", 0, 0, 0, 0, 0)), nil)
	st.Record(types.NamespacedName{Namespace: "ns", Name: "a"}, now.Add(-2*time.Second), page(sloModel("llama", 100, 5, 10, 20, 20)), nil)
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	if err := idx.Add(pod("a", map[string]string{"app": "llm"}, true, true, nil)); err != nil {
		t.Fatal(err)
	}
	empty := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	prov := New(Config{MaxAge: 15 * time.Second, Window: 5 * time.Second, SLOWindow: time.Minute},
		Listers{Pods: corelisters.NewPodLister(idx), Deployments: appslisters.NewDeploymentLister(empty), StatefulSets: appslisters.NewStatefulSetLister(empty)},
		st, nil, testclock.NewFakePassiveClock(now))
	srv := httptest.NewServer(externalHandler(t, prov.External()))
	defer srv.Close()
	for _, tc := range []struct {
		metric string
		want   int64
	}{
		{metric: "inference_queue_size", want: 5},
		{metric: "inference_time_to_first_token_p90_seconds", want: 60},
	} {
		t.Run(tc.metric, func(t *testing.T) {
			resp, err := srv.Client().Get(srv.URL + "/apis/external.metrics.k8s.io/v1beta1/namespaces/ns/" + tc.metric + "?labelSelector=app%3Dllm")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body struct {
				Items []struct {
					WindowSeconds *int64 `json:"window"`
					Value         string
				}
				Message string
			}
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != 200 || len(body.Items) != 1 {
				t.Fatalf("status %d: %+v", resp.StatusCode, body)
			}
			if w := body.Items[0].WindowSeconds; w == nil || *w != tc.want {
				t.Errorf("window %s, want %d", ptrString(w), tc.want)
			}
		})
	}
}

func ptrString(p *int64) string {
	if p == nil {
		return "<nil>"
	}
	return strconv.FormatInt(*p, 10)
}

// hugeIn is the selector "key in (value, a0, a1, …)" with n made-up values:
// it matches what key=value matches, and is as long as asked.
func hugeIn(key, value string, n int) string {
	vals := []string{value}
	for i := range n {
		vals = append(vals, fmt.Sprintf("a%d", i))
	}
	return key + " in (" + strings.Join(vals, ",") + ")"
}
