// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Finish reasons, as in vLLM's finished_reason label and the OpenAI API.
const (
	ReasonLength = "length"
	ReasonStop   = "stop"
	ReasonAbort  = "abort"
)

// ErrStopped is returned by Submit once the engine has stopped.
var ErrStopped = errors.New("engine stopped")

// Engine is the simulated scheduler: a single goroutine (Run) that steps a
// virtual clock, one continuous-batching step at a time, in the manner of
// vLLM V1's scheduler. Submit and the Stream methods are safe for
// concurrent use; all scheduling state belongs to the Run goroutine.
type Engine struct {
	cfg     Config
	clock   Clock
	rec     recorder
	in      chan *seq
	aborts  chan *seq
	stopped chan struct{}

	// Owned by the Run goroutine (or by a test driving step/commit).
	waiting    []*seq // FIFO; preempted requests go back to the front
	running    []*seq // scheduling order; the last is preempted first
	usedBlocks int
	sched      []scheduled
	lora       loraState

	busyMu sync.Mutex
	busy   busyState
}

// loraState is the engine's view of its LoRA adapters (cfg.LoRAAdapters),
// owned by the Run goroutine.
type loraState struct {
	names    []string // the adapters; a seq's adapter i+1 is names[i]
	order    []int    // adapter numbers (1-based) in the order of their first request, as vLLM lists them
	seen     []bool   // by adapter number
	inBatch  []int    // adapter numbers in the running batch, for admission
	run      []int    // per adapter number: running requests
	wait     []int    // per adapter number: waiting requests
	lastRun  []string // the lists last reported
	lastWait []string
	reported bool
}

// busyState accounts the time the engine's simulated GPU spends in steps.
type busyState struct {
	done, smDone       time.Duration // busy time (and busy × fullness) of finished steps
	stepStart, stepEnd time.Duration // the step in progress, if stepEnd > stepStart
	fullness           float64       // of the step in progress
}

// Busy is a reading of the engine's busy-time counters, in simulated time
// since the engine started.
type Busy struct {
	// Now is the simulated time of the reading.
	Now time.Duration
	// Busy is the time spent in engine steps: what NVML's utilization
	// counts (a kernel was running).
	Busy time.Duration
	// SMBusy is Busy weighted by each step's fullness: the larger of its
	// requests over max-num-seqs and its batched tokens over
	// max-num-batched-tokens, a stand-in for SM activity.
	SMBusy time.Duration
}

// Busy reads the busy-time counters at the clock's current time.
func (e *Engine) Busy() Busy {
	now := e.clock.Now()
	e.busyMu.Lock()
	b := e.busy
	e.busyMu.Unlock()
	out := Busy{Now: now, Busy: b.done, SMBusy: b.smDone}
	if b.stepEnd > b.stepStart && now > b.stepStart {
		in := min(now, b.stepEnd) - b.stepStart
		out.Busy += in
		out.SMBusy += time.Duration(float64(in) * b.fullness)
	}
	return out
}

// stepping records that a step of fullness runs from start to end.
func (e *Engine) stepping(start, end time.Duration, fullness float64) {
	e.busyMu.Lock()
	e.busy.stepStart, e.busy.stepEnd, e.busy.fullness = start, end, fullness
	e.busyMu.Unlock()
}

// stepped records that the step in progress finished.
func (e *Engine) stepped() {
	e.busyMu.Lock()
	d := e.busy.stepEnd - e.busy.stepStart
	e.busy.done += d
	e.busy.smDone += time.Duration(float64(d) * e.busy.fullness)
	e.busy.stepStart, e.busy.stepEnd = 0, 0
	e.busyMu.Unlock()
}

type scheduled struct {
	s *seq
	n int // tokens computed for s in this step
}

// seq is one request inside the engine.
type seq struct {
	prompt    int
	maxTokens int
	adapter   int // 0: the base model; i+1: LoRA adapter i of cfg.LoRAAdapters

	// Engine-owned.
	computed    int           // tokens in the KV cache
	blocks      int           // KV blocks held
	arrival     time.Duration // simulated arrival time
	firstSched  time.Duration // first time scheduled (end of queueing)
	wasSched    bool
	firstToken  time.Duration
	lastToken   time.Duration
	preemptions int
	finished    bool

	// Shared with the Stream reader.
	mu        sync.Mutex
	generated int
	done      bool
	reason    string
	notify    chan struct{}
	cancelled bool
}

// NewEngine returns an engine for a validated cfg that reports to rec
// (nil: nothing). Start it with Run.
func NewEngine(cfg Config, clock Clock, rec recorder) *Engine {
	if rec == nil {
		rec = nopRecorder{}
	}
	names := cfg.AdapterNames()
	return &Engine{
		cfg:     cfg,
		clock:   clock,
		rec:     rec,
		in:      make(chan *seq, 4096),
		aborts:  make(chan *seq, 4096),
		stopped: make(chan struct{}),
		lora: loraState{
			names: names,
			seen:  make([]bool, len(names)+1),
			run:   make([]int, len(names)+1),
			wait:  make([]int, len(names)+1),
		},
	}
}

// Stream is the caller's handle on a submitted request.
type Stream struct {
	e *Engine
	s *seq
}

// Submit queues a request of promptTokens prompt tokens that generates
// maxTokens tokens. The caller must Cancel the stream if it stops reading
// before the request is done (Cancel after done is a no-op).
func (e *Engine) Submit(ctx context.Context, promptTokens, maxTokens int) (*Stream, error) {
	return e.SubmitAdapter(ctx, 0, promptTokens, maxTokens)
}

// SubmitAdapter is Submit for a request of LoRA adapter number adapter:
// 0 is the base model, i+1 is adapter i of the configuration's
// LoRAAdapters. It is admitted to the running batch only while fewer than
// MaxLoRAs distinct adapters run or its adapter already does.
func (e *Engine) SubmitAdapter(ctx context.Context, adapter, promptTokens, maxTokens int) (*Stream, error) {
	if adapter < 0 || adapter > len(e.lora.names) {
		return nil, fmt.Errorf("adapter number %d out of range [0, %d]", adapter, len(e.lora.names))
	}
	s := &seq{prompt: promptTokens, maxTokens: maxTokens, adapter: adapter, notify: make(chan struct{}, 1), arrival: e.clock.Now()}
	select {
	case e.in <- s:
		return &Stream{e: e, s: s}, nil
	case <-e.stopped:
		return nil, ErrStopped
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Wait blocks until more than seen tokens have been generated or the request
// is done, and returns the number generated so far, whether it is done and,
// if so, its finish reason.
func (st *Stream) Wait(ctx context.Context, seen int) (generated int, done bool, reason string, err error) {
	for {
		st.s.mu.Lock()
		generated, done, reason = st.s.generated, st.s.done, st.s.reason
		st.s.mu.Unlock()
		if generated > seen || done {
			return generated, done, reason, nil
		}
		select {
		case <-st.s.notify:
		case <-st.e.stopped:
			return generated, false, "", ErrStopped
		case <-ctx.Done():
			return generated, false, "", ctx.Err()
		}
	}
}

// Cancel aborts the request if it is not done yet.
func (st *Stream) Cancel() {
	st.s.mu.Lock()
	skip := st.s.done || st.s.cancelled
	st.s.cancelled = true
	st.s.mu.Unlock()
	if skip {
		return
	}
	select {
	case st.e.aborts <- st.s:
	case <-st.e.stopped:
	}
}

// Run steps the engine until ctx is done. It returns nil on cancellation.
func (e *Engine) Run(ctx context.Context) error {
	defer close(e.stopped)
	now := e.clock.Now()
	for {
		e.drain(now)
		if len(e.running) == 0 && len(e.waiting) == 0 {
			e.rec.state(0, 0, 0, e.cfg.NumGPUBlocks)
			if e.lora.reported { // no line before the first step, as in vLLM
				e.reportAdapters()
			}
			select {
			case <-ctx.Done():
				return nil
			case s := <-e.in:
				now = e.clock.Now()
				e.enqueue(s, now)
			case s := <-e.aborts:
				e.abort(s, now)
			}
			continue
		}
		d := e.schedule(now)
		end := now + d
		e.stepping(now, end, e.fullness())
		if err := e.clock.SleepUntil(ctx, end); err != nil {
			return nil
		}
		e.stepped()
		e.commit(end)
		now = end
	}
}

// drain takes in every request submitted or cancelled since the last step.
func (e *Engine) drain(now time.Duration) {
	for {
		select {
		case s := <-e.in:
			e.enqueue(s, now)
		case s := <-e.aborts:
			e.abort(s, now)
		default:
			return
		}
	}
}

func (e *Engine) enqueue(s *seq, now time.Duration) {
	s.mu.Lock()
	cancelled := s.cancelled
	s.mu.Unlock()
	if cancelled {
		e.finish(s, now, ReasonAbort, s.generated)
		return
	}
	if s.arrival > now {
		s.arrival = now
	}
	if s.adapter > 0 && !e.lora.seen[s.adapter] {
		e.lora.seen[s.adapter] = true
		e.lora.order = append(e.lora.order, s.adapter)
	}
	e.waiting = append(e.waiting, s)
}

// abort removes s from the engine if it is still there.
func (e *Engine) abort(s *seq, now time.Duration) {
	if s.finished {
		return
	}
	for i, r := range e.running {
		if r == s {
			e.running = append(e.running[:i], e.running[i+1:]...)
			e.free(s)
			e.finish(s, now, ReasonAbort, s.generated)
			return
		}
	}
	for i, r := range e.waiting {
		if r == s {
			e.waiting = append(e.waiting[:i], e.waiting[i+1:]...)
			e.finish(s, now, ReasonAbort, s.generated)
			return
		}
	}
}

func (e *Engine) free(s *seq) {
	e.usedBlocks -= s.blocks
	s.blocks = 0
	s.computed = 0
}

// schedule plans one step at simulated time now, like vLLM V1's scheduler:
// running requests first, in order, each getting the tokens it still needs
// within the step's token budget; when KV blocks run out, the last running
// request is preempted (its KV freed, to be recomputed) and put back at the
// front of the waiting queue. Waiting requests are admitted in FIFO order
// only if nothing was preempted, while the batch, the token budget and the
// KV cache allow. A waiting request of a LoRA adapter is skipped (it keeps
// its place) while MaxLoRAs other adapters are in the batch, as vLLM's
// scheduler does. It returns the step's simulated duration.
func (e *Engine) schedule(now time.Duration) time.Duration {
	e.sched = e.sched[:0]
	budget := e.cfg.MaxNumBatchedTokens
	prefill := 0
	preempted := false
	for i := 0; i < len(e.running) && budget > 0; i++ {
		s := e.running[i]
		n := min(s.prompt+s.generated-s.computed, budget)
		need := blocksFor(s.computed+n, e.cfg.BlockSize) - s.blocks
		selfPreempted := false
		for need > e.cfg.NumGPUBlocks-e.usedBlocks {
			victim := e.running[len(e.running)-1]
			e.running = e.running[:len(e.running)-1]
			e.preempt(victim)
			preempted = true
			if victim == s {
				selfPreempted = true
				break
			}
		}
		if selfPreempted {
			break // s was the last running request
		}
		e.usedBlocks += need
		s.blocks += need
		e.sched = append(e.sched, scheduled{s: s, n: n})
		budget -= n
		if n != 1 || s.computed <= 0 {
			prefill += n
		}
	}
	e.batchAdapters()
	for i := 0; !preempted && i < len(e.waiting) && len(e.running) < e.cfg.MaxNumSeqs && budget > 0; {
		s := e.waiting[i]
		if !e.admitsAdapter(s.adapter) {
			i++ // skipped: its adapter would exceed max-loras
			continue
		}
		n := min(s.prompt+s.generated-s.computed, budget)
		need := blocksFor(n, e.cfg.BlockSize)
		if need > e.cfg.NumGPUBlocks-e.usedBlocks {
			break // head of line waits for KV blocks
		}
		if i == 0 {
			e.waiting = e.waiting[1:]
		} else {
			e.waiting = slices.Delete(e.waiting, i, i+1)
		}
		e.running = append(e.running, s)
		e.usedBlocks += need
		s.blocks = need
		if !s.wasSched {
			s.wasSched = true
			s.firstSched = now
		}
		e.sched = append(e.sched, scheduled{s: s, n: n})
		budget -= n
		prefill += n
	}
	tokens, context := 0, 0
	for _, sc := range e.sched {
		tokens += sc.n
		context += sc.s.computed + sc.n
	}
	return e.cfg.StepTime(len(e.sched), tokens, prefill, context)
}

// batchAdapters collects the adapters of the running batch into
// e.lora.inBatch, before waiting requests are admitted.
func (e *Engine) batchAdapters() {
	e.lora.inBatch = e.lora.inBatch[:0]
	if len(e.lora.names) == 0 {
		return
	}
	for _, s := range e.running {
		if s.adapter > 0 && !slices.Contains(e.lora.inBatch, s.adapter) {
			e.lora.inBatch = append(e.lora.inBatch, s.adapter)
		}
	}
}

// admitsAdapter reports whether a request of adapter may join the running
// batch, and if so counts its adapter in: the base model always may; an
// adapter may when it is in the batch already or fewer than MaxLoRAs are.
func (e *Engine) admitsAdapter(adapter int) bool {
	if adapter == 0 || slices.Contains(e.lora.inBatch, adapter) {
		return true
	}
	if len(e.lora.inBatch) >= e.cfg.MaxLoRAs {
		return false
	}
	e.lora.inBatch = append(e.lora.inBatch, adapter)
	return true
}

// reportAdapters tells the recorder which adapters have running and which
// have waiting requests, in the order of their first request, when that
// changed since the last report (and once after the first step).
func (e *Engine) reportAdapters() {
	l := &e.lora
	if len(l.names) == 0 {
		return
	}
	clear(l.run)
	clear(l.wait)
	for _, s := range e.running {
		l.run[s.adapter]++
	}
	for _, s := range e.waiting {
		l.wait[s.adapter]++
	}
	var run, wait []string
	for _, a := range l.order {
		if l.run[a] > 0 {
			run = append(run, l.names[a-1])
		}
		if l.wait[a] > 0 {
			wait = append(wait, l.names[a-1])
		}
	}
	if l.reported && slices.Equal(run, l.lastRun) && slices.Equal(wait, l.lastWait) {
		return
	}
	l.reported, l.lastRun, l.lastWait = true, run, wait
	e.rec.adapters(run, wait)
}

// fullness is how full the planned step is: the larger of its requests
// over max-num-seqs and its tokens over max-num-batched-tokens, at most 1.
func (e *Engine) fullness() float64 {
	tokens := 0
	for _, sc := range e.sched {
		tokens += sc.n
	}
	f := max(float64(len(e.sched))/float64(e.cfg.MaxNumSeqs), float64(tokens)/float64(e.cfg.MaxNumBatchedTokens))
	return min(f, 1)
}

func (e *Engine) preempt(s *seq) {
	e.free(s)
	s.preemptions++
	e.waiting = append([]*seq{s}, e.waiting...)
	e.rec.preempted()
}

// commit applies the step planned by schedule, which ends at simulated time
// t: computed tokens enter the KV cache, every request whose prompt (and
// earlier output) is now fully computed emits one token, and requests that
// reached max_tokens finish.
//
// Clients are woken only after the step's counters and histograms are
// recorded, as in vLLM, whose engine updates its metrics before the API
// server streams the tokens: a client that has received its last token
// finds it counted on /metrics.
func (e *Engine) commit(t time.Duration) {
	tokens, genTokens, promptTokens := 0, 0, 0
	var emitted, ended []*seq
	for _, sc := range e.sched {
		s := sc.s
		tokens += sc.n
		s.computed += sc.n
		if s.computed < s.prompt+s.generated {
			continue // chunked prefill not finished
		}
		gen := s.generated + 1
		if gen < s.maxTokens { // the last token is published by finish, with done
			s.mu.Lock()
			s.generated = gen
			s.mu.Unlock()
		}
		genTokens++
		if gen == 1 {
			s.firstToken = t
			promptTokens += s.prompt
			e.rec.firstToken(nonNeg(t - s.arrival))
		} else {
			e.rec.interToken(nonNeg(t - s.lastToken))
		}
		s.lastToken = t
		if gen >= s.maxTokens {
			ended = append(ended, s)
		} else {
			emitted = append(emitted, s)
		}
	}
	if len(e.sched) > 0 {
		e.rec.step(tokens, promptTokens, genTokens)
	}
	for _, s := range ended {
		e.finish(s, t, ReasonLength, s.maxTokens)
	}
	for _, s := range emitted {
		signal(s)
	}
	kept := e.running[:0]
	for _, s := range e.running {
		if s.finished {
			e.free(s)
			continue
		}
		kept = append(kept, s)
	}
	clear(e.running[len(kept):])
	e.running = kept
	e.sched = e.sched[:0]
	e.rec.state(len(e.running), len(e.waiting), e.usedBlocks, e.cfg.NumGPUBlocks)
	e.reportAdapters()
}

// finish marks s done at t with generated tokens, publishing both at once
// (a reader must not see the last token without done), and records its
// latencies. Blocks are freed by the caller.
func (e *Engine) finish(s *seq, t time.Duration, reason string, generated int) {
	s.finished = true
	s.mu.Lock()
	s.generated = generated
	s.done = true
	s.reason = reason
	gen := s.generated
	s.mu.Unlock()
	f := finishedRequest{
		reason:       reason,
		promptTokens: s.prompt,
		genTokens:    gen,
		maxTokens:    s.maxTokens,
		e2e:          nonNeg(t - s.arrival),
	}
	if s.wasSched {
		f.queue = nonNeg(s.firstSched - s.arrival)
		f.inference = nonNeg(s.lastToken - s.firstSched)
	} else {
		f.queue = nonNeg(t - s.arrival)
	}
	if gen > 0 {
		f.prefill = nonNeg(s.firstToken - s.firstSched)
		f.decode = nonNeg(s.lastToken - s.firstToken)
	}
	e.rec.finished(f)
	signal(s) // after recording: see commit
}

func signal(s *seq) {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

func nonNeg(d time.Duration) time.Duration {
	return max(d, 0)
}
