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
	"flag"
	"fmt"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/capacity"
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
	policies       string
	pols           []policy // policies, parsed by parseFlags
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
	capacitySLO    string // the capacity probe's SLO, for the capacity policy
	repeats        int    // runs of every policy on every trace
	seed           uint64 // of the run order; 0: from the clock
	policyFile     string
	sweeps         sweepFlag
	probeFile      string   // a recorded capacity probe, for probe-derived targets
	merge          []string // -render: summary files to merge
}

// newFlagSet defines the flags into cfg; -trace and -merge are returned to
// be split.
func newFlagSet(cfg *config) (fs *flag.FlagSet, traces, merge *string) {
	fs = flag.NewFlagSet("shootout", flag.ContinueOnError)
	traces = fs.String("trace", "testdata/traces/azure-llm-2023-code.csv.gz,testdata/traces/azure-llm-2023-conv.csv.gz",
		"Comma-separated trace files (CSV columns TIMESTAMP, ContextTokens, GeneratedTokens; .gz read), each replayed -repeats times per policy.")
	fs.StringVar(&cfg.policies, "policies", "all", "Comma-separated policies to run, in order: gpu-80, gpu-60, queue-3, batch-90pct, kv-80, capacity, recipe, recipe-signal, fixed-peak, all, or none; or your own: NAME=fixed:N, or NAME=[KIND/]METRIC:TARGET[+[KIND/]METRIC:TARGET...][@up-window=D][@down-window=D][@min=N], an HPA on every METRIC the adapter serves (KIND pods: per-pod averageValue, the default; object or object-avg: on the Deployment, Value or AverageValue, the default for inference_demand_per_replica; external or external-avg: over the fleet's pods), its stabilization windows in simulated time, e.g. queue-1=inference_queue_size:1, demand-3=inference_demand_per_replica:3, q-gpu=inference_queue_size:3+gpu_utilization:0.6@down-window=2m.")
	fs.Float64Var(&cfg.compress, "compress", 15, "Time compression: every time constant (HPA sync period, behavior windows and periods, cold start, scrape and agent intervals, termination grace, the simulator's clock) runs this many times faster. 15 keeps the HPA's whole-second fields exact.")
	fs.DurationVar(&cfg.coldStart, "cold-start", 60*time.Second, "Model-load time of a new replica before it turns Ready, in simulated time.")
	fs.DurationVar(&cfg.duration, "duration", 0, "Replay only the first part of each trace, in simulated time (0: all of it).")
	fs.DurationVar(&cfg.warmup, "warmup", 10*time.Minute, "Simulated time at the start of each replay left out of the headline figures (attainment, goodput, GPU-hours), the same for every policy, the fixed fleets too; the whole-trace figures are reported beside them. Each replay still starts at the trace's start.")
	fs.Float64Var(&cfg.rateScale, "rate-scale", 1, "Multiply the trace's arrival rate (divide its inter-arrival gaps) by this; lengths are kept.")
	fs.DurationVar(&cfg.slo.TTFT, "slo-ttft", 2*time.Second, "SLO on time to first token.")
	fs.DurationVar(&cfg.slo.TPOT, "slo-tpot", 100*time.Millisecond, "SLO on the mean time per output token after the first.")
	fs.IntVar(&cfg.minReplicas, "min-replicas", 1, "minReplicas of every HPA.")
	fs.IntVar(&cfg.maxReplicas, "max-replicas", framework.FakeGPUs, "maxReplicas of every HPA, and the size of the fixed fleet (the node has 8 GPUs).")
	fs.StringVar(&cfg.pick, "picker", pickLeastLoaded, "How the front end picks a Ready pod: least-loaded (fewest requests in flight, as an inference gateway) or round-robin (as a Service).")
	fs.StringVar(&cfg.out, "out", "shootout-out", "Directory for the report files.")
	fs.StringVar(&cfg.capacitySLO, "capacity-slo", "", "SLO of the capacity probe that sets the capacity policy's metric and target, in capacity's --slo form (empty: ttft:p90<=<-slo-ttft>,itl:p90<=<-slo-tpot>,errors<=0.1%).")
	fs.BoolVar(&cfg.render, "render", false, "Run nothing: from the JSON and requests CSV already in -out, recompute each policy's summary, rewrite the report files (JSON, CSV, SVG, summary, frontier) and print the tables; with -merge, from summary files instead.")
	fs.IntVar(&cfg.repeats, "repeats", 3, "Runs of every policy on every trace, repeat by repeat, the policies of each repeat in a random order drawn from -seed; the report gives each figure's mean and 95% interval.")
	fs.Uint64Var(&cfg.seed, "seed", 0, "Seed of the run order (0: drawn from the clock); the report records it, and the same seed gives the same order.")
	fs.StringVar(&cfg.policyFile, "policy-file", "", "File of policies (JSON or YAML): {\"policies\": [{\"name\": N, \"why\": W, \"spec\": autoscalingv2 HorizontalPodAutoscalerSpec}]} with times in simulated seconds, a shootout report <trace>.json (its policies), or a HorizontalPodAutoscaler or List of them. Run after -policies (which then defaults to none).")
	fs.Var(&cfg.sweeps, "sweep", "FAMILY=T1,T2,T3,T4[,probe]: one policy per target of a signal family (gpu, queue, batch, kv, demand, rps, tokens, fixed), at least 4 targets; probe adds the target derived from the capacity probe (-probe-file, or the probe run on the trace). Repeatable; run after -policies (which then defaults to none).")
	fs.StringVar(&cfg.probeFile, "probe-file", "", "A recorded capacity probe for the probe-derived targets of -sweep: a shootout report <trace>.json with its capacity, or a capacity --json report. Without it the probe runs on each trace.")
	merge = fs.String("merge", "", "With -render: comma-separated summary files (<trace>-summary.json, from one or several runs, e.g. parts run on different days) to merge by trace into the points, intervals and frontier chart written in -out.")
	return fs, traces, merge
}

func parseFlags(args []string, getenv func(string) string) (config, error) {
	p, _ := sim.LookupProfile(sim.ProfileLlama3_8BA100)
	cfg := config{binDir: getenv(envBin), model: p.Model, maxNumSeqs: p.MaxNumSeqs, maxModelLen: p.MaxModelLen, maxInFlight: 20000, requestTimeout: 30 * time.Minute}
	fs, traces, merge := newFlagSet(&cfg)
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *merge != "" {
		cfg.merge = strings.Split(*merge, ",")
	}
	cfg.traces = strings.Split(*traces, ",")
	if cfg.capacitySLO == "" {
		cfg.capacitySLO = defaultCapacitySLO(cfg.slo)
	}
	var errs []error
	if _, err := capacity.ParseSLOs(cfg.capacitySLO); err != nil {
		errs = append(errs, fmt.Errorf("-capacity-slo: %w", err))
	}
	if cfg.binDir == "" && !cfg.render {
		errs = append(errs, fmt.Errorf("%s is not set: run `make shootout`", envBin))
	}
	if !(cfg.compress >= 1) || math.IsInf(cfg.compress, 0) {
		errs = append(errs, fmt.Errorf("-compress must be at least 1, got %v", cfg.compress))
	}
	if !(cfg.rateScale > 0) || math.IsInf(cfg.rateScale, 0) {
		errs = append(errs, fmt.Errorf("-rate-scale must be positive, got %v", cfg.rateScale))
	}
	if cfg.minReplicas < 1 || cfg.maxReplicas < cfg.minReplicas || cfg.maxReplicas > framework.FakeGPUs {
		errs = append(errs, fmt.Errorf("want 1 <= -min-replicas <= -max-replicas <= %d, got %d and %d", framework.FakeGPUs, cfg.minReplicas, cfg.maxReplicas))
	}
	if cfg.pick != pickLeastLoaded && cfg.pick != pickRoundRobin {
		errs = append(errs, fmt.Errorf("-picker must be %s or %s, got %q", pickLeastLoaded, pickRoundRobin, cfg.pick))
	}
	if cfg.repeats < 1 || cfg.repeats > 100 {
		errs = append(errs, fmt.Errorf("-repeats must be 1 to 100, got %d", cfg.repeats))
	}
	if cfg.seed == 0 {
		cfg.seed = uint64(time.Now().UnixNano())
	}
	if len(cfg.merge) > 0 && !cfg.render {
		errs = append(errs, errors.New("-merge needs -render"))
	}
	if (cfg.policyFile != "" || len(cfg.sweeps) > 0) && !set["policies"] {
		cfg.policies = "none"
	}
	if cfg.policies != "none" {
		pols, err := selectPolicies(defaultPolicies(cfg.maxReplicas), cfg.policies, cfg.maxReplicas)
		if err != nil {
			errs = append(errs, fmt.Errorf("-policies: %w", err))
		}
		cfg.pols = append(cfg.pols, pols...)
	}
	if cfg.policyFile != "" {
		pols, err := readPolicyFile(cfg.policyFile, cfg.maxReplicas)
		if err != nil {
			errs = append(errs, err)
		}
		cfg.pols = append(cfg.pols, pols...)
	}
	if len(cfg.sweeps) > 0 {
		var probe *probeResult
		if cfg.probeFile != "" {
			var err error
			if probe, err = readProbeFile(cfg.probeFile); err != nil {
				errs = append(errs, err)
			}
		}
		pols, err := sweepPolicies(cfg.sweeps, probe, cfg.maxReplicas)
		if err != nil {
			errs = append(errs, err)
		}
		cfg.pols = append(cfg.pols, pols...)
	}
	if cfg.probeFile != "" && len(cfg.traces) > 1 {
		errs = append(errs, fmt.Errorf("-probe-file: a probe measures one trace's mix; give one -trace, not %d", len(cfg.traces)))
	}
	if cfg.probeFile != "" && !slices.ContainsFunc(cfg.sweeps, func(s sweep) bool { return slices.Contains(s.Targets, targetProbe) }) {
		errs = append(errs, errors.New("-probe-file is used only by a -sweep FAMILY=...,probe"))
	}
	if err := checkNames(cfg.pols); err != nil {
		errs = append(errs, err)
	}
	if len(cfg.pols) == 0 && len(errs) == 0 && !cfg.render {
		errs = append(errs, errors.New("no policies to run: -policies none without -policy-file or -sweep"))
	}
	if cfg.coldStart < 0 || cfg.duration < 0 || cfg.slo.TTFT <= 0 || cfg.slo.TPOT <= 0 {
		errs = append(errs, errors.New("-cold-start and -duration must not be negative, the SLOs must be positive"))
	}
	if cfg.warmup < 0 || (cfg.duration > 0 && cfg.warmup >= cfg.duration) {
		errs = append(errs, fmt.Errorf("-warmup must be at least 0 and shorter than -duration, got %s (duration %s)", cfg.warmup, cfg.duration))
	}
	return cfg, errors.Join(errs...)
}

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Getenv)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "shootout:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cfg.render {
		err = render(cfg)
	} else {
		err = run(ctx, cfg)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "shootout:", err)
		stop()
		os.Exit(1)
	}
}

// preparedTrace is a trace cut to the duration, rate-scaled and fitted
// to the model's context length.
type preparedTrace struct {
	name    string
	reqs    []loadgen.TraceRequest
	clipped int // prompts shortened to fit max-model-len
	bursts  []burstSpan
}

func prepareTrace(path string, cfg config) (preparedTrace, error) {
	all, err := loadgen.ReadTraceFile(path)
	if err != nil {
		return preparedTrace{}, err
	}
	t := preparedTrace{name: strings.TrimSuffix(strings.TrimSuffix(filepath.Base(path), ".gz"), ".csv")}
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
		return t, fmt.Errorf("trace %s: -warmup %s leaves nothing to score: its last request is at %s", path, cfg.warmup, last.Round(time.Second))
	}
	t.bursts = findBurstSpans(arrivals)
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
		rep := report{Trace: t.name, Requests: len(t.reqs), Clipped: t.clipped, Bursts: len(t.bursts), BurstSpans: t.bursts, Warmup: cfg.warmup, Timing: tm, SLO: cfg.slo,
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
		for i, slot := range order {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			p := pols[slot.Policy]
			runStart := time.Now()
			res, err := runPolicy(ctx, e, cfg, tm, t.name, t.reqs, p, say)
			if err != nil {
				return err
			}
			res.Repeat, res.Order = slot.Repeat, i+1
			res.Summary = summarize(p.Name, t.name, rep.scoring(), res.Records, res.Samples)
			res.Wall = time.Since(runStart)
			s := res.Summary
			say("%s #%d on %s (run %d of %d): after the %s warm-up attainment %.1f%% (TTFT %.1f%%, TPOT %.1f%%) on %.2f GPU-hours; whole trace %.1f%% on %.2f; %d failed (%d refused), %d scale events (%s wall)",
				p.Name, slot.Repeat, t.name, i+1, len(order), cfg.warmup, 100*s.AfterWarmup.Attainment, 100*s.AfterWarmup.TTFTAttainment, 100*s.AfterWarmup.TPOTAttainment,
				s.AfterWarmup.GPUHours, 100*s.Attainment, s.ReplicaHours, s.Failed, s.Refused, s.ScaleEvents, res.Wall.Round(time.Second))
			rep.Runs = append(rep.Runs, res)
			if err := rep.write(cfg.out, t.reqs); err != nil {
				return err
			}
		}
		fmt.Println(rep.markdown())
	}
	say("done in %s; reports in %s", time.Since(began).Round(time.Second), cfg.out)
	return nil
}

// render recomputes the summaries of each trace from the files a run left
// in cfg.out, rewrites the report and prints the tables; with -merge it
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
		recs, err := readRecords(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s-requests.csv: %w", base, err)
		}
		// The warm-up is the flag's and the bursts are the trace's: a report
		// can be scored again with another warm-up.
		rep.Warmup, rep.BurstSpans, rep.Bursts = cfg.warmup, t.bursts, len(t.bursts)
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
