// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// pending is a profile being fetched; wait returns its error.
type pending struct{ done chan error }

func (p pending) wait() error {
	if p.done == nil {
		return nil
	}
	return <-p.done
}

// profile fetches the adapter's CPU profile over d into o.profileDir/name,
// in the background, from the adapter's own port (/debug/pprof, authorized
// for the admin's certificate). Without --profile it does nothing.
func (e *env) profile(ctx context.Context, o options, name string, d time.Duration) pending {
	if o.profileDir == "" {
		return pending{}
	}
	done := make(chan error, 1)
	secs := int(math.Ceil(d.Seconds()))
	go func() {
		done <- e.fetchProfile(ctx, o, name, fmt.Sprintf("/debug/pprof/profile?seconds=%d", secs), d+30*time.Second)
	}()
	return pending{done: done}
}

// heapProfile fetches the adapter's heap profile into o.profileDir.
func (e *env) heapProfile(ctx context.Context, o options) error {
	if o.profileDir == "" {
		return nil
	}
	return e.fetchProfile(ctx, o, "heap.pprof", "/debug/pprof/heap", 30*time.Second)
}

func (e *env) fetchProfile(ctx context.Context, o options, name, path string, timeout time.Duration) error {
	base, err := e.adapter.HTTPClient(e.cp.Admin)
	if err != nil {
		return fmt.Errorf("profile client: %w", err)
	}
	c := *base
	c.Timeout = 0 // a CPU profile takes its seconds; ctx bounds it
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.adapter.URL()+path, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("fetch %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return fmt.Errorf("fetch %s: %s: %s", path, resp.Status, body)
	}
	if err := os.MkdirAll(o.profileDir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", o.profileDir, err)
	}
	f, err := os.Create(filepath.Join(o.profileDir, name))
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, io.LimitReader(resp.Body, 256<<20)); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", name, err)
	}
	return f.Close()
}
