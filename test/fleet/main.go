// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Command fleet is `make fleet`: a benchmark of the adapter against a fleet
// of fake vLLM pods, through the real aggregator. It starts etcd,
// kube-apiserver and kube-controller-manager (the e2e framework), serves N
// fake pods on loopback addresses 127.2.x.y:8000 from one or more child
// processes of its own binary (each page is the vLLM V1 fixture of
// pkg/adapter/parse/testdata with the pod's own vllm:num_requests_waiting, which
// changes on command), creates N Running pods in the API server, starts the
// adapter registered through its APIService, and measures:
//
//   - freshness: from a pod's value change to the first N-pod answer
//     through the aggregator that shows it;
//   - the adapter's CPU per pod-scrape and its RSS over a quiet window;
//   - answer latency with 1, 10, 50, ... concurrent clients, for three
//     questions: the N-pod list (a Pods metric, as an HPA asks it; its
//     answer grows with N), the sum over the N pods (an External metric;
//     one value), and the floor (a Namespace that kube-apiserver answers
//     from its cache, with no aggregator and no adapter: the least any
//     answer costs on the machine), each asked for in JSON accepting gzip
//     (as kubectl asks) and in protobuf without compression (as the HPA
//     controller asks);
//   - the scrapes per pod per second the fleet received.
//
// Every process it starts is stopped by PID before it exits. See
// docs/performance.md#fleet-benchmark.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// envBin names the control-plane binaries' directory (test/tools/build.sh).
const envBin = "IMA_E2E_BIN"

// cgroupRoot is where cgroup hierarchies are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// podsPerProc is how many pods one fake-fleet process serves when -procs
// is 0: each pod takes a listener and one or two keep-alive connections,
// and these machines allow 20,000 open files per process.
const podsPerProc = 2500

type options struct {
	binDir       string
	pods         int
	interval     time.Duration
	trials       int
	clients      []int
	questions    []question
	encodings    []encoding
	procs        int
	quiet        time.Duration
	loadDuration time.Duration
	// pace, when set, makes each client of the latency runs start a
	// question every pace instead of back to back.
	pace time.Duration
	keep bool
	// profileDir, when set, receives the adapter's CPU profile over the
	// quiet window and over each latency run, and its heap profile.
	profileDir string
	// adapterArgs are appended to the adapter's flags.
	adapterArgs []string
	// memoryLimit, when set (e.g. 200Mi), is passed to the adapter as
	// MEMORY_LIMIT_BYTES (memoryLimitBytes, set by validate), as the chart
	// passes the container's limit: the adapter then sets GOMEMLIMIT from it.
	memoryLimit      string
	memoryLimitBytes int64
	// enforceMemoryLimit runs the adapter in a memory cgroup limited to
	// memoryLimit, as the kubelet runs a container (cgroup.go).
	enforceMemoryLimit bool
	// adapterEnvVars are KEY=VALUE pairs added to the adapter's environment
	// (e.g. GOGC=50).
	adapterEnvVars []string
}

func parseClients(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-clients: %q is not a positive number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func (o *options) validate() error {
	var errs []error
	if o.binDir == "" {
		errs = append(errs, fmt.Errorf("%s is not set: run `make fleet`, or `%s=$(./test/tools/build.sh) go run ./test/fleet`", envBin, envBin))
	}
	if o.pods < 1 || o.pods > 250*250 {
		errs = append(errs, fmt.Errorf("-pods must be in 1..62500, got %d", o.pods))
	}
	if o.interval < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("-interval must be at least 100ms, got %s", o.interval))
	}
	if o.trials < 1 {
		errs = append(errs, fmt.Errorf("-trials must be at least 1, got %d", o.trials))
	}
	if o.procs < 0 {
		errs = append(errs, fmt.Errorf("-procs must not be negative, got %d", o.procs))
	}
	if o.quiet < time.Second || o.loadDuration < time.Second {
		errs = append(errs, errors.New("-quiet and -load-duration must be at least 1s"))
	}
	if o.pace < 0 || o.pace >= o.loadDuration {
		errs = append(errs, fmt.Errorf("-pace must be 0 (back to back) or shorter than -load-duration (%s), got %s", o.loadDuration, o.pace))
	}
	for _, kv := range o.adapterEnvVars {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			errs = append(errs, fmt.Errorf("-adapter-env: %q is not KEY=VALUE", kv))
		}
	}
	if o.memoryLimit != "" {
		q, err := resource.ParseQuantity(o.memoryLimit)
		if err != nil || q.Sign() <= 0 {
			errs = append(errs, fmt.Errorf("-memory-limit %q is not a positive quantity such as 200Mi", o.memoryLimit))
		}
		o.memoryLimitBytes = q.Value()
	}
	if o.enforceMemoryLimit && o.memoryLimit == "" {
		errs = append(errs, errors.New("-enforce-memory-limit needs -memory-limit"))
	}
	if o.procs == 0 {
		o.procs = (o.pods + podsPerProc - 1) / podsPerProc
	}
	o.procs = min(o.procs, o.pods)
	return errors.Join(errs...)
}

func main() {
	var o options
	var clients, qs, encs string
	var serveFrom, serveTo int
	var servePage, serveControl string
	flag.IntVar(&o.pods, "pods", 1000, "fake pods in the fleet")
	flag.DurationVar(&o.interval, "interval", time.Second, "the adapter's --scrape-interval (--max-age is 3x)")
	flag.IntVar(&o.trials, "trials", 20, "freshness trials (value change -> visible through the aggregator)")
	flag.StringVar(&clients, "clients", "1,10,50", "concurrent clients of each answer-latency run, comma-separated")
	flag.StringVar(&qs, "questions", "list,sum,floor,direct", "questions of the latency runs, comma-separated: list (the N-pod list of a Pods metric), sum (the sum over the N pods, an External metric), floor (a Namespace from kube-apiserver's cache: no aggregator, no adapter; the least any answer costs here) and direct (the N-pod list asked of the adapter itself, as the aggregator asks it: the adapter's own part, no kube-apiserver)")
	flag.StringVar(&encs, "encodings", "json,protobuf", "encodings each latency run's question is asked in, comma-separated: json (accepting gzip, as kubectl asks) and protobuf (without compression, as the HPA controller asks)")
	flag.IntVar(&o.procs, "procs", 0, fmt.Sprintf("fake-fleet processes (0: one per %d pods)", podsPerProc))
	flag.DurationVar(&o.quiet, "quiet", 20*time.Second, "the quiet window over which CPU per pod-scrape is measured")
	flag.DurationVar(&o.loadDuration, "load-duration", 10*time.Second, "length of each answer-latency run")
	flag.DurationVar(&o.pace, "pace", 0, "each client of the latency runs starts a question every pace (at once when the last answer took longer), e.g. 100ms for 10 answers/s per client; 0 asks back to back")
	flag.StringVar(&o.profileDir, "profile", "", "directory for the adapter's pprof profiles: CPU over the quiet window (cpu-quiet.pprof) and each latency run (cpu-QUESTION-ENCODING-clients-N.pprof, QUESTION list, sum, floor or direct, ENCODING json or protobuf), heap after the quiet window (heap.pprof)")
	var adapterArgs string
	flag.StringVar(&adapterArgs, "adapter-args", "", "extra adapter flags, space-separated (e.g. \"--answer-cache-ttl=0\")")
	var adapterEnv string
	flag.StringVar(&adapterEnv, "adapter-env", "", "extra adapter environment, space-separated KEY=VALUE pairs (e.g. \"GOGC=50\")")
	flag.StringVar(&o.memoryLimit, "memory-limit", "", "the adapter's memory limit as the chart would set it (e.g. 200Mi): passed as MEMORY_LIMIT_BYTES, from which the adapter sets GOMEMLIMIT (less 96 MiB); empty: none")
	flag.BoolVar(&o.enforceMemoryLimit, "enforce-memory-limit", false, "also run the adapter in a memory cgroup limited to -memory-limit, as the kubelet runs a container (needs root and a cgroup v1 memory hierarchy or the v2 memory controller); reports what the kernel accounted and any OOM kill")
	flag.BoolVar(&o.keep, "keep", false, "keep the run's directory (certificates, logs) even on success")
	// The child mode: serve pods [from, to) and take commands on an address.
	flag.IntVar(&serveFrom, "serve-from", -1, "internal: serve pods from this index (child process)")
	flag.IntVar(&serveTo, "serve-to", -1, "internal: serve pods up to this index, exclusive (child process)")
	flag.StringVar(&servePage, "serve-page", "", "internal: the page file (child process)")
	flag.StringVar(&serveControl, "serve-control", "", "internal: the command address (child process)")
	flag.Parse()
	o.adapterArgs = strings.Fields(adapterArgs)
	o.adapterEnvVars = strings.Fields(adapterEnv)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if serveFrom >= 0 {
		if err := serveFleet(ctx, serveFrom, serveTo, servePage, serveControl); err != nil {
			fmt.Fprintln(os.Stderr, "fleet:", err)
			os.Exit(1)
		}
		return
	}
	o.binDir = os.Getenv(envBin)
	var err error
	o.clients, err = parseClients(clients)
	if err == nil {
		o.questions, err = parseQuestions(qs)
	}
	if err == nil {
		o.encodings, err = parseEncodings(encs)
	}
	if err == nil {
		err = o.validate()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		os.Exit(2)
	}
	go func() { <-ctx.Done(); stop() }() // a second Ctrl-C ends it at once
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		stop()
		os.Exit(1)
	}
}
