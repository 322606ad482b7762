// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"

	"k8s.io/klog/v2"
)

// Pickers: how the front end chooses a Ready pod for each request.
const (
	// pickLeastLoaded sends each request to the Ready pod with the fewest
	// requests in flight through the front end (ties: the first in order),
	// as an inference gateway does.
	pickLeastLoaded = "least-loaded"
	// pickRoundRobin cycles over the Ready pods, as a Service does.
	pickRoundRobin = "round-robin"
)

// frontEnd is the Service in front of the fleet: a reverse proxy on
// 127.0.0.1 over the endpoints Ready at each request. Server-sent events
// pass through unbuffered.
type frontEnd struct {
	URL string

	srv       *http.Server
	endpoints func() []string
	pick      string

	mu       sync.Mutex
	inFlight map[string]int
	next     int
}

// maxIdlePerPod is the most idle connections the front end keeps to one
// pod for the next requests.
const maxIdlePerPod = 512

type backendKey struct{}

// startFrontEnd starts a front end over endpoints that keeps up to
// idlePerPod idle connections to each (at least 1, at most maxIdlePerPod).
func startFrontEnd(endpoints func() []string, pick string, idlePerPod int) (*frontEnd, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("front end: listen: %w", err)
	}
	f := &frontEnd{URL: "http://" + l.Addr().String(), endpoints: endpoints, pick: pick, inFlight: map[string]int{}}
	rp := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(r.In.Context().Value(backendKey{}).(*url.URL)) },
		Transport:     &http.Transport{MaxIdleConnsPerHost: min(max(idlePerPod, 1), maxIdlePerPod), DisableCompression: true},
		FlushInterval: -1,
		ErrorLog:      log.New(klogWriter{}, "", 0),
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			http.Error(w, "front end: "+err.Error(), http.StatusBadGateway)
		},
	}
	f.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Full duplex: by default Go's HTTP/1 server consumes and closes
		// the rest of the request body when the response starts, while the
		// transport may still be reading that body to forward it (after
		// copying Content-Length bytes it reads once more to check for
		// extra bytes). When a pod answers within that window, the read
		// fails, the transport drops the connection to the pod and the
		// stream already under way is cut ("unexpected EOF" at the client).
		// See golang/go#40747.
		if err := http.NewResponseController(w).EnableFullDuplex(); err != nil {
			http.Error(w, "front end: "+err.Error(), http.StatusInternalServerError)
			return
		}
		// With full duplex the handler must also finish the request body
		// itself. The reverse proxy never reads the body of a request it
		// could not forward (a pod being stopped refuses it); the server
		// would then read the rest only after the handler returned, and the
		// end of the body would start the connection's background read
		// after the server stopped it: the next read of the connection
		// panics ("invalid concurrent Body.Read call", golang/go#68560) and
		// the client's keep-alive connection is dropped. Closing it here
		// reads what is left (nothing once the request was forwarded).
		defer func() { _ = r.Body.Close() }()
		ep, ok := f.choose()
		if !ok {
			http.Error(w, "front end: no Ready endpoints", http.StatusServiceUnavailable)
			return
		}
		defer f.done(ep)
		target, err := url.Parse(ep)
		if err != nil {
			http.Error(w, "front end: "+err.Error(), http.StatusInternalServerError)
			return
		}
		rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), backendKey{}, target)))
	})}
	go func() { _ = f.srv.Serve(l) }()
	return f, nil
}

// choose picks an endpoint and counts the request in flight on it.
func (f *frontEnd) choose() (string, bool) {
	eps := f.endpoints()
	if len(eps) == 0 {
		return "", false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var ep string
	switch f.pick {
	case pickRoundRobin:
		ep = eps[f.next%len(eps)]
		f.next++
	default:
		ep = pickLeast(eps, f.inFlight)
	}
	f.inFlight[ep]++
	return ep, true
}

// pickLeast returns the endpoint of eps with the fewest in flight, the
// first of them on a tie.
func pickLeast(eps []string, inFlight map[string]int) string {
	best := eps[0]
	for _, ep := range eps[1:] {
		if inFlight[ep] < inFlight[best] {
			best = ep
		}
	}
	return best
}

func (f *frontEnd) done(ep string) {
	f.mu.Lock()
	f.inFlight[ep]--
	if f.inFlight[ep] <= 0 {
		delete(f.inFlight, ep)
	}
	f.mu.Unlock()
}

func (f *frontEnd) Close() error { return f.srv.Close() }

// klogWriter sends the reverse proxy's error log (a client or a pod that
// went away mid-stream) to klog's log file instead of the terminal.
type klogWriter struct{}

func (klogWriter) Write(p []byte) (int, error) {
	klog.InfoS("front end", "msg", strings.TrimSpace(string(p)))
	return len(p), nil
}
