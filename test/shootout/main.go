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
	"strings"
	"syscall"
	"time"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/capacity"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/loadgen"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/sim"
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
}

func parseFlags(args []string, getenv func(string) string) (config, error) {
	p, _ := sim.LookupProfile(sim.ProfileLlama3_8BA100)
	cfg := config{binDir: getenv(envBin), model: p.Model, maxNumSeqs: p.MaxNumSeqs, maxModelLen: p.MaxModelLen, maxInFlight: 20000, requestTimeout: 30 * time.Minute}
	fs := flag.NewFlagSet("shootout", flag.ContinueOnError)
	traces := fs.String("trace", "testdata/traces/azure-llm-2023-code.csv.gz,testdata/traces/azure-llm-2023-conv.csv.gz",
		"Comma-separated trace files (CSV columns TIMESTAMP, ContextTokens, GeneratedTokens; .gz read), each replayed once per policy.")
	fs.StringVar(&cfg.policies, "policies", "all", "Comma-separated policies to run, in order: gpu-80, gpu-60, queue-3, batch-90pct, kv-80, capacity, fixed-peak, or all; or your own, NAME=METRIC:TARGET (METRIC: gpu_utilization, inference_queue_size, inference_batch_size or inference_kv_cache_usage; TARGET per pod, e.g. queue-1=inference_queue_size:1) or NAME=fixed:N.")
	fs.Float64Var(&cfg.compress, "compress", 15, "Time compression: every time constant (HPA sync period, behavior windows and periods, cold start, scrape and agent intervals, termination grace, the simulator's clock) runs this many times faster. 15 keeps the HPA's whole-second fields exact.")
	fs.DurationVar(&cfg.coldStart, "cold-start", 60*time.Second, "Model-load time of a new replica before it turns Ready, in simulated time.")
	fs.DurationVar(&cfg.duration, "duration", 0, "Replay only the first part of each trace, in simulated time (0: all of it).")
	fs.Float64Var(&cfg.rateScale, "rate-scale", 1, "Multiply the trace's arrival rate (divide its inter-arrival gaps) by this; lengths are kept.")
	fs.DurationVar(&cfg.slo.TTFT, "slo-ttft", 2*time.Second, "SLO on time to first token.")
	fs.DurationVar(&cfg.slo.TPOT, "slo-tpot", 100*time.Millisecond, "SLO on the mean time per output token after the first.")
	fs.IntVar(&cfg.minReplicas, "min-replicas", 1, "minReplicas of every HPA.")
	fs.IntVar(&cfg.maxReplicas, "max-replicas", framework.FakeGPUs, "maxReplicas of every HPA, and the size of the fixed fleet (the node has 8 GPUs).")
	fs.StringVar(&cfg.pick, "picker", pickLeastLoaded, "How the front end picks a Ready pod: least-loaded (fewest requests in flight, as an inference gateway) or round-robin (as a Service).")
	fs.StringVar(&cfg.out, "out", "shootout-out", "Directory for the report files.")
	fs.StringVar(&cfg.capacitySLO, "capacity-slo", "", "SLO of the capacity probe that sets the capacity policy's metric and target, in capacity's --slo form (empty: ttft:p90<=<-slo-ttft>,itl:p90<=<-slo-tpot>,errors<=0.1%).")
	fs.BoolVar(&cfg.render, "render", false, "Run nothing: from the JSON and requests CSV already in -out, recompute each policy's summary, rewrite the report files (JSON, CSV, SVG) and print the table.")
	if err := fs.Parse(args); err != nil {
		return cfg, err
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
	var err error
	if cfg.pols, err = selectPolicies(defaultPolicies(cfg.maxNumSeqs, cfg.maxReplicas), cfg.policies, cfg.maxReplicas); err != nil {
		errs = append(errs, fmt.Errorf("-policies: %w", err))
	}
	if cfg.coldStart < 0 || cfg.duration < 0 || cfg.slo.TTFT <= 0 || cfg.slo.TPOT <= 0 {
		errs = append(errs, errors.New("-cold-start and -duration must not be negative, the SLOs must be positive"))
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
	bursts  []time.Duration
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
	t.bursts = findBursts(arrivals)
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
		rep := report{Trace: t.name, Requests: len(t.reqs), Clipped: t.clipped, Bursts: len(t.bursts), Timing: tm, SLO: cfg.slo,
			Picker: cfg.pick, RateScale: cfg.rateScale, MinReplicas: cfg.minReplicas, MaxReplicas: cfg.maxReplicas, Profile: sim.ProfileLlama3_8BA100}
		for _, p := range cfg.pols {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if p.Name == policyCapacity {
				var probe *probeResult
				p, probe, err = probeCapacity(ctx, cfg, tm, t.name, t.reqs, say)
				rep.Capacity = probe
				if err != nil {
					return err
				}
			}
			runStart := time.Now()
			res, err := runPolicy(ctx, e, cfg, tm, t.name, t.reqs, p, say)
			if err != nil {
				return err
			}
			res.Summary = summarize(p.Name, t.name, cfg.slo, res.Records, res.Samples, t.bursts)
			res.Wall = time.Since(runStart)
			s := res.Summary
			say("%s on %s: attainment %.1f%%, %d failed (%d refused), TTFT p90 %.2fs, %.2f GPU-hours, %.0f good requests per GPU-hour, %d scale events (%s wall)",
				p.Name, t.name, 100*s.Attainment, s.Failed, s.Refused, s.TTFT.P90, s.ReplicaHours, s.GoodPerGPUHour, s.ScaleEvents, res.Wall.Round(time.Second))
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
// in cfg.out, rewrites the report and prints the table.
func render(cfg config) error {
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
		for i := range rep.Runs {
			run := &rep.Runs[i]
			run.Records = recs[run.Policy.Name]
			// Summaries are computed afresh, so that a report written by an
			// older shootout gains the figures added since.
			run.Summary = summarize(run.Policy.Name, t.name, rep.SLO, run.Records, run.Samples, t.bursts)
		}
		if err := rep.write(cfg.out, t.reqs); err != nil {
			return err
		}
		fmt.Println(rep.markdown())
	}
	return nil
}
