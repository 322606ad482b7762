// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package provider

import (
	"encoding/json"
	"math"
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

// sloModel is a model with a generated-tokens counter and a TTFT histogram
// (bounds 0.1, 0.5, 1, +Inf; cumulative counts ttft).
func sloModel(name string, tokens float64, ttft ...float64) parse.Model {
	m := model(name, 1, 1, 0.5)
	m.Counters[catalog.GenerationTokens] = tokens
	m.HasCounter = 1 << catalog.GenerationTokens
	h := &parse.Histogram{}
	m.Hists[catalog.TimeToFirstToken] = h
	h.N = 4
	copy(h.Le[:], []float64{0.1, 0.5, 1, math.Inf(1)})
	copy(h.Count[:], ttft)
	return m
}

// The API serves rates per pod and summed per deployment, and a
// deployment's TTFT p90 from its pods' merged buckets; an idle window is a
// 404, never 0.
func TestSLOSignalsAPI(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	t0, t1 := now.Add(-12*time.Second), now.Add(-2*time.Second)
	st := store.New()
	rec := func(name string, at time.Time, m parse.Model) {
		st.Record(types.NamespacedName{Namespace: "ns", Name: name}, at, page(m), nil)
	}
	// fast: 90 requests under 0.1 s, 1000 tokens in 10 s; slow: 10 requests in (0.5, 1], 500 tokens.
	rec("fast", t0, sloModel("llama", 0, 0, 0, 0, 0))
	rec("fast", t1, sloModel("llama", 1000, 90, 90, 90, 90))
	rec("slow", t0, sloModel("llama", 0, 0, 0, 0, 0))
	rec("slow", t1, sloModel("llama", 500, 0, 0, 10, 10))
	rec("idle-a", t0, sloModel("llama", 0, 0, 0, 0, 0))
	rec("idle-a", t1, sloModel("llama", 0, 0, 0, 0, 0))
	rec("new", t1, sloModel("llama", 7000, 50, 50, 50, 50)) // one scrape so far
	llm := map[string]string{"app": "llm"}
	idle := map[string]string{"app": "idle"}
	f := fixture{
		now:   now,
		store: st,
		pods: []*corev1.Pod{
			pod("fast", llm, true, true, nil),
			pod("slow", llm, true, true, nil),
			pod("idle-a", idle, true, true, nil),
			pod("new", map[string]string{"app": "grow"}, true, true, nil),
		},
		deps: []*appsv1.Deployment{
			{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "llm"}, Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: llm}}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "idle"}, Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: idle}}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "grow"}, Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"llm", "grow"}}}}}},
		},
	}
	srv, _ := newServer(t, f)
	base := "/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/"
	for _, tc := range []struct {
		name    string
		path    string
		code    int
		want    map[string]string
		wantErr string
	}{
		{"tokens per second per pod", base + "pods/*/inference_generation_tokens_per_second?labelSelector=app%3Dllm", 200, map[string]string{"fast": "100", "slow": "50"}, ""},
		{"tokens per second summed per deployment", base + "deployments.apps/llm/inference_generation_tokens_per_second", 200, map[string]string{"llm": "150"}, ""},
		// 100 requests: 90 at most 0.1 s, so the 90th is at 0.1; the mean of the pods' p90s would be 0.5.
		{"fleet p90 from merged buckets", base + "deployments.apps/llm/inference_time_to_first_token_p90_seconds", 200, map[string]string{"llm": "100m"}, ""},
		{"pod p90", base + "pods/slow/inference_time_to_first_token_p90_seconds", 200, map[string]string{"slow": "950m"}, ""},
		{"model selector", base + "deployments.apps/llm/inference_time_to_first_token_p90_seconds?metricLabelSelector=model_name%3Dmistral", 404, nil, "no model matching"},
		// A pod scraped once (just scaled up) has measured nothing yet: it neither blocks nor changes the p90.
		{"a new pod joins the merge empty", base + "deployments.apps/grow/inference_time_to_first_token_p90_seconds", 200, map[string]string{"grow": "100m"}, ""},
		{"a new pod has no rate yet: the sum waits for it", base + "deployments.apps/grow/inference_generation_tokens_per_second", 404, nil, "first good scrape"},
		{"idle deployment: 404, not 0", base + "deployments.apps/idle/inference_time_to_first_token_p90_seconds", 404, nil, "no request finished"},
		{"no histogram on the page", base + "deployments.apps/llm/inference_queue_time_p90_seconds", 404, nil, "no histogram"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := get(t, srv, tc.path)
			if code != tc.code {
				t.Fatalf("code %d, want %d: %s", code, tc.code, body)
			}
			if tc.wantErr != "" {
				if !strings.Contains(body, tc.wantErr) {
					t.Errorf("body %s lacks %q", body, tc.wantErr)
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
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s = %s, want %s (%s)", k, got[k], v, body)
				}
			}
		})
	}
}
