// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// podPort is the port every fake pod serves its page on.
const podPort = 8000

// Misbehaviours a model server is put through on a schedule. Each makes
// the page unusable: the pod must be left out of answers (never 0, never
// another pod's value) until it serves again.
const (
	modeHealthy      = ""
	modeHangMidBody  = "hang-mid-body" // half the page, then nothing until the scraper gives up
	modeHTTP500      = "http-500"      // 500 Internal Server Error
	modeReset        = "reset"         // the connection is reset before any answer
	modeHugePage     = "huge-page"     // a 6 MiB page, over --max-body-size (4 MiB)
	modeSlowHeaders  = "slow-headers"  // headers after 3 s, past --scrape-timeout
	modeGzipBomb     = "gzip-bomb"     // 64 MiB of page in 64 KB of gzip, sent unasked
	modeWrongDialect = "wrong-dialect" // a TGI page from a pod annotated vllm-v1
	hugePageBytes    = 6 << 20
	slowHeadersDelay = 3 * time.Second
	bombBytes        = 64 << 20
	wrongDialectQ    = 99999 // tgi_queue_size on the wrong-dialect page: never a pod's value
)

// modes is the rotation of misbehaviours.
var modes = []string{modeHangMidBody, modeHTTP500, modeReset, modeHugePage, modeSlowHeaders, modeGzipBomb, modeWrongDialect}

// valueFor derives a pod's queue size from its UID: 1..9999, never 0, so
// that a 0 in an answer is always a missing value reported as 0 and a value
// under another pod's name is (almost always) detectable.
func valueFor(uid string) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(uid))
	return int64(h.Sum64()%9999) + 1
}

// page is the healthy vLLM V1 page of a pod whose queue holds value requests.
func page(value int64) []byte {
	return fmt.Appendf(nil, `# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="soak-model"} %d
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="soak-model"} 1
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="soak-model"} 0.25
`, value)
}

// slot is one pod IP: a listener while a pod holds the address, the pod's
// identity and value, and how it behaves now.
type slot struct {
	ip    netip.Addr
	l     net.Listener
	conns map[net.Conn]struct{}
	pod   string // "" while free
	value int64
	mode  string
}

// podServer serves every fake pod's page from this process, one listener
// per pod IP, each page with the value of the pod that holds the address
// now. Releasing an address closes its listener and its connections, as a
// pod's death does, so a new pod on the same address starts clean.
type podServer struct {
	srv  *http.Server
	bomb []byte // gzip of bombBytes of comment lines

	mu    sync.Mutex
	slots map[netip.Addr]*slot
	wg    sync.WaitGroup
}

func newPodServer() (*podServer, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, fmt.Errorf("gzip bomb: %w", err)
	}
	line := bytes.Repeat([]byte("#"), 1023)
	line = append(line, '\n')
	for range bombBytes / len(line) {
		if _, err := zw.Write(line); err != nil {
			return nil, fmt.Errorf("gzip bomb: %w", err)
		}
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("gzip bomb: %w", err)
	}
	s := &podServer{bomb: buf.Bytes(), slots: map[netip.Addr]*slot{}}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 5 * time.Second, ConnState: s.connState}
	return s, nil
}

// slotOf returns the slot a connection's local address belongs to.
func (s *podServer) slotOf(local net.Addr) *slot {
	ap, err := netip.ParseAddrPort(fmt.Sprint(local))
	if err != nil {
		return nil
	}
	return s.slots[ap.Addr()]
}

func (s *podServer) connState(c net.Conn, st http.ConnState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sl := s.slotOf(c.LocalAddr())
	if sl == nil {
		return
	}
	switch st {
	case http.StateNew:
		if sl.pod == "" { // released while the connection was being accepted
			c.Close()
			return
		}
		sl.conns[c] = struct{}{}
	case http.StateClosed, http.StateHijacked:
		delete(sl.conns, c)
	}
}

// assign gives ip to pod with value: it listens on ip:podPort and serves
// the healthy page.
func (s *podServer) assign(ip netip.Addr, pod string, value int64) error {
	l, err := net.Listen("tcp", netip.AddrPortFrom(ip, podPort).String())
	if err != nil {
		return fmt.Errorf("listen for pod %s on %s: %w", pod, ip, err)
	}
	s.mu.Lock()
	if old := s.slots[ip]; old != nil && old.pod != "" {
		s.mu.Unlock()
		l.Close()
		return fmt.Errorf("assign %s to %s: held by %s", ip, pod, old.pod)
	}
	s.slots[ip] = &slot{ip: ip, l: l, conns: map[net.Conn]struct{}{}, pod: pod, value: value}
	s.mu.Unlock()
	s.wg.Go(func() {
		if err := s.srv.Serve(l); err != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, http.ErrServerClosed) {
			klog.ErrorS(err, "soak: pod listener stopped", "ip", ip)
		}
	})
	return nil
}

// release frees ip: its listener and connections are closed.
func (s *podServer) release(ip netip.Addr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sl := s.slots[ip]
	if sl == nil || sl.pod == "" {
		return
	}
	sl.pod, sl.mode = "", modeHealthy
	sl.l.Close()
	for c := range sl.conns {
		c.Close()
	}
	clear(sl.conns)
}

// setMode changes how the pod on ip behaves; it reports whether a pod holds ip.
func (s *podServer) setMode(ip netip.Addr, mode string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sl := s.slots[ip]
	if sl == nil || sl.pod == "" {
		return false
	}
	sl.mode = mode
	return true
}

// ServeHTTP answers a scrape as the pod on the connection's local address.
func (s *podServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	s.mu.Lock()
	sl := s.slotOf(local)
	var pod, mode string
	var value int64
	if sl != nil {
		pod, mode, value = sl.pod, sl.mode, sl.value
	}
	s.mu.Unlock()
	if pod == "" {
		http.Error(w, "no pod here", http.StatusNotFound)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	body := page(value)
	switch mode {
	case modeHangMidBody:
		h.Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(body[:len(body)/2])
		w.(http.Flusher).Flush()
		hang(r.Context(), time.Minute)
	case modeHTTP500:
		http.Error(w, "internal error", http.StatusInternalServerError)
	case modeReset:
		if c, _, err := w.(http.Hijacker).Hijack(); err == nil {
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // RST instead of FIN
			}
			c.Close()
		}
	case modeHugePage:
		w.WriteHeader(http.StatusOK)
		chunk := append(bytes.Repeat([]byte("#"), 64<<10-1), '\n')
		for range hugePageBytes / len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
		_, _ = w.Write(body)
	case modeSlowHeaders:
		if !hang(r.Context(), slowHeadersDelay) {
			return
		}
		_, _ = w.Write(body)
	case modeGzipBomb:
		h.Set("Content-Encoding", "gzip")
		h.Set("Content-Length", strconv.Itoa(len(s.bomb)))
		_, _ = w.Write(s.bomb)
	case modeWrongDialect:
		fmt.Fprintf(w, "# TYPE tgi_queue_size gauge\ntgi_queue_size %d\n# TYPE tgi_batch_current_size gauge\ntgi_batch_current_size 3\n", wrongDialectQ)
	default:
		h.Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
	}
}

// hang waits for d or until ctx ends; it reports whether d passed.
func hang(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// close stops every listener and connection and waits for the serve loops.
func (s *podServer) close() error {
	err := s.srv.Close()
	s.wg.Wait()
	return err
}
