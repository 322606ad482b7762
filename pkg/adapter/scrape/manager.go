// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package scrape

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/agentpage"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/parse"
)

// Manager runs the scrape loops of a set of targets through a pool of
// Config.Concurrency workers, of which one namespace's loops hold at most
// Config.NamespaceConcurrency at once, and on-demand scrapes (ScrapeNow)
// through a pool of its own of Config.FirstConcurrency workers, of which
// one namespace's pods hold at most Config.FirstNamespaceConcurrency. A loop is
// not a goroutine: one scheduler (sched.go) runs every target's loop on the
// workers' goroutines.
type Manager struct {
	cfg  Config
	sink Sink
	// agentSink receives gpu-agent pages; nil until SetAgentSink (then a
	// GPUAgent target's scrape fails with an error saying so). The adapter
	// always sets it; with GPU metrics off it simply has no agent targets.
	agentSink AgentSink
	metrics   *metrics
	// creds are the HTTPS targets' verification and the credentials
	// presented to them (Config.TLS).
	creds *credentials
	// tlsSlots bounds the kept connections of HTTPS targets
	// (Config.MaxKeptTLSConnections).
	tlsSlots *connSlots
	// get fetches a target's page into a worker's buffer: (*worker).get,
	// replaced only by this package's tests and benchmarks (to count
	// requests, or to compare with net/http's client).
	get func(w *worker, parent context.Context, deadline time.Time, ep *endpoint, maxBody int64) (int, error)
	// workers is the loops' pool and semaphore: a scrape takes a worker
	// from the channel and puts it back when done.
	workers chan *worker
	// firstWorkers is the same for on-demand scrapes.
	firstWorkers chan *worker
	// firstShares holds each namespace's share of firstWorkers.
	firstShares *namespaceShares
	// flights holds the on-demand scrape in flight of each pod, if any: at
	// most one per pod; a second ScrapeNow of the pod waits for it.
	flightMu sync.Mutex
	flights  map[types.NamespacedName]chan struct{} // closed when done

	lastScrape atomic.Int64 // unix nanoseconds of the latest scrape start

	// exec, while Run runs, is served by one goroutine per on-demand
	// worker: scrapes run on those long-lived stacks (see onStack).
	exec atomic.Pointer[chan *worker]

	mu      sync.Mutex
	targets map[types.NamespacedName]Target // desired, from SetTargets
	loops   map[types.NamespacedName]*loop  // running, only while Run runs
	runCtx  context.Context                 // nil unless Run is running
	sched   *scheduler                      // nil unless Run is running
	loopWG  sync.WaitGroup                  // loops not yet done
}

// loop is one target's background scrape loop, run by the scheduler.
type loop struct {
	target Target
	// ep is the target's request and kept connection, shared with the
	// target's on-demand scrapes; nil when the URL is invalid (epErr).
	ep     *endpoint
	epErr  error
	ctx    context.Context // ends when the loop is stopped
	cancel context.CancelFunc
	// done is closed when the loop is stopped and no scrape of it runs.
	done chan struct{}
	wg   *sync.WaitGroup // Manager.loopWG, done with the loop

	// Owned by the scheduler, under its lock.
	tick  time.Time // the due time of the next scrape, or of the one running
	index int       // in the scheduler's heap while stateDue
	state loopState
	// lastReason is the Reason of the latest scrape's outcome ("" for
	// success), only used by the scrape running.
	lastReason string
}

// finish marks the loop done.
func (l *loop) finish() {
	close(l.done)
	l.wg.Done()
}

// NewManager returns a Manager that records into sink and registers its
// self-metrics into reg (nil: not registered). It starts nothing; call Run.
func NewManager(cfg Config, sink Sink, reg prometheus.Registerer) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid scrape config: %w", err)
	}
	if sink == nil {
		return nil, errors.New("scrape manager needs a sink")
	}
	creds, err := newCredentials(cfg.TLS)
	if err != nil {
		return nil, fmt.Errorf("scrape credentials: %w", err)
	}
	tlsSlots := newConnSlots(cfg.MaxKeptTLSConnections)
	met, err := newMetrics(reg, tlsSlots)
	if err != nil {
		return nil, err
	}
	m := &Manager{
		cfg:          cfg,
		creds:        creds,
		tlsSlots:     tlsSlots,
		sink:         sink,
		get:          (*worker).get,
		metrics:      met,
		workers:      make(chan *worker, cfg.Concurrency),
		firstWorkers: make(chan *worker, cfg.FirstConcurrency),
		firstShares:  newNamespaceShares(cfg.firstNamespaceConcurrency()),
		flights:      map[types.NamespacedName]chan struct{}{},
		targets:      map[types.NamespacedName]Target{},
		loops:        map[types.NamespacedName]*loop{},
	}
	// Buffers and parsers are made on first use.
	for range cfg.Concurrency {
		m.workers <- newWorker()
	}
	for range cfg.FirstConcurrency {
		m.firstWorkers <- newWorker()
	}
	return m, nil
}

// SetAgentSink makes the manager scrape GPUAgent targets into s. Call it
// before Run.
func (m *Manager) SetAgentSink(s AgentSink) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.agentSink = s
}

// SetTargets replaces the set of targets. While Run runs it reconciles at
// once: a loop starts for each new pod, the loops of pods no longer listed
// stop, and a pod whose URL or Server changed gets a new loop. Before Run,
// the set is kept for Run to start. If a pod appears twice, the last wins.
//
// A scrape already in flight for a removed pod is canceled and not recorded,
// unless it is already inside Sink.Record.
func (m *Manager) SetTargets(ts []Target) {
	desired := make(map[types.NamespacedName]Target, len(ts))
	for _, t := range ts {
		desired[t.Pod] = t
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.targets = desired
	if m.runCtx != nil {
		m.reconcileLocked()
	}
}

func (m *Manager) reconcileLocked() {
	for pod, l := range m.loops {
		if t, ok := m.targets[pod]; ok && t == l.target {
			continue
		}
		m.stopLoopLocked(l)
		delete(m.loops, pod)
	}
	now := time.Now()
	for pod, t := range m.targets {
		if _, ok := m.loops[pod]; ok {
			continue
		}
		ctx, cancel := context.WithCancel(m.runCtx)
		l := &loop{target: t, ctx: ctx, cancel: cancel, done: make(chan struct{}), wg: &m.loopWG, index: -1}
		l.ep, l.epErr = m.newEndpoint(t)
		m.loops[pod] = l
		m.loopWG.Add(1)
		m.sched.add(l, now)
	}
	m.metrics.targets.Set(float64(len(m.loops)))
}

// Run starts the loops of the targets set so far and of those set later,
// and blocks until ctx is done; then it stops every loop, waits for them,
// and returns nil. It returns an error at once if it is already running.
func (m *Manager) Run(ctx context.Context) error {
	m.mu.Lock()
	if m.runCtx != nil {
		m.mu.Unlock()
		return errors.New("scrape manager is already running")
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	m.runCtx = runCtx
	stopExec := m.startExec()
	defer stopExec()
	m.sched = newScheduler(m.cfg, m.runScheduled)
	stopSched := m.sched.start(runCtx)
	m.reconcileLocked()
	n := len(m.loops)
	m.mu.Unlock()
	klog.InfoS("Scrape loops started", "targets", n, "interval", m.cfg.Interval, "timeout", m.cfg.Timeout,
		"concurrency", m.cfg.Concurrency, "perNamespace", m.cfg.namespaceConcurrency(),
		"firstConcurrency", m.cfg.FirstConcurrency, "firstPerNamespace", m.cfg.firstNamespaceConcurrency())

	<-ctx.Done()

	m.mu.Lock()
	cancel()
	for pod, l := range m.loops {
		m.stopLoopLocked(l)
		delete(m.loops, pod)
	}
	m.runCtx = nil
	m.sched = nil
	m.metrics.targets.Set(0)
	m.mu.Unlock()
	m.loopWG.Wait()
	stopSched()
	klog.InfoS("Scrape loops stopped")
	return nil
}

// stop cancels the loop and closes its kept connection; a scrape in
// flight is interrupted and its connection closed when it ends.
func (l *loop) stop() {
	l.cancel()
	if l.ep != nil {
		l.ep.close()
	}
}

// stopLoopLocked stops l: the scheduler forgets it, its scrape in flight,
// if any, is interrupted, and l is done at once or when that scrape ends.
func (m *Manager) stopLoopLocked(l *loop) {
	l.stop()
	if !m.sched.remove(l) {
		l.finish()
	}
}

// newEndpoint prepares t's request and connection slot.
func (m *Manager) newEndpoint(t Target) (*endpoint, error) {
	ep, err := newTargetEndpoint(t, m.cfg.RequestGzip, max(90*time.Second, 3*m.cfg.Interval), m.creds)
	if err != nil {
		return nil, err
	}
	if ep.tls {
		ep.slots = m.tlsSlots
	}
	return ep, nil
}

// endpointFor returns the endpoint of t's loop when it has one for the
// same target (the on-demand scrape then shares the loop's kept
// connection), else a new one that release closes.
func (m *Manager) endpointFor(t Target) (ep *endpoint, release func(), epErr error) {
	m.mu.Lock()
	l := m.loops[t.Pod]
	m.mu.Unlock()
	if l != nil && l.target == t {
		return l.ep, func() {}, l.epErr
	}
	ep, epErr = m.newEndpoint(t)
	if epErr != nil {
		return nil, func() {}, epErr
	}
	return ep, ep.close, nil
}

// runScheduled is one scrape of the loop l, run by the scheduler on one of
// its runners, which holds a slot of l's namespace.
func (m *Manager) runScheduled(l *loop) {
	if l.ctx.Err() != nil {
		return
	}
	ok, err := m.scrapeOn(l.ctx, m.workers, l.target, l.ep, l.epErr, false, false)
	if ok {
		l.logState(err)
	}
}

// ScrapeNow scrapes ts once, concurrently through the on-demand pool (never
// a loop's worker), the pods of one namespace through at most its share of
// it (Config.FirstNamespaceConcurrency), records each outcome in the Sink,
// and returns when all are done. A pod already being scraped on demand, by this call or another,
// is not scraped again: ScrapeNow waits for that scrape instead. When ctx
// ends first, scrapes in flight are canceled and recorded with
// ReasonCanceled, targets not yet started are not scraped (nor recorded),
// and ScrapeNow stops waiting for other calls' scrapes.
func (m *Manager) ScrapeNow(ctx context.Context, ts []Target) {
	var (
		next   atomic.Int64
		wg     sync.WaitGroup
		mu     sync.Mutex
		others []chan struct{} // other scrapes in flight of pods in ts
	)
	for range min(len(ts), m.cfg.FirstConcurrency) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(ts) || ctx.Err() != nil {
					return
				}
				t := ts[i]
				done, mine := m.claim(t.Pod)
				if !mine {
					mu.Lock()
					others = append(others, done)
					mu.Unlock()
					continue
				}
				// A slot of the pod's namespace first, then a worker: one
				// namespace's scrapes never hold more than its share of
				// the pool, nor wait in its queue for one.
				leave, entered := m.firstShares.enter(ctx, t.Pod.Namespace)
				if !entered {
					m.unclaim(t.Pod, done)
					return
				}
				ep, release, epErr := m.endpointFor(t)
				ok, err := m.scrapeOnce(ctx, m.firstWorkers, t, ep, epErr, true)
				release()
				leave()
				m.unclaim(t.Pod, done)
				if ok && err != nil {
					klog.V(2).InfoS("Scrape failed", "pod", klog.KRef(t.Pod.Namespace, t.Pod.Name), "url", logURL(t.URL), "err", err)
				}
			}
		}()
	}
	wg.Wait()
	for _, done := range others {
		select {
		case <-done:
		case <-ctx.Done():
			return
		}
	}
}

// namespaceShares bounds the on-demand workers one namespace holds at
// once: a semaphore per namespace with scrapes running or waiting, dropped
// when the last leaves, so its size follows the scrapes in flight, not the
// namespaces ever asked about.
type namespaceShares struct {
	share int
	mu    sync.Mutex
	ns    map[string]*nsShare
}

type nsShare struct {
	slots chan struct{} // one token per scrape holding a slot
	users int           // scrapes holding or waiting for a slot; guarded by namespaceShares.mu
}

func newNamespaceShares(share int) *namespaceShares {
	return &namespaceShares{share: share, ns: map[string]*nsShare{}}
}

// enter waits for a slot of namespace, or for ctx to end (ok false). Call
// leave once the scrape is done.
func (s *namespaceShares) enter(ctx context.Context, namespace string) (leave func(), ok bool) {
	s.mu.Lock()
	sh := s.ns[namespace]
	if sh == nil {
		sh = &nsShare{slots: make(chan struct{}, s.share)}
		s.ns[namespace] = sh
	}
	sh.users++
	s.mu.Unlock()
	select {
	case sh.slots <- struct{}{}:
		return func() {
			<-sh.slots
			s.done(namespace, sh)
		}, true
	case <-ctx.Done():
		s.done(namespace, sh)
		return nil, false
	}
}

func (s *namespaceShares) done(namespace string, sh *nsShare) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sh.users--; sh.users == 0 {
		delete(s.ns, namespace)
	}
}

// claim makes the caller the one on-demand scrape in flight of pod and
// returns mine == true and the channel to pass to unclaim; or, when another
// is in flight, mine == false and a channel closed when that one is done.
func (m *Manager) claim(pod types.NamespacedName) (done chan struct{}, mine bool) {
	m.flightMu.Lock()
	defer m.flightMu.Unlock()
	if done, ok := m.flights[pod]; ok {
		return done, false
	}
	done = make(chan struct{})
	m.flights[pod] = done
	return done, true
}

// unclaim ends the on-demand scrape of pod claimed with done.
func (m *Manager) unclaim(pod types.NamespacedName, done chan struct{}) {
	m.flightMu.Lock()
	defer m.flightMu.Unlock()
	delete(m.flights, pod)
	close(done)
}

// Targets is the number of targets of the latest SetTargets.
func (m *Manager) Targets() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.targets)
}

// LastScrape returns the start time of the most recent scrape attempt, or
// the zero time if there has been none.
func (m *Manager) LastScrape() time.Time {
	n := m.lastScrape.Load()
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// scrapeOnce waits for a worker of pool, scrapes t with it, and records the
// outcome (always when recordCanceled, else only while ctx is live). It
// returns whether a scrape was attempted at all, and its error.
func (m *Manager) scrapeOnce(ctx context.Context, pool chan *worker, t Target, ep *endpoint, epErr error, recordCanceled bool) (bool, error) {
	return m.scrapeOn(ctx, pool, t, ep, epErr, recordCanceled, true)
}

// scrapeOn is scrapeOnce, which runs the scrape on an exec goroutine
// when viaExec (see onStack), else on the caller's.
func (m *Manager) scrapeOn(ctx context.Context, pool chan *worker, t Target, ep *endpoint, epErr error, recordCanceled, viaExec bool) (bool, error) {
	var w *worker
	select {
	case w = <-pool:
	case <-ctx.Done():
		return false, nil
	}
	defer func() {
		w.release()
		pool <- w
	}()
	w.job = job{ctx: ctx, target: t, ep: ep, epErr: epErr, recordCanceled: recordCanceled}
	if viaExec {
		m.onStack(w)
	} else {
		m.run(w)
	}
	err := w.job.err
	w.job = job{}
	return true, err
}

// job is the scrape a worker runs, handed to an exec goroutine inside the
// worker itself so that the hand-off allocates nothing.
type job struct {
	ctx            context.Context
	target         Target
	ep             *endpoint
	epErr          error
	recordCanceled bool
	err            error // the outcome
}

// run runs w's job.
func (m *Manager) run(w *worker) {
	j := &w.job
	j.err = m.scrapeTarget(j.ctx, w, j.target, j.ep, j.epErr, j.recordCanceled)
}

// startExec starts one goroutine per on-demand worker to run scrapes, and
// returns the function that stops them. (The loops' scrapes run on the
// scheduler's runners.)
func (m *Manager) startExec() (stop func()) {
	exec := make(chan *worker)
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range m.cfg.FirstConcurrency {
		wg.Go(func() {
			for {
				select {
				case w := <-exec:
					m.run(w)
					w.done <- struct{}{}
				case <-done:
					return
				}
			}
		})
	}
	m.exec.Store(&exec)
	return func() {
		m.exec.Store(nil)
		close(done)
		wg.Wait()
	}
}

// onStack runs w's job, a scrape, on one of the exec goroutines while Run
// runs, else (or if none is free at once) on the caller's. A scrape needs
// tens of KB of stack (HTTP client, parser). The exec goroutines keep
// theirs from scrape to scrape; run on the caller's instead (ScrapeNow's,
// a new one per call), the stack would grow anew for every call.
func (m *Manager) onStack(w *worker) {
	if exec := m.exec.Load(); exec != nil {
		select {
		case *exec <- w:
			<-w.done
			return
		default:
		}
	}
	m.run(w)
}

// scrapeTarget scrapes t with w and records the outcome; see scrapeOnce.
func (m *Manager) scrapeTarget(ctx context.Context, w *worker, t Target, ep *endpoint, epErr error, recordCanceled bool) error {
	if w.parser == nil {
		servers := m.cfg.Servers
		if m.cfg.Histograms != nil {
			// The parser asks once per page, inside ParseBy on this
			// goroutine: w.hist is the pod's answer, set below.
			servers = servers.WithHistograms(func() bool { return w.hist })
		}
		w.parser = parse.NewParserFor(servers)
	}
	if m.cfg.Histograms != nil && t.Kind == ModelServer {
		w.hist = m.cfg.Histograms(t.Pod)
	}

	start := time.Now()
	m.lastScrape.Store(start.UnixNano())
	var (
		page *parse.Page
		pods []agentpage.PodGPU
		n    int
		err  error
	)
	switch {
	case epErr != nil:
		err = &Error{ReasonConnection, fmt.Errorf("invalid target: %w", epErr)}
	case t.Kind == GPUAgent && m.agentSink == nil:
		err = &Error{ReasonParse, errors.New("gpu-agent target but no agent sink configured")}
	default:
		// Connect, request, body and parse share one deadline; the end of
		// ctx interrupts the request, and an earlier deadline of ctx
		// (ScrapeNow's caller's) also bounds the parse.
		deadline := start.Add(m.cfg.Timeout)
		n, err = m.get(w, ctx, deadline, ep, m.cfg.MaxBodySize)
		switch {
		case err != nil:
		case t.Kind == GPUAgent:
			pods, err = w.parseAgent()
		default:
			parseBy := deadline
			if d, ok := ctx.Deadline(); ok && d.Before(parseBy) {
				parseBy = d
			}
			page, err = w.parsePage(ctx, parseBy, t.Server)
		}
	}

	m.metrics.scrapes.Inc()
	m.metrics.duration.Observe(time.Since(start).Seconds())
	m.metrics.bytes.Add(float64(n))
	if err != nil {
		m.metrics.failures.WithLabelValues(ReasonOf(err)).Inc()
		err = fmt.Errorf("scraping %s of pod %s: %w", logURL(t.URL), t.Pod, err)
		page, pods = nil, nil
	}
	if page != nil {
		m.metrics.countRejected(page)
	}
	if ctx.Err() == nil || recordCanceled {
		if t.Kind == GPUAgent {
			if m.agentSink != nil {
				m.agentSink.RecordAgent(t.Pod, start, pods, err)
			}
		} else {
			m.sink.Record(t.Pod, start, page, err)
		}
	}
	return err
}
