// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/test/e2e/framework"
)

// Pods that are never churned: stable pods (never broken: the health
// question) and victims (whose pages are broken on a schedule).
const (
	stablePods = 3
	victimPods = 2
	// Churned pods use pool 0 from this index on; fixed pods below it.
	churnFirstIP = 10
	churnMin     = 6
	churnMax     = 14
	churnEvery   = 1500 * time.Millisecond
	// reuseDelay is the least time between a pod's deletion and its
	// address serving another pod: the kubelet's teardown in a cluster.
	reuseDelay = 3 * time.Second
)

// churnCounts is what the churn did.
type churnCounts struct {
	created, deleted, replaced, failed int
}

// startPod creates pod name with role at ip, serves its page with a value
// derived from its UID and reports it Running at ip. The address stays the
// pod's until it is deleted, even when the report fails (it may have
// reached the API server).
func (e *env) startPod(ctx context.Context, reg *registry, name, role string, ip netip.Addr) (types.UID, error) {
	pod := &corev1.Pod{ObjectMeta: podMeta(name, role), Spec: podSpec()}
	pod, err := e.client.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("create pod %s: %w", name, err)
	}
	if err := e.servePod(reg, pod, ip); err != nil {
		return pod.UID, err
	}
	if _, err := framework.ReportRunning(ctx, e.client, pod, ip.String()); err != nil {
		return pod.UID, err
	}
	return pod.UID, nil
}

// servePod serves pod's page at ip with its own value.
func (e *env) servePod(reg *registry, pod *corev1.Pod, ip netip.Addr) error {
	v := valueFor(string(pod.UID))
	reg.add(pod.Name, ip, v)
	return e.pods.assign(ip, pod.Name, v)
}

// createFixed creates the stable and victim pods.
func (e *env) createFixed(ctx context.Context, reg *registry) (victims []string, err error) {
	for i := range stablePods + victimPods {
		role, name := "stable", fmt.Sprintf("stable-%d", i)
		if i >= stablePods {
			role, name = "victim", fmt.Sprintf("victim-%d", i-stablePods)
			victims = append(victims, name)
		} else {
			reg.stable = append(reg.stable, name)
		}
		if _, err := e.startPod(ctx, reg, name, role, poolIP(0, i)); err != nil {
			return nil, err
		}
	}
	return victims, nil
}

// churnPod is a churned pod the soak created.
type churnPod struct {
	name string
	ip   netip.Addr
}

// churn creates, deletes and replaces pods until ctx ends: every churnEvery
// one action, keeping churnMin..churnMax pods. A replacement is a new pod
// (new name, new UID, another value) on the address the deleted pod held.
func (e *env) churn(ctx context.Context, reg *registry, rng *rand.Rand) churnCounts {
	var c churnCounts
	var live []churnPod
	freedAt := map[netip.Addr]time.Time{} // free addresses and when they were freed
	for i := churnFirstIP; i < poolSize; i++ {
		freedAt[poolIP(0, i)] = time.Time{}
	}
	next := 0
	newName := func() string { next++; return fmt.Sprintf("churn-%05d", next) }
	// takeIP returns the most recently freed address that may be reused now.
	takeIP := func(now time.Time) (netip.Addr, bool) {
		var best netip.Addr
		var bestAt time.Time
		found := false
		for ip, at := range freedAt {
			if !at.IsZero() && (now.Sub(at) < reuseDelay || !reg.reuseAllowed(now)) {
				continue
			}
			if !found || at.After(bestAt) {
				best, bestAt, found = ip, at, true
			}
		}
		if found {
			delete(freedAt, best)
		}
		return best, found
	}
	create := func(ip netip.Addr) bool {
		name := newName()
		if _, err := e.startPod(ctx, reg, name, "churn", ip); err != nil {
			klog.V(1).InfoS("soak: churn create", "pod", name, "err", err)
			c.failed++
			if !isAssigned(e.pods, ip) {
				freedAt[ip] = time.Now() // never served: free again
				return false
			}
		}
		live = append(live, churnPod{name: name, ip: ip})
		return true
	}
	remove := func(i int) bool {
		p := live[i]
		err := e.client.CoreV1().Pods(namespace).Delete(ctx, p.name, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))})
		if err != nil && !apierrors.IsNotFound(err) {
			klog.V(1).InfoS("soak: churn delete", "pod", p.name, "err", err)
			c.failed++
			return false
		}
		e.pods.release(p.ip)
		freedAt[p.ip] = time.Now()
		live = append(live[:i], live[i+1:]...)
		return true
	}
	t := time.NewTicker(churnEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return c
		case <-t.C:
		}
		now := time.Now()
		switch action := rng.IntN(3); {
		case len(live) < churnMin || action == 0 && len(live) < churnMax:
			if ip, ok := takeIP(now); ok && create(ip) {
				c.created++
			}
		case len(live) > churnMax || action == 1:
			if remove(rng.IntN(len(live))) {
				c.deleted++
			}
		case !reg.reuseAllowed(now): // no reuse for now: a plain create
			if ip, ok := takeIP(now); ok && len(live) < churnMax && create(ip) {
				c.created++
			}
		default: // replace: a new pod on the address the old one held
			i := rng.IntN(len(live))
			ip := live[i].ip
			if !remove(i) {
				continue
			}
			if !sleep(ctx, reuseDelay) || !reg.reuseAllowed(time.Now()) {
				continue // freed; a later create may take it
			}
			delete(freedAt, ip)
			if create(ip) {
				c.replaced++
			}
		}
	}
}

func isAssigned(s *podServer, ip netip.Addr) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sl := s.slots[ip]
	return sl != nil && sl.pod != ""
}

// kubelet plays the kubelet for the HPA Deployment's pods until ctx ends:
// every second it gives each new pod an address from pool 1, serves its
// page with the HPA's target value and reports it Running; it frees the
// addresses of pods that are gone. hpaPods gets the Running pods' names.
func (e *env) kubelet(ctx context.Context, reg *registry, hpaPods func([]string)) {
	held := map[types.UID]netip.Addr{}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		list, err := e.client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "role=" + hpaName})
		if err != nil {
			continue // the API server is down: nothing changes meanwhile
		}
		seen := map[types.UID]bool{}
		var running []string
		for i := range list.Items {
			pod := &list.Items[i]
			seen[pod.UID] = true
			if pod.Status.PodIP != "" {
				running = append(running, pod.Name)
				continue
			}
			if pod.DeletionTimestamp != nil {
				continue
			}
			ip, ok := held[pod.UID]
			if !ok {
				if ip, ok = freeIP(held); !ok {
					continue
				}
				reg.add(pod.Name, ip, hpaPodValue)
				if err := e.pods.assign(ip, pod.Name, hpaPodValue); err != nil {
					klog.ErrorS(err, "soak: kubelet")
					continue
				}
				held[pod.UID] = ip
			}
			if _, err := framework.ReportRunning(ctx, e.client, pod, ip.String()); err == nil {
				running = append(running, pod.Name)
			}
		}
		for uid, ip := range held {
			if !seen[uid] {
				e.pods.release(ip)
				delete(held, uid)
			}
		}
		hpaPods(running)
	}
}

// freeIP is the lowest pool-1 address not in held.
func freeIP(held map[types.UID]netip.Addr) (netip.Addr, bool) {
	used := map[netip.Addr]bool{}
	for _, ip := range held {
		used[ip] = true
	}
	for i := range poolSize {
		if ip := poolIP(1, i); !used[ip] {
			return ip, true
		}
	}
	return netip.Addr{}, false
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
