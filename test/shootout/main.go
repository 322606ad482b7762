// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Command shootout is `make shootout`: it replays real LLM request traces
// against a simulated vLLM fleet (inference-sim with the calibrated
// llama-3-8b-a100 profile, one fake GPU per replica, a cold start before
// each replica turns Ready) on a real control plane (etcd, kube-apiserver,
// kube-controller-manager's HPA controller) with the inference-metrics-
// adapter, once per autoscaling policy, from the same start, and reports
// per policy the SLO attainment, goodput, TTFT/TPOT percentiles, GPU-hours
// and scale events, as JSON, CSV, an SVG chart and a Markdown table. Every
// time constant is compressed by the same factor. See docs/shootout.md.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/cli"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/loadgen"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/sim"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/test/e2e/framework"
)

// envBin names the directory of etcd, kube-apiserver and
// kube-controller-manager (test/tools/build.sh).
const envBin = "IMA_E2E_BIN"

// config is the whole run.
type config struct {
	binDir         string
	traces         []string
	pols           []policy // of --policies, --policy-file and --sweep
	compress       float64
	coldStart      time.Duration
	duration       time.Duration // simulated; 0: the whole trace
	warmup         time.Duration // simulated; left out of the headline figures
	rateScale      float64
	slo            SLO
	minReplicas    int
	maxReplicas    int
	pick           string
	out            string
	model          string
	maxNumSeqs     int
	maxModelLen    int
	maxInFlight    int
	requestTimeout time.Duration // simulated
	render         bool
	capacitySLO    string   // the capacity probe's SLO, for the capacity policy
	repeats        int      // runs of every policy on every trace
	seed           uint64   // of the run order; 0: from the clock
	merge          []string // --render: summary files to merge
	sideBySide     int      // runs at once, each on its own node (slot)
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := runMain(ctx, os.Args[1:], os.Getenv, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "shootout:", err)
		os.Exit(cli.ExitCode(err)) // 2 for a usage error
	}
}

// runMain parses args (--help to stdout) and runs or renders.
func runMain(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	cfg, done, err := parseFlags(args, getenv, stdout)
	if done || err != nil {
		return err
	}
	if cfg.render {
		return render(cfg)
	}
	return run(ctx, cfg)
}

// preparedTrace is a trace cut to the duration, rate-scaled and fitted
// to the model's context length. A path of several files joined by "+"
// is one trace, the files merged by their timestamps; its name joins
// theirs with "+", and sources are their names (nil for one file).
type preparedTrace struct {
	name    string
	sources []string
	reqs    []loadgen.TraceRequest
	clipped int // prompts shortened to fit max-model-len
	bursts  []burstSpan
}

func prepareTrace(path string, cfg config) (preparedTrace, error) {
	files := strings.Split(path, "+")
	all, err := loadgen.ReadMergedTraceFiles(files...)
	if err != nil {
		return preparedTrace{}, err
	}
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = strings.TrimSuffix(strings.TrimSuffix(filepath.Base(f), ".gz"), ".csv")
	}
	t := preparedTrace{name: strings.Join(names, "+")}
	if len(names) > 1 {
		t.sources = names
	}
	arrivals := make([]time.Duration, 0, len(all))
	for _, r := range all {
		r.At = time.Duration(float64(r.At) / cfg.rateScale)
		if cfg.duration > 0 && r.At > cfg.duration {
			break
		}
		if r.PromptTokens+r.OutputTokens > cfg.maxModelLen {
			r.OutputTokens = min(r.OutputTokens, cfg.maxModelLen/2)
			r.PromptTokens = cfg.maxModelLen - r.OutputTokens
			t.clipped++
		}
		t.reqs = append(t.reqs, r)
		arrivals = append(arrivals, r.At)
	}
	if len(t.reqs) == 0 {
		return t, fmt.Errorf("trace %s: no requests within %s", path, cfg.duration)
	}
	if last := t.reqs[len(t.reqs)-1].At; cfg.warmup >= last {
		return t, fmt.Errorf("trace %s: --warmup %s leaves nothing to score: its last request is at %s", path, cfg.warmup, last.Round(time.Second))
	}
	if len(files) > 1 {
		t.bursts = findSourceBursts(t.reqs, len(files))
	} else {
		t.bursts = findBurstSpans(arrivals)
	}
	return t, nil
}

// run sets up once, runs every policy on every trace, writes the reports
// after each run, and tears down.
func run(ctx context.Context, cfg config) (err error) {
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", cfg.out, err)
	}
	logFile, err := os.Create(filepath.Join(cfg.out, "shootout.log"))
	if err != nil {
		return fmt.Errorf("create log: %w", err)
	}
	defer logFile.Close()
	if err := framework.LogTo(logFile); err != nil {
		return err
	}
	began := time.Now()
	say := func(format string, args ...any) {
		fmt.Printf("shootout [%s]: %s\n", time.Since(began).Round(time.Second), fmt.Sprintf(format, args...))
	}
	tm := newTiming(cfg.compress, cfg.coldStart)
	if off := tm.inexact(); len(off) > 0 {
		say("warning: at compression ×%g the HPA's whole-second behavior fields are not exact: %s (simulated time; 15 and its divisors keep them exact)", cfg.compress, strings.Join(off, "; "))
	}
	var traces []preparedTrace
	for _, path := range cfg.traces {
		t, err := prepareTrace(path, cfg)
		if err != nil {
			return err
		}
		say("trace %s: %d requests over %s simulated, %d bursts, %d prompts clipped to max-model-len %d", t.name, len(t.reqs), t.reqs[len(t.reqs)-1].At.Round(time.Second), len(t.bursts), t.clipped, cfg.maxModelLen)
		traces = append(traces, t)
	}
	e, err := setUp(ctx, cfg, tm, say)
	defer func() {
		if e != nil {
			say("stopping the adapter, the simulators and the control plane")
			err = errors.Join(err, e.tearDown())
		}
	}()
	if err != nil {
		return fmt.Errorf("set up: %w", err)
	}
	say("set up in %s", time.Since(began).Round(time.Second))
	for _, t := range traces {
		rep := report{Trace: t.name, Sources: t.sources, Requests: len(t.reqs), Clipped: t.clipped, Bursts: len(t.bursts), BurstSpans: t.bursts, Warmup: cfg.warmup, Timing: tm, SLO: cfg.slo,
			Picker: cfg.pick, RateScale: cfg.rateScale, MinReplicas: cfg.minReplicas, MaxReplicas: cfg.maxReplicas, Profile: sim.ProfileLlama3_8BA100,
			Repeats: cfg.repeats, Seed: cfg.seed}
		pols := cfg.pols
		// The capacity probe runs once per trace, before any replay, when a
		// policy's target comes from it: every repeat runs the same target.
		wantCapacity := slices.ContainsFunc(pols, func(p policy) bool { return p.Name == policyCapacity })
		if wantCapacity || slices.ContainsFunc(pols, func(p policy) bool { return p.probeFamily != "" }) {
			capPol, probe, err := probeCapacity(ctx, cfg, tm, t.name, t.reqs, say)
			rep.Capacity = probe
			// Without a recommendation the probe-derived targets may still
			// be had (resolveProbePolicies says when not).
			if err != nil && (wantCapacity || probe == nil) {
				return err
			}
			if pols, err = resolveProbePolicies(pols, probe, tm, cfg.maxReplicas); err != nil {
				return err
			}
			for i := range pols {
				if pols[i].Name == policyCapacity {
					pols[i] = capPol
				}
			}
		}
		rep.Policies = pols
		order := runOrder(len(pols), cfg.repeats, cfg.seed)
		for _, slot := range order {
			rep.Order = append(rep.Order, fmt.Sprintf("%s#%d", pols[slot.Policy].Name, slot.Repeat))
		}
		say("trace %s: %d runs (%d policies × %d repeats), order from seed %d: %s", t.name, len(order), len(pols), cfg.repeats, cfg.seed, strings.Join(rep.Order, " "))
		if cfg.sideBySide > 1 {
			say("trace %s: up to %d runs side by side, each on its own node (%s)", t.name, cfg.sideBySide, strings.Join(slotNodes(cfg.sideBySide), ", "))
		}
		scoring := rep.scoring()
		do := func(ctx context.Context, i, slot int) (runResult, error) {
			rs := order[i]
			p := pols[rs.Policy]
			runSay := say
			if cfg.sideBySide > 1 {
				runSay = func(format string, args ...any) { say("[%s] "+format, append([]any{slotNode(slot)}, args...)...) }
			}
			runStart := time.Now()
			res, err := runPolicy(ctx, e, cfg, tm, t.name, t.reqs, p, slot, runSay)
			if err != nil {
				return res, err
			}
			res.Repeat, res.Order = rs.Repeat, i+1
			res.Summary = summarize(p.Name, t.name, scoring, res.Records, res.Samples)
			res.Wall = time.Since(runStart)
			return res, nil
		}
		done := func(i int, res runResult, pl placement) error {
			rs := order[i]
			p := pols[rs.Policy]
			where := ""
			if cfg.sideBySide > 1 {
				res.Slot, res.Node, res.Beside = pl.Slot+1, slotNode(pl.Slot), pl.Beside
				where = fmt.Sprintf(" [%s, at most %d beside it]", res.Node, res.Beside)
			}
			s := res.Summary
			say("%s #%d on %s (run %d of %d)%s: after the %s warm-up attainment %.1f%% (TTFT %.1f%%, TPOT %.1f%%) on %.2f GPU-hours; whole trace %.1f%% on %.2f; %d failed (%d refused), %d scale events (%s wall)",
				p.Name, rs.Repeat, t.name, i+1, len(order), where, cfg.warmup, 100*s.AfterWarmup.Attainment, 100*s.AfterWarmup.TTFTAttainment, 100*s.AfterWarmup.TPOTAttainment,
				s.AfterWarmup.GPUHours, 100*s.Attainment, s.ReplicaHours, s.Failed, s.Refused, s.ScaleEvents, res.Wall.Round(time.Second))
			if h := heldText(s); h != "" {
				say("%s #%d: desired above every metric's recommendation (held by the scale-down window) after the warm-up in %s", p.Name, rs.Repeat, h)
			}
			rep.Runs = insertByOrder(rep.Runs, res)
			return rep.write(cfg.out, t.reqs)
		}
		if err := schedule(ctx, len(order), cfg.sideBySide, do, done, nil); err != nil {
			return err
		}
		fmt.Println(rep.markdown())
	}
	say("done in %s; reports in %s", time.Since(began).Round(time.Second), cfg.out)
	return nil
}

// render recomputes the summaries of each trace from the files a run left
// in cfg.out, rewrites the report and prints the tables; with --merge it
// merges summary files instead (renderMerged).
func render(cfg config) error {
	if len(cfg.merge) > 0 {
		return renderMerged(cfg.merge, cfg.out)
	}
	for _, path := range cfg.traces {
		t, err := prepareTrace(path, cfg)
		if err != nil {
			return err
		}
		base := filepath.Join(cfg.out, t.name)
		raw, err := os.ReadFile(base + ".json")
		if err != nil {
			return err
		}
		var rep report
		if err := json.Unmarshal(raw, &rep); err != nil {
			return fmt.Errorf("%s.json: %w", base, err)
		}
		f, err := os.Open(base + "-requests.csv")
		if err != nil {
			return err
		}
		recs, sourced, err := readRecords(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s-requests.csv: %w", base, err)
		}
		// The warm-up is the flag's and the bursts are the trace's: a report
		// can be scored again with another warm-up. Records of an older
		// shootout do not say which file of a merged trace each came from.
		rep.Warmup, rep.BurstSpans, rep.Bursts, rep.Sources = cfg.warmup, t.bursts, len(t.bursts), t.sources
		if !sourced && len(t.sources) > 0 {
			fmt.Printf("%s-requests.csv has no source column (an older shootout's): no attainment by trace file, and each file's bursts are scored on every request of their minutes\n", base)
			rep.Sources, rep.BurstSpans = nil, untagged(t.bursts)
		}
		if err := checkSources(recs, len(rep.Sources)); err != nil {
			return fmt.Errorf("%s-requests.csv: %w", base, err)
		}
		for i := range rep.Runs {
			run := &rep.Runs[i]
			run.Records = recs[runKey{Policy: run.Policy.Name, Repeat: max(run.Repeat, 1)}]
			// Summaries are computed afresh, so that a report written by an
			// older shootout gains the figures added since.
			run.Summary = summarize(run.Policy.Name, t.name, rep.scoring(), run.Records, run.Samples)
		}
		if err := rep.write(cfg.out, t.reqs); err != nil {
			return err
		}
		fmt.Println(rep.markdown())
	}
	return nil
}

// checkSources fails when a record's source is not one of the trace's n
// files (a records file of another trace); with one file every source is 0.
func checkSources(recs map[runKey][]Record, n int) error {
	for k, rs := range recs {
		for _, r := range rs {
			if r.Source >= max(n, 1) {
				return fmt.Errorf("%s #%d: a request from trace file %d, but the trace has %d file(s)", k.Policy, k.Repeat, r.Source, max(n, 1))
			}
		}
	}
	return nil
}

// untagged is bursts without their files: scored on every request of their
// minutes (records that do not say their file).
func untagged(bursts []burstSpan) []burstSpan {
	out := slices.Clone(bursts)
	for i := range out {
		out[i].Source = nil
	}
	return out
}
