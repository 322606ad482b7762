// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/test/e2e/framework"
)

// TestDiscovery: both registered versions list every serving metric for
// pods and for deployments, through the aggregator.
func TestDiscovery(t *testing.T) {
	e := requireEnv(t, framework.ComponentAdapter)
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, version := range framework.CustomMetricsVersions() {
		t.Run(version, func(t *testing.T) {
			body, err := rawGet(ctx, e.ControlPlane.Config, "/apis/custom.metrics.k8s.io/"+version)
			if err != nil {
				t.Fatalf("discovery: %v", err)
			}
			var list metav1.APIResourceList
			if err := json.Unmarshal(body, &list); err != nil {
				t.Fatalf("decode discovery: %v", err)
			}
			have := map[string]metav1.APIResource{}
			for _, r := range list.APIResources {
				have[r.Name] = r
			}
			for _, resource := range []string{"pods", "deployments.apps"} {
				for _, m := range []string{metricQueue, metricBatch, metricKV, metricFill} {
					r, ok := have[resource+"/"+m]
					if !ok {
						t.Errorf("discovery of %s lacks %s/%s; it lists %d resources", version, resource, m, len(list.APIResources))
						continue
					}
					if !r.Namespaced {
						t.Errorf("%s/%s is not namespaced", resource, m)
					}
				}
			}
		})
	}
}

// TestPodAndObjectValues: the API's per-pod values equal what each pod's
// /metrics page says, a pod with no page is left out, and the Deployment's
// object value is the sum over its pods.
func TestPodAndObjectValues(t *testing.T) {
	e := requireEnv(t, framework.ComponentSim, framework.ComponentAdapter)
	t.Parallel()
	ns := e.Namespace(t)
	d := simDeployment("values", 3, "--max-num-seqs=2")
	pods := createSimDeployment(t, e, ns, d, 3)
	selector := labels.SelectorFromSet(d.Spec.Selector.MatchLabels)

	// Hold each pod at its own queue length: an overloaded server with at
	// most N requests open has N-2 waiting (max-num-seqs=2).
	urls := map[string]string{}
	for i, p := range pods {
		u, ok := e.Kubelet.Endpoint(ns, p.Name)
		if !ok {
			t.Fatalf("no simulator for %s", p.Name)
		}
		urls[p.Name] = u
		startLoad(t, u, 40, 60*time.Second, 4+3*i)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	// The queues must be non-zero and differ between pods, so that a match
	// cannot come from idle servers or from values swapped between pods.
	for _, metric := range []struct {
		api, page string
		distinct  bool
	}{
		{metricQueue, "vllm:num_requests_waiting", true},
		{metricBatch, "vllm:num_requests_running", false},
	} {
		var last string
		err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			api, err := e.ControlPlane.Metrics.PodValues(ctx, ns, metric.api, selector)
			if err != nil {
				noteErr(ctx, &last, err)
				return false, nil
			}
			page := map[string]float64{}
			for name, u := range urls {
				if page[name], err = simGauge(ctx, u, metric.page); err != nil {
					return false, err
				}
			}
			last = fmt.Sprintf("API %s, pages %s", formatValues(api), formatValues(page))
			if len(api) != len(page) || (metric.distinct && !nonZeroDistinct(page)) {
				return false, nil
			}
			for name, v := range page {
				if a, ok := api[name]; !ok || a != v {
					return false, nil
				}
			}
			return true, nil
		})
		if err != nil {
			t.Fatalf("%s: API never matched the pages (last: %s): %v", metric.api, last, err)
		}
		t.Logf("%s matches every pod's page: %s", metric.api, last)
	}

	// Item shape: the described pod, the metric name, a recent timestamp.
	list, err := e.ControlPlane.Metrics.Pods(ctx, ns, metricQueue, selector, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range list.Items {
		if it.DescribedObject.Kind != "Pod" || it.DescribedObject.Namespace != ns {
			t.Errorf("item describes %+v, want a Pod in %s", it.DescribedObject, ns)
		}
		if it.Metric.Name != metricQueue {
			t.Errorf("item metric name %q, want %q", it.Metric.Name, metricQueue)
		}
		if age := time.Since(it.Timestamp.Time); age < -time.Second || age > 10*time.Second {
			t.Errorf("item for %s is stamped %s ago; want the time of a scrape within max-age", it.DescribedObject.Name, age)
		}
	}

	// The Deployment's value is the sum over its pods.
	var lastObj string
	err = wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		pages := 0.0
		for _, u := range urls {
			v, err := simGauge(ctx, u, "vllm:num_requests_waiting")
			if err != nil {
				return false, err
			}
			pages += v
		}
		obj, err := e.ControlPlane.Metrics.Object(ctx, ns, framework.DeploymentKind, d.Name, metricQueue)
		if err != nil {
			noteErr(ctx, &lastObj, err)
			return false, nil
		}
		v := obj.Value.AsApproximateFloat64()
		lastObj = fmt.Sprintf("object %g, sum of pages %g", v, pages)
		return math.Abs(v-pages) < 1e-9 && obj.DescribedObject.Kind == "Deployment", nil
	})
	if err != nil {
		t.Fatalf("deployment object metric never equalled the sum of the pages (last: %s): %v", lastObj, err)
	}
	t.Logf("deployment %s: %s", metricQueue, lastObj)

	// A pod whose server is gone is left out, never reported as 0.
	gone := pods[0].Name
	if err := e.Kubelet.KillSim(ns, gone); err != nil {
		t.Fatal(err)
	}
	var lastGone string
	err = wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		api, err := e.ControlPlane.Metrics.PodValues(ctx, ns, metricQueue, selector)
		if err != nil {
			noteErr(ctx, &lastGone, err)
			return false, nil
		}
		lastGone = formatValues(api)
		_, present := api[gone]
		return !present && len(api) == len(pods)-1, nil
	})
	if err != nil {
		t.Fatalf("pod %s with a dead server still listed, or the others missing (last: %s): %v", gone, lastGone, err)
	}
	if v, err := e.ControlPlane.Metrics.Object(ctx, ns, framework.PodKind, gone, metricQueue); !apierrors.IsNotFound(err) {
		t.Fatalf("the dead pod's own metric: want 404 NotFound, got err=%v value=%+v", err, v)
	}
	t.Logf("after killing %s's server: %s; its own metric is 404", gone, lastGone)
}

func nonZeroDistinct(vals map[string]float64) bool {
	seen := map[float64]bool{}
	for _, v := range vals {
		if v == 0 || seen[v] {
			return false
		}
		seen[v] = true
	}
	return true
}
