// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// AdapterReplicas is several adapter processes behind one Service, as a
// Deployment with replicas > 1 runs them: the APIServices point at a TCP
// proxy on 127.0.0.1 (the stand-in for the Service's virtual IP and
// kube-proxy), which sends each new connection to the next replica that
// accepts it, round robin. All replicas present the same serving
// certificate, as the pods of one Deployment mount the same Secret.
type AdapterReplicas struct {
	// Adapter is the registration: its Port is the proxy's, its Process nil.
	*Adapter
	// Ports are the replicas' own secure ports, in replica order.
	Ports []int

	proxy *tcpProxy
	mu    sync.Mutex
	procs []*Process
}

// StartAdapterReplicas starts n adapters with cfg, each on its own port and
// certificate directory, waits for each /readyz, and registers them through
// one proxy as cfg's Service and APIServices. On error it stops what it started.
func StartAdapterReplicas(ctx context.Context, cp *ControlPlane, cfg AdapterConfig, n int) (_ *AdapterReplicas, err error) {
	if cfg.Namespace == "" || cfg.Service == "" || n < 1 {
		return nil, errors.New("adapter replicas: namespace, service and n >= 1 must be set")
	}
	if cfg.Kubeconfig == "" {
		cfg.Kubeconfig = cp.AdminKubeconfig
	}
	a := &Adapter{cp: cp, cfg: cfg, ServerName: cfg.Service + "." + cfg.Namespace + ".svc"}
	r := &AdapterReplicas{Adapter: a}
	defer func() {
		if err != nil {
			err = errors.Join(err, r.Stop(context.Background()))
		}
	}()
	if a.CA, err = NewCA("e2e-adapter-ca"); err != nil {
		return nil, err
	}
	serving, err := a.issueServing()
	if err != nil {
		return nil, err
	}
	httpc, err := a.HTTPClient(cp.Admin)
	if err != nil {
		return nil, err
	}
	for i := range n {
		name := cfg.Service + "-" + strconv.Itoa(i)
		dir := filepath.Join(cp.Dir, "adapter-"+name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("adapter replicas: create %s: %w", dir, err)
		}
		kp := *serving // Write records the file names in the key pair
		if err := kp.Write(dir, "serving"); err != nil {
			return nil, err
		}
		port, err := FreePort()
		if err != nil {
			return nil, err
		}
		p, err := StartProcess(name, cp.LogDir, cfg.Binary, cfg.processArgs(port, &kp), nil)
		if err != nil {
			return nil, err
		}
		r.Ports = append(r.Ports, port)
		r.procs = append(r.procs, p)
		if err := waitHTTP(ctx, p, httpc, r.ReplicaURL(i)+"/readyz", 60*time.Second); err != nil {
			return nil, err
		}
	}
	backends := make([]string, n)
	for i, port := range r.Ports {
		backends[i] = "127.0.0.1:" + strconv.Itoa(port)
	}
	if r.proxy, err = startTCPProxy(backends); err != nil {
		return nil, err
	}
	a.Port = r.proxy.port
	r.mu.Lock()
	a.Process = r.procs[0] // register tails its log on failure
	r.mu.Unlock()
	err = a.register(ctx)
	a.Process = nil
	if err != nil {
		return nil, err
	}
	return r, nil
}

// ReplicaURL is replica i's own address (not through the proxy).
func (r *AdapterReplicas) ReplicaURL(i int) string {
	return "https://127.0.0.1:" + strconv.Itoa(r.Ports[i])
}

// Replica is replica i's current process.
func (r *AdapterReplicas) Replica(i int) *Process {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.procs[i]
}

// Kill sends SIGKILL to replica i, as when a node dies or the OOM killer
// strikes: no graceful shutdown.
func (r *AdapterReplicas) Kill(i int) error { return r.Replica(i).Kill() }

// Restart starts replica i again (same port, flags and certificate) after
// Kill and waits for its /readyz.
func (r *AdapterReplicas) Restart(ctx context.Context, i int) error {
	p, err := r.Replica(i).Relaunch()
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.procs[i] = p
	r.mu.Unlock()
	httpc, err := r.HTTPClient(r.cp.Admin)
	if err != nil {
		return err
	}
	return waitHTTP(ctx, p, httpc, r.ReplicaURL(i)+"/readyz", 60*time.Second)
}

// Connections is the number of open proxied connections per replica, e.g.
// to tell which replica the aggregator is talking to.
func (r *AdapterReplicas) Connections() []int64 {
	out := make([]int64, len(r.Ports))
	if r.proxy != nil {
		for i := range out {
			out[i] = r.proxy.open[i].Load()
		}
	}
	return out
}

// Stop deletes the APIServices, stops every replica and then the proxy.
func (r *AdapterReplicas) Stop(ctx context.Context) error {
	var errs []error
	if r.Adapter != nil && r.proxy != nil {
		errs = append(errs, r.Adapter.Stop(ctx)) // Process is nil: only the APIServices
	}
	r.mu.Lock()
	procs := append([]*Process(nil), r.procs...)
	r.mu.Unlock()
	for _, p := range procs {
		errs = append(errs, p.Stop(stopGrace))
	}
	if r.proxy != nil {
		errs = append(errs, r.proxy.close())
	}
	return errors.Join(errs...)
}

// LoopbackProxy is AdapterReplicas' Service stand-in on its own, for a test
// that starts and replaces the replicas itself (as a rolling update does):
// a TCP proxy on 127.0.0.1 over fixed backend addresses, where a backend
// marked not ready (SetReady) or with nothing listening is skipped.
type LoopbackProxy struct{ p *tcpProxy }

// StartLoopbackProxy listens on a free port of 127.0.0.1 and forwards each
// connection to the next of backends ("127.0.0.1:port") that accepts it.
func StartLoopbackProxy(backends []string) (*LoopbackProxy, error) {
	p, err := startTCPProxy(backends)
	if err != nil {
		return nil, err
	}
	return &LoopbackProxy{p: p}, nil
}

// Port is the proxy's port on 127.0.0.1.
func (l *LoopbackProxy) Port() int { return l.p.port }

// SetReady marks backend i ready or not, as a replica's endpoint in a
// Service follows its readiness probe: new connections go only to ready
// backends (all are ready at the start); open ones are left alone.
func (l *LoopbackProxy) SetReady(i int, ready bool) { l.p.unready[i].Store(!ready) }

// Connections is the number of open proxied connections per backend.
func (l *LoopbackProxy) Connections() []int64 {
	out := make([]int64, len(l.p.backends))
	for i := range out {
		out[i] = l.p.open[i].Load()
	}
	return out
}

// Close stops accepting and closes every proxied connection.
func (l *LoopbackProxy) Close() error { return l.p.close() }

// tcpProxy forwards each accepted connection to the next backend that
// accepts a connection, round robin, like kube-proxy over the ready
// endpoints of a Service (a killed replica refuses connections at once on
// loopback, as its endpoint would leave the Service).
type tcpProxy struct {
	port     int
	backends []string
	open     []atomic.Int64
	unready  []atomic.Bool // by backend; the zero value is ready
	next     atomic.Uint64

	l     net.Listener
	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func startTCPProxy(backends []string) (*tcpProxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("tcp proxy: listen: %w", err)
	}
	p := &tcpProxy{port: l.Addr().(*net.TCPAddr).Port, backends: backends,
		open: make([]atomic.Int64, len(backends)), unready: make([]atomic.Bool, len(backends)), l: l, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.serve)
	return p, nil
}

func (p *tcpProxy) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return // closed
		}
		p.wg.Go(func() { p.forward(c) })
	}
}

// track records c as open (false once the proxy is closed).
func (p *tcpProxy) track(c net.Conn, add bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !add {
		delete(p.conns, c)
		return true
	}
	if p.conns == nil {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *tcpProxy) forward(client net.Conn) {
	defer client.Close()
	if !p.track(client, true) {
		return
	}
	defer p.track(client, false)
	start := p.next.Add(1)
	for k := range len(p.backends) {
		i := int((start + uint64(k)) % uint64(len(p.backends)))
		if p.unready[i].Load() {
			continue
		}
		backend, err := net.DialTimeout("tcp", p.backends[i], 2*time.Second)
		if err != nil {
			continue
		}
		if !p.track(backend, true) {
			backend.Close()
			return
		}
		p.open[i].Add(1)
		done := make(chan struct{}, 2)
		pipe := func(dst, src net.Conn) {
			_, _ = io.Copy(dst, src)
			// Either side ending ends both, as a reset would.
			dst.Close()
			src.Close()
			done <- struct{}{}
		}
		go pipe(backend, client)
		go pipe(client, backend)
		<-done
		<-done
		p.open[i].Add(-1)
		p.track(backend, false)
		return
	}
}

// close stops accepting, closes every open connection and waits for the
// forwarding goroutines.
func (p *tcpProxy) close() error {
	err := p.l.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
	return err
}
