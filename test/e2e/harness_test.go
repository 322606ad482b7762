// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/test/e2e/framework"
)

// TestKubeletStandIn checks the harness itself: a Deployment's pods become
// Running at distinct loopback pod IPs where inference-sim serves /metrics,
// and scaling down stops the removed pod's simulator.
func TestKubeletStandIn(t *testing.T) {
	e := requireEnv(t, framework.ComponentSim)
	t.Parallel()
	ns := e.Namespace(t)
	d := simDeployment("standin", 2, "--max-num-seqs=2")
	pods := createSimDeployment(t, e, ns, d, 2)
	selector := labels.SelectorFromSet(d.Spec.Selector.MatchLabels)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	seen := map[string]bool{}
	for _, p := range pods {
		ip := p.Status.PodIP
		if !strings.HasPrefix(ip, "127.") || ip == "127.0.0.1" || seen[ip] {
			t.Errorf("pod %s has IP %q; want a unique 127.0.x.y other than 127.0.0.1", p.Name, ip)
		}
		seen[ip] = true
		ready := false
		for _, c := range p.Status.Conditions {
			ready = ready || (c.Type == "Ready" && c.Status == "True")
		}
		if !ready {
			t.Errorf("pod %s is not Ready: %+v", p.Name, p.Status.Conditions)
		}
		v, err := simGauge(ctx, "http://"+ip+":8000", "vllm:num_requests_waiting")
		if err != nil {
			t.Errorf("pod %s: %v", p.Name, err)
		} else if v != 0 {
			t.Errorf("idle pod %s reports %g waiting requests, want 0", p.Name, v)
		}
	}
	if got := e.Kubelet.Endpoints(ns, selector); len(got) != 2 {
		t.Fatalf("endpoints %v, want 2", got)
	}

	patch := []byte(`{"spec":{"replicas":1}}`)
	if _, err := e.ControlPlane.Client.AppsV1().Deployments(ns).Patch(ctx, d.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "scale"); err != nil {
		t.Fatalf("scale to 1: %v", err)
	}
	if _, err := waitRunningPods(ctx, e.ControlPlane.Client, ns, selector, 1); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		return len(e.Kubelet.Endpoints(ns, selector)) == 1, nil
	}); err != nil {
		t.Fatalf("after scaling to 1, endpoints %v: %v", e.Kubelet.Endpoints(ns, selector), err)
	}
}
