// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Reachability of the Kubernetes API server. The informers keep serving
// their last state when the API server goes away, so without this check the
// adapter stays ready while its view of the pods silently ages.
const (
	apiProbeInterval  = 10 * time.Second
	apiProbeTimeout   = 5 * time.Second
	apiMaxUnreachable = 60 * time.Second
)

// apiReachability probes the Kubernetes API server every interval and
// reports, as a readyz check, whether it answered within maxUnreachable.
type apiReachability struct {
	probe          func(context.Context) error
	clock          clock.WithTicker
	interval       time.Duration
	timeout        time.Duration
	maxUnreachable time.Duration

	mu      sync.Mutex
	lastOK  time.Time // last answer, or the start before the first
	lastErr error     // of the last probe
}

func newAPIReachability(probe func(context.Context) error, clk clock.WithTicker) *apiReachability {
	return &apiReachability{
		probe:          probe,
		clock:          clk,
		interval:       apiProbeInterval,
		timeout:        apiProbeTimeout,
		maxUnreachable: apiMaxUnreachable,
		lastOK:         clk.Now(),
	}
}

// versionProbe asks the API server for /version, which every client may read.
func versionProbe(c rest.Interface) func(context.Context) error {
	return func(ctx context.Context) error {
		return c.Get().AbsPath("/version").Do(ctx).Error()
	}
}

// Run probes at once and then every interval until ctx is done.
func (r *apiReachability) Run(ctx context.Context) {
	t := r.clock.NewTicker(r.interval)
	defer t.Stop()
	for {
		r.probeOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// probeOnce runs one probe, bounded by the timeout, and records its outcome.
func (r *apiReachability) probeOnce(ctx context.Context) {
	pctx, cancel := context.WithTimeout(ctx, r.timeout)
	err := r.probe(pctx)
	cancel()
	if ctx.Err() != nil {
		return // stopping: the outcome says nothing about the API server
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case err == nil && r.lastErr != nil:
		klog.InfoS("Kubernetes API server reachable again", "unreachableFor", r.clock.Since(r.lastOK).Round(time.Second))
	case err != nil && r.lastErr == nil:
		klog.ErrorS(err, "Kubernetes API server unreachable; readyz fails if it stays so", "after", r.maxUnreachable)
	}
	r.lastErr = err
	if err == nil {
		r.lastOK = r.clock.Now()
	}
}

// Check fails when the API server has not answered for over maxUnreachable.
func (r *apiReachability) Check(*http.Request) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if age := r.clock.Since(r.lastOK); age > r.maxUnreachable {
		return fmt.Errorf("the Kubernetes API server has not answered for %s (limit %s); last error: %v", age.Round(time.Second), r.maxUnreachable, r.lastErr) //nolint:errorlint // lastErr is nil when no probe has ended yet
	}
	return nil
}
