package scrape

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/agentpage"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/parse"
)

// Manager runs the scrape loops of a set of targets through a pool of
// Config.Concurrency workers, of which one namespace's loops hold at most
// Config.NamespaceConcurrency at once, and on-demand scrapes (ScrapeNow)
// through a pool of its own of Config.FirstConcurrency workers.
type Manager struct {
	cfg  Config
	sink Sink
	// agentSink receives gpu-agent pages; nil until SetAgentSink (then a
	// GPUAgent target's scrape fails with an error saying so). The adapter
	// always sets it; with GPU metrics off it simply has no agent targets.
	agentSink AgentSink
	metrics   *metrics
	// get fetches a target's page into a worker's buffer: (*worker).get,
	// replaced only by this package's tests and benchmarks (to count
	// requests, or to compare with net/http's client).
	get func(w *worker, parent context.Context, deadline time.Time, ep *endpoint, maxBody int64) (int, error)
	// workers is the loops' pool and semaphore: a scrape takes a worker
	// from the channel and puts it back when done.
	workers chan *worker
	// firstWorkers is the same for on-demand scrapes.
	firstWorkers chan *worker
	// share caps the loop workers one namespace holds at once.
	share *namespaceShare

	// flights holds the on-demand scrape in flight of each pod, if any: at
	// most one per pod; a second ScrapeNow of the pod waits for it.
	flightMu sync.Mutex
	flights  map[types.NamespacedName]chan struct{} // closed when done

	lastScrape atomic.Int64 // unix nanoseconds of the latest scrape start

	// exec, while Run runs, is served by one goroutine per worker: scrapes
	// run on those long-lived stacks (see onStack).
	exec atomic.Pointer[chan *worker]

	mu      sync.Mutex
	targets map[types.NamespacedName]Target // desired, from SetTargets
	loops   map[types.NamespacedName]*loop  // running, only while Run runs
	runCtx  context.Context                 // nil unless Run is running
	loopWG  sync.WaitGroup
}

// loop is one target's background scrape loop.
type loop struct {
	target Target
	// ep is the target's request and kept connection, shared with the
	// target's on-demand scrapes; nil when the URL is invalid (epErr).
	ep     *endpoint
	epErr  error
	cancel context.CancelFunc
	done   chan struct{}
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
	met, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	m := &Manager{
		cfg:          cfg,
		sink:         sink,
		get:          (*worker).get,
		metrics:      met,
		workers:      make(chan *worker, cfg.Concurrency),
		firstWorkers: make(chan *worker, cfg.FirstConcurrency),
		share:        newNamespaceShare(cfg.namespaceConcurrency()),
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
		l.stop()
		delete(m.loops, pod)
	}
	for pod, t := range m.targets {
		if _, ok := m.loops[pod]; ok {
			continue
		}
		ctx, cancel := context.WithCancel(m.runCtx)
		l := &loop{target: t, cancel: cancel, done: make(chan struct{})}
		l.ep, l.epErr = m.newEndpoint(t)
		m.loops[pod] = l
		m.loopWG.Add(1)
		go m.runLoop(ctx, l)
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
	m.reconcileLocked()
	n := len(m.loops)
	m.mu.Unlock()
	klog.InfoS("Scrape loops started", "targets", n, "interval", m.cfg.Interval, "timeout", m.cfg.Timeout,
		"concurrency", m.cfg.Concurrency, "firstConcurrency", m.cfg.FirstConcurrency)

	<-ctx.Done()

	m.mu.Lock()
	cancel()
	for pod, l := range m.loops {
		l.stop()
		delete(m.loops, pod)
	}
	m.runCtx = nil
	m.metrics.targets.Set(0)
	m.mu.Unlock()
	m.loopWG.Wait()
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

// newEndpoint prepares t's request and connection slot.
func (m *Manager) newEndpoint(t Target) (*endpoint, error) {
	return newEndpoint(t.URL, m.cfg.RequestGzip, max(90*time.Second, 3*m.cfg.Interval))
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

// runLoop scrapes l.target every Interval, after a random start delay,
// until ctx is done.
func (m *Manager) runLoop(ctx context.Context, l *loop) {
	defer m.loopWG.Done()
	defer close(l.done)
	t := l.target

	delay := time.Duration(m.cfg.Jitter * float64(m.cfg.Interval) * rand.Float64())
	timer := time.NewTimer(delay)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return
	case <-timer.C:
	}

	ticker := time.NewTicker(m.cfg.Interval)
	defer ticker.Stop()
	lastReason := ""
	for {
		ok, err := m.loopScrape(ctx, t, l.ep, l.epErr)
		if ok {
			// Log changes of state only; every failure is in the metrics.
			if reason := ReasonOf(err); reason != lastReason && reason != ReasonCanceled {
				if err != nil {
					klog.ErrorS(err, "Scrape failing", "pod", klog.KRef(t.Pod.Namespace, t.Pod.Name), "url", t.URL, "reason", reason)
				} else {
					klog.InfoS("Scrape recovered", "pod", klog.KRef(t.Pod.Namespace, t.Pod.Name), "url", t.URL)
				}
				lastReason = reason
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// loopScrape is one scrape of a loop: it waits for a slot of the target's
// namespace, then for a loop worker.
func (m *Manager) loopScrape(ctx context.Context, t Target, ep *endpoint, epErr error) (bool, error) {
	slots, ok := m.share.acquire(ctx, t.Pod.Namespace)
	if !ok {
		return false, nil
	}
	defer m.share.release(t.Pod.Namespace, slots)
	return m.scrapeOnce(ctx, m.workers, t, ep, epErr, false)
}

// ScrapeNow scrapes ts once, concurrently through the on-demand pool (never
// a loop's worker), records each outcome in the Sink, and returns when all
// are done. A pod already being scraped on demand, by this call or another,
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
				ep, release, epErr := m.endpointFor(t)
				ok, err := m.scrapeOnce(ctx, m.firstWorkers, t, ep, epErr, true)
				release()
				m.unclaim(t.Pod, done)
				if ok && err != nil {
					klog.V(2).InfoS("Scrape failed", "pod", klog.KRef(t.Pod.Namespace, t.Pod.Name), "url", t.URL, "err", err)
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
	m.onStack(w)
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
	j.err = m.scrapeWith(j.ctx, w, j.target, j.ep, j.epErr, j.recordCanceled)
}

// startExec starts one goroutine per worker to run scrapes, and returns
// the function that stops them.
func (m *Manager) startExec() (stop func()) {
	exec := make(chan *worker)
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range m.cfg.Concurrency + m.cfg.FirstConcurrency {
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
// theirs from scrape to scrape; run on a pod's loop goroutine instead,
// there being one per pod, the stack would stay grown with every loop
// between scrapes, and be copied whenever the collector shrank it.
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

// scrapeWith scrapes t with w and records the outcome; see scrapeOnce.
func (m *Manager) scrapeWith(ctx context.Context, w *worker, t Target, ep *endpoint, epErr error, recordCanceled bool) error {
	if w.parser == nil {
		w.parser = parse.NewParserFor(m.cfg.Servers)
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
		err = &Error{ReasonConnection, fmt.Errorf("invalid URL: %w", epErr)}
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
		err = fmt.Errorf("scraping %s of pod %s: %w", t.URL, t.Pod, err)
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
