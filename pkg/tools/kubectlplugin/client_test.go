// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package kubectlplugin

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/kubectlplugin/kubectlplugintest"
)

// fleet is two Deployments on the stand-in API: llm (two pods, 1 and 2
// GPUs, every value answered) and new (one pod whose values are not there
// yet), and a pod of neither.
func fleet(t *testing.T) *kubectlplugintest.Server {
	t.Helper()
	s := kubectlplugintest.New(t)
	llm, fresh := map[string]string{"app": "llm"}, map[string]string{"app": "new"}
	team := map[string]string{"team": "ml"}
	s.Deployments = append(s.Deployments, kubectlplugintest.Deployment("llm", team, llm), kubectlplugintest.Deployment("new", team, fresh), kubectlplugintest.Deployment("other", nil, map[string]string{"app": "other"}))
	s.Pods = append(s.Pods, kubectlplugintest.Pod("llm-a", llm, 1), kubectlplugintest.Pod("llm-b", llm, 2), kubectlplugintest.Pod("new-a", fresh, 1), kubectlplugintest.Pod("stray", map[string]string{"app": "stray"}, 1))
	s.PodValues["gpu_utilization"] = map[string]float64{"llm-a": 1, "llm-b": 0.4}
	s.PodValues["gpu_sm_active"] = map[string]float64{"llm-a": 0.4, "llm-b": 0.1}
	s.PodValues["inference_queue_size"] = map[string]float64{"llm-a": 0, "llm-b": 3}
	s.DeploymentValues["inference_generation_tokens_per_second"] = map[string]float64{"llm": 300}
	s.DeploymentValues["inference_requests_per_second"] = map[string]float64{"llm": 10}
	s.DeploymentValues["inference_time_to_first_token_p90_seconds"] = map[string]float64{"llm": 0.8}
	s.DeploymentValues["inference_time_to_first_token_p99_seconds"] = map[string]float64{"llm": 1.5}
	return s
}

func TestClientDeployments(t *testing.T) {
	s := fleet(t)
	c, err := NewClient(s.Config())
	if err != nil {
		t.Fatal(err)
	}
	ws, err := c.Deployments(context.Background(), kubectlplugintest.Namespace, "team=ml")
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 2 || ws[0].Name != "llm" || ws[1].Name != "new" {
		t.Fatalf("want the two Deployments labelled team=ml, sorted: %+v", ws)
	}
	wantPods := []PodGPU{{Name: "llm-a", GPUs: 1, Util: f(1), SM: f(0.4)}, {Name: "llm-b", GPUs: 2, Util: f(0.4), SM: f(0.1)}}
	if diff := cmp.Diff(wantPods, ws[0].Pods, approx); diff != "" {
		t.Errorf("llm pods (-want +got):\n%s", diff)
	}
	wantValues := map[catalog.Signal]float64{catalog.GenerationTokensPerSecond: 300, catalog.RequestsPerSecond: 10, catalog.TimeToFirstTokenP90: 0.8, catalog.TimeToFirstTokenP99: 1.5}
	if diff := cmp.Diff(wantValues, ws[0].Values, approx); diff != "" {
		t.Errorf("llm values (-want +got):\n%s", diff)
	}
	// What the API did not answer is missing with the API's reason.
	if why := ws[0].Missing["inference_time_to_first_token_p50_seconds"]; !strings.Contains(why, "no value in the test") {
		t.Errorf("missing p50's reason = %q", why)
	}
	if len(ws[1].Values) != 0 || ws[1].Pods[0].Util != nil || !strings.Contains(ws[1].Missing["gpu_utilization"], "no value") {
		t.Errorf("new: want nothing measured and the reasons, got %+v", ws[1])
	}
	// Read as the HPA reads: pods by the Deployment's selector, the
	// Deployment's values by name through custom.metrics.k8s.io/v1beta2.
	reqs := strings.Join(s.Requests(), "\n")
	for _, want := range []string{
		"/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/pods/%2A/gpu_utilization?labelSelector=app%3Dllm",
		"/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/deployments.apps/llm/inference_generation_tokens_per_second",
	} {
		if !strings.Contains(reqs, want) {
			t.Errorf("no request %s among:\n%s", want, reqs)
		}
	}

	sum := Summarize(ws[0], SLO{TimeToFirstToken: 1e9}, 0)
	if sum.GPUsAllocated != 3 || !cmp.Equal(sum.GPUBusyShare, f(0.6), approx) || !cmp.Equal(sum.SLOMetShare, &Range{f(0.9), f(0.99)}, approx) {
		t.Errorf("summary of llm: %d GPUs, busy %v, SLO met %v; want 3, 0.6, 0.9..0.99", sum.GPUsAllocated, sum.GPUBusyShare, sum.SLOMetShare)
	}
}

func TestClientPods(t *testing.T) {
	s := fleet(t)
	c, err := NewClient(s.Config())
	if err != nil {
		t.Fatal(err)
	}
	rows, err := c.Pods(context.Background(), kubectlplugintest.Namespace, "app=llm")
	if err != nil {
		t.Fatal(err)
	}
	want := []Row{
		{Pod: "llm-a", GPUs: 1, Values: map[catalog.Signal]float64{catalog.GPUUtilization: 1, catalog.GPUSMActive: 0.4, catalog.QueueSize: 0}},
		{Pod: "llm-b", GPUs: 2, Values: map[catalog.Signal]float64{catalog.GPUUtilization: 0.4, catalog.GPUSMActive: 0.1, catalog.QueueSize: 3}},
	}
	if diff := cmp.Diff(want, rows, approx); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
	if _, err := c.Pods(context.Background(), kubectlplugintest.Namespace, "app=none"); err == nil || !strings.Contains(err.Error(), "no running pods") {
		t.Errorf("no pods: err = %v", err)
	}
}

// TestClientErrors: a failing API (not a 404) is an error, never a row of
// missing values.
func TestClientErrors(t *testing.T) {
	for _, code := range []int{http.StatusForbidden, http.StatusServiceUnavailable} {
		s := fleet(t)
		s.Fail = code
		c, err := NewClient(s.Config())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Deployments(context.Background(), kubectlplugintest.Namespace, ""); err == nil {
			t.Errorf("HTTP %d: Deployments returned no error", code)
		}
		if _, err := c.Pods(context.Background(), kubectlplugintest.Namespace, "app=llm"); err == nil {
			t.Errorf("HTTP %d: Pods returned no error", code)
		}
	}
}
