// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package scrape

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// legacyClient is the net/http client that the scrape client replaced, as
// it was (one Transport, one keep-alive connection per target, each with
// its read-loop and write-loop goroutines), kept so that the benchmarks
// compare the two in one run. Only benchmarks use it.
type legacyClient struct {
	client *http.Client
	gzip   bool // Config.RequestGzip

	mu   sync.Mutex
	reqs map[*endpoint]*http.Request // built once per target, as the loops did
}

// useLegacyClient makes m fetch with net/http's client; call it before Run.
// The caller closes the client's idle connections when done.
func useLegacyClient(m *Manager) *legacyClient {
	lc := &legacyClient{client: newLegacyClient(m.cfg), gzip: m.cfg.RequestGzip, reqs: map[*endpoint]*http.Request{}}
	m.get = lc.get
	return lc
}

func newLegacyClient(cfg Config) *http.Client {
	dialer := &net.Dialer{Timeout: cfg.Timeout, KeepAlive: 30 * time.Second}
	return &http.Client{
		Transport: &http.Transport{
			Proxy:                  nil,
			DialContext:            dialer.DialContext,
			MaxIdleConns:           0,
			MaxIdleConnsPerHost:    2,
			IdleConnTimeout:        max(90*time.Second, 3*cfg.Interval),
			TLSHandshakeTimeout:    cfg.Timeout,
			ResponseHeaderTimeout:  cfg.Timeout,
			MaxResponseHeaderBytes: maxHeaderBytes,
			DisableCompression:     true,
			ForceAttemptHTTP2:      false,
			WriteBufferSize:        512,
			ReadBufferSize:         2 << 10,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

func (lc *legacyClient) request(ep *endpoint) (*http.Request, error) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if req, ok := lc.reqs[ep]; ok {
		return req, nil
	}
	req, err := http.NewRequest(http.MethodGet, ep.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", acceptHeader)
	if lc.gzip {
		req.Header.Set("Accept-Encoding", "gzip")
	} else {
		req.Header.Set("Accept-Encoding", "identity")
	}
	req.Header.Set("User-Agent", userAgent)
	lc.reqs[ep] = req
	return req, nil
}

// get is (*worker).get through net/http, as the adapter did it before.
func (lc *legacyClient) get(w *worker, parent context.Context, deadline time.Time, ep *endpoint, maxBody int64) (int, error) {
	req, err := lc.request(ep)
	if err != nil {
		return 0, &Error{ReasonConnection, err}
	}
	ctx, cancel := context.WithDeadline(parent, deadline)
	defer cancel()
	resp, err := lc.client.Do(req.WithContext(ctx))
	if err != nil {
		return 0, classify(parent, deadline, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		drain(resp.Body)
		return 0, &Error{ReasonHTTPStatus, fmt.Errorf("HTTP %d", resp.StatusCode)}
	}
	return w.readBody(parent, deadline, resp.Body, resp.ContentLength, resp.Header.Get("Content-Encoding") == "gzip", maxBody)
}
