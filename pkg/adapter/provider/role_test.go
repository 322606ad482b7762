// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package provider

import (
	"encoding/json"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// newRoleServer is newServer with the provider's role label set.
func newRoleServer(t *testing.T, f fixture, roleLabel string) *httptest.Server {
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
	prov := New(Config{MaxAge: 15 * time.Second, Window: 5 * time.Second, RoleLabel: roleLabel},
		Listers{Pods: corelisters.NewPodLister(pi), Deployments: appslisters.NewDeploymentLister(di), StatefulSets: appslisters.NewStatefulSetLister(si)},
		f.store, &recordingDemand{}, testclock.NewFakePassiveClock(f.now))
	srv := httptest.NewServer(handler(t, prov))
	t.Cleanup(srv.Close)
	return srv
}

// TestRoleSelection: a role=VALUE metric selector restricts a question to
// the pods whose role label has that value: one Deployment's selector
// covers prefill pods, decode pods and a pod without the label, and each
// role is asked about apart on pods, on the Deployment and in its demand
// per replica (whose Ready plus starting replicas are the role's). A pod
// without the label is no role's. The readiness rule holds per role: a
// Ready prefill pod without a value makes prefill's answer absent, not
// decode's. The role label is --role-label's; a role that is not one
// equality of a label value is a 400 naming the key.
func TestRoleSelection(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	fresh := now.Add(-2 * time.Second)
	for _, roleLabel := range []string{"", "example.com/stage"} {
		key := roleLabel
		if key == "" {
			key = DefaultRoleLabel
		}
		t.Run("label "+key, func(t *testing.T) {
			st := store.New()
			rec := func(name string, q, b, kv float64) {
				st.Record(types.NamespacedName{Namespace: "ns", Name: name}, fresh, page(model("llama", q, b, kv)), nil)
			}
			rec("prefill-0", 3, 1, 0.1)
			rec("prefill-1", 5, 2, 0.2)
			rec("decode-0", 1, 20, 0.8)
			rec("decode-1", 0, 10, 0.6)
			rec("unlabelled", 100, 100, 0.9)
			rec("other-role", 40, 40, 0.5)
			labelled := func(role string) map[string]string {
				l := map[string]string{"app": "llm"}
				if role != "" {
					l[key] = role
				}
				return l
			}
			starting := pod("prefill-2", labelled("prefill"), false, false, nil) // starting: a replica on its way
			f := fixture{now: now, store: st, pods: []*corev1.Pod{
				pod("prefill-0", labelled("prefill"), true, true, nil),
				pod("prefill-1", labelled("prefill"), true, true, nil),
				starting,
				pod("decode-0", labelled("decode"), true, true, nil),
				pod("decode-1", labelled("decode"), true, true, nil),
				pod("unlabelled", labelled(""), true, true, nil),
				pod("other-role", labelled("router"), true, true, nil),
				pod("prefill-silent", map[string]string{"app": "silent", key: "prefill"}, true, true, nil), // Ready, never scraped
				pod("decode-loud", map[string]string{"app": "silent", key: "decode"}, true, true, nil),
				pod("epp", map[string]string{"app": "router"}, true, true, map[string]string{"inference-metrics-adapter/front-door-for": "inferencepool/pool"}),
			}, deps: []*appsv1.Deployment{
				{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "llm"}, Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "llm"}}}},
				{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "silent"}, Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "silent"}}}},
			}}
			st.Record(types.NamespacedName{Namespace: "ns", Name: "decode-loud"}, fresh, page(model("llama", 2, 6, 0.3)), nil)
			srv := newRoleServer(t, f, roleLabel)
			base := "/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/"
			ms := func(sel string) string { return "metricLabelSelector=" + url.QueryEscape(sel) }

			cases := []struct {
				name, path string
				code       int
				want       map[string]string // described object name -> value
				wantErr    []string
			}{
				{name: "pods of prefill", path: base + "pods/*/inference_queue_size?labelSelector=app%3Dllm&" + ms("role=prefill"), code: 200, want: map[string]string{"prefill-0": "3", "prefill-1": "5"}},
				{name: "pods of decode", path: base + "pods/*/inference_batch_size?labelSelector=app%3Dllm&" + ms("role=decode"), code: 200, want: map[string]string{"decode-0": "20", "decode-1": "10"}},
				{name: "pods of every role without one", path: base + "pods/*/inference_queue_size?labelSelector=app%3Dllm", code: 200, want: map[string]string{"prefill-0": "3", "prefill-1": "5", "decode-0": "1", "decode-1": "0", "unlabelled": "100", "other-role": "40"}},
				{name: "a role and a model together", path: base + "pods/*/inference_queue_size?labelSelector=app%3Dllm&" + ms("role=prefill,model_name=llama"), code: 200, want: map[string]string{"prefill-0": "3", "prefill-1": "5"}},
				{name: "a role and another model", path: base + "pods/*/inference_queue_size?labelSelector=app%3Dllm&" + ms("role=prefill,model_name=qwen"), code: 404, wantErr: []string{"no model matching"}},
				{name: "a pod of the role by name", path: base + "pods/prefill-0/inference_queue_size?" + ms("role=prefill"), code: 200, want: map[string]string{"prefill-0": "3"}},
				{name: "a pod of another role by name", path: base + "pods/prefill-0/inference_queue_size?" + ms("role=decode"), code: 404, wantErr: []string{key + "=prefill", "role decode"}},
				{name: "a pod without the label by name", path: base + "pods/unlabelled/inference_queue_size?" + ms("role=decode"), code: 404, wantErr: []string{"no " + key + " label"}},
				{name: "deployment, prefill's waiting requests", path: base + "deployments.apps/llm/inference_queue_size?" + ms("role=prefill"), code: 200, want: map[string]string{"llm": "8"}},
				{name: "deployment, decode's running requests", path: base + "deployments.apps/llm/inference_batch_size?" + ms("role=decode"), code: 200, want: map[string]string{"llm": "30"}},
				{name: "deployment, decode's KV-cache usage", path: base + "deployments.apps/llm/inference_kv_cache_usage?" + ms("role=decode"), code: 200, want: map[string]string{"llm": "800m"}},
				{name: "deployment without a role: every pod", path: base + "deployments.apps/llm/inference_queue_size", code: 200, want: map[string]string{"llm": "149"}},
				{name: "demand per replica of prefill: its Ready and starting pods", path: base + "deployments.apps/llm/" + catalog.DemandPerReplica + "?" + ms("role=prefill"), code: 200, want: map[string]string{"llm": "3667m"}},
				{name: "demand per replica of decode", path: base + "deployments.apps/llm/" + catalog.DemandPerReplica + "?" + ms("role=decode"), code: 200, want: map[string]string{"llm": "15500m"}},
				{name: "a role no pod has", path: base + "deployments.apps/llm/inference_queue_size?" + ms("role=encode"), code: 404, wantErr: []string{"no pods match"}},
				{name: "a Ready prefill pod without a value: prefill absent", path: base + "deployments.apps/silent/inference_queue_size?" + ms("role=prefill"), code: 404, wantErr: []string{"prefill-silent"}},
				{name: "the same workload's decode is answered", path: base + "deployments.apps/silent/inference_queue_size?" + ms("role=decode"), code: 200, want: map[string]string{"silent": "2"}},
				{name: "not an equality", path: base + "deployments.apps/llm/inference_queue_size?" + ms("role!=prefill"), code: 400, wantErr: []string{"role", "one equality"}},
				{name: "two roles", path: base + "deployments.apps/llm/inference_queue_size?" + ms("role in (prefill,decode)"), code: 400, wantErr: []string{"role", "one equality"}},
				{name: "a role that only exists", path: base + "deployments.apps/llm/inference_queue_size?" + ms("role"), code: 400, wantErr: []string{"role", "one equality"}},
				{name: "an empty value", path: base + "deployments.apps/llm/inference_queue_size?" + ms("role="), code: 400, wantErr: []string{"role", "label value"}},
				{name: "front doors are not per role", path: base + "inferencepools.inference.networking.k8s.io/pool/" + catalog.FrontDoorPendingRequests + "?" + ms("role=prefill"), code: 400, wantErr: []string{"role", "not per role"}},
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					code, body := get(t, srv, tc.path)
					if code != tc.code {
						t.Fatalf("status %d, want %d; body %s", code, tc.code, body)
					}
					if tc.code != 200 {
						for _, w := range tc.wantErr {
							if !strings.Contains(body, w) {
								t.Errorf("body %s does not say %q", body, w)
							}
						}
						return
					}
					var list struct{ Items []valueJSON }
					var one valueJSON
					if err := json.Unmarshal([]byte(body), &list); err != nil || len(list.Items) == 0 {
						if err := json.Unmarshal([]byte(body), &one); err != nil {
							t.Fatal(err)
						}
						list.Items = []valueJSON{one}
					}
					got := map[string]string{}
					for _, it := range list.Items {
						got[it.DescribedObject.Name] = it.Value
					}
					if len(got) != len(tc.want) {
						t.Fatalf("values %v, want %v", got, tc.want)
					}
					for n, v := range tc.want {
						if got[n] != v {
							t.Errorf("%s = %q, want %q (all: %v)", n, got[n], v, got)
						}
					}
					if strings.Contains(tc.path, "role%3D") {
						for _, it := range list.Items {
							if it.Metric.Selector == nil || !slices.Contains(keysOf(it.Metric.Selector.MatchLabels), catalog.RoleSelectorLabel) {
								t.Errorf("the answer does not echo the role: %+v", it.Metric.Selector)
							}
						}
					}
				})
			}
		})
	}
}

func keysOf(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestRoleOfRefusesBadValues: a role value is bounded in length and
// charset even where the selector was not parsed from text (the KEDA
// scaler's, and other in-process callers', are built, not parsed); the 400
// names the key.
func TestRoleOfRefusesBadValues(t *testing.T) {
	info := cmprovider.CustomMetricInfo{GroupResource: deploymentsGR, Namespaced: true, Metric: "inference_queue_size"}
	for _, tc := range []struct {
		value string
		ok    bool
	}{
		{"prefill", true}, {"decode", true}, {"P.d-1_x", true}, {strings.Repeat("p", MaxRoleLen), true},
		{strings.Repeat("p", MaxRoleLen+1), false}, {"pre fill", false}, {"-prefill", false}, {"prefill.", false},
		{"", false}, {"prefill\n", false}, {"préfill", false},
	} {
		sel := labels.SelectorFromValidatedSet(labels.Set{catalog.RoleSelectorLabel: tc.value})
		role, err := roleOf(info, sel)
		switch {
		case tc.ok && (err != nil || role != tc.value):
			t.Errorf("role %q: got %q, %v; want it accepted", tc.value, role, err)
		case !tc.ok && (err == nil || !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), catalog.RoleSelectorLabel)):
			t.Errorf("role %q: got %q, %v; want a 400 naming %q", tc.value, role, err, catalog.RoleSelectorLabel)
		}
	}
}
