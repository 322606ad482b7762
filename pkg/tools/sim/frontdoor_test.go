// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/parse"
)

// fakeBackend answers /health with 200 once healthy is set (503 before) and
// every other path with "served".
func fakeBackend(t *testing.T, healthy *atomic.Bool) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			if !healthy.Load() {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
			return
		}
		_, _ = io.WriteString(w, "served "+r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// startFrontDoor serves a FrontDoor on 127.0.0.1 until the test ends.
func startFrontDoor(t *testing.T, cfg FrontDoorConfig) (*FrontDoor, string) {
	t.Helper()
	f, err := NewFrontDoor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Serve(ctx, ln, time.Second) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return f, "http://" + ln.Addr().String()
}

// waitPending waits (bounded) until f holds want requests.
func waitPending(t *testing.T, f *FrontDoor, want int64) {
	t.Helper()
	var held int64
	if err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		held = f.Pending()
		return held == want, nil
	}); err != nil {
		t.Fatalf("front door holds %d requests after 10s, want %d", held, want)
	}
}

// parsePending reads the front door's page the way the adapter does.
func parsePending(t *testing.T, base string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	pg, err := parse.NewParser().Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	if pg.Server != parse.GIEEPP || len(pg.Models) != 1 || pg.Models[0].Name != "m" {
		t.Fatalf("the page parses as %v with models %+v, want one gie-epp model m:\n%s", pg.Server, pg.Models, body)
	}
	v, ok := pg.Models[0].Value(catalog.QueueSize)
	if !ok {
		t.Fatalf("no queue on the page:\n%s", body)
	}
	return v
}

// TestFrontDoorHoldsUntilBackendHealthy: requests are held, and counted on
// the EPP-shaped page, while the backend is unhealthy; once it is healthy
// every held request is forwarded and answered, and the count is back to 0.
func TestFrontDoorHoldsUntilBackendHealthy(t *testing.T) {
	var healthy atomic.Bool
	backend := fakeBackend(t, &healthy)
	f, base := startFrontDoor(t, FrontDoorConfig{Backend: backend.URL, Model: "m", Pool: "p", MaxHold: time.Minute, ProbeEvery: 10 * time.Millisecond})

	if got := parsePending(t, base); got != 0 {
		t.Fatalf("idle front door publishes %v held requests", got)
	}
	const n = 3
	bodies := make([]string, n)
	codes := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			resp, err := http.Post(base+"/v1/completions", "application/json", strings.NewReader(`{"model":"m"}`))
			if err != nil {
				t.Errorf("request %d: %v", i, err)
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			codes[i], bodies[i] = resp.StatusCode, string(b)
		})
	}
	waitPending(t, f, n)
	if got := parsePending(t, base); got != n {
		t.Errorf("page says %v held, want %d", got, n)
	}
	healthy.Store(true)
	wg.Wait()
	for i := range n {
		if codes[i] != http.StatusOK || bodies[i] != "served /v1/completions" {
			t.Errorf("request %d: %d %q, want the backend's answer", i, codes[i], bodies[i])
		}
	}
	if got := parsePending(t, base); got != 0 {
		t.Errorf("after dispatch the page says %v held, want 0", got)
	}
}

// TestFrontDoorGivesUp: a request held past MaxHold is answered 503, and one
// whose client leaves is dropped; neither stays counted.
func TestFrontDoorGivesUp(t *testing.T) {
	var healthy atomic.Bool
	backend := fakeBackend(t, &healthy)
	f, base := startFrontDoor(t, FrontDoorConfig{Backend: backend.URL, Model: "m", Pool: "p", MaxHold: 50 * time.Millisecond, ProbeEvery: 10 * time.Millisecond})
	resp, err := http.Post(base+"/v1/completions", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("held past MaxHold: %d, want 503", resp.StatusCode)
	}
	waitPending(t, f, 0)

	f2, base2 := startFrontDoor(t, FrontDoorConfig{Backend: backend.URL, Model: "m", Pool: "p", MaxHold: time.Minute, ProbeEvery: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base2+"/v1/completions", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	waitPending(t, f2, 1)
	cancel()
	if err := <-errc; err == nil {
		t.Errorf("a cancelled held request got an answer")
	}
	waitPending(t, f2, 0)
}

func TestFrontDoorConfigValidate(t *testing.T) {
	good := FrontDoorConfig{Backend: "http://127.0.0.1:9000", MaxHold: time.Second, ProbeEvery: time.Second}
	tests := []struct {
		name    string
		mod     func(*FrontDoorConfig)
		wantErr string
	}{
		{"good", func(*FrontDoorConfig) {}, ""},
		{"no scheme", func(c *FrontDoorConfig) { c.Backend = "127.0.0.1:9000" }, "want an http(s) URL"},
		{"no host", func(c *FrontDoorConfig) { c.Backend = "http://" }, "want an http(s) URL"},
		{"zero hold", func(c *FrontDoorConfig) { c.MaxHold = 0 }, "max hold must be positive"},
		{"zero probe", func(c *FrontDoorConfig) { c.ProbeEvery = 0 }, "probe period must be positive"},
		{"current names", func(c *FrontDoorConfig) { c.Names = NamesCurrent }, ""},
		{"unknown names", func(c *FrontDoorConfig) { c.Names = "newest" }, `metric names "newest": want one of deprecated, current, both`},
		{"negative saturation point", func(c *FrontDoorConfig) { c.SaturationAt = -1 }, "saturation point must not be negative"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := good
			tc.mod(&c)
			err := c.Validate()
			if (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("Validate() = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// TestFrontDoorHoldsAgainWhenTheBackendIsGone: the backend's replicas go
// away between two probes (a Service with no endpoint answers 503); a
// request forwarded in that window is not failed but held again, counted,
// and served once the backend is back.
func TestFrontDoorHoldsAgainWhenTheBackendIsGone(t *testing.T) {
	var gone atomic.Bool
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if gone.Load() {
			http.Error(w, "service proxy: no live endpoints", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "served "+r.URL.Path)
	}))
	t.Cleanup(backend.Close)
	// Probes far apart, so that the request comes between two of them.
	f, base := startFrontDoor(t, FrontDoorConfig{Backend: backend.URL, Model: "m", Pool: "p", MaxHold: time.Minute, ProbeEvery: 2 * time.Second})
	get := func() (int, string) {
		resp, err := http.Get(base + "/v1/models")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(); code != http.StatusOK || body != "served /v1/models" {
		t.Fatalf("healthy backend: %d %q", code, body)
	}
	gone.Store(true)
	type answer struct {
		code int
		body string
	}
	done := make(chan answer, 1)
	go func() { c, b := get(); done <- answer{c, b} }()
	waitPending(t, f, 1)
	gone.Store(false)
	select {
	case a := <-done:
		if a.code != http.StatusOK || a.body != "served /v1/models" {
			t.Errorf("request sent while the backend was gone: %d %q, want it held and then served", a.code, a.body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the held request was not served within 10s of the backend's return")
	}
	waitPending(t, f, 0)
}
