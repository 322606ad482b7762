// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"context"
	"math"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
)

func TestModelScale(t *testing.T) {
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "model", Namespace: "ns"},
		Spec:       appsv1.DeploymentSpec{Replicas: new(int32(3))},
		Status:     appsv1.DeploymentStatus{ReadyReplicas: 2},
	}
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "model", Namespace: "ns"},
		Status: autoscalingv2.HorizontalPodAutoscalerStatus{
			DesiredReplicas: 4,
			CurrentMetrics: []autoscalingv2.MetricStatus{
				{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricStatus{
					Metric:  autoscalingv2.MetricIdentifier{Name: "queue"},
					Current: autoscalingv2.MetricValueStatus{AverageValue: new(resource.MustParse("1500m"))}}},
				{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricStatus{
					Metric:  autoscalingv2.MetricIdentifier{Name: "forecast"},
					Current: autoscalingv2.MetricValueStatus{Value: new(resource.MustParse("4"))}}},
				// A metric the HPA could not read has no current value.
				{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricStatus{
					Metric: autoscalingv2.MetricIdentifier{Name: "absent"}}},
			},
			Conditions: []autoscalingv2.HorizontalPodAutoscalerCondition{
				{Type: autoscalingv2.AbleToScale, Status: corev1.ConditionTrue, Reason: "ReadyForNewScale"},
				{Type: autoscalingv2.ScalingActive, Status: corev1.ConditionFalse, Reason: "FailedGetObjectMetric", Message: "no history"},
			},
		},
	}
	tests := []struct {
		name    string
		objects []runtime.Object
		want    ScaleState
		values  map[string]float64 // NaN: not read
	}{
		{
			name:    "deployment and HPA",
			objects: []runtime.Object{dep, hpa},
			want:    ScaleState{Spec: 3, Ready: 2, Desired: 4, Active: "False", Reason: "FailedGetObjectMetric", Message: "no history"},
			values:  map[string]float64{"queue": 1.5, "forecast": 4, "absent": math.NaN()},
		},
		{
			name:    "no HPA yet",
			objects: []runtime.Object{dep},
			want:    ScaleState{Spec: 3, Ready: 2},
			values:  map[string]float64{"queue": math.NaN()},
		},
		{
			name:   "nothing",
			want:   ScaleState{},
			values: map[string]float64{"queue": math.NaN()},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := &Model{Namespace: "ns", Name: "model", client: fake.NewClientset(tc.objects...)}
			got := m.Scale(context.Background())
			if got.Spec != tc.want.Spec || got.Ready != tc.want.Ready || got.Desired != tc.want.Desired ||
				got.Active != tc.want.Active || got.Reason != tc.want.Reason || got.Message != tc.want.Message {
				t.Errorf("Scale() = %+v, want %+v", got, tc.want)
			}
			for name, want := range tc.values {
				v := got.Value(name)
				if math.IsNaN(want) != math.IsNaN(v) || (!math.IsNaN(want) && v != want) {
					t.Errorf("Value(%q) = %g, want %g", name, v, want)
				}
			}
		})
	}
}

func TestReplicaSeconds(t *testing.T) {
	row := func(at time.Duration, specs ...int32) ScaleRow {
		r := ScaleRow{At: at}
		for _, s := range specs {
			r.States = append(r.States, ScaleState{Spec: s})
		}
		return r
	}
	rows := []ScaleRow{row(0, 1, 2), row(time.Second, 3, 2), row(3*time.Second, 5, 2)}
	tests := []struct {
		name string
		rows []ScaleRow
		i    int
		want float64
	}{
		{"each value held until the next row", rows, 0, 1*1 + 3*2},
		{"second model", rows, 1, 2 * 3},
		{"one row has no width", rows[:1], 0, 0},
		{"no rows", nil, 0, 0},
	}
	for _, tc := range tests {
		if got := ReplicaSeconds(tc.rows, tc.i); got != tc.want {
			t.Errorf("%s: ReplicaSeconds = %g, want %g", tc.name, got, tc.want)
		}
	}
}
