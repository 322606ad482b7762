// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package provider

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/metrics/pkg/apis/custom_metrics"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/store"
)

// Adapters looks up whether LoRA adapters are running or waiting on a pod
// (store.Store implements it). A Values without it serves no per-adapter
// metric.
type Adapters interface {
	Adapter(pod types.NamespacedName, list store.AdapterList, match store.AdapterMatcher, now time.Time, maxAge time.Duration) store.Sample
}

func isLoRAAdapterMetric(name string) bool {
	return slices.Contains(catalog.LoRAAdapterMetrics(), name)
}

// loraQuestion is what a per-adapter question reads from each pod.
type loraQuestion struct {
	list  store.AdapterList
	match store.AdapterMatcher
}

// loraQuestionOf checks a per-adapter question: its metric selector must
// pick adapters by catalog.LoRANameLabel and by nothing else (a selector
// on another key could never match an adapter, and the answer would be a
// misleading 0).
func loraQuestionOf(info cmprovider.CustomMetricInfo, metricSelector labels.Selector) (loraQuestion, error) {
	q := loraQuestion{list: store.AdaptersRunning}
	if info.Metric == catalog.LoRAAdapterWaiting {
		q.list = store.AdaptersWaiting
	}
	example := fmt.Sprintf("metric selector %s: my-adapter (metricLabelSelector=%s%%3Dmy-adapter)", catalog.LoRANameLabel, catalog.LoRANameLabel)
	if metricSelector == nil || metricSelector.Empty() {
		return q, badRequest(fmt.Sprintf("%s needs a metric selector that picks LoRA adapters by %s, e.g. the %s", info.Metric, catalog.LoRANameLabel, example))
	}
	reqs, _ := metricSelector.Requirements()
	for _, r := range reqs {
		if r.Key() != catalog.LoRANameLabel {
			return q, badRequest(fmt.Sprintf("%s picks LoRA adapters by %s only, not %q (vLLM's lora_requests_info line has no other label to match: one vLLM serves one base model), e.g. the %s", info.Metric, catalog.LoRANameLabel, r.Key(), example))
		}
	}
	q.match = func(name string) bool {
		return metricSelector.Matches(labels.Set{catalog.LoRANameLabel: name})
	}
	return q, nil
}

// loraRead returns q's per-pod reader: whether a picked adapter is in q's list
// on the pod's latest page (1 or 0), or why that is unknown.
func (p *Provider) loraRead(q loraQuestion) podReader {
	return func(pod *corev1.Pod, now time.Time) store.Sample {
		as, ok := p.values.(Adapters)
		if !ok {
			return store.Sample{Status: store.Absent, Detail: "per-adapter LoRA metrics are not served by this store"}
		}
		return as.Adapter(types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}, q.list, q.match, now, p.cfg.MaxAge)
	}
}

// loraAdapterByName answers a per-adapter metric for one pod (0 or 1), or
// for one workload: the number of its pods (by the readiness rule) where a
// picked adapter is running or waiting.
func (p *Provider) loraAdapterByName(ctx context.Context, name types.NamespacedName, info cmprovider.CustomMetricInfo, metricSelector labels.Selector) (*custom_metrics.MetricValue, error) {
	k, ok := kindOf(info.GroupResource)
	if !ok {
		return nil, notFound(info, fmt.Sprintf("%s is served for pods, deployments, statefulsets and leaderworkersets, not %s", info.Metric, info.GroupResource.String()))
	}
	if name.Namespace == "" {
		return nil, badRequest(fmt.Sprintf("%s %q: ask within a namespace", info.GroupResource.String(), name.Name))
	}
	q, err := loraQuestionOf(info, metricSelector)
	if err != nil {
		return nil, err
	}
	var v *custom_metrics.MetricValue
	if k == kindPod {
		v, err = p.podByName(ctx, name, info, metricSelector, catalog.QueueSize, p.loraRead(q))
	} else {
		sel, serr := p.objectSelector(k, name)
		if serr != nil {
			return nil, notFound(info, serr.Error())
		}
		v, err = p.objectValue(ctx, k, name, sel, catalog.QueueSize, p.loraOver(q), info, metricSelector, true)
	}
	if err != nil {
		return nil, err
	}
	v.Metric.Name = info.Metric
	return v, nil
}

// loraAdapterBySelector answers a per-adapter metric for the pods or
// workloads matching selector in namespace.
func (p *Provider) loraAdapterBySelector(ctx context.Context, namespace string, selector labels.Selector, info cmprovider.CustomMetricInfo, metricSelector labels.Selector) (*custom_metrics.MetricValueList, error) {
	k, ok := kindOf(info.GroupResource)
	if !ok {
		return nil, notFound(info, fmt.Sprintf("%s is served for pods, deployments, statefulsets and leaderworkersets, not %s", info.Metric, info.GroupResource.String()))
	}
	q, err := loraQuestionOf(info, metricSelector)
	if err != nil {
		return nil, err
	}
	if selector == nil {
		selector = labels.Everything()
	}
	var list *custom_metrics.MetricValueList
	if k == kindPod {
		list, err = p.podsBySelector(ctx, namespace, selector, info, metricSelector, catalog.QueueSize, p.loraRead(q))
	} else {
		if namespace == "" {
			return nil, badRequest(fmt.Sprintf("%s across all namespaces are not served: ask within a namespace", info.GroupResource.String()))
		}
		list, err = p.objectsBySelector(ctx, k, namespace, selector, catalog.QueueSize, p.loraOver(q), info, metricSelector)
	}
	if err != nil {
		return nil, err
	}
	for i := range list.Items {
		list.Items[i].Metric.Name = info.Metric
	}
	return list, nil
}

// loraOver counts the pods of a set where q holds, by the readiness rule.
func (p *Provider) loraOver(q loraQuestion) func(running []*corev1.Pod) aggregate {
	return func(running []*corev1.Pod) aggregate { return p.aggregateReads(running, catalog.Sum, p.loraRead(q)) }
}
