// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	cliflag "k8s.io/component-base/cli/flag"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/cli"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/capacity"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/sim"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/test/e2e/framework"
)

// usage heads --help, above the flags printed section by section.
const usage = `Usage: go run ./test/shootout [flags]   (or make shootout SHOOTOUT_FLAGS="...")

Replays LLM request traces against a simulated vLLM fleet on a real control plane with the adapter, once per autoscaling policy, and reports SLO attainment, goodput, latency percentiles and GPU-hours per policy (docs/shootout.md). Needs IMA_E2E_BIN (make shootout sets it) unless --render.
`

// helpColumns is the width --help wraps flag descriptions to: 0, one line
// per flag whatever the terminal, so that docs/shootout.md quotes --help
// exactly.
const helpColumns = 0

// options are the shootout's command-line flags.
type options struct {
	traces      []string
	policies    string
	policiesSet bool // --policies was given (complete)
	compress    float64
	coldStart   time.Duration
	duration    time.Duration
	warmup      time.Duration
	rateScale   float64
	slo         SLO
	minReplicas int
	maxReplicas int
	pick        string
	out         string
	capacitySLO string
	render      bool
	repeats     int
	seed        uint64
	policyFiles []string
	sweeps      []string
	probeFile   string
	merge       []string
	sideBySide  int
	maxInFlight int // 0: from the open-file limit
	// openFiles returns the process's open-file limit (ulimit -n).
	openFiles func() (uint64, error)
}

func newOptions() *options {
	return &options{
		traces:      []string{"testdata/traces/azure-llm-2023-code.csv.gz", "testdata/traces/azure-llm-2023-conv.csv.gz"},
		policies:    "all",
		compress:    15,
		coldStart:   60 * time.Second,
		warmup:      10 * time.Minute,
		rateScale:   1,
		slo:         SLO{TTFT: 2 * time.Second, TPOT: 100 * time.Millisecond},
		minReplicas: 1,
		maxReplicas: framework.FakeGPUs,
		pick:        pickLeastLoaded,
		out:         "shootout-out",
		repeats:     3,
		sideBySide:  1,
		openFiles:   openFileLimit,
	}
}

// flags defines the options' flags, in named sections for --help (which
// lists each section's flags sorted by name).
func (o *options) flags() cliflag.NamedFlagSets {
	var fss cliflag.NamedFlagSets

	fs := fss.FlagSet("Traffic")
	fs.StringSliceVar(&o.traces, "trace", o.traces, "Trace files (CSV columns TIMESTAMP, ContextTokens, GeneratedTokens; .gz read), comma-separated or repeated, each replayed --repeats times per policy. Files joined by + are one trace, merged by their timestamps, as one server receiving both (each file must overlap another in time; the two Azure traces cover the same hour; the report gives each file's attainment apart), e.g. testdata/traces/azure-llm-2023-code.csv.gz+testdata/traces/azure-llm-2023-conv.csv.gz.")
	fs.DurationVar(&o.duration, "duration", o.duration, "Replay only the first part of each trace, in simulated time (0: all of it).")
	fs.Float64Var(&o.rateScale, "rate-scale", o.rateScale, "Multiply the trace's arrival rate (divide its inter-arrival gaps) by this; lengths are kept.")
	fs.IntVar(&o.maxInFlight, "max-in-flight", o.maxInFlight, fmt.Sprintf("Most requests of one replay open at once; an arrival beyond them is not sent and counts as a failed request (dropped, in the report) at the time it was due: behind that many it would miss the SLO. 0: as many as the open-file limit (ulimit -n) allows: what is left after %d files kept back, shared by the --side-by-side slots, ÷ %d (each open request holds three connections in this process, the replay client's and the front end's two, and the front end may keep one more idle to a pod for reuse).", reservedFiles, filesPerRequest))

	fs = fss.FlagSet("Policies")
	fs.StringVar(&o.policies, "policies", o.policies, "Comma-separated policies to run, in order: gpu-80, gpu-60, queue-3, batch-90pct, kv-80, capacity, recipe, recipe-signal, fixed-peak, all, or none; or your own: NAME=fixed:N, NAME=oracle:CAPACITY[@lag=D][@hold=D] (clairvoyant: each minute's arrivals of the trace ÷ CAPACITY requests per second per replica, started a cold start and an HPA sync ahead, each change made D later, each minute's count held D after it; a reference that peeks at the trace), or NAME=[KIND/]METRIC:TARGET[+[KIND/]METRIC:TARGET...][@up-window=D][@down-window=D][@min=N], an HPA on every METRIC the adapter serves (KIND pods: per-pod averageValue, the default; object or object-avg: on the Deployment, Value or AverageValue, the default for inference_demand_per_replica and inference_demand_forecast_per_replica; external or external-avg: over the fleet's pods), its stabilization windows in simulated time, e.g. queue-1=inference_queue_size:1, demand-3=inference_demand_per_replica:3, q-gpu=inference_queue_size:3+gpu_utilization:0.6@down-window=2m.")
	fs.StringArrayVar(&o.policyFiles, "policy-file", o.policyFiles, "File of policies (JSON or YAML): {\"policies\": [{\"name\": N, \"why\": W, \"spec\": autoscalingv2 HorizontalPodAutoscalerSpec}]} with times in simulated seconds, a shootout report <trace>.json (its policies), or a HorizontalPodAutoscaler or List of them. Repeatable: every file's policies run, in the order given. Run after --policies (which then defaults to none).")
	fs.StringArrayVar(&o.sweeps, "sweep", o.sweeps, "FAMILY=T1,T2,T3,T4[,probe]: one policy per target of a signal family ("+joinFamilies()+"), at least 4 targets; probe adds the target derived from the capacity probe (--probe-file, or the probe run on the trace). Repeatable; run after --policies (which then defaults to none).")
	fs.StringVar(&o.probeFile, "probe-file", o.probeFile, "A recorded capacity probe for the probe-derived targets of --sweep: a shootout report <trace>.json with its capacity, or a capacity --json report. Without it the probe runs on each trace.")
	fs.StringVar(&o.capacitySLO, "capacity-slo", o.capacitySLO, "SLO of the capacity probe that sets the capacity policy's metric and target, in capacity's --slo form (empty: ttft:p90<=<--slo-ttft>,itl:p90<=<--slo-tpot>,errors<=0.1%).")

	fs = fss.FlagSet("Fleet")
	fs.IntVar(&o.minReplicas, "min-replicas", o.minReplicas, "minReplicas of every HPA.")
	fs.IntVar(&o.maxReplicas, "max-replicas", o.maxReplicas, "maxReplicas of every HPA, and the size of the fixed fleet (the node has 8 GPUs).")
	fs.DurationVar(&o.coldStart, "cold-start", o.coldStart, "Model-load time of a new replica before it turns Ready, in simulated time.")
	fs.StringVar(&o.pick, "picker", o.pick, "How the front end picks a Ready pod: least-loaded (fewest requests in flight, as an inference gateway) or round-robin (as a Service).")

	fs = fss.FlagSet("Time and SLO")
	fs.Float64Var(&o.compress, "compress", o.compress, "Time compression: every time constant (HPA sync period, behavior windows and periods, cold start, scrape and agent intervals, termination grace, the simulator's clock) runs this many times faster. 15 keeps the HPA's whole-second fields exact.")
	fs.DurationVar(&o.warmup, "warmup", o.warmup, "Simulated time at the start of each replay left out of the headline figures (attainment, goodput, GPU-hours), the same for every policy, the fixed fleets too; the whole-trace figures are reported beside them. Each replay still starts at the trace's start.")
	fs.DurationVar(&o.slo.TTFT, "slo-ttft", o.slo.TTFT, "SLO on time to first token.")
	fs.DurationVar(&o.slo.TPOT, "slo-tpot", o.slo.TPOT, "SLO on the mean time per output token after the first.")

	fs = fss.FlagSet("Runs and reports")
	fs.IntVar(&o.repeats, "repeats", o.repeats, "Runs of every policy on every trace, repeat by repeat, the policies of each repeat in a random order drawn from --seed; the report gives each figure's mean and 95% interval.")
	fs.Uint64Var(&o.seed, "seed", o.seed, "Seed of the run order (0: drawn from the clock); the report records it, and the same seed gives the same order.")
	fs.StringVar(&o.out, "out", o.out, "Directory for the report files.")
	fs.IntVar(&o.sideBySide, "side-by-side", o.sideBySide, fmt.Sprintf("Up to this many runs at once, 1 to %d, started in the run order as slots free, each in its own namespace on its own modelled node of %d GPUs with its own gpu-agent, replay client and sampler; the report records each run's node and how many ran beside it. 1 runs one at a time. At most %d: every slot's simulators, replay client and sampler share the machine's CPUs, and at the default ×15 a millisecond waiting for a CPU is 15 ms of simulated latency, so check that attainment moves by less than the repeat noise before trusting more than 1.", maxSideBySide, framework.FakeGPUs, maxSideBySide))
	fs.BoolVar(&o.render, "render", o.render, "Run nothing: from the JSON and requests CSV already in --out, recompute each policy's summary, rewrite the report files (JSON, CSV, SVG, summary, frontier) and print the tables; with --merge, from summary files instead.")
	fs.StringSliceVar(&o.merge, "merge", o.merge, "With --render: summary files (<trace>-summary.json, from one or several runs, e.g. parts run on different days), comma-separated or repeated, to merge by trace into the points, intervals and frontier chart written in --out.")
	return fss
}

// newFlagSet returns one set holding all of fss's flags, for parsing.
func newFlagSet(fss cliflag.NamedFlagSets) *pflag.FlagSet {
	fs := pflag.NewFlagSet("shootout", pflag.ContinueOnError)
	for _, name := range fss.Order {
		fs.AddFlagSet(fss.FlagSets[name])
	}
	return fs
}

// complete records what only the parsed flag set knows: whether
// --policies was given.
func (o *options) complete(fs *pflag.FlagSet) {
	o.policiesSet = fs.Changed("policies")
}

// parseFlags parses args and validates them into the run's config. done
// is true, with no error, when args asked for --help, which is written to
// help. Every error is a cli.UsageError listing every problem.
func parseFlags(args []string, getenv func(string) string, help io.Writer) (cfg config, done bool, err error) {
	o := newOptions()
	fss := o.flags()
	fs := newFlagSet(fss)
	fs.SetOutput(help)
	fs.Usage = func() {
		fmt.Fprint(help, usage)
		cliflag.PrintSections(help, fss, helpColumns)
	}
	if done, err := cli.Parse(fs, args); done || err != nil {
		return config{}, done, framework.SingleDashHint(fs, args, err)
	}
	o.complete(fs)
	cfg, err = o.config(getenv)
	return cfg, false, cli.Usage(err)
}

// config validates the options, listing every problem, and builds the
// run's config: the policies of --policies, --policy-file and --sweep.
func (o *options) config(getenv func(string) string) (config, error) {
	p, _ := sim.LookupProfile(sim.ProfileLlama3_8BA100)
	cfg := config{
		binDir: getenv(envBin), traces: o.traces, compress: o.compress, coldStart: o.coldStart, duration: o.duration,
		warmup: o.warmup, rateScale: o.rateScale, slo: o.slo, minReplicas: o.minReplicas, maxReplicas: o.maxReplicas,
		pick: o.pick, out: o.out, model: p.Model, maxNumSeqs: p.MaxNumSeqs, maxModelLen: p.MaxModelLen,
		requestTimeout: 30 * time.Minute, render: o.render, capacitySLO: o.capacitySLO,
		repeats: o.repeats, seed: o.seed, merge: o.merge, sideBySide: o.sideBySide,
	}
	if cfg.capacitySLO == "" {
		cfg.capacitySLO = defaultCapacitySLO(cfg.slo)
	}
	var errs []error
	if len(cfg.traces) == 0 {
		errs = append(errs, errors.New("--trace: no trace file"))
	}
	if _, err := capacity.ParseSLOs(cfg.capacitySLO); err != nil {
		errs = append(errs, fmt.Errorf("--capacity-slo: %w", err))
	}
	if cfg.binDir == "" && !cfg.render {
		errs = append(errs, fmt.Errorf("%s is not set: run `make shootout`", envBin))
	}
	if !(cfg.compress >= 1) || math.IsInf(cfg.compress, 0) {
		errs = append(errs, fmt.Errorf("--compress must be at least 1, got %v", cfg.compress))
	}
	if !(cfg.rateScale > 0) || math.IsInf(cfg.rateScale, 0) {
		errs = append(errs, fmt.Errorf("--rate-scale must be positive, got %v", cfg.rateScale))
	}
	if cfg.minReplicas < 1 || cfg.maxReplicas < cfg.minReplicas || cfg.maxReplicas > framework.FakeGPUs {
		errs = append(errs, fmt.Errorf("want 1 <= --min-replicas <= --max-replicas <= %d, got %d and %d", framework.FakeGPUs, cfg.minReplicas, cfg.maxReplicas))
	}
	if cfg.pick != pickLeastLoaded && cfg.pick != pickRoundRobin {
		errs = append(errs, fmt.Errorf("--picker must be %s or %s, got %q", pickLeastLoaded, pickRoundRobin, cfg.pick))
	}
	if cfg.repeats < 1 || cfg.repeats > 100 {
		errs = append(errs, fmt.Errorf("--repeats must be 1 to 100, got %d", cfg.repeats))
	}
	if cfg.sideBySide < 1 || cfg.sideBySide > maxSideBySide {
		errs = append(errs, fmt.Errorf("--side-by-side must be 1 to %d, got %d", maxSideBySide, cfg.sideBySide))
	} else if cfg.sideBySide > 1 && cfg.render {
		errs = append(errs, errors.New("--side-by-side runs policies: it does not go with --render"))
	}
	if !cfg.render { // a render replays nothing
		if err := o.setMaxInFlight(&cfg); err != nil {
			errs = append(errs, err)
		}
	}
	if cfg.seed == 0 {
		cfg.seed = uint64(time.Now().UnixNano())
	}
	if len(cfg.merge) > 0 && !cfg.render {
		errs = append(errs, errors.New("--merge needs --render"))
	}
	policies := o.policies
	if (len(o.policyFiles) > 0 || len(o.sweeps) > 0) && !o.policiesSet {
		policies = "none"
	}
	if policies != "none" {
		pols, err := selectPolicies(defaultPolicies(cfg.maxReplicas), policies, cfg.maxReplicas)
		if err != nil {
			errs = append(errs, fmt.Errorf("--policies: %w", err))
		}
		cfg.pols = append(cfg.pols, pols...)
	}
	for _, file := range o.policyFiles {
		pols, err := readPolicyFile(file, cfg.maxReplicas)
		if err != nil {
			errs = append(errs, err)
		}
		cfg.pols = append(cfg.pols, pols...)
	}
	sweeps, sweepErr := parseSweeps(o.sweeps)
	if sweepErr != nil {
		errs = append(errs, sweepErr)
	}
	if len(sweeps) > 0 {
		var probe *probeResult
		if o.probeFile != "" {
			var err error
			if probe, err = readProbeFile(o.probeFile); err != nil {
				errs = append(errs, err)
			}
		}
		pols, err := sweepPolicies(sweeps, probe, cfg.maxReplicas)
		if err != nil {
			errs = append(errs, err)
		}
		cfg.pols = append(cfg.pols, pols...)
	}
	if o.probeFile != "" && len(cfg.traces) > 1 {
		errs = append(errs, fmt.Errorf("--probe-file: a probe measures one trace's mix; give one --trace, not %d", len(cfg.traces)))
	}
	if o.probeFile != "" && sweepErr == nil && !slices.ContainsFunc(sweeps, func(s sweep) bool { return slices.Contains(s.Targets, targetProbe) }) {
		errs = append(errs, errors.New("--probe-file is used only by a --sweep FAMILY=...,probe"))
	}
	if err := checkNames(cfg.pols); err != nil {
		errs = append(errs, err)
	}
	if len(cfg.pols) == 0 && len(errs) == 0 && !cfg.render {
		errs = append(errs, errors.New("no policies to run: --policies none without --policy-file or --sweep"))
	}
	if cfg.coldStart < 0 || cfg.duration < 0 || cfg.slo.TTFT <= 0 || cfg.slo.TPOT <= 0 {
		errs = append(errs, errors.New("--cold-start and --duration must not be negative, the SLOs (--slo-ttft, --slo-tpot) must be positive"))
	}
	if cfg.warmup < 0 || (cfg.duration > 0 && cfg.warmup >= cfg.duration) {
		errs = append(errs, fmt.Errorf("--warmup must be at least 0 and shorter than --duration, got %s (duration %s)", cfg.warmup, cfg.duration))
	}
	return cfg, errors.Join(errs...)
}

// Open files of the shootout process: those kept back for everything but
// the replays (control-plane clients, the sampler, logs, reports), and
// those each open request may need: three it holds (the replay client's
// connection, and the front end's from the client and to the pod) and one
// the front end may keep idle to a pod for reuse (it keeps up to
// --max-in-flight ÷ --max-replicas per pod).
const (
	reservedFiles   = 1024
	filesPerRequest = 4
)

// setMaxInFlight sets cfg.maxInFlight from --max-in-flight, or from the
// open-file limit when it is 0, and checks that the limit allows it: a
// replay past it fails to connect ("too many open files") and so does
// everything else in the process.
func (o *options) setMaxInFlight(cfg *config) error {
	if o.maxInFlight < 0 {
		return fmt.Errorf("--max-in-flight must be at least 0, got %d", o.maxInFlight)
	}
	files, err := o.openFiles()
	if err != nil {
		return fmt.Errorf("--max-in-flight: reading the open-file limit: %w", err)
	}
	slots := max(cfg.sideBySide, 1)
	limit := inFlightLimit(files, slots)
	switch {
	case limit < max(cfg.maxReplicas, 1):
		return fmt.Errorf("the open-file limit (ulimit -n) is %d: too low for %d replay(s) side by side; raise it", files, slots)
	case o.maxInFlight == 0:
		cfg.maxInFlight = limit
	case o.maxInFlight > limit:
		return fmt.Errorf("--max-in-flight %d needs more open files than the limit (ulimit -n) %d allows: at most %d here; raise the limit or lower --max-in-flight", o.maxInFlight, files, limit)
	default:
		cfg.maxInFlight = o.maxInFlight
	}
	return nil
}

// inFlightLimit is the most requests one replay may hold open when slots
// replays share the open-file limit files.
func inFlightLimit(files uint64, slots int) int {
	if files <= reservedFiles {
		return 0
	}
	return int((files - reservedFiles) / uint64(slots) / filesPerRequest)
}

// openFileLimit returns the process's soft open-file limit, which Go raises
// to the hard limit at start.
func openFileLimit() (uint64, error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, err
	}
	return rl.Cur, nil
}
