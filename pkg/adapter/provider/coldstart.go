// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package provider

import (
	"context"
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/metrics/pkg/apis/custom_metrics"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/store"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/targets"
)

// replicaDemand is a workload's demand and replicas at one moment.
type replicaDemand struct {
	demand   float64   // queue + running over the pods with a fresh value
	oldest   time.Time // the oldest contributing scrape
	ready    int       // Running and Ready pods
	starting int       // pods that exist, are not terminating and not yet Ready
	why      reasons   // Ready pods without a fresh value, and why
}

// replicas is the divisor: Ready plus starting.
func (r replicaDemand) replicas() int { return r.ready + r.starting }

// countDemand reads the pods of a workload. A pod counts as a replica
// unless it is terminating or has finished (Succeeded, Failed); it is Ready
// when Running with its Ready condition true (as the HPA counts), starting
// otherwise (Pending, or Running while its model loads): starting pods need
// no scrape. Demand is the signal rule of aggregatePods applied to queue
// plus running: a Ready pod must have both fresh (else it is noted in why),
// a pod not Ready counts when it has both fresh, and a pod whose IP a newer
// pod took is neither demand nor a replica.
func (p *Provider) countDemand(pods []*corev1.Pod, match store.ModelMatcher) replicaDemand {
	now := p.clock.Now()
	var r replicaDemand
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		if _, ok := p.shadowed(pod); ok {
			continue
		}
		ready := pod.Status.Phase == corev1.PodRunning && targets.IsReady(pod)
		if ready {
			r.ready++
		} else {
			r.starting++
		}
		if !targets.IsRunning(pod) {
			continue // no address, nothing to read
		}
		s := p.podDemand(pod, match, now)
		if s.Status != store.OK {
			if ready {
				r.why.add(pod, s)
			}
			continue
		}
		r.demand += s.Value
		if r.oldest.IsZero() || s.Time.Before(r.oldest) {
			r.oldest = s.Time
		}
	}
	return r
}

// podDemand is one pod's queue plus running requests, with the older of the
// two scrape times; the first missing signal makes it missing.
func (p *Provider) podDemand(pod *corev1.Pod, match store.ModelMatcher, now time.Time) store.Sample {
	q := p.podSample(pod, catalog.QueueSize, match, now)
	if q.Status != store.OK {
		return q
	}
	b := p.podSample(pod, catalog.BatchSize, match, now)
	if b.Status != store.OK {
		return b
	}
	s := q
	s.Value += b.Value
	if b.Time.Before(s.Time) {
		s.Time = b.Time
	}
	return s
}

// demandPerReplicaValue answers catalog.DemandPerReplica for one workload object.
// It is absent (404) when a Ready pod has no fresh value (a partial sum
// would understate the demand) and when no pod is Ready: with every replica
// starting, the demand waits in front of the pods, unmeasured, so the value
// is unknown rather than 0. With want false the question creates no demand.
func (p *Provider) demandPerReplicaValue(ctx context.Context, k kind, name types.NamespacedName, sel labels.Selector, match store.ModelMatcher, info cmprovider.CustomMetricInfo, metricSelector labels.Selector, want bool) (*custom_metrics.MetricValue, error) {
	r, _, why, err := p.workloadDemand(ctx, k, name, sel, match, selectorKey(metricSelector), want)
	if err != nil {
		return nil, err
	}
	obj := name.Namespace + "/" + name.Name
	if why != "" {
		return nil, notFound(info, fmt.Sprintf("%s: %s", obj, why))
	}
	v := r.demand / float64(r.replicas())
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return nil, outOfRange(info, obj, v)
	}
	// Built as a gauge (QueueSize: windowSeconds is the scrape interval),
	// then named.
	mv, err := p.value(ctx, info, catalog.QueueSize, ref(k, name), v, r.oldest, metricSelector)
	if err != nil {
		return nil, err
	}
	mv.Metric.Name = catalog.DemandPerReplica
	return &mv, nil
}

// workloadDemand measures a workload's demand and replicas, and records the
// demand in the forecast's history (keyed by the workload and the model
// selector's string, modelKey). why is the reason the demand is unknown,
// empty when it is known: a Ready pod without a fresh value (a partial sum
// would understate the demand), or no pod Ready (with every replica
// starting, the demand waits in front of the pods, unmeasured). With want
// false the question creates no demand.
func (p *Provider) workloadDemand(ctx context.Context, k kind, name types.NamespacedName, sel labels.Selector, match store.ModelMatcher, modelKey string, want bool) (r replicaDemand, pods []*corev1.Pod, why string, err error) {
	pods, err = p.list.Pods.Pods(name.Namespace).List(sel)
	if err != nil {
		return r, nil, "", apierrors.NewInternalError(fmt.Errorf("listing pods from cache: %w", err))
	}
	if want {
		p.want(ctx, name.Namespace, sel, runningPods(pods))
	}
	r = p.countDemand(pods, match)
	if k == kindLeaderWorkerSet {
		// pods are the groups' serving pods, one a group; a group without
		// one is a replica starting (lws.go).
		n, err := p.lwsGroupsWithoutServer(name.Namespace, sel)
		if err != nil {
			return r, nil, "", apierrors.NewInternalError(err)
		}
		r.starting += n
	}
	if r.why.n > 0 {
		return r, pods, fmt.Sprintf("%d of %d ready pods have no queue and running value (the demand needs every ready pod): %s", r.why.n, r.ready, r.why.text(ctx)), nil
	}
	if r.ready == 0 {
		if r.starting == 0 {
			return r, pods, noPodsMessage(name.Namespace, sel, len(pods)), nil
		}
		return r, pods, fmt.Sprintf("no pod is Ready (%d starting), so the demand is unknown: it waits in front of the pods, not on them", r.starting), nil
	}
	p.recordDemand(k, name, modelKey, r, pods, match) // forecast.go
	return r, pods, "", nil
}

// demandPerReplicaKind resolves the object kind of a catalog.DemandPerReplica
// question: deployments and statefulsets only.
func demandPerReplicaKind(info cmprovider.CustomMetricInfo) (kind, error) {
	k, ok := kindOf(info.GroupResource)
	if !ok || k == kindPod {
		return 0, notFound(info, fmt.Sprintf("%s is served for deployments and statefulsets and leaderworkersets (an HPA Object metric), not %s: it divides a workload's demand by its Ready plus starting replicas", catalog.DemandPerReplica, info.GroupResource.String()))
	}
	return k, nil
}

// demandPerReplicaByName answers catalog.DemandPerReplica for one named workload.
func (p *Provider) demandPerReplicaByName(ctx context.Context, name types.NamespacedName, info cmprovider.CustomMetricInfo, metricSelector labels.Selector) (*custom_metrics.MetricValue, error) {
	k, err := demandPerReplicaKind(info)
	if err != nil {
		return nil, err
	}
	match := modelMatcher(metricSelector)
	return p.workloadByName(k, name, info, func(name types.NamespacedName, sel labels.Selector, want bool) (*custom_metrics.MetricValue, error) {
		return p.demandPerReplicaValue(ctx, k, name, sel, match, info, metricSelector, want)
	})
}

// demandPerReplicaBySelector answers catalog.DemandPerReplica for every workload
// matching selector in namespace. Without a selector the question reads only
// what is already scraped, as objectsBySelector does.
func (p *Provider) demandPerReplicaBySelector(ctx context.Context, namespace string, selector labels.Selector, info cmprovider.CustomMetricInfo, metricSelector labels.Selector) (*custom_metrics.MetricValueList, error) {
	k, err := demandPerReplicaKind(info)
	if err != nil {
		return nil, err
	}
	match := modelMatcher(metricSelector)
	return p.workloadsBySelector(k, namespace, selector, info, func(name types.NamespacedName, sel labels.Selector, want bool) (*custom_metrics.MetricValue, error) {
		return p.demandPerReplicaValue(ctx, k, name, sel, match, info, metricSelector, want)
	})
}

// workloadValue answers a workload metric (the demand per replica, its
// forecast) for the workload name whose pods sel selects; with want false
// the question creates no demand.
type workloadValue func(name types.NamespacedName, sel labels.Selector, want bool) (*custom_metrics.MetricValue, error)

// workloadByName answers a workload metric of kind k for one named
// workload: asked within a namespace, on the workload's pod selector, and
// creating demand.
func (p *Provider) workloadByName(k kind, name types.NamespacedName, info cmprovider.CustomMetricInfo, value workloadValue) (*custom_metrics.MetricValue, error) {
	if name.Namespace == "" {
		return nil, badRequest(fmt.Sprintf("%s %q: ask within a namespace", info.GroupResource.String(), name.Name))
	}
	sel, err := p.objectSelector(k, name)
	if err != nil {
		return nil, notFound(info, err.Error())
	}
	return value(name, sel, true)
}

// workloadsBySelector answers a workload metric of kind k for every
// workload matching selector in namespace; without a selector the question
// creates no demand (it reads only what is already scraped).
func (p *Provider) workloadsBySelector(k kind, namespace string, selector labels.Selector, info cmprovider.CustomMetricInfo, value workloadValue) (*custom_metrics.MetricValueList, error) {
	if namespace == "" {
		return nil, badRequest(fmt.Sprintf("%s across all namespaces are not served: ask within a namespace", info.GroupResource.String()))
	}
	if selector == nil {
		selector = labels.Everything()
	}
	return p.eachWorkload(k, namespace, selector, info, func(name types.NamespacedName, sel labels.Selector) (*custom_metrics.MetricValue, error) {
		return value(name, sel, !selector.Empty())
	})
}
