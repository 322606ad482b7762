// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package provider

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/metrics/pkg/apis/external_metrics"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/answercache"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/targets"
)

// External serves external.metrics.k8s.io: a signal aggregated over the
// pods that the metric selector picks in the namespace. It lets one workload
// scale on another's queue, and an HPA scale a workload to and from zero.
type External struct{ p *Provider }

var _ cmprovider.ExternalMetricsProvider = External{}

// External returns the external metrics provider over the same caches and store.
func (p *Provider) External() External { return External{p: p} }

// modelKeys are the selector keys that pick models rather than pods.
var modelKeys = map[string]bool{"model_name": true, "model": true}

// splitSelector separates the model requirements of an external metric's
// selector from the pod requirements.
func splitSelector(sel labels.Selector) (pods, models labels.Selector) {
	pods, models = labels.NewSelector(), labels.NewSelector()
	if sel == nil {
		return pods, models
	}
	reqs, _ := sel.Requirements()
	for _, r := range reqs {
		if modelKeys[r.Key()] {
			// Normalise Triton's "model" onto the key the matcher sets for both.
			nr, err := labels.NewRequirement("model_name", r.Operator(), r.Values().List())
			if err == nil {
				models = models.Add(*nr)
			}
			continue
		}
		pods = pods.Add(r)
	}
	return pods, models
}

// ListAllExternalMetrics lists the serving and GPU signals.
func (e External) ListAllExternalMetrics() []cmprovider.ExternalMetricInfo {
	var out []cmprovider.ExternalMetricInfo
	for _, s := range catalog.All() {
		out = append(out, cmprovider.ExternalMetricInfo{Metric: s.Name()})
	}
	return out
}

// GetExternalMetric aggregates the signal over the pods the selector picks
// (queue and batch summed, fractions maxed, GPU utilization averaged), by
// the rule of object metrics: every Ready pod must have a fresh value (the
// answer is a 404 naming the pods that lack one), and a pod that is not
// Ready counts when it has one. The selector must pick pods: an
// empty pod selector is refused rather than summing a whole namespace.
func (e External) GetExternalMetric(ctx context.Context, namespace string, metricSelector labels.Selector, info cmprovider.ExternalMetricInfo) (*external_metrics.ExternalMetricValueList, error) {
	p := e.p
	gr := schema.GroupResource{Group: "external.metrics.k8s.io", Resource: info.Metric}
	cinfo := cmprovider.CustomMetricInfo{GroupResource: gr, Metric: info.Metric, Namespaced: true}
	sig, ok := catalog.ByName(info.Metric)
	if !ok {
		return nil, notFound(cinfo, fmt.Sprintf("unknown metric %q; served metrics: %s", info.Metric, servedNames()))
	}
	if err := checkSelectors(info.Metric, nil, metricSelector); err != nil {
		return nil, err
	}
	p, err := p.forRole(cinfo, metricSelector) // role.go: role=VALUE reads that role's pods only
	if err != nil {
		return nil, err
	}
	podSel, modelSel := splitSelector(metricSelector)
	podSel = withoutKey(podSel, catalog.RoleSelectorLabel) // a role, not a pod label
	if targets.SelectsWholeNamespace(podSel) {
		return nil, badRequest(fmt.Sprintf("external metric %s needs a metric selector that picks pods by a label they have (e.g. app=llm); model_name alone, or negations only (!x, x!=y, x notin (...)), would sum a whole namespace", info.Metric))
	}
	pods, err := p.list.Pods.Pods(namespace).List(podSel)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("listing pods from cache: %w", err))
	}
	running := runningPods(pods)
	p.cfg.Latency.Ask(sig, running) // before the first scrape: it parses their histograms then
	p.want(ctx, namespace, podSel, running)
	agg := p.aggregatePods(running, sig, modelMatcher(modelSel))
	if agg.why.n > 0 {
		return nil, notFound(cinfo, fmt.Sprintf("%d of %d ready pods matching %q have no value (the sum needs every ready pod): %s", agg.why.n, agg.ready, podSel.String(), agg.why.text(ctx)))
	}
	if agg.counted == 0 {
		return nil, notFound(cinfo, noPodsMessage(namespace, podSel, len(pods))+" (external metrics cover Ready pods, and pods not Ready that have a value)")
	}
	q, ok := quantity(agg.value)
	if !ok {
		return nil, outOfRange(cinfo, fmt.Sprintf("pods matching %q", podSel.String()), agg.value)
	}
	answercache.Seen(ctx, agg.oldest)
	window := p.windowOf(sig)
	return &external_metrics.ExternalMetricValueList{Items: []external_metrics.ExternalMetricValue{{
		MetricName:    info.Metric,
		MetricLabels:  selectorLabels(metricSelector),
		Timestamp:     metav1.NewTime(agg.oldest),
		WindowSeconds: &window,
		Value:         q,
	}}}, nil
}

// selectorLabels echoes the equality requirements of the selector as the
// value's labels.
func selectorLabels(sel labels.Selector) map[string]string {
	out := map[string]string{}
	if sel == nil {
		return out
	}
	reqs, _ := sel.Requirements()
	for _, r := range reqs {
		if (r.Operator() == selection.Equals || r.Operator() == selection.DoubleEquals || r.Operator() == selection.In) && r.Values().Len() == 1 {
			out[r.Key()] = r.Values().List()[0]
		}
	}
	return out
}
