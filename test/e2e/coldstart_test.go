// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/test/e2e/framework"
)

// coldStartLoad is the simulator's model-load time in this test: long
// enough that the pod is seen Running and not Ready first.
const coldStartLoad = 15 * time.Second

// TestColdStartReadiness: a pod whose simulator loads its model for
// --load-time, with a readiness probe on /health, is Running but not Ready
// (and not an endpoint) while /health answers 503, and turns Ready (and an
// endpoint) only once the simulator answers 200.
func TestColdStartReadiness(t *testing.T) {
	e := requireEnv(t, framework.ComponentSim)
	t.Parallel()
	ns := e.Namespace(t)
	d := simDeployment("coldstart", 1, "--load-time="+coldStartLoad.String())
	d.Spec.Template.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
		HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromString("http")}}}
	pods := createSimDeployment(t, e, ns, d, 1)
	selector := labels.SelectorFromSet(d.Spec.Selector.MatchLabels)
	url := "http://" + pods[0].Status.PodIP + ":8000/health"

	ctx, cancel := context.WithTimeout(context.Background(), coldStartLoad+60*time.Second)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	sawLoading := false
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		// Read the pod first, then the server: a Ready pod must already
		// have a server that answers.
		p, err := e.ControlPlane.Client.CoreV1().Pods(ns).Get(ctx, pods[0].Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ready := false
		for _, c := range p.Status.Conditions {
			ready = ready || (c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue)
		}
		endpoints := e.Kubelet.Endpoints(ns, selector)
		resp, err := client.Get(url)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		switch {
		case !ready && resp.StatusCode == http.StatusServiceUnavailable:
			sawLoading = true
			if len(endpoints) != 0 {
				t.Errorf("a loading pod is an endpoint: %v", endpoints)
			}
		case ready && resp.StatusCode != http.StatusOK:
			t.Errorf("pod Ready while its server answers %d", resp.StatusCode)
		case ready:
			if len(endpoints) != 1 {
				t.Errorf("a Ready pod is not an endpoint: %v", endpoints)
			}
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("the pod never turned Ready after its %s load: %v", coldStartLoad, err)
	}
	if !sawLoading {
		t.Errorf("the pod was never seen Running and not Ready while loading")
	}
}
