// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/test/e2e/framework"
)

// TestTGIScalesOnQueue: an HPA on inference_queue_size scales a fleet of
// simulators that serve /metrics as TGI does (tgi_queue_size, no model
// label), the same scenario as TestHPAScales/pods-queue-size.
func TestTGIScalesOnQueue(t *testing.T) {
	e := requireEnv(t, framework.ComponentSim, framework.ComponentAdapter)
	t.Parallel()
	ns := e.Namespace(t)
	d := simDeployment("tgi", 1, "--metrics-format=tgi", "--max-num-seqs=4")
	pods := createSimDeployment(t, e, ns, d, 1)
	u, _ := e.Kubelet.Endpoint(ns, pods[0].Name)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := simGauge(ctx, u, "tgi_queue_size"); err != nil {
		t.Fatalf("the pod does not serve a TGI page: %v", err)
	}
	// Queue C/N-4 = 5 at N=4, as in TestHPAScales.
	runScaleScenario(t, e, ns, d.Name, framework.PodsMetric(metricQueue, "5"), metricQueue, 36)
}

// TestSGLangTwoModels: one pod serves two models in SGLang's format. The
// custom metrics API answers each model's value through
// metricLabelSelector=model_name=X, equal to the pod's own page for that
// model, and the sum without a selector; an HPA whose metric.selector
// names one model reads only that model's value.
func TestSGLangTwoModels(t *testing.T) {
	e := requireEnv(t, framework.ComponentSim, framework.ComponentAdapter)
	t.Parallel()
	ns := e.Namespace(t)
	d := simDeployment("sglang", 1, "--metrics-format=sglang", "--model=alpha,beta", "--max-num-seqs=2")
	pods := createSimDeployment(t, e, ns, d, 1)
	pod := pods[0].Name
	selector := labels.SelectorFromSet(d.Spec.Selector.MatchLabels)
	u, _ := e.Kubelet.Endpoint(ns, pod)

	// Each model has its own engine: with at most C requests open, an
	// overloaded model has C-2 waiting. alpha ≈ 10, beta ≈ 3, so that one
	// model's value differs from the other's and from their sum.
	startModelLoad(t, u, "alpha", 40, 90*time.Second, 12)
	startModelLoad(t, u, "beta", 40, 90*time.Second, 5)

	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	var last string
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		page, err := simModelGauge(ctx, u, "sglang:num_queue_reqs")
		if err != nil {
			return false, err
		}
		api := map[string]float64{}
		for _, m := range []string{"alpha", "beta", ""} {
			v, err := podModelValue(ctx, e, ns, metricQueue, selector, m, pod)
			if err != nil {
				noteErr(ctx, &last, err)
				return false, nil
			}
			api[m] = v
		}
		last = fmt.Sprintf("API alpha=%g beta=%g all=%g; page alpha=%g beta=%g", api["alpha"], api["beta"], api[""], page["alpha"], page["beta"])
		return page["alpha"] > page["beta"] && page["beta"] > 0 &&
			api["alpha"] == page["alpha"] && api["beta"] == page["beta"] && api[""] == page["alpha"]+page["beta"], nil
	})
	if err != nil {
		t.Fatalf("per-model values never matched the pod's page (last: %s): %v", last, err)
	}
	t.Logf("metricLabelSelector picks each model: %s", last)

	// An HPA on beta alone: target 100 per pod keeps it at one replica.
	metric := framework.PodsMetric(metricQueue, "100")
	metric.Pods.Metric.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"model_name": "beta"}}
	createHPA(t, e, ns, newHPA(d.Name, 1, 2, metric, 0))
	ctx2, cancel2 := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel2()
	err = wait.PollUntilContextCancel(ctx2, time.Second, true, func(ctx context.Context) (bool, error) {
		hv, ok, _ := hpaCurrent(ctx, e, ns, d.Name)
		if !ok {
			last = "the HPA has no current value yet"
			return false, nil
		}
		page, err := simModelGauge(ctx, u, "sglang:num_queue_reqs")
		if err != nil {
			return false, err
		}
		last = fmt.Sprintf("HPA %g/pod; page alpha=%g beta=%g", hv, page["alpha"], page["beta"])
		return hv == page["beta"] && hv != page["alpha"] && hv != page["alpha"]+page["beta"], nil
	})
	if err != nil {
		t.Fatalf("the HPA with metric.selector model_name=beta never read beta's value alone (last: %s): %v", last, err)
	}
	t.Logf("HPA with metric.selector model_name=beta: %s", last)
}

// hpaCurrent is the HPA's current value of its first metric (per pod for
// Pods metrics and average-value targets) whatever the metric's type, and
// whether its ScalingActive condition is True.
func hpaCurrent(ctx context.Context, e *framework.Environment, ns, name string) (value float64, ok, scalingActive bool) {
	h, err := e.ControlPlane.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil || len(h.Status.CurrentMetrics) == 0 {
		return 0, false, false
	}
	for _, c := range h.Status.Conditions {
		if c.Type == autoscalingv2.ScalingActive {
			scalingActive = c.Status == corev1.ConditionTrue
		}
	}
	m := h.Status.CurrentMetrics[0]
	var q *resource.Quantity
	switch {
	case m.Pods != nil:
		q = m.Pods.Current.AverageValue
	case m.Object != nil && m.Object.Current.AverageValue != nil:
		q = m.Object.Current.AverageValue
	case m.Object != nil:
		q = m.Object.Current.Value
	case m.External != nil && m.External.Current.AverageValue != nil:
		q = m.External.Current.AverageValue
	case m.External != nil:
		q = m.External.Current.Value
	}
	if q == nil {
		return 0, false, scalingActive
	}
	return q.AsApproximateFloat64(), true, scalingActive
}

// podModelValue is the adapter's value of metric for pod, restricted to
// model by metricLabelSelector (all models when model is "").
func podModelValue(ctx context.Context, e *framework.Environment, ns, metric string, selector labels.Selector, model, pod string) (float64, error) {
	metricSelector := labels.Everything()
	if model != "" {
		metricSelector = labels.SelectorFromSet(labels.Set{"model_name": model})
	}
	list, err := e.ControlPlane.Metrics.Pods(ctx, ns, metric, selector, metricSelector)
	if err != nil {
		return 0, fmt.Errorf("model %q: %w", model, err)
	}
	for _, it := range list.Items {
		if it.DescribedObject.Name == pod {
			return it.Value.AsApproximateFloat64(), nil
		}
	}
	return 0, fmt.Errorf("model %q: pod %s not in the answer (%d items)", model, pod, len(list.Items))
}

// startModelLoad is startLoad for one model of a multi-model server.
func startModelLoad(t *testing.T, url, modelName string, rate float64, d time.Duration, maxInFlight int) *load {
	t.Helper()
	return startLoadFor(t, url, modelName, rate, d, maxInFlight)
}
