// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package provider

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/metrics/pkg/apis/custom_metrics"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/store"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/targets"
)

// The front-door metrics (catalog.FrontDoorMetrics) are served on a Service
// or an InferencePool: the requests held, not yet dispatched (and those in
// flight, and the pool's saturation), by the pods that name the
// Service in their inference-metrics-adapter/front-door-for annotation, in
// the Service's namespace. Those pods are scraped like model servers (their
// page's queue is what they hold: the gie-epp and front-door servers of
// package parse, or a custom server), so staleness and refused values follow
// the same rules. The Service object itself is not read: the annotation is
// the link, and it never leaves the namespace, so no namespace can count its
// pods into another's Service.

var servicesGR = schema.GroupResource{Resource: "services"}

// inferencePoolGRs are the Gateway API Inference Extension's InferencePool
// (v1, and the older v1alpha2 in its x-k8s.io group), which a front door may
// name instead of a Service: its endpoint picker holds the pool's requests.
var inferencePoolGRs = []schema.GroupResource{
	{Group: "inference.networking.k8s.io", Resource: "inferencepools"},
	{Group: "inference.networking.x-k8s.io", Resource: "inferencepools"},
}

// frontDoorSignal is how one front-door metric is read: the signal of a
// front door's page it is (package parse reads the endpoint picker's held
// requests as its queue, its requests in flight as its batch, its pool's
// saturation as its batch fill), and how the front door's pods combine.
type frontDoorSignal struct {
	sig     catalog.Signal
	agg     catalog.Aggregation
	perPool bool   // the pool's value: no model label, so no model selector
	source  string // the endpoint picker's series, for 404s
}

var frontDoorSignals = map[string]frontDoorSignal{
	catalog.FrontDoorPendingRequests: {sig: catalog.QueueSize, agg: catalog.Sum, source: "llm_d_epp_flow_control_queue_size or inference_extension_flow_control_queue_size, with flow control on"},
	catalog.FrontDoorRunningRequests: {sig: catalog.BatchSize, agg: catalog.Sum, source: "llm_d_epp_request_running or inference_objective_running_requests"},
	// Every replica of an endpoint picker computes the same pool's
	// saturation: the largest is served.
	catalog.FrontDoorPoolSaturation: {sig: catalog.BatchFill, agg: catalog.Max, perPool: true, source: "llm_d_epp_flow_control_pool_saturation or inference_extension_flow_control_pool_saturation, with flow control on"},
}

func isService(gr schema.GroupResource) bool {
	return gr.Group == "" && strings.TrimSuffix(strings.ToLower(gr.Resource), "s") == "service"
}

func isInferencePool(gr schema.GroupResource) bool {
	for _, pool := range inferencePoolGRs {
		if gr.Group == pool.Group && strings.TrimSuffix(strings.ToLower(gr.Resource), "s") == "inferencepool" {
			return true
		}
	}
	return false
}

// isFrontDoorObject reports whether gr is a kind a front door may stand in
// front of: a Service, or an InferencePool.
func isFrontDoorObject(gr schema.GroupResource) bool { return isService(gr) || isInferencePool(gr) }

// frontDoorByName answers a front-door metric for one Service or
// InferencePool: its pages' value combined over the Running, Ready pods
// that are its front door.
// Every such pod must have a fresh value (a partial sum would understate the
// demand); pods not Ready are left out. No front-door pod, none Ready, or a
// Ready one without a value is a 404, never 0.
func (p *Provider) frontDoorByName(ctx context.Context, name types.NamespacedName, info cmprovider.CustomMetricInfo, metricSelector labels.Selector) (*custom_metrics.MetricValue, error) {
	if !isFrontDoorObject(info.GroupResource) {
		return nil, notFound(info, fmt.Sprintf("%s is served on services (the Service a front door's pods name in their %s annotation) and inferencepools, not on %s", info.Metric, targets.AnnotationFrontDoor, info.GroupResource.String()))
	}
	fd, ok := frontDoorSignals[info.Metric]
	if !ok {
		return nil, notFound(info, fmt.Sprintf("%s serve only %s (a front door's held requests, requests in flight and pool saturation), not %q", info.GroupResource.String(), strings.Join(catalog.FrontDoorMetrics(), ", "), info.Metric))
	}
	match := modelMatcher(metricSelector)
	if fd.perPool && match != nil {
		return nil, notFound(info, fmt.Sprintf("%s is the pool's, not a model's (the endpoint picker publishes it per inference_pool): ask without a metric selector", info.Metric))
	}
	if name.Namespace == "" {
		return nil, badRequest(fmt.Sprintf("%s/%s: ask within a namespace (/apis/custom.metrics.k8s.io/v1beta2/namespaces/NAMESPACE/%s/%s/%s)", info.GroupResource.String(), name.Name, info.GroupResource.String(), name.Name, info.Metric))
	}
	// The annotation's value: the Service's name, or inferencepool/<name>.
	want := name.Name
	what := fmt.Sprintf("service %s/%s", name.Namespace, name.Name)
	if isInferencePool(info.GroupResource) {
		want = targets.FrontDoorPoolPrefix + name.Name
		what = fmt.Sprintf("inferencepool %s/%s", name.Namespace, name.Name)
	}
	doors, err := p.frontDoorPods(name.Namespace, want)
	if err != nil {
		return nil, err
	}
	if len(doors) == 0 {
		return nil, notFound(info, fmt.Sprintf("%s: no Running pod in namespace %q has the annotation %s=%s, so nothing counts the requests held in front of it", what, name.Namespace, targets.AnnotationFrontDoor, want))
	}
	sum, oldest, ready, why := p.sumFrontDoors(doors, fd, match, p.clock.Now())
	switch {
	case ready == 0:
		return nil, notFound(info, fmt.Sprintf("%s: %d front-door pods, none Ready", what, len(doors)))
	case why.n > 0:
		return nil, notFound(info, fmt.Sprintf("%s: %d of %d Ready front-door pods have no value (the answer needs every Ready one; an endpoint picker publishes it as %s): %s", what, why.n, ready, fd.source, why.text(ctx)))
	case math.IsInf(sum, 0) || math.IsNaN(sum):
		return nil, outOfRange(info, what, sum)
	}
	v, err := p.value(ctx, info, fd.sig, frontDoorRef(info.GroupResource, name), sum, oldest, metricSelector)
	if err != nil {
		return nil, err
	}
	v.Metric.Name = info.Metric
	return &v, nil
}

// frontDoorBySelector refuses list questions: a Service's or an
// InferencePool's front door is found by name, and the adapter reads
// neither kind to match labels.
func frontDoorBySelector(namespace string, info cmprovider.CustomMetricInfo) error {
	if !isFrontDoorObject(info.GroupResource) {
		return notFound(info, fmt.Sprintf("%s is served on services and inferencepools, not on %s", info.Metric, info.GroupResource.String()))
	}
	if namespace == "" {
		namespace = "NAMESPACE"
	}
	metric := info.Metric
	if !catalog.IsFrontDoorMetric(metric) {
		metric = catalog.FrontDoorPendingRequests
	}
	return notFound(info, fmt.Sprintf("%s are answered one by name: ask for /apis/custom.metrics.k8s.io/v1beta2/namespaces/%s/%s/NAME/%s (an HPA Object metric with that describedObject does)", info.GroupResource.String(), namespace, info.GroupResource.String(), metric))
}

// frontDoorPods returns the Running pods of namespace whose front-door
// annotation is exactly want (a Service's name, or inferencepool/<name>).
func (p *Provider) frontDoorPods(namespace, want string) ([]*corev1.Pod, error) {
	pods, err := p.list.Pods.Pods(namespace).List(labels.Everything())
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("listing pods from cache: %w", err))
	}
	var out []*corev1.Pod
	for _, pod := range pods {
		if v, ok := targets.FrontDoorFor(pod); ok && v == want && pod.Namespace == namespace && targets.IsRunning(pod) {
			out = append(out, pod)
		}
	}
	slices.SortFunc(out, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// sumFrontDoors combines fd's values of the Ready pods among doors (held
// requests and requests in flight summed, the pool's saturation maxed). It
// returns the result, the oldest scrape in it, the number of Ready pods,
// and why the Ready pods without a fresh value have none. Pods not Ready,
// and pods whose IP a newer pod has taken, are left out.
func (p *Provider) sumFrontDoors(doors []*corev1.Pod, fd frontDoorSignal, match store.ModelMatcher, now time.Time) (sum float64, oldest time.Time, ready int, why reasons) {
	n := 0
	for _, pod := range doors {
		if _, ok := p.shadowed(pod); ok || !targets.IsReady(pod) {
			continue
		}
		ready++
		s := p.values.Get(types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}, fd.sig, match, now, p.cfg.MaxAge)
		if s.Status != store.OK {
			why.add(pod, s)
			continue
		}
		sum = catalog.Combine(fd.agg, sum, n, s.Value)
		n++
		if oldest.IsZero() || s.Time.Before(oldest) {
			oldest = s.Time
		}
	}
	return sum, oldest, ready, why
}

func frontDoorRef(gr schema.GroupResource, name types.NamespacedName) custom_metrics.ObjectReference {
	if isInferencePool(gr) {
		version := "v1"
		if gr.Group == "inference.networking.x-k8s.io" {
			version = "v1alpha2"
		}
		return custom_metrics.ObjectReference{Kind: "InferencePool", APIVersion: gr.Group + "/" + version, Namespace: name.Namespace, Name: name.Name}
	}
	return custom_metrics.ObjectReference{Kind: "Service", APIVersion: "v1", Namespace: name.Namespace, Name: name.Name}
}
