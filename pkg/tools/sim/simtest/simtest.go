// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Package simtest runs an in-process inference-sim on 127.0.0.1 for tests of
// the packages that drive it (the simulator's own, the load generator's, the
// capacity probe's).
package simtest

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/sim"
)

// Start serves a simulator with cfg on a free 127.0.0.1 port and returns its
// base URL. It is stopped, and must stop within 10 s, when the test ends.
func Start(t testing.TB, cfg sim.Config) string {
	t.Helper()
	srv, err := sim.NewServer(cfg, sim.NewScaledClock(cfg.TimeScale))
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln, 5*time.Second) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("simulator did not stop")
		}
	})
	return "http://" + ln.Addr().String()
}
