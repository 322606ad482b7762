// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Command soak is `make soak`: the adapter under churn and faults on a real
// control plane, judged from what the HPA sees. It starts etcd,
// kube-apiserver and kube-controller-manager (the e2e framework), two
// adapter replicas behind one APIService (a TCP proxy stands in for the
// Service), and serves every pod's vLLM page from this process on
// 127.4.x.y:8000, each pod's queue size derived from its UID. For --duration:
//
//   - pods churn: created, deleted, and replaced by a new pod (new name, new
//     UID, another value) on the address the old one held;
//   - model servers misbehave in turn: hang mid-body, 500, connection reset,
//     a page over --max-body-size, headers past --scrape-timeout, a gzip
//     bomb, a page of another server;
//   - the environment fails in turn: kube-apiserver stopped and restarted,
//     etcd stopped and restarted, adapter replica 1 SIGKILLed and restarted
//     (replica 0 lives throughout: its memory and goroutines are judged);
//
// while a client asks every soak pod's inference_queue_size through the
// aggregator four times a second (and each replica directly once a
// second, as a cluster's several API servers would) and an HPA (target = each pod's value, no
// scale-down stabilization) watches a Deployment whose pods are among the
// broken ones. It fails on any answer with another pod's value, a 0 for a
// missing value, a broken page's value past --max-age, an HPA scale-down, a
// recovery past its bound, an adapter crash, a log rate past its bound or
// memory or goroutines that grow; and prints the fault table. Its flags
// are in options.go (go run ./test/soak --help); see
// docs/operations.md#faults-and-recovery.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"time"

	cliflag "k8s.io/component-base/cli/flag"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/cli"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/test/e2e/framework"
)

func main() {
	ctx, stop := framework.ProgramContext(context.Background())
	err := command(ctx, os.Args[1:], os.Getenv(framework.BinEnv), time.Now(), os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(cli.ExitCode(err)) // 2 for a usage error, 1 for a failed soak
	}
}

// command parses args, validates them and runs the soak; binDir is the
// control-plane binaries' directory, and now seeds a --seed of 0. A
// problem with args is a cli.UsageError.
func command(ctx context.Context, args []string, binDir string, now time.Time, stdout io.Writer) error {
	o := newOptions(binDir)
	fss := o.flags()
	fs := cli.FlagSet("soak", fss)
	fs.SetOutput(stdout)
	fs.Usage = func() {
		fmt.Fprint(stdout, helpHeader)
		cliflag.PrintSections(stdout, fss, 0)
	}
	check := func() []error { return nonNil(o.validate()) }
	if done, err := cli.ParseAndCheck(fs, args, check); done || err != nil {
		return framework.SingleDashHint(fs, args, err)
	}
	o.complete(now)
	return run(ctx, *o, stdout)
}

// run sets up, soaks, reports and tears down; it fails on any violation.
func run(ctx context.Context, o options, out io.Writer) (err error) {
	began := time.Now()
	say := func(format string, args ...any) {
		fmt.Fprintf(out, "soak %6.1fs: %s\n", time.Since(began).Seconds(), fmt.Sprintf(format, args...))
	}
	rd, err := framework.NewRunDir("soak")
	if err != nil {
		return err
	}
	e := &env{run: rd}
	defer func() { err = rd.Close(err, o.keep, func() error { return e.teardown(say) }, say) }()
	if err := e.setup(ctx, o.binDir, say); err != nil {
		return err
	}
	res, err := e.soak(ctx, o, say)
	if res != nil {
		res.print(out, o, time.Since(began))
		if n := len(res.failures); n > 0 {
			err = errors.Join(err, fmt.Errorf("%d assertion(s) failed (see above)", n))
		}
	}
	return err
}

// result is what the soak saw.
type result struct {
	faults       []*fault
	tl           *timeline
	churn        churnCounts
	reuses       int
	hpaLo, hpaHi int32
	lifetimes    []lifetime
	logLines     int
	logReplica   int
	logOK        bool
	soaked       time.Duration
	failures     []string
}

// soak creates the pods and the HPA, runs churn, faults, the checker, the
// HPA watch and the sampler for o.duration, lets the system settle and
// judges.
func (e *env) soak(ctx context.Context, o options, say func(string, ...any)) (*result, error) {
	reg := newRegistry()
	tl := &timeline{}
	fs := &faults{killed: map[*framework.Process]bool{}}
	victims, err := e.createFixed(ctx, reg)
	if err != nil {
		return nil, err
	}
	if err := e.createHPA(ctx); err != nil {
		return nil, err
	}
	var mu sync.Mutex
	var hpaPods []string
	candidates := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append(slices.Clone(victims), hpaPods...)
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() {
		e.kubelet(runCtx, reg, func(p []string) { mu.Lock(); hpaPods = p; mu.Unlock() })
	})
	wg.Go(func() { e.check(runCtx, reg, tl) })
	say("waiting for the first correct answer through the aggregator")
	if _, ok := tl.waitFor(ctx, time.Time{}, 90*time.Second, isHealthy); !ok {
		cancel()
		wg.Wait()
		return nil, errors.New("no correct answer within 90s of setup")
	}
	res := &result{tl: tl}
	var samples [][]sample
	wg.Go(func() { samples = e.sampler(runCtx, tl, fs) })
	wg.Go(func() { res.hpaLo, res.hpaHi = e.hpaWatch(runCtx, tl) })
	start := time.Now()
	deadline := start.Add(o.duration)
	say("soaking for %s (seed %d): churn, broken pages, kube-apiserver / etcd stops, adapter kills", o.duration, o.seed)
	churnCtx, stopChurn := context.WithCancel(runCtx)
	defer stopChurn()
	var churnWG, faultWG sync.WaitGroup
	churnWG.Go(func() {
		res.churn = e.churn(churnCtx, reg, rand.New(rand.NewPCG(o.seed, 1)))
	})
	// The fault loop starts no fault past the deadline and returns once the
	// fault in progress has recovered (or its bound has passed).
	faultWG.Go(func() {
		e.injectFaults(runCtx, deadline, reg, tl, fs, candidates, rand.New(rand.NewPCG(o.seed, 2)), say)
	})
	faultsDone := make(chan struct{})
	go func() { faultWG.Wait(); close(faultsDone) }()
	progress := time.NewTicker(30 * time.Second)
	for wait := true; wait; {
		select {
		case <-faultsDone:
			wait = false
		case <-progress.C:
			tl.mu.Lock()
			say("%d answers (%d failed, %d correct), %d violations", tl.total, tl.failed, tl.healthy, len(tl.violations))
			tl.mu.Unlock()
		}
	}
	progress.Stop()
	stopChurn()
	churnWG.Wait()
	res.soaked = time.Since(start)
	settle := time.Now()
	say("settling: waiting for a correct answer with no churn and no faults")
	if _, ok := tl.waitFor(ctx, settle, controlPlaneBound, isHealthy); !ok {
		tl.violate(time.Now(), vRecovery, "no correct answer within %s after the soak", controlPlaneBound)
	}
	cancel()
	wg.Wait()
	res.faults = fs.list
	for _, ft := range res.faults {
		ft.measure(tl)
	}
	res.reuses = reg.reuses()
	res.lifetimes = lifetimes(samples)
	res.logLines, res.logReplica, res.logOK = logRate(samples)
	res.judge()
	return res, ctx.Err()
}
