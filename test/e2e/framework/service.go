// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
)

// ServiceProxy stands in for a Service's virtual IP and kube-proxy: an HTTP
// reverse proxy on 127.0.0.1 that sends each request to the next of the
// endpoints live at that moment, round robin. Server-sent events pass
// through unbuffered, so time to first token is measured faithfully.
type ServiceProxy struct {
	URL string

	srv       *http.Server
	endpoints func() []string
	next      atomic.Uint64
}

// StartServiceProxy listens on a free port of 127.0.0.1.
func StartServiceProxy(endpoints func() []string) (*ServiceProxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("service proxy: listen: %w", err)
	}
	p := &ServiceProxy{URL: "http://" + l.Addr().String(), endpoints: endpoints}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(r.In.Context().Value(backendKey{}).(*url.URL))
		},
		Transport: &http.Transport{MaxIdleConnsPerHost: 256, DisableCompression: true},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			http.Error(w, "service proxy: "+err.Error(), http.StatusBadGateway)
		},
	}
	p.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		eps := p.endpoints()
		if len(eps) == 0 {
			http.Error(w, "service proxy: no live endpoints", http.StatusServiceUnavailable)
			return
		}
		target, err := url.Parse(eps[p.next.Add(1)%uint64(len(eps))])
		if err != nil {
			http.Error(w, "service proxy: "+err.Error(), http.StatusInternalServerError)
			return
		}
		rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), backendKey{}, target)))
	})}
	go func() { _ = p.srv.Serve(l) }() // http.ErrServerClosed after Close
	return p, nil
}

// backendKey carries the chosen endpoint from the handler to Rewrite.
type backendKey struct{}

// Close stops the proxy and its open connections.
func (p *ServiceProxy) Close() error { return p.srv.Close() }
