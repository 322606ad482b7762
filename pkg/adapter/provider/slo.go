// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package provider

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/store"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/targets"
)

// Windows looks up a pod's latency window, for the percentiles of a set of
// pods (store.Store implements it). A Values without it serves percentiles
// per pod only.
type Windows interface {
	Window(pod types.NamespacedName, sig catalog.Signal, match store.ModelMatcher, now time.Time, maxAge time.Duration) (store.Window, store.Sample)
}

// aggregateWindows is aggregatePods for a percentile signal: the pods'
// bucket deltas over the window are merged first and the percentile is
// taken of the merged histogram, so that a workload's p90 is the p90 of all
// its requests, not a combination of its pods' p90s. The readiness rule is
// aggregatePods'. An idle pod (no request in the window) counts, with
// nothing to add; when no counted pod had a request, every counted pod is
// noted in why, so that the answer is a 404 that says so, never a 0.
func (p *Provider) aggregateWindows(running []*corev1.Pod, sig catalog.Signal, match store.ModelMatcher) aggregate {
	var a aggregate
	ws, ok := p.values.(Windows)
	if !ok {
		for _, pod := range running {
			a.why.addText(pod, store.Absent, "percentiles over a set of pods are not served by this store")
		}
		return a
	}
	_, q, _ := sig.Quantile()
	now := p.clock.Now()
	var merged store.Window
	var counted []*corev1.Pod
	for _, pod := range running {
		if _, ok := p.shadowed(pod); ok {
			continue
		}
		ready := targets.IsReady(pod)
		if ready {
			a.ready++
		}
		w, s := ws.Window(types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}, sig, match, now, p.cfg.MaxAge)
		if s.Status != store.OK {
			if ready {
				a.why.add(pod, s)
			}
			continue
		}
		if err := merged.Merge(w); err != nil {
			a.why.addText(pod, store.Absent, fmt.Sprintf("its %s histogram cannot join the other pods': %v", sig.Name(), err))
			continue
		}
		counted = append(counted, pod)
		if a.oldest.IsZero() || s.Time.Before(a.oldest) {
			a.oldest = s.Time
		}
	}
	a.counted = len(counted)
	if a.counted == 0 || a.why.n > 0 {
		return a
	}
	v, ok := merged.Quantile(q)
	if !ok {
		for _, pod := range counted {
			a.why.addText(pod, store.Absent, store.NoObservation(sig, merged.Span))
		}
		return a
	}
	a.value = v
	return a
}
