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
	"slices"
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
	// Names is which endpoint picker's metric names the page uses: one of
	// FrontDoorNames; empty is NamesDeprecated.
	Names string
	// SaturationAt is the number of requests in flight at which the pool
	// reads saturated (1); 0 publishes no pool saturation, as an endpoint
	// picker without flow control.
	SaturationAt int
}

// The metric names a front door publishes (FrontDoorConfig.Names), as the
// endpoint pickers do (docs/metrics.md, served on Services).
const (
	// NamesDeprecated: the Gateway API Inference Extension's EPP:
	// inference_extension_flow_control_queue_size,
	// inference_objective_running_requests and
	// inference_extension_flow_control_pool_saturation.
	NamesDeprecated = "deprecated"
	// NamesCurrent: llm-d's router under its current names only:
	// llm_d_epp_flow_control_queue_size, llm_d_epp_request_running and
	// llm_d_epp_flow_control_pool_saturation (per stage).
	NamesCurrent = "current"
	// NamesBoth: llm-d's router as it ships, each gauge under its current
	// name and again under the deprecated one, with the same value.
	NamesBoth = "both"
)

// FrontDoorNames lists the values of FrontDoorConfig.Names.
var FrontDoorNames = []string{NamesDeprecated, NamesCurrent, NamesBoth}

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
	if c.Names != "" && !slices.Contains(FrontDoorNames, c.Names) {
		errs = append(errs, fmt.Errorf("front-door metric names %q: want one of %s", c.Names, strings.Join(FrontDoorNames, ", ")))
	}
	if c.SaturationAt < 0 {
		errs = append(errs, fmt.Errorf("front-door saturation point must not be negative, got %d", c.SaturationAt))
	}
	return errors.Join(errs...)
}

// FrontDoor plays a router in front of a model Service, the way the Gateway
// API Inference Extension's endpoint picker does with flow control on: it
// holds every request while the backend has no healthy endpoint (as at zero
// replicas), and dispatches the held requests once the backend's /health
// answers 200. It publishes on /metrics, as the EPP does, the requests it
// holds, not yet dispatched (inference_extension_flow_control_queue_size
// or llm_d_epp_flow_control_queue_size), those it dispatched and has not
// seen finish (inference_objective_running_requests or
// llm_d_epp_request_running) and, with a SaturationAt, the pool's
// saturation (inference_extension_flow_control_pool_saturation or
// llm_d_epp_flow_control_pool_saturation): the names by Names.
type FrontDoor struct {
	cfg     FrontDoorConfig
	backend *url.URL
	proxy   *httputil.ReverseProxy
	probe   *http.Client
	pending atomic.Int64
	running atomic.Int64
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

// Running returns the number of requests dispatched and not yet finished.
func (f *FrontDoor) Running() int64 { return f.running.Load() }

// Saturation returns the pool's saturation as the page publishes it: the
// requests in flight over SaturationAt, and 1 while the backend has no
// healthy endpoint (llm-d reads an empty pool as saturated); ok is false
// without a SaturationAt.
func (f *FrontDoor) Saturation() (v float64, ok bool) {
	if f.cfg.SaturationAt <= 0 {
		return 0, false
	}
	if ready, _ := f.state(); !ready {
		return 1, true
	}
	return float64(f.running.Load()) / float64(f.cfg.SaturationAt), true
}

// Handler serves /health (always 200: the router is up), /metrics, and
// holds then forwards everything else.
func (f *FrontDoor) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("GET /metrics", f.serveMetrics)
	mux.HandleFunc("/", f.serveHeld)
	return mux
}

// The EPP's HELP texts, "[ALPHA] " included: the Gateway API Inference
// Extension's (pkg/epp/metrics/metrics.go) and llm-d-router's
// (pkg/epp/metrics/llm_d_router_metrics.go, subsystem llm_d_epp), whose
// deprecated families say which name replaces them.
const (
	queueHelp      = "[ALPHA] Current number of requests actively held in the Flow Control queue."
	runningHelp    = "[ALPHA] Current number of active running requests."
	oldRunningHelp = "[ALPHA] Inference objective number of running requests in each model."
	saturationHelp = "[ALPHA] Pool saturation signal gating Flow Control dispatch. The stage label partitions by pipeline role: 'prefill' and 'decode' are per-stage signals, 'effective' is max(prefill, decode) and is the value used for gating. 1.0 is the gating set point; values above 1.0 indicate the magnitude of oversubscription past it. An empty pool reads as 1.0."
	// gieSaturationHelp is the Gateway API Inference Extension's text of
	// its pool saturation gauge, one per pool, without stages.
	gieSaturationHelp = "[ALPHA] Pool saturation signal gating Flow Control dispatch."
	// flowControlHelp is the Gateway API Inference Extension's own text
	// of its queue gauge.
	flowControlHelp = "[ALPHA] Current number of requests being actively managed by the EPP flow control layer, from the start of the EnqueueAndWait call until a final outcome is reached."
)

// deprecatedHelp is llm-d's HELP of a deprecated family: current names it.
func deprecatedHelp(current, help string) string {
	return "[ALPHA] [Deprecated: Use " + current + "] " + strings.TrimPrefix(help, "[ALPHA] ")
}

func (f *FrontDoor) serveMetrics(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = io.WriteString(w, f.page())
}

// page is the front door's /metrics page: one family per gauge and name,
// in the text format's sorted order.
func (f *FrontDoor) page() string {
	model, pool := escapeLabel(f.cfg.Model), escapeLabel(f.cfg.Pool)
	pending := strconv.FormatInt(f.pending.Load(), 10)
	running := strconv.FormatInt(f.running.Load(), 10)
	sat, hasSat := f.Saturation()
	current := f.cfg.Names == NamesCurrent || f.cfg.Names == NamesBoth
	old := f.cfg.Names != NamesCurrent
	var b strings.Builder
	family := func(name, help, labels, value string) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name)
		for l := range strings.SplitSeq(labels, "\n") {
			fmt.Fprintf(&b, "%s%s %s\n", name, l, value)
		}
	}
	queueLabels := fmt.Sprintf(`{fairness_id="default",inference_pool="%s",model_name="%s",priority="0",target_model_name="%s"}`, pool, model, model)
	stages := fmt.Sprintf("{inference_pool=\"%s\",stage=\"decode\"}\n{inference_pool=\"%s\",stage=\"effective\"}\n{inference_pool=\"%s\",stage=\"prefill\"}", pool, pool, pool)
	satValue := strconv.FormatFloat(sat, 'g', -1, 64)
	switch {
	case old && !current: // the Gateway API Inference Extension's EPP
		family("inference_extension_flow_control_queue_size", flowControlHelp, queueLabels, pending)
		if hasSat {
			family("inference_extension_flow_control_pool_saturation", gieSaturationHelp, fmt.Sprintf(`{inference_pool="%s"}`, pool), satValue)
		}
		family("inference_objective_running_requests", oldRunningHelp, fmt.Sprintf(`{model_name="%s"}`, model), running)
	default: // llm-d's router: current names, and with both the deprecated ones beside them
		if old {
			if hasSat {
				family("inference_extension_flow_control_pool_saturation", deprecatedHelp("llm_d_epp_flow_control_pool_saturation", saturationHelp), stages, satValue)
			}
			family("inference_extension_flow_control_queue_size", deprecatedHelp("llm_d_epp_flow_control_queue_size", queueHelp), queueLabels, pending)
			family("inference_objective_running_requests", oldRunningHelp, fmt.Sprintf(`{model_name="%s"}`, model), running)
		}
		if hasSat {
			family("llm_d_epp_flow_control_pool_saturation", saturationHelp, stages, satValue)
		}
		family("llm_d_epp_flow_control_queue_size", queueHelp, queueLabels, pending)
		family("llm_d_epp_request_running", runningHelp, fmt.Sprintf(`{fairness_id="default",model_name="%s",priority="0",target_model_name="%s"}`, model, model), running)
	}
	return b.String()
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
		f.running.Add(1)
		f.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), attemptKey{}, a)))
		f.running.Add(-1)
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
