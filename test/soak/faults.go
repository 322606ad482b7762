// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/test/e2e/framework"
)

// Fault timing and the recovery bounds asserted.
const (
	// componentDown is how long a stopped component stays down.
	componentDown = 5 * time.Second
	// faultGap is the quiet time after one fault recovers.
	faultGap = 2 * time.Second
	// pageBroken is how long a model server misbehaves: past max-age, so
	// that its last value must have left the answers.
	pageBroken = maxAge + 7*time.Second
	// Recovery bounds: from the component's restart (control plane), from
	// the kill (adapter: the other replica answers) or from the page's
	// mending (model server) to the first correct answer.
	controlPlaneBound = 30 * time.Second
	// killedReplica is the adapter replica the adapter faults kill.
	killedReplica = 1
	failoverBound = 10 * time.Second
	pageBound     = 10 * time.Second
	// reuseSettle: after the API server or etcd is back, addresses are not
	// reused for this long (the adapters' watches reconnect with backoff).
	reuseSettle = 20 * time.Second
)

// fault is one injected fault and what it took to recover.
type fault struct {
	at      time.Time
	kind    string
	target  string
	back    time.Time     // restarted / page mended
	leftOut time.Duration // pages: from breaking to the first answer without the pod (-1: never seen)
	// recovery: from back (from at for an adapter kill) to the first
	// correct answer; recovered false if none came within bound.
	recovery  time.Duration
	bound     time.Duration
	recovered bool
	note      string
	// from and ok define recovery: the first answer started at or after
	// from for which ok holds. It is measured again on the whole timeline
	// at the end, as questions still in flight may have started earlier.
	from time.Time
	ok   func(answer) bool
}

// measure sets the recovery from the timeline as it stands.
func (ft *fault) measure(tl *timeline) {
	if at, found := tl.firstAfter(ft.from, ft.ok); found {
		ft.recovery, ft.recovered = at.Sub(ft.from), true
	}
}

// faults is the record of every fault, safe for the two fault loops.
type faults struct {
	mu   sync.Mutex
	list []*fault
	// killed are the adapter processes killed on purpose.
	killed map[*framework.Process]bool
}

func (f *faults) add(ft *fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.list = append(f.list, ft)
}

func (f *faults) markKilled(p *framework.Process) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.killed[p] = true
}

func (f *faults) wasKilled(p *framework.Process) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.killed[p]
}

// schedule is one cycle of faults, one at a time: the environment's three
// (kube-apiserver, etcd, an adapter replica) interleaved with the seven
// broken pages, so that each recovery is measured alone.
var schedule = []string{"kube-apiserver", "page", "page", "etcd", "page", "page", "adapter", "page", "page", "page"}

// injectFaults runs the schedule over and over until deadline: each fault
// is injected after the last one recovered (or its bound passed).
func (e *env) injectFaults(ctx context.Context, deadline time.Time, reg *registry, tl *timeline, fs *faults,
	victims func() []string, rng *rand.Rand, say func(string, ...any)) {
	pages := 0
	for k := 0; time.Now().Before(deadline) && ctx.Err() == nil; k++ {
		var ft *fault
		switch step := schedule[k%len(schedule)]; step {
		case "page":
			ft = e.pageFault(ctx, modes[pages%len(modes)], reg, tl, victims, rng)
			pages++
			if ft != nil {
				say("fault %-28s %-26s left out after %s, recovered in %s", ft.kind, ft.target, durText(ft.leftOut), recoveryText(ft))
			}
		case "adapter":
			ft = e.killAdapter(ctx, tl, fs)
		default:
			ft = e.controlPlaneFault(ctx, step, reg, tl)
		}
		if ft == nil {
			continue
		}
		fs.add(ft)
		if !strings.HasPrefix(ft.kind, "model server") {
			say("fault %-28s %-26s down %.1fs, recovered in %s", ft.kind, ft.target, ft.back.Sub(ft.at).Seconds(), recoveryText(ft))
		}
		if !sleep(ctx, faultGap) {
			return
		}
	}
}

// controlPlaneFault stops kube-apiserver or etcd, keeps it down for
// componentDown, starts it again (same ports, data, certificates) and
// waits for a correct answer. Address reuse is paused meanwhile.
func (e *env) controlPlaneFault(ctx context.Context, target string, reg *registry, tl *timeline) *fault {
	ft := &fault{kind: target + " stop", target: target, bound: controlPlaneBound}
	stop, start := e.cp.StopAPIServer, e.cp.StartAPIServer
	if target == "etcd" {
		stop, start = e.cp.StopEtcd, e.cp.StartEtcd
	}
	reg.pauseReuse(time.Now().Add(24 * time.Hour))
	ft.at = time.Now()
	if err := stop(); err != nil {
		ft.note = err.Error()
	}
	sleep(ctx, componentDown)
	ft.back = time.Now()
	if err := start(ctx); err != nil {
		ft.note = fmt.Sprintf("restart: %v", err)
		klog.ErrorS(err, "soak: restart", "component", target)
	}
	reg.pauseReuse(time.Now().Add(reuseSettle))
	ft.from, ft.ok = ft.back, isHealthy
	ft.recovery, ft.recovered = tl.waitFor(ctx, ft.from, ft.bound+5*time.Second, ft.ok)
	return ft
}

// killAdapter SIGKILLs replica killedReplica, measures how long until a
// correct answer through the aggregator, and restarts it. The target says
// whether the aggregator was connected to it (it reconnects, round robin,
// after each kube-apiserver restart, so about half the kills hit the
// replica that was answering). Replica 0 is never killed: its memory and
// goroutines are judged over the whole soak.
func (e *env) killAdapter(ctx context.Context, tl *timeline, fs *faults) *fault {
	i := killedReplica
	conns := e.adapters.Connections()
	ft := &fault{kind: "adapter SIGKILL", target: fmt.Sprintf("replica %d (%d of %d conns)", i, conns[i], sum(conns)), bound: failoverBound}
	p := e.adapters.Replica(i)
	fs.markKilled(p)
	ft.at = time.Now()
	if err := e.adapters.Kill(i); err != nil {
		ft.note = err.Error()
	}
	ft.from, ft.ok = ft.at, isHealthy
	ft.recovery, ft.recovered = tl.waitFor(ctx, ft.from, ft.bound+5*time.Second, ft.ok)
	sleep(ctx, componentDown)
	ft.back = time.Now()
	if err := e.adapters.Restart(ctx, i); err != nil {
		ft.note = fmt.Sprintf("restart: %v", err)
		klog.ErrorS(err, "soak: restart adapter", "replica", i)
	}
	return ft
}

// pageFault breaks the page of one of victims() with mode for pageBroken,
// mends it, and measures when the pod left the answers and when its value
// came back. It returns nil when there was no pod to break.
func (e *env) pageFault(ctx context.Context, mode string, reg *registry, tl *timeline, victims func() []string, rng *rand.Rand) *fault {
	pods := victims()
	if len(pods) == 0 {
		return nil
	}
	pod := pods[rng.IntN(len(pods))]
	ip, ok := reg.ip(pod)
	if !ok {
		return nil
	}
	ft := &fault{kind: "model server " + mode, target: pod, bound: pageBound, at: time.Now()}
	reg.breakPage(pod, ft.at)
	if !e.pods.setMode(ip, mode) {
		reg.mendPage(pod, ft.at)
		return nil // the pod went away meanwhile
	}
	sleep(ctx, pageBroken)
	// Recorded as mended just before it is: an answer that arrives after
	// the record may hold a scrape of the mended page.
	ft.back = time.Now()
	reg.mendPage(pod, ft.back)
	e.pods.setMode(ip, modeHealthy)
	want, _ := reg.value(pod)
	ft.from, ft.ok = ft.back, func(a answer) bool { return a.err == nil && a.values[pod] == float64(want) }
	ft.recovery, ft.recovered = tl.waitFor(ctx, ft.from, ft.bound+5*time.Second, ft.ok)
	ft.leftOut = -1
	if at, ok := tl.firstAfter(ft.at, func(a answer) bool {
		_, has := a.values[pod]
		return a.err == nil && !has && a.start.Before(ft.back)
	}); ok {
		ft.leftOut = at.Sub(ft.at)
	}
	return ft
}

func sum(xs []int64) int64 {
	var n int64
	for _, x := range xs {
		n += x
	}
	return n
}

func durText(d time.Duration) string {
	if d < 0 {
		return "never"
	}
	return fmt.Sprintf("%.1fs", d.Seconds())
}

func recoveryText(ft *fault) string {
	if !ft.recovered {
		return fmt.Sprintf("NOT within %s", ft.bound)
	}
	return durText(ft.recovery)
}
