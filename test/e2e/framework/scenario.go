// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// ModelReadyTimeout bounds StartModel's wait for the first pods to be Ready.
const ModelReadyTimeout = 90 * time.Second

// Model is a Deployment of simulated model servers that turn Ready only once
// their model has loaded, and the Service stand-in in front of them: the
// workload a scaling scenario drives with load and scales with an HPA named
// as the Deployment.
type Model struct {
	Namespace, Name string
	Selector        labels.Selector
	URL             string // the Service stand-in
	client          kubernetes.Interface
}

// StartModel creates d in ns with a readiness probe on /health (inference-sim
// answers it once its --load-time has passed), starts a Service stand-in over
// its Ready pods (stopped at the test's end) and waits until d's
// spec.replicas pods are Ready.
func StartModel(t *testing.T, e *Environment, ns string, d *appsv1.Deployment) *Model {
	t.Helper()
	d.Spec.Template.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
		HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromString("http")}}}
	m := &Model{Namespace: ns, Name: d.Name, Selector: labels.SelectorFromSet(d.Spec.Selector.MatchLabels), client: e.ControlPlane.Client}
	ctx, cancel := context.WithTimeout(context.Background(), ModelReadyTimeout)
	defer cancel()
	if _, err := m.client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create deployment %s/%s: %v", ns, d.Name, err)
	}
	svc, err := StartServiceProxy(func() []string { return e.Kubelet.Endpoints(ns, m.Selector) })
	if err != nil {
		t.Fatalf("deployment %s/%s: service stand-in: %v", ns, d.Name, err)
	}
	t.Cleanup(func() { svc.Close() })
	m.URL = svc.URL
	want := *d.Spec.Replicas
	var ready int32
	if err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		dep, err := m.client.AppsV1().Deployments(ns).Get(ctx, d.Name, metav1.GetOptions{})
		if err == nil {
			ready = dep.Status.ReadyReplicas
		}
		return err == nil && ready == want, nil
	}); err != nil {
		t.Fatalf("deployment %s/%s: %d of %d pods Ready after %s: %v", ns, d.Name, ready, want, ModelReadyTimeout, err)
	}
	return m
}

// ScaleState is a Model's Deployment and HPA at one moment.
type ScaleState struct {
	Spec, Ready, Desired int32 // the Deployment's spec.replicas and Ready replicas, the HPA's desiredReplicas
	// Values holds each metric's current value in the HPA's status, by
	// metric name: a Pods metric's AverageValue, an Object metric's Value.
	Values                  map[string]float64
	Active, Reason, Message string // the HPA's ScalingActive condition
}

// Value is the current value the HPA read for metric, NaN if it read none.
func (s ScaleState) Value(metric string) float64 {
	if v, ok := s.Values[metric]; ok {
		return v
	}
	return math.NaN()
}

// ActiveTrue says whether the HPA's ScalingActive condition is True.
func (s ScaleState) ActiveTrue() bool { return s.Active == string(corev1.ConditionTrue) }

// Scale reads the Model's Deployment and its HPA (named as the Deployment);
// what cannot be read is left zero.
func (m *Model) Scale(ctx context.Context) ScaleState {
	var s ScaleState
	if d, err := m.client.AppsV1().Deployments(m.Namespace).Get(ctx, m.Name, metav1.GetOptions{}); err == nil {
		s.Spec, s.Ready = *d.Spec.Replicas, d.Status.ReadyReplicas
	}
	h, err := m.client.AutoscalingV2().HorizontalPodAutoscalers(m.Namespace).Get(ctx, m.Name, metav1.GetOptions{})
	if err != nil {
		return s
	}
	s.Desired = h.Status.DesiredReplicas
	s.Values = map[string]float64{}
	for _, cm := range h.Status.CurrentMetrics {
		switch {
		case cm.Pods != nil && cm.Pods.Current.AverageValue != nil:
			s.Values[cm.Pods.Metric.Name] = cm.Pods.Current.AverageValue.AsApproximateFloat64()
		case cm.Object != nil && cm.Object.Current.Value != nil:
			s.Values[cm.Object.Metric.Name] = cm.Object.Current.Value.AsApproximateFloat64()
		}
	}
	for _, c := range h.Status.Conditions {
		if c.Type == autoscalingv2.ScalingActive {
			s.Active, s.Reason, s.Message = string(c.Status), c.Reason, c.Message
		}
	}
	return s
}

// ScaleRow is every Model's ScaleState at one moment of a scenario.
type ScaleRow struct {
	At     time.Duration // since the scenario's start
	States []ScaleState  // one per Model, in the order given to SampleScale
}

// SampleScale reads every Model at once, each read bounded by timeout.
func SampleScale(models []*Model, at, timeout time.Duration) ScaleRow {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	row := ScaleRow{At: at, States: make([]ScaleState, len(models))}
	var wg sync.WaitGroup
	for i, m := range models {
		wg.Go(func() { row.States[i] = m.Scale(ctx) })
	}
	wg.Wait()
	return row
}

// ReplicaSeconds is Model i's spec.replicas integrated over rows (each value
// held until the next row), in seconds of At.
func ReplicaSeconds(rows []ScaleRow, i int) float64 {
	var sum float64
	for j := 0; j+1 < len(rows); j++ {
		sum += float64(rows[j].States[i].Spec) * (rows[j+1].At - rows[j].At).Seconds()
	}
	return sum
}
