// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"
)

// pagePort is the port every fake pod serves its page on.
const pagePort = 8000

// queueSeries is the page line whose value each pod changes on command.
var queueSeries = []byte(`vllm:num_requests_waiting{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} `)

// podIP is pod i's loopback address: 127.2.x.y with y in 1..250, so that
// no address ends in .0 or .255.
func podIP(i int) string {
	return fmt.Sprintf("127.2.%d.%d", i/250, i%250+1)
}

// page is a vLLM V1 page split around pod's queue value.
type page struct{ prefix, suffix []byte }

// splitPage finds queueSeries in b and splits the page around its value.
func splitPage(b []byte) (page, error) {
	at := bytes.Index(b, queueSeries)
	if at < 0 {
		return page{}, fmt.Errorf("no %q line in the page", queueSeries)
	}
	valueAt := at + len(queueSeries)
	end := bytes.IndexByte(b[valueAt:], '\n')
	if end < 0 {
		return page{}, errors.New("the queue line does not end")
	}
	return page{prefix: b[:valueAt], suffix: b[valueAt+end:]}, nil
}

// fleet serves pods [from, to) on their loopback addresses, each page with
// that pod's queue value, and counts the scrapes each pod receives.
type fleet struct {
	from, to int
	page     page
	values   []atomic.Int64 // the pod's vllm:num_requests_waiting
	scrapes  []atomic.Int64
	byIP     map[netip.Addr]int // address -> index into values
	// conns counts the connections the pods' listeners accepted: with
	// keep-alive, each pod's first scrape and any reconnection.
	conns atomic.Int64
}

func newFleet(from, to int, p page) (*fleet, error) {
	f := &fleet{from: from, to: to, page: p,
		values: make([]atomic.Int64, to-from), scrapes: make([]atomic.Int64, to-from),
		byIP: make(map[netip.Addr]int, to-from)}
	for i := from; i < to; i++ {
		a, err := netip.ParseAddr(podIP(i))
		if err != nil {
			return nil, fmt.Errorf("pod %d address: %w", i, err)
		}
		f.byIP[a] = i - from
		f.values[i-from].Store(int64(i % 10))
	}
	return f, nil
}

// ServeHTTP answers a scrape with the page of the pod whose address it came to.
func (f *fleet) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	ap, err := netip.ParseAddrPort(fmt.Sprint(local))
	i, ok := f.byIP[ap.Addr()]
	if err != nil || !ok {
		http.Error(w, "no such pod", http.StatusNotFound)
		return
	}
	f.scrapes[i].Add(1)
	v := strconv.AppendFloat(nil, float64(f.values[i].Load()), 'f', 1, 64)
	h := w.Header()
	h.Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(f.page.prefix)+len(v)+len(f.page.suffix)))
	for _, b := range [][]byte{f.page.prefix, v, f.page.suffix} {
		if _, err := w.Write(b); err != nil {
			return
		}
	}
}

// control is the fleet's command port: /set?pod=I&value=V changes pod I's
// value; /counts returns the scrapes each pod has received so far; /conns
// the connections its pods accepted so far.
func (f *fleet) control() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/set", func(w http.ResponseWriter, r *http.Request) {
		pod, err1 := strconv.Atoi(r.URL.Query().Get("pod"))
		v, err2 := strconv.ParseInt(r.URL.Query().Get("value"), 10, 64)
		if err := errors.Join(err1, err2); err != nil || pod < f.from || pod >= f.to {
			http.Error(w, fmt.Sprintf("bad set: pod %d of [%d,%d): %v", pod, f.from, f.to, err), http.StatusBadRequest)
			return
		}
		f.values[pod-f.from].Store(v)
	})
	mux.HandleFunc("/counts", func(w http.ResponseWriter, r *http.Request) {
		out := make([]int64, len(f.scrapes))
		for i := range f.scrapes {
			out[i] = f.scrapes[i].Load()
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	})
	mux.HandleFunc("/conns", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(f.conns.Load())
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {})
	return mux
}

// serveTLS is the fake pods' TLS configuration with the certificate in
// certFile and keyFile: HTTP/1.1 (the scraper's protocol), session
// tickets on (the Go server's default, shared by the pods of one child).
func serveTLS(certFile, keyFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("load the pods' serving certificate: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// serveFleet is the child process: it listens on every pod's address
// (over TLS when c names a certificate) and on c.control, and serves until
// ctx ends.
func serveFleet(ctx context.Context, c childOptions) error {
	from, to := c.from, c.to
	b, err := os.ReadFile(c.page)
	if err != nil {
		return fmt.Errorf("read page: %w", err)
	}
	p, err := splitPage(b)
	if err != nil {
		return fmt.Errorf("%s: %w", c.page, err)
	}
	f, err := newFleet(from, to, p)
	if err != nil {
		return err
	}
	var tlsConfig *tls.Config
	if c.certFile != "" {
		if tlsConfig, err = serveTLS(c.certFile, c.keyFile); err != nil {
			return err
		}
	}
	pods := &http.Server{Handler: f, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 5 * time.Minute,
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				f.conns.Add(1)
			}
		}}
	ctl := &http.Server{Handler: f.control(), ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, to-from+1)
	for i := from; i < to; i++ {
		l, err := net.Listen("tcp", net.JoinHostPort(podIP(i), strconv.Itoa(pagePort)))
		if err != nil {
			_ = pods.Close()
			return fmt.Errorf("listen for pod %d (raise the open-file limit or use more --procs): %w", i, err)
		}
		if tlsConfig != nil {
			l = tls.NewListener(l, tlsConfig)
		}
		go func() { errc <- pods.Serve(l) }()
	}
	controlAddr := c.control
	cl, err := net.Listen("tcp", controlAddr)
	if err != nil {
		_ = pods.Close()
		return fmt.Errorf("listen for commands on %s: %w", controlAddr, err)
	}
	go func() { errc <- ctl.Serve(cl) }()
	klog.InfoS("fleet: serving", "from", from, "to", to, "control", controlAddr, "tls", tlsConfig != nil)
	select {
	case <-ctx.Done():
	case err := <-errc:
		klog.ErrorS(err, "fleet: a listener stopped")
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return errors.Join(pods.Shutdown(sctx), ctl.Shutdown(sctx))
}

// fleetClient commands one child fleet process.
type fleetClient struct {
	from, to int
	url      string
	http     *http.Client
}

func (c *fleetClient) get(ctx context.Context, path string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url+path, nil)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("fleet %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("fleet %s: read: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("fleet %s: %s: %s", path, resp.Status, body)
	}
	if into != nil {
		if err := json.Unmarshal(body, into); err != nil {
			return fmt.Errorf("fleet %s: decode: %w", path, err)
		}
	}
	return nil
}

// fleets is every child, in pod order.
type fleets []*fleetClient

// set changes pod i's value.
func (fs fleets) set(ctx context.Context, pod int, value int64) error {
	for _, c := range fs {
		if pod >= c.from && pod < c.to {
			return c.get(ctx, fmt.Sprintf("/set?pod=%d&value=%d", pod, value), nil)
		}
	}
	return fmt.Errorf("no fleet serves pod %d", pod)
}

// conns returns the connections every child's pods have accepted so far.
func (fs fleets) conns(ctx context.Context) (int64, error) {
	var all int64
	for _, c := range fs {
		var n int64
		if err := c.get(ctx, "/conns", &n); err != nil {
			return 0, err
		}
		all += n
	}
	return all, nil
}

// counts returns the scrapes each pod has received, in pod order.
func (fs fleets) counts(ctx context.Context) ([]int64, error) {
	var all []int64
	for _, c := range fs {
		var part []int64
		if err := c.get(ctx, "/counts", &part); err != nil {
			return nil, err
		}
		if len(part) != c.to-c.from {
			return nil, fmt.Errorf("fleet [%d,%d) returned %d counts", c.from, c.to, len(part))
		}
		all = append(all, part...)
	}
	return all, nil
}
