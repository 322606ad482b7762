// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"
)

// FrontDoorConfig configures a FrontDoor.
type FrontDoorConfig struct {
	// Backend is the base URL requests are sent to once it is healthy,
	// e.g. a Service's address: http://10.0.0.7:8000.
	Backend string
	// Model and Pool are the model_name/target_model_name and
	// inference_pool labels of the published gauge.
	Model, Pool string
	// MaxHold bounds how long one request is held; past it the request is
	// answered 503.
	MaxHold time.Duration
	// ProbeEvery is the period of the backend's /health probe.
	ProbeEvery time.Duration
}

// Validate reports what is wrong with c.
func (c FrontDoorConfig) Validate() error {
	var errs []error
	u, err := url.Parse(c.Backend)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("front-door backend %q: want an http(s) URL with a host", c.Backend))
	}
	if c.MaxHold <= 0 {
		errs = append(errs, fmt.Errorf("front-door max hold must be positive, got %s", c.MaxHold))
	}
	if c.ProbeEvery <= 0 {
		errs = append(errs, fmt.Errorf("front-door probe period must be positive, got %s", c.ProbeEvery))
	}
	return errors.Join(errs...)
}

// FrontDoor plays a router in front of a model Service, the way the Gateway
// API Inference Extension's endpoint picker does with flow control on: it
// holds every request while the backend has no healthy endpoint (as at zero
// replicas), and dispatches the held requests once the backend's /health
// answers 200. It publishes the requests it holds, not yet dispatched, on
// /metrics as the EPP does: inference_extension_flow_control_queue_size.
type FrontDoor struct {
	cfg     FrontDoorConfig
	backend *url.URL
	proxy   *httputil.ReverseProxy
	probe   *http.Client
	pending atomic.Int64
	// bodyTimeout bounds the wall-clock time of reading a request body.
	bodyTimeout time.Duration

	mu    sync.Mutex
	ready bool
	wake  chan struct{} // closed when the backend turns healthy
}

// NewFrontDoor returns a FrontDoor for cfg.
func NewFrontDoor(cfg FrontDoorConfig) (*FrontDoor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	u, _ := url.Parse(cfg.Backend) // checked by Validate
	f := &FrontDoor{cfg: cfg, backend: u, wake: make(chan struct{}), bodyTimeout: bodyReadTimeout,
		probe: &http.Client{Timeout: max(cfg.ProbeEvery, 500*time.Millisecond)}}
	f.proxy = &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(u) },
		FlushInterval: -1, // server-sent events pass unbuffered
		Transport:     unavailableAs503{http.DefaultTransport},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if a, ok := r.Context().Value(attemptKey{}).(*attempt); ok && errors.Is(err, errUnavailable) {
				a.unavailable = true // nothing written: serveHeld holds it again
				return
			}
			http.Error(w, "front door: backend: "+err.Error(), http.StatusBadGateway)
		},
	}
	return f, nil
}

// errUnavailable is a backend that answered 503 (a Service with no ready
// endpoint): the request was not served and can be held again.
var errUnavailable = errors.New("backend unavailable (503)")

// unavailableAs503 turns a backend's 503 into errUnavailable.
type unavailableAs503 struct{ next http.RoundTripper }

func (t unavailableAs503) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	if err == nil && resp.StatusCode == http.StatusServiceUnavailable {
		resp.Body.Close()
		return nil, errUnavailable
	}
	return resp, err
}

// attempt records, for serveHeld, that one forwarding found the backend
// unavailable.
type attempt struct{ unavailable bool }

type attemptKey struct{}

// Pending returns the number of requests held now.
func (f *FrontDoor) Pending() int64 { return f.pending.Load() }

// Handler serves /health (always 200: the router is up), /metrics, and
// holds then forwards everything else.
func (f *FrontDoor) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("GET /metrics", f.serveMetrics)
	mux.HandleFunc("/", f.serveHeld)
	return mux
}

// flowControlHelp is the EPP's HELP text of the gauge, "[ALPHA] " included
// (gateway-api-inference-extension pkg/epp/metrics/metrics.go).
const flowControlHelp = "[ALPHA] Current number of requests being actively managed by the EPP flow control layer, from the start of the EnqueueAndWait call until a final outcome is reached."

func (f *FrontDoor) serveMetrics(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	model := escapeLabel(f.cfg.Model)
	fmt.Fprintf(w, "# HELP inference_extension_flow_control_queue_size %s\n", flowControlHelp)
	fmt.Fprintf(w, "# TYPE inference_extension_flow_control_queue_size gauge\n")
	fmt.Fprintf(w, "inference_extension_flow_control_queue_size{fairness_id=\"default\",inference_pool=\"%s\",model_name=\"%s\",priority=\"0\",target_model_name=\"%s\"} %s\n",
		escapeLabel(f.cfg.Pool), model, model, strconv.FormatInt(f.pending.Load(), 10))
}

func escapeLabel(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}

// serveHeld holds the request until the backend is healthy, then forwards
// it. The backend's health is a probe's, up to ProbeEvery old: when the
// forwarded request finds the backend unavailable (503: its replicas have
// just gone), the backend is taken as unhealthy and the request is held
// again, as a router holds requests while its pool has no endpoint. A
// request whose client goes away, or held past MaxHold in all, is dropped
// from the count and not forwarded.
func (f *FrontDoor) serveHeld(w http.ResponseWriter, r *http.Request) {
	// Read the body first, as a router that picks by the request does: the
	// server then notices a client that leaves while its request is held,
	// and the request can be sent again.
	body, err := readBody(w, r, maxHeldBody, f.bodyTimeout)
	if err != nil {
		http.Error(w, "front door: reading the request: "+err.Error(), http.StatusBadRequest)
		return
	}
	timer := time.NewTimer(f.cfg.MaxHold)
	defer timer.Stop()
	for {
		if !f.hold(w, r, timer.C) {
			return
		}
		a := &attempt{}
		r.Body = io.NopCloser(bytes.NewReader(body))
		f.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), attemptKey{}, a)))
		if !a.unavailable {
			return
		}
		f.setReady(false)
	}
}

// hold counts the request as held until the backend is healthy and
// reports true, or answers it (given up at expired) or drops it (client
// gone) and reports false.
func (f *FrontDoor) hold(w http.ResponseWriter, r *http.Request, expired <-chan time.Time) bool {
	f.pending.Add(1)
	defer f.pending.Add(-1)
	for {
		ready, wake := f.state()
		if ready {
			return true
		}
		select {
		case <-wake:
		case <-r.Context().Done():
			return false
		case <-expired:
			http.Error(w, fmt.Sprintf("front door: no healthy backend within %s", f.cfg.MaxHold), http.StatusServiceUnavailable)
			return false
		}
	}
}

// maxHeldBody bounds the body of one held request.
const maxHeldBody = 16 << 20

func (f *FrontDoor) state() (bool, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ready, f.wake
}

func (f *FrontDoor) setReady(ready bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case ready && !f.ready:
		close(f.wake)
		klog.InfoS("Backend healthy: dispatching held requests", "backend", f.cfg.Backend, "held", f.pending.Load())
	case !ready && f.ready:
		f.wake = make(chan struct{})
		klog.InfoS("Backend unhealthy: holding requests", "backend", f.cfg.Backend)
	}
	f.ready = ready
}

// probeBackend probes the backend's /health every ProbeEvery until ctx is done.
func (f *FrontDoor) probeBackend(ctx context.Context) {
	health := f.backend.JoinPath("health").String()
	tick := time.NewTicker(f.cfg.ProbeEvery)
	defer tick.Stop()
	for {
		f.setReady(f.healthy(ctx, health))
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (f *FrontDoor) healthy(ctx context.Context, health string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, health, nil)
	if err != nil {
		return false
	}
	resp, err := f.probe.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Serve probes the backend and serves on ln until ctx is done, then lets
// open requests finish for up to drain.
func (f *FrontDoor) Serve(ctx context.Context, ln net.Listener, drain time.Duration) error {
	probeCtx, stopProbe := context.WithCancel(context.Background())
	var probing sync.WaitGroup
	probing.Go(func() { f.probeBackend(probeCtx) })
	defer func() {
		stopProbe()
		probing.Wait()
	}()

	hs := &http.Server{Handler: f.Handler(), ReadHeaderTimeout: 10 * time.Second}
	serveDone := make(chan error, 1)
	go func() { serveDone <- hs.Serve(ln) }()
	select {
	case <-ctx.Done():
		klog.InfoS("Shutting down", "address", ln.Addr().String(), "drain", drain)
		sctx, cancel := context.WithTimeout(context.Background(), drain)
		defer cancel()
		if err := hs.Shutdown(sctx); err != nil {
			klog.InfoS("Drain timed out, closing open connections", "err", err)
			_ = hs.Close()
		}
		if err := <-serveDone; !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serving HTTP on %s: %w", ln.Addr(), err)
		}
		return nil
	case err := <-serveDone:
		return fmt.Errorf("serving HTTP on %s: %w", ln.Addr(), err)
	}
}
