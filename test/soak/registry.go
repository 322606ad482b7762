// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"net/netip"
	"sync"
	"time"
)

// interval is a span of time; a zero end means still open.
type interval struct{ from, to time.Time }

func (iv interval) contains(t time.Time) bool {
	return !t.Before(iv.from) && (iv.to.IsZero() || t.Before(iv.to))
}

// registry is what the soak knows about its pods: the value each pod
// serves (its identity), who held each address before, and when each pod's
// page was broken on purpose. The checker judges answers against it.
type registry struct {
	mu       sync.Mutex
	values   map[string]int64        // pod name -> the value its page serves
	ipOf     map[string]netip.Addr   // pod name -> its address
	previous map[netip.Addr][]string // address -> the pods that held it, oldest first
	broken   map[string][]interval   // pod name -> when its page was unusable
	// noReuseUntil: no address is handed to a new pod before this time.
	// Set while the API server or etcd is down and for a while after, so
	// that the adapters' watches (which reconnect with backoff) have seen a
	// pod's deletion before its address serves another pod's page: in a
	// cluster, an address is reused only after the kubelet, which needs the
	// API server, has torn the old pod down.
	noReuseUntil time.Time
	stable       []string // pods never churned nor broken: the health question
}

func newRegistry() *registry {
	return &registry{values: map[string]int64{}, ipOf: map[string]netip.Addr{},
		previous: map[netip.Addr][]string{}, broken: map[string][]interval{}}
}

// add records that pod serves value at ip from now on.
func (r *registry) add(pod string, ip netip.Addr, value int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.values[pod] = value
	r.ipOf[pod] = ip
	r.previous[ip] = append(r.previous[ip], pod)
}

// value is pod's own value.
func (r *registry) value(pod string) (int64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.values[pod]
	return v, ok
}

// ip is pod's address.
func (r *registry) ip(pod string) (netip.Addr, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ip, ok := r.ipOf[pod]
	return ip, ok
}

// ownerOf names the pod, other than pod, that held or holds pod's address
// and serves value, if any: the pod whose value pod was given; earlier says
// whether it held the address before pod.
func (r *registry) ownerOf(pod string, value int64) (owner string, earlier bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ip := r.ipOf[pod]
	before := true
	for _, other := range r.previous[ip] {
		if other == pod {
			before = false
			continue
		}
		if r.values[other] == value {
			return other, before
		}
	}
	return "", false
}

// reusesOf is how many pods held ip before the last one.
func (r *registry) reuses() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, pods := range r.previous {
		n += max(0, len(pods)-1)
	}
	return n
}

// breakPage and mendPage record when pod's page is unusable.
func (r *registry) breakPage(pod string, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.broken[pod] = append(r.broken[pod], interval{from: at})
}

func (r *registry) mendPage(pod string, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ivs := r.broken[pod]; len(ivs) > 0 && ivs[len(ivs)-1].to.IsZero() {
		ivs[len(ivs)-1].to = at
	}
}

// brokenThrough returns when pod's page broke, if it was broken from start
// until end without being mended in between.
func (r *registry) brokenThrough(pod string, start, end time.Time) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, iv := range r.broken[pod] {
		if iv.contains(start) && iv.contains(end) {
			return iv.from, true
		}
	}
	return time.Time{}, false
}

// pauseReuse forbids address reuse until t.
func (r *registry) pauseReuse(t time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.noReuseUntil = t
}

func (r *registry) reuseAllowed(now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !now.Before(r.noReuseUntil)
}
