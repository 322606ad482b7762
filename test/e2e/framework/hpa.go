// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// HPA returns an autoscaling/v2 HorizontalPodAutoscaler named like the
// Deployment it scales, between minReplicas and maxReplicas, on metric,
// with behavior (nil: Kubernetes' defaults). The namespace is the one it
// is created in.
func HPA(deployment string, minReplicas, maxReplicas int32, metric autoscalingv2.MetricSpec, behavior *autoscalingv2.HorizontalPodAutoscalerBehavior) *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: deployment},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: deployment},
			MinReplicas:    &minReplicas,
			MaxReplicas:    maxReplicas,
			Metrics:        []autoscalingv2.MetricSpec{metric},
			Behavior:       behavior,
		},
	}
}

// PodsMetric is a Pods metric name with a target average value per pod
// (a quantity such as "5" or "800m").
func PodsMetric(name, averageValue string) autoscalingv2.MetricSpec {
	target := resource.MustParse(averageValue)
	return autoscalingv2.MetricSpec{
		Type: autoscalingv2.PodsMetricSourceType,
		Pods: &autoscalingv2.PodsMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: name},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &target},
		},
	}
}

// QuickBehavior is the short-window behavior of the e2e scaling tests and
// the demo: scale up at once (no stabilization), by up to 4 pods per 5 s;
// scale down after downWindow seconds of lower recommendations, by at most
// down per its period.
func QuickBehavior(downWindow int32, down autoscalingv2.HPAScalingPolicy) *autoscalingv2.HorizontalPodAutoscalerBehavior {
	return &autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleUp: &autoscalingv2.HPAScalingRules{
			StabilizationWindowSeconds: new(int32(0)),
			Policies:                   []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: 4, PeriodSeconds: 5}},
		},
		ScaleDown: &autoscalingv2.HPAScalingRules{
			StabilizationWindowSeconds: &downWindow,
			Policies:                   []autoscalingv2.HPAScalingPolicy{down},
		},
	}
}
