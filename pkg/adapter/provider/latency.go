// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package provider

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
)

// LatencyDemand records, per pod, when a question about a latency
// percentile (inference_*_p50/p90/p99_seconds) last covered it, so that the
// scrapers parse a server's latency histograms, about two thirds of the
// parse on a vLLM page, only for the pods someone asks about: the pods a
// question's answer is computed from (the pod asked by name, the pods of
// the selector, of the Deployment or StatefulSet, of the external metric's
// selector). A question in one namespace, from any reader (a KEDA caller
// included), turns nothing on in another. Safe for concurrent use.
//
// It holds one entry per pod asked about within the TTL; pods that went
// away are forgotten once their entry is older than the TTL.
type LatencyDemand struct {
	ttl   time.Duration
	clock clock.PassiveClock

	mu        sync.RWMutex
	pods      map[types.NamespacedName]int64 // unix nanoseconds of the latest question covering the pod
	lastSweep int64                          // unix nanoseconds of the latest sweep of expired entries
}

// NewLatencyDemand returns a LatencyDemand under which a pod's histograms
// are wanted for ttl after each question that covers it; a ttl of zero or
// less wants them always, for every pod.
func NewLatencyDemand(ttl time.Duration, clk clock.PassiveClock) *LatencyDemand {
	return &LatencyDemand{ttl: ttl, clock: clk, pods: map[types.NamespacedName]int64{}}
}

// refresh is how old a pod's entry may be before a question covering it
// writes it again: an HPA asks every 15 s, and most of its questions then
// only read.
func (d *LatencyDemand) refresh() int64 { return int64(min(d.ttl/16, 30*time.Second)) }

// Ask records a question about sig whose answer covers pods; it counts only
// for a percentile.
func (d *LatencyDemand) Ask(sig catalog.Signal, pods []*corev1.Pod) {
	if d == nil || d.ttl <= 0 || len(pods) == 0 {
		return
	}
	if _, _, ok := sig.Quantile(); !ok {
		return
	}
	now := d.clock.Now().UnixNano()
	if d.fresh(pods, now) {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, p := range pods {
		d.pods[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] = now
	}
	if now-d.lastSweep >= int64(d.ttl) {
		d.lastSweep = now
		for k, at := range d.pods {
			if now-at >= int64(d.ttl) {
				delete(d.pods, k)
			}
		}
	}
}

// fresh reports whether every pod's entry is younger than refresh.
func (d *LatencyDemand) fresh(pods []*corev1.Pod, now int64) bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	for _, p := range pods {
		at, ok := d.pods[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}]
		if !ok || now-at >= d.refresh() {
			return false
		}
	}
	return true
}

// WantedFor reports whether pod's latency histograms should be parsed now:
// a question covering it is younger than the TTL. It takes a read lock and
// the clock, without an allocation, for the scrapers to call before each
// page (scrape.Config.Histograms). A nil LatencyDemand wants them always.
func (d *LatencyDemand) WantedFor(pod types.NamespacedName) bool {
	if d == nil || d.ttl <= 0 {
		return true
	}
	d.mu.RLock()
	at, ok := d.pods[pod]
	d.mu.RUnlock()
	return ok && d.clock.Now().UnixNano()-at < int64(d.ttl)
}
