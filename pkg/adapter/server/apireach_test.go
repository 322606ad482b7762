// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
)

// The readyz check fails once the Kubernetes API server has not answered for
// over 60s, and passes again at its first answer.
// Was wrong: readyz stayed green while the informers served an ever older view of the pods.
func TestReadyzFailsWhenAPIServerUnreachable(t *testing.T) {
	down := errors.New("connection refused")
	steps := []struct {
		name     string
		advance  time.Duration // before the probe
		probeErr error
		wantFail bool
	}{
		{"first probe answers", 0, nil, false},
		{"answers again", 10 * time.Second, nil, false},
		{"first failure", 10 * time.Second, down, false},
		{"failing for 30s", 20 * time.Second, down, false},
		{"failing for 60s: still within the bound", 30 * time.Second, down, false},
		{"failing for 70s", 10 * time.Second, down, true},
		{"failing for 5m", 230 * time.Second, down, true},
		{"answers: ready at once", 10 * time.Second, nil, false},
		{"fails again briefly", 10 * time.Second, down, false},
	}
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	var probeErr error
	r := newAPIReachability(func(context.Context) error { return probeErr }, clk)
	for _, s := range steps {
		clk.Step(s.advance)
		probeErr = s.probeErr
		r.probeOnce(context.Background())
		err := r.Check(nil)
		if (err != nil) != s.wantFail {
			t.Fatalf("%s: Check() = %v, want failure %v", s.name, err, s.wantFail)
		}
		if err != nil && !strings.Contains(err.Error(), "connection refused") {
			t.Errorf("%s: error %q does not say why", s.name, err)
		}
	}
}

// Before the first probe's answer the check passes for the bound, then
// fails: a probe that never gets an answer is unreachability too.
func TestReachabilityWithoutAnswerFailsAfterBound(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	r := newAPIReachability(func(context.Context) error { return nil }, clk)
	if err := r.Check(nil); err != nil {
		t.Fatalf("at start: %v", err)
	}
	clk.Step(61 * time.Second)
	if err := r.Check(nil); err == nil {
		t.Fatal("no answer for 61s and still ready")
	}
}

// versionProbe against a real HTTP server on 127.0.0.1: an answer, an
// error status, and a server that hangs past the probe's timeout.
func TestVersionProbe(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Header.Get("X-Test") {
		case "down":
			http.Error(w, "etcd unavailable", http.StatusServiceUnavailable)
		case "hang":
			select {
			case <-r.Context().Done():
			case <-release:
			}
		default:
			if r.URL.Path != "/version" {
				http.NotFound(w, r)
				return
			}
			_, _ = w.Write([]byte(`{"major":"1","minor":"37","gitVersion":"v1.37.2"}`))
		}
	}))
	defer srv.Close()
	defer close(release)

	tests := []struct {
		mode    string
		wantErr bool
	}{
		{"", false},
		{"down", true},
		{"hang", true},
	}
	for _, tt := range tests {
		t.Run("mode="+tt.mode, func(t *testing.T) {
			cfg := &rest.Config{Host: srv.URL, WrapTransport: func(rt http.RoundTripper) http.RoundTripper {
				return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
					req.Header.Set("X-Test", tt.mode)
					return rt.RoundTrip(req)
				})
			}}
			client, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			r := newAPIReachability(versionProbe(client.Discovery().RESTClient()), clocktesting.NewFakeClock(time.Now()))
			r.timeout = 200 * time.Millisecond
			r.probeOnce(context.Background())
			if (r.lastErr != nil) != tt.wantErr {
				t.Errorf("probe error %v, want error %v", r.lastErr, tt.wantErr)
			}
		})
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Run probes until its context ends, and then returns.
func TestReachabilityRunStops(t *testing.T) {
	probed := make(chan struct{}, 1)
	r := newAPIReachability(func(context.Context) error {
		select {
		case probed <- struct{}{}:
		default:
		}
		return nil
	}, clocktesting.NewFakeClock(time.Now()))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	<-probed
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10s of cancel")
	}
}
