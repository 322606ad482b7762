// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package provider

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/parse"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/store"
)

// loraModel is the model "" a vLLM page's vllm:lora_requests_info line makes.
func loraModel(cut bool, adapters ...parse.Adapter) parse.Model {
	m := parse.Model{Adapters: adapters, AdaptersCut: cut}
	m.Has = m.Has.Add(catalog.LoRAAdaptersRunning).Add(catalog.LoRAAdaptersWaiting)
	return m
}

// TestLoRAAdapterAPI asks the per-adapter metrics through the real API
// handler: per pod 1, 0 or absent (never 0 for a pod whose page names no
// adapters), per workload the number of pods (by the readiness rule), and
// the selector rules.
func TestLoRAAdapterAPI(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	fresh := now.Add(-2 * time.Second)
	st := store.New()
	rec := func(name string, models ...parse.Model) {
		st.Record(types.NamespacedName{Namespace: "ns", Name: name}, fresh, page(models...), nil)
	}
	base := model("llama", 3, 24, 0.4)
	rec("a", base, loraModel(false, parse.Adapter{Name: "sql", Waiting: true}, parse.Adapter{Name: "chat", Running: true}))
	rec("b", base, loraModel(false, parse.Adapter{Name: "chat", Running: true, Waiting: true}))
	rec("u", base, loraModel(false, parse.Adapter{Name: "sql", Waiting: true})) // not Ready, has a value: counts
	rec("c", base)                                                              // no lora line
	rec("cut", base, loraModel(true, parse.Adapter{Name: "sql", Waiting: true}))
	llm := map[string]string{"app": "llm"}
	f := fixture{
		now:   now,
		store: st,
		pods: []*corev1.Pod{
			pod("a", llm, true, true, nil),
			pod("b", llm, true, true, nil),
			pod("u", llm, true, false, nil),
			pod("c", map[string]string{"app": "plain"}, true, true, nil),
			pod("cut", map[string]string{"app": "cut"}, true, true, nil),
		},
		deps: []*appsv1.Deployment{
			{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "llm", Labels: map[string]string{"tier": "gpu"}}, Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: llm}}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "mixed"}, Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"llm", "plain"}}}}}},
		},
	}
	srv, _ := newServer(t, f)
	ns := "/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/"
	q := func(labelSel, metricSel string) string {
		v := url.Values{}
		if labelSel != "" {
			v.Set("labelSelector", labelSel)
		}
		if metricSel != "" {
			v.Set("metricLabelSelector", metricSel)
		}
		return "?" + v.Encode()
	}
	waiting, running := catalog.LoRAAdapterWaiting, catalog.LoRAAdapterRunning
	cases := []struct {
		name    string
		path    string
		code    int
		want    map[string]string // object name -> value
		wantErr string
	}{
		{name: "pods: is sql waiting", path: ns + "pods/*/" + waiting + q("app=llm", "lora_name=sql"), code: 200, want: map[string]string{"a": "1", "b": "0", "u": "1"}},
		{name: "pods: is chat running", path: ns + "pods/*/" + running + q("app=llm", "lora_name=chat"), code: 200, want: map[string]string{"a": "1", "b": "1", "u": "0"}},
		{name: "pods: a set of names", path: ns + "pods/*/" + waiting + q("app=llm", "lora_name in (chat,code)"), code: 200, want: map[string]string{"a": "0", "b": "1", "u": "0"}},
		{name: "pod by name", path: ns + "pods/a/" + waiting + q("", "lora_name=sql"), code: 200, want: map[string]string{"a": "1"}},
		{name: "pod without a lora line: absent, not 0", path: ns + "pods/c/" + waiting + q("", "lora_name=sql"), code: 404, wantErr: "has no vllm:lora_requests_info series"},
		{name: "pods without a lora line", path: ns + "pods/*/" + waiting + q("app=plain", "lora_name=sql"), code: 404, wantErr: "none has a value"},
		{name: "a cut line does not say 0", path: ns + "pods/cut/" + waiting + q("", "lora_name=code"), code: 404, wantErr: "the line names more"},
		{name: "a cut line still says 1", path: ns + "pods/cut/" + waiting + q("", "lora_name=sql"), code: 200, want: map[string]string{"cut": "1"}},
		{name: "no metric selector", path: ns + "pods/*/" + waiting + q("app=llm", ""), code: 400, wantErr: "needs a metric selector that picks LoRA adapters by lora_name"},
		{name: "model_name is not an adapter label", path: ns + "pods/*/" + waiting + q("app=llm", "model_name=sql"), code: 400, wantErr: `not \"model_name\"`},
		{name: "lora_name and another key", path: ns + "pods/*/" + waiting + q("app=llm", "lora_name=sql,model_name=llama"), code: 400, wantErr: `not \"model_name\"`},
		{name: "deployment: pods where sql waits", path: ns + "deployments.apps/llm/" + waiting + q("", "lora_name=sql"), code: 200, want: map[string]string{"llm": "2"}},
		{name: "deployment: pods where chat runs", path: ns + "deployments.apps/llm/" + running + q("", "lora_name=chat"), code: 200, want: map[string]string{"llm": "2"}},
		{name: "deployment: a measured 0", path: ns + "deployments.apps/llm/" + waiting + q("", "lora_name=code"), code: 200, want: map[string]string{"llm": "0"}},
		{name: "deployment with a Ready pod without a lora line", path: ns + "deployments.apps/mixed/" + waiting + q("", "lora_name=sql"), code: 404, wantErr: "1 of 3 ready pods have no value"},
		{name: "deployments by selector", path: ns + "deployments.apps/*/" + waiting + q("tier=gpu", "lora_name=sql"), code: 200, want: map[string]string{"llm": "2"}},
		{name: "deployment without a metric selector", path: ns + "deployments.apps/llm/" + waiting, code: 400, wantErr: "needs a metric selector"},
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
			var list struct{ Items []valueJSON }
			if err := json.Unmarshal([]byte(body), &list); err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, it := range list.Items {
				got[it.DescribedObject.Name] = it.Value
				wantName := running
				if strings.Contains(tc.path, waiting) {
					wantName = waiting
				}
				if it.Metric.Name != wantName {
					t.Errorf("%s: metric %q, want %q", it.DescribedObject.Name, it.Metric.Name, wantName)
				}
				if it.Metric.Selector == nil {
					t.Errorf("%s: the metric selector is not echoed", it.DescribedObject.Name)
				}
				if !it.Timestamp.Equal(fresh) || it.WindowSeconds == nil || *it.WindowSeconds != 5 {
					t.Errorf("%s: timestamp %s window %v, want the scrape's %s and 5", it.DescribedObject.Name, it.Timestamp, it.WindowSeconds, fresh)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("values %v, want %v\n%s", got, tc.want, body)
			}
		})
	}
}

func TestDiscoveryListsLoRAAdapterMetrics(t *testing.T) {
	checkDiscovery(t, catalog.LoRAAdapterMetrics(), onPodsAndWorkloads...)
}
