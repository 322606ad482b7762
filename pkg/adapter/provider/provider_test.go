// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/emicklei/go-restful/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	genericapi "k8s.io/apiserver/pkg/endpoints"
	genericapifilters "k8s.io/apiserver/pkg/endpoints/filters"
	genericapiserver "k8s.io/apiserver/pkg/server"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/metrics/pkg/apis/custom_metrics"
	testclock "k8s.io/utils/clock/testing"
	cmapiserver "sigs.k8s.io/custom-metrics-apiserver/pkg/apiserver"
	"sigs.k8s.io/custom-metrics-apiserver/pkg/apiserver/installer"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"
	cmstorage "sigs.k8s.io/custom-metrics-apiserver/pkg/registry/custom_metrics"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/parse"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/store"
)

// handler serves prov through custom-metrics-apiserver's own REST storage
// and go-restful installer: the JSON a client gets is what the real
// aggregated API server would send.
func handler(t testing.TB, prov cmprovider.CustomMetricsProvider) http.Handler {
	t.Helper()
	groupInfo := genericapiserver.NewDefaultAPIGroupInfo(custom_metrics.GroupName, cmapiserver.Scheme, runtime.NewParameterCodec(cmapiserver.Scheme), cmapiserver.Codecs)
	container := restful.NewContainer()
	container.Router(restful.CurlyRouter{})
	for _, gv := range groupInfo.PrioritizedVersions {
		group := &installer.MetricsAPIGroupVersion{
			DynamicStorage: cmstorage.NewREST(prov),
			APIGroupVersion: &genericapi.APIGroupVersion{
				Root:             genericapiserver.APIGroupPrefix,
				GroupVersion:     gv,
				MetaGroupVersion: groupInfo.MetaGroupVersion,
				ParameterCodec:   groupInfo.ParameterCodec,
				Serializer:       groupInfo.NegotiatedSerializer,
				Creater:          groupInfo.Scheme,
				Convertor:        groupInfo.Scheme,
				UnsafeConvertor:  runtime.UnsafeObjectConvertor(groupInfo.Scheme),
				Typer:            groupInfo.Scheme,
				Namer:            runtime.Namer(meta.NewAccessor()),
			},
			ResourceLister: cmprovider.NewCustomMetricResourceLister(prov),
			Handlers:       &installer.CMHandlers{},
		}
		if err := group.InstallREST(container); err != nil {
			t.Fatalf("installing %s: %v", gv, err)
		}
	}
	resolver := genericapiserver.NewRequestInfoResolver(&genericapiserver.Config{})
	return genericapifilters.WithRequestInfo(container, resolver)
}

type fixture struct {
	now   time.Time
	pods  []*corev1.Pod
	deps  []*appsv1.Deployment
	store *store.Store
}

func pod(name string, lbls map[string]string, running, ready bool, ann map[string]string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: lbls, Annotations: ann},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "vllm", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8000}}}}},
	}
	if running {
		p.Status.Phase = corev1.PodRunning
		p.Status.PodIP = "127.0.0.9"
	} else {
		p.Status.Phase = corev1.PodPending
	}
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}
	return p
}

func page(models ...parse.Model) *parse.Page {
	return &parse.Page{Server: parse.VLLMV1, Models: models}
}

func model(name string, q, b, kv float64) parse.Model {
	m := parse.Model{Name: name}
	m.Values[catalog.QueueSize], m.Values[catalog.BatchSize], m.Values[catalog.KVCacheUsage] = q, b, kv
	m.Has = m.Has.Add(catalog.QueueSize).Add(catalog.BatchSize).Add(catalog.KVCacheUsage)
	return m
}

type recordingDemand struct {
	asked    []string
	shadowed map[types.NamespacedName]types.NamespacedName
}

func (d *recordingDemand) Want(_ context.Context, ns string, sel labels.Selector, pods []*corev1.Pod) {
	d.asked = append(d.asked, fmt.Sprintf("%s/%s:%d", ns, sel, len(pods)))
}

func (d *recordingDemand) WantPod(_ context.Context, pod *corev1.Pod) {
	d.asked = append(d.asked, fmt.Sprintf("pod %s/%s", pod.Namespace, pod.Name))
}

func (d *recordingDemand) Shadowed(pod types.NamespacedName) (types.NamespacedName, bool) {
	n, ok := d.shadowed[pod]
	return n, ok
}

func newServer(t *testing.T, f fixture) (*httptest.Server, *recordingDemand) {
	t.Helper()
	idx := func() cache.Indexer {
		return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	}
	pi, di, si := idx(), idx(), idx()
	for _, p := range f.pods {
		if err := pi.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range f.deps {
		if err := di.Add(d); err != nil {
			t.Fatal(err)
		}
	}
	dem := &recordingDemand{}
	prov := New(Config{MaxAge: 15 * time.Second, Window: 5 * time.Second},
		Listers{Pods: corelisters.NewPodLister(pi), Deployments: appslisters.NewDeploymentLister(di), StatefulSets: appslisters.NewStatefulSetLister(si)},
		f.store, dem, testclock.NewFakePassiveClock(f.now))
	srv := httptest.NewServer(handler(t, prov))
	t.Cleanup(srv.Close)
	return srv, dem
}

func get(t *testing.T, srv *httptest.Server, path string) (int, string) {
	t.Helper()
	resp, err := srv.Client().Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

type valueJSON struct {
	DescribedObject struct{ Kind, Name, Namespace string }
	Metric          struct {
		Name     string
		Selector *metav1.LabelSelector
	}
	Timestamp     time.Time
	WindowSeconds *int64
	Value         string
}

func TestCustomMetricsAPI(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	fresh := now.Add(-2 * time.Second)
	app := map[string]string{"app": "llm"}
	st := store.New()
	st.Record(types.NamespacedName{Namespace: "ns", Name: "a"}, fresh, page(model("llama", 3, 24, 0.42), model("lora1", 2, 1, 0.5)), nil)
	st.Record(types.NamespacedName{Namespace: "ns", Name: "b"}, fresh, page(model("llama", 5, 10, 0.1)), nil)
	st.Record(types.NamespacedName{Namespace: "ns", Name: "stale"}, now.Add(-time.Minute), page(model("llama", 7, 7, 0.7)), nil)
	st.Record(types.NamespacedName{Namespace: "ns", Name: "failed"}, fresh, nil, fmt.Errorf("scrape: timeout"))
	st.Record(types.NamespacedName{Namespace: "ns", Name: "tgi"}, fresh, &parse.Page{Server: parse.TGI, Models: []parse.Model{{Has: catalog.Set(0).Add(catalog.QueueSize).Add(catalog.BatchSize), Values: [catalog.NumServing]float64{4, 8}}}}, nil)
	f := fixture{
		now:   now,
		store: st,
		pods: []*corev1.Pod{
			pod("a", app, true, true, nil),
			pod("b", app, true, true, map[string]string{"inference-metrics-adapter/max-batch-size": "20"}),
			pod("pending", app, false, false, nil),
			pod("stale", map[string]string{"app": "old"}, true, true, nil),
			pod("failed", map[string]string{"app": "broken"}, true, true, nil),
			pod("tgi", map[string]string{"app": "tgi"}, true, true, nil),
			pod("unready", map[string]string{"app": "mixed"}, true, false, nil),
		},
		deps: []*appsv1.Deployment{
			{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "llm", Labels: map[string]string{"tier": "gpu"}}, Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: app}}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "mixed"}, Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"llm", "old", "mixed"}}}}}},
		},
	}
	srv, _ := newServer(t, f)
	base := "/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/"
	sel := func(s string) string { return "?labelSelector=" + url.QueryEscape(s) }

	cases := []struct {
		name     string
		path     string
		code     int
		want     map[string]string // object name -> value
		wantErr  string
		wantSel  bool
		wantTime time.Time
	}{
		{name: "queue by selector sums models per pod", path: base + "pods/*/inference_queue_size" + sel("app=llm"), code: 200, want: map[string]string{"a": "5", "b": "5"}, wantTime: fresh},
		{name: "kv maxes over models", path: base + "pods/*/inference_kv_cache_usage" + sel("app=llm"), code: 200, want: map[string]string{"a": "500m", "b": "100m"}},
		{name: "model selector picks one model", path: base + "pods/*/inference_queue_size" + sel("app=llm") + "&metricLabelSelector=" + url.QueryEscape("model_name=llama"), code: 200, want: map[string]string{"a": "3", "b": "5"}, wantSel: true},
		{name: "model selector matching no model", path: base + "pods/*/inference_queue_size" + sel("app=llm") + "&metricLabelSelector=" + url.QueryEscape("model_name=mistral"), code: 404, wantErr: "no model matching the metric selector"},
		{name: "single pod by name", path: base + "pods/b/inference_batch_size", code: 200, want: map[string]string{"b": "10"}},
		{name: "batch fill from annotation", path: base + "pods/*/inference_batch_fill" + sel("app=llm"), code: 200, want: map[string]string{"b": "500m"}},
		{name: "no pods matched", path: base + "pods/*/inference_queue_size" + sel("app=nothing"), code: 404, wantErr: `no pods match \"app=nothing\" in namespace`},
		{name: "stale pod is left out", path: base + "pods/*/inference_queue_size" + sel("app=old"), code: 404, wantErr: "1 stale"},
		{name: "failed pod is left out", path: base + "pods/*/inference_queue_size" + sel("app=broken"), code: 404, wantErr: "scrape failed: scrape: timeout"},
		{name: "series absent (TGI has no KV)", path: base + "pods/*/inference_kv_cache_usage" + sel("app=tgi"), code: 404, wantErr: "page (tgi) has no series for inference_kv_cache_usage"},
		{name: "unknown metric", path: base + "pods/*/gpu_temperature" + sel("app=llm"), code: 404, wantErr: "unknown metric"},
		{name: "deployment object sums queue", path: base + "deployments.apps/llm/inference_queue_size", code: 200, want: map[string]string{"llm": "10"}},
		{name: "deployment object maxes kv", path: base + "deployments.apps/llm/inference_kv_cache_usage", code: 200, want: map[string]string{"llm": "500m"}},
		{name: "deployment with a stale ready pod is a 404 naming it", path: base + "deployments.apps/mixed/inference_queue_size", code: 404, wantErr: "1 of 3 ready pods have no value"},
		{name: "deployments by selector", path: base + "deployments.apps/*/inference_batch_size" + sel("tier=gpu"), code: 200, want: map[string]string{"llm": "35"}},
		{name: "v1beta1 works too", path: "/apis/custom.metrics.k8s.io/v1beta1/namespaces/ns/pods/*/inference_queue_size" + sel("app=llm"), code: 200, want: map[string]string{"a": "5", "b": "5"}},
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
			// The API answers a list for by-name questions too.
			var list struct{ Items []valueJSON }
			if err := json.Unmarshal([]byte(body), &list); err != nil {
				t.Fatal(err)
			}
			items := list.Items
			got := map[string]string{}
			for _, it := range items {
				got[it.DescribedObject.Name] = it.Value
				if strings.Contains(tc.path, "/v1beta2/") && (it.WindowSeconds == nil || *it.WindowSeconds != 5) {
					t.Errorf("%s: windowSeconds %v, want 5", it.DescribedObject.Name, it.WindowSeconds)
				}
				if it.Timestamp.IsZero() {
					t.Errorf("%s: no timestamp", it.DescribedObject.Name)
				}
				if !tc.wantTime.IsZero() && !it.Timestamp.Equal(tc.wantTime) {
					t.Errorf("%s: timestamp %s, want the scrape time %s", it.DescribedObject.Name, it.Timestamp, tc.wantTime)
				}
				if tc.wantSel != (it.Metric.Selector != nil) {
					t.Errorf("%s: metric selector %v", it.DescribedObject.Name, it.Metric.Selector)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("values %v, want %v\n%s", got, tc.want, body)
			}
		})
	}
}

func TestDiscoveryListsEveryMetric(t *testing.T) {
	var names []string
	for _, s := range catalog.All() {
		names = append(names, s.Name())
	}
	checkDiscovery(t, names, onPodsAndWorkloads...)
}

// onPodsAndWorkloads are the resources every signal is served on.
var onPodsAndWorkloads = []string{"pods", "deployments.apps", "statefulsets.apps"}

// checkDiscovery fails unless the API's discovery lists each metric on
// each of resources.
func checkDiscovery(t *testing.T, names []string, resources ...string) {
	t.Helper()
	srv, _ := newServer(t, fixture{now: time.Now(), store: store.New()})
	code, body := get(t, srv, "/apis/custom.metrics.k8s.io/v1beta2")
	if code != 200 {
		t.Fatalf("status %d: %s", code, body)
	}
	for _, name := range names {
		for _, r := range resources {
			if !strings.Contains(body, `"`+r+"/"+name+`"`) {
				t.Errorf("discovery lacks %s/%s", r, name)
			}
		}
	}
}

func TestSelectorQuestionRegistersDemand(t *testing.T) {
	srv, dem := newServer(t, fixture{now: time.Now(), store: store.New(), pods: []*corev1.Pod{pod("a", map[string]string{"app": "x"}, true, true, nil)}})
	code, body := get(t, srv, "/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/pods/*/inference_queue_size?labelSelector=app%3Dx")
	if code != 404 || !strings.Contains(body, "not scraped yet") {
		t.Fatalf("status %d body %s: want 404 not scraped yet", code, body)
	}
	if fmt.Sprint(dem.asked) != "[ns/app=x:1]" {
		t.Fatalf("demand %v", dem.asked)
	}
}

// TestHugeSelectorsAreRefused: every item of an answer echoes the metric
// selector, so a reader's selector of a few hundred KiB (a URL may carry
// about 1 MiB) would make a 100-pod answer tens of MiB to build, encode and
// keep, and every pod is matched against each requirement of a label
// selector; a selector longer than MaxSelectorLen is refused (400) on every
// path, saying which, and one within it is answered.
func TestHugeSelectorsAreRefused(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	app := map[string]string{"app": "llm"}
	st := store.New()
	f := fixture{now: now, store: st,
		deps: []*appsv1.Deployment{{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "llm", Labels: app}, Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: app}}}},
	}
	for i := range 100 {
		name := fmt.Sprintf("llm-%d", i)
		st.Record(types.NamespacedName{Namespace: "ns", Name: name}, now.Add(-time.Second), page(model("llama", 1, 1, 0.5)), nil)
		f.pods = append(f.pods, pod(name, app, true, true, nil))
	}
	srv, _ := newServer(t, f)
	// model_name notin (m0, m1, …): matches llama, and is as long as asked.
	notIn := func(n int) string {
		vals := make([]string, n)
		for i := range vals {
			vals[i] = fmt.Sprintf("m%d", i)
		}
		return "&metricLabelSelector=" + url.QueryEscape("model_name notin ("+strings.Join(vals, ",")+")")
	}
	base := "/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/"
	huge, small := notIn(20000), notIn(100)
	labelIn := func(n int) string { return "labelSelector=" + url.QueryEscape(hugeIn("app", "llm", n)) }
	for _, tc := range []struct {
		name string
		path string
		code int
		says string
	}{
		{"a huge label selector", base + "pods/*/inference_queue_size?" + labelIn(20000), 400, "label selector"},
		{"a long label selector within the bound", base + "pods/*/inference_queue_size?" + labelIn(200), 200, ""},
		{"pods by selector", base + "pods/*/inference_queue_size?labelSelector=app%3Dllm" + huge, 400, "metric selector"},
		{"pod by name", base + "pods/llm-1/inference_queue_size?" + huge[1:], 400, "metric selector"},
		{"deployment by name", base + "deployments.apps/llm/inference_queue_size?" + huge[1:], 400, "metric selector"},
		{"deployments by selector", base + "deployments.apps/*/inference_queue_size?labelSelector=app%3Dllm" + huge, 400, "metric selector"},
		{"demand per replica", base + "deployments.apps/llm/inference_demand_per_replica?" + huge[1:], 400, "metric selector"},
		{"a short one is answered", base + "pods/*/inference_queue_size?labelSelector=app%3Dllm" + small, 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := get(t, srv, tc.path)
			if code != tc.code {
				t.Fatalf("status %d (an answer of %d bytes for a question of %d), want %d", code, len(body), len(tc.path), tc.code)
			}
			if code == 400 && !strings.Contains(body, tc.says) {
				t.Errorf("400 does not say why: %.300s", body)
			}
		})
	}
}

// TestBatchFillFromAnInfiniteMaxBatchSize: a max-batch-size annotation that
// parses to an infinite (or not-a-number) size gives no fill, never a
// measured 0 (batch ÷ +Inf) nor a value out of range.
func TestBatchFillFromAnInfiniteMaxBatchSize(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for _, ann := range []string{"Inf", "+inf", "infinity", "NaN"} {
		t.Run(ann, func(t *testing.T) {
			st := store.New()
			st.Record(types.NamespacedName{Namespace: "ns", Name: "a"}, now.Add(-time.Second), page(model("llama", 3, 24, 0.42)), nil)
			srv, _ := newServer(t, fixture{now: now, store: st, pods: []*corev1.Pod{
				pod("a", map[string]string{"app": "llm"}, true, true, map[string]string{"inference-metrics-adapter/max-batch-size": ann}),
			}})
			code, body := get(t, srv, "/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/pods/a/inference_batch_fill")
			if code != 404 || !strings.Contains(body, "max-batch-size") {
				t.Errorf("status %d, want a 404 that names the annotation: %s", code, body)
			}
		})
	}
}
