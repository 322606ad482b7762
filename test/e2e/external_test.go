// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/test/e2e/framework"
)

// TestExternalScalesDeployment: an autoscaling/v2 HPA with an External
// metric, inference_queue_size over the pods that selector app=<name>
// picks, scales a Deployment of simulators from one replica to several
// under load and back to one after it.
//
// The queue is that of the scaled Deployment's own pods, so the loop is
// closed: more replicas share the load, the summed queue falls, and the
// HPA settles where it meets the target (4 replicas at 5 per pod, as in
// TestHPAScales). Scaling one workload on another's queue is what External
// metrics are for too, but there the scaled replicas do not change the
// signal, so such a test could only show a jump to maxReplicas.
//
// The suite's adapter does not serve external.metrics.k8s.io (the option
// defaults off, since one adapter per cluster owns that API), so this test
// starts a second adapter registered only as v1beta1.external.metrics.k8s.io,
// unless the suite's adapter already serves it.
func TestExternalScalesDeployment(t *testing.T) {
	e := requireEnv(t, framework.ComponentSim, framework.ComponentAdapter)
	t.Parallel()
	if !e.Adapter.Config().EnableExternalMetrics {
		startExternalAdapter(t, e)
	}
	ns := e.Namespace(t)
	d := simDeployment("llm", 1, "--max-num-seqs=4")
	createSimDeployment(t, e, ns, d, 1)

	// Through the aggregator, the external API answers the sum over the pods.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	selector := labels.SelectorFromSet(labels.Set{"app": d.Name})
	var last string
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		list, err := e.ControlPlane.Metrics.ExternalValues(ctx, ns, metricQueue, selector)
		if err != nil {
			noteErr(ctx, &last, err)
			return false, nil
		}
		last = fmt.Sprintf("%+v", list.Items)
		return len(list.Items) == 1 && list.Items[0].MetricName == metricQueue && list.Items[0].Value.IsZero(), nil
	})
	if err != nil {
		t.Fatalf("%s of %s in %s through %s never gave the idle Deployment's queue, 0 (last: %s): %v", metricQueue, selector,
			ns, framework.ExternalMetricsGroup, last, err)
	}

	metric := autoscalingv2.MetricSpec{
		Type: autoscalingv2.ExternalMetricSourceType,
		External: &autoscalingv2.ExternalMetricSource{
			Metric: autoscalingv2.MetricIdentifier{
				Name:     metricQueue,
				Selector: &metav1.LabelSelector{MatchLabels: d.Spec.Template.Labels},
			},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: new(resource.MustParse("5"))},
		},
	}
	// The summed queue C-4N is 5 per pod at N=4.
	runScaleScenario(t, e, ns, d.Name, metric, metricQueue, 36)
}

// startExternalAdapter runs a second adapter registered only as
// external.metrics.k8s.io, stopped (APIService first) when t ends.
func startExternalAdapter(t *testing.T, e *framework.Environment) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	a, err := framework.StartAdapter(ctx, e.ControlPlane, framework.AdapterConfig{
		Binary:                e.Adapter.Config().Binary,
		Namespace:             framework.AdapterNamespace,
		Service:               framework.AdapterService + "-external",
		Args:                  framework.AdapterArgs(),
		EnableExternalMetrics: true,
		SkipCustomMetrics:     true,
	})
	if err != nil {
		t.Fatalf("start an adapter for external metrics: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := a.Stop(ctx); err != nil {
			t.Errorf("stop the external adapter: %v", err)
		}
	})
}
