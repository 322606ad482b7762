// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"
	cliflag "k8s.io/component-base/cli/flag"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/cli"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/test/e2e/framework"
)

// helpHeader heads --help, above the flags printed section by section.
const helpHeader = `Usage: go run ./test/fleet [flags]   (or: make fleet FLEET_FLAGS="...")

Benchmarks the adapter against a fleet of fake vLLM pods through the real aggregator: freshness, CPU per pod-scrape, RSS and answer latency. Needs IMA_E2E_BIN, the directory test/tools/build.sh prints (make fleet sets it). See docs/performance.md#fleet-benchmark.
`

// The schemes of --scrape-scheme.
const (
	schemeHTTP  = "http"
	schemeHTTPS = "https"
)

// podsPerProc is how many pods one fake-fleet process serves when --procs
// is 0: each pod takes a listener and one or two keep-alive connections,
// and these machines allow 20,000 open files per process.
const podsPerProc = 2500

// options are the command-line flags of the fleet benchmark and, once
// validate has run, the settings they give.
type options struct {
	binDir   string
	pods     int
	interval time.Duration
	trials   int
	// clientsFlag, questionsFlag and encodingsFlag are the flags as given;
	// validate parses them into clients, questions and encodings.
	clientsFlag, questionsFlag, encodingsFlag string
	clients                                   []int
	questions                                 []question
	encodings                                 []encoding
	procs                                     int
	quiet                                     time.Duration
	loadDuration                              time.Duration
	// pace, when set, makes each client of the latency runs start a
	// question every pace instead of back to back.
	pace time.Duration
	keep bool
	// profileDir, when set, receives the adapter's CPU profile over the
	// quiet window and over each latency run, and its heap profile.
	profileDir string
	// adapterArgsFlag and adapterEnvFlag are the flags as given, split
	// into adapterArgs (appended to the adapter's flags) and
	// adapterEnvVars (KEY=VALUE pairs added to the adapter's environment,
	// e.g. GOGC=50).
	adapterArgsFlag, adapterEnvFlag string
	adapterArgs                     []string
	adapterEnvVars                  []string
	// memoryLimit, when set (e.g. 200Mi), is passed to the adapter as
	// MEMORY_LIMIT_BYTES (memoryLimitBytes, set by validate), as the chart
	// passes the container's limit: the adapter then sets GOMEMLIMIT from it.
	memoryLimit      string
	memoryLimitBytes int64
	// enforceMemoryLimit runs the adapter in a memory cgroup limited to
	// memoryLimit, as the kubelet runs a container (cgroup.go).
	enforceMemoryLimit bool
	// scrapeScheme is how the adapter scrapes the fleet's pages: http, or
	// https (a test CA's certificate, the pods annotated
	// prometheus.io/scheme: https, the adapter given --scrape-ca-file).
	scrapeScheme string
	// child, when its from is set, makes this process a fake-fleet child.
	child childOptions
}

// childOptions are the internal flags of a fake-fleet child process (run.go
// starts it): serve pods [from, to) with the page in page and take commands
// on control.
type childOptions struct {
	from, to      int
	page, control string
	// certFile and keyFile, when set, make the child serve the pods'
	// pages over TLS with that certificate.
	certFile, keyFile string
}

// newOptions returns the defaults, with binDir, the control-plane binaries'
// directory, from the environment.
func newOptions(binDir string) *options {
	return &options{
		binDir: binDir, pods: 1000, interval: time.Second, trials: 20,
		clientsFlag: "1,10,50", questionsFlag: "list,sum,floor,direct", encodingsFlag: "json,protobuf",
		quiet: 20 * time.Second, loadDuration: 10 * time.Second, scrapeScheme: schemeHTTP,
		child: childOptions{from: -1, to: -1},
	}
}

// flags returns the flags in --help's sections.
func (o *options) flags() cliflag.NamedFlagSets {
	var fss cliflag.NamedFlagSets
	fleet := fss.FlagSet("fleet")
	fleet.IntVar(&o.pods, "pods", o.pods, "Fake pods in the fleet, 1..62500.")
	fleet.IntVar(&o.procs, "procs", o.procs, fmt.Sprintf("Fake-fleet processes serving the pods (0: one per %d pods).", podsPerProc))
	fleet.StringVar(&o.scrapeScheme, "scrape-scheme", o.scrapeScheme, "How the adapter scrapes the pods: http, or https (the fleet serves TLS with a certificate of a test CA for the pods' DNS names, keep-alive and session tickets on; the pods are annotated prometheus.io/scheme: https and the adapter verifies against the CA with --scrape-ca-file).")

	adapter := fss.FlagSet("adapter")
	adapter.DurationVar(&o.interval, "interval", o.interval, "The adapter's --scrape-interval (its --max-age is 3 times it), at least 100ms.")
	adapter.StringVar(&o.adapterArgsFlag, "adapter-args", o.adapterArgsFlag, `Extra adapter flags, space-separated (e.g. "--answer-cache-ttl=0").`)
	adapter.StringVar(&o.adapterEnvFlag, "adapter-env", o.adapterEnvFlag, `Extra adapter environment, space-separated KEY=VALUE pairs (e.g. "GOGC=50").`)
	adapter.StringVar(&o.memoryLimit, "memory-limit", o.memoryLimit, "The adapter's memory limit as the chart would set it (e.g. 200Mi): passed as MEMORY_LIMIT_BYTES, from which the adapter sets GOMEMLIMIT (less 96 MiB); empty: none.")
	adapter.BoolVar(&o.enforceMemoryLimit, "enforce-memory-limit", o.enforceMemoryLimit, "Also run the adapter in a memory cgroup limited to --memory-limit, as the kubelet runs a container (needs root and a cgroup v1 memory hierarchy or the v2 memory controller); reports what the kernel accounted and any OOM kill.")

	fresh := fss.FlagSet("freshness and CPU")
	fresh.IntVar(&o.trials, "trials", o.trials, "Freshness trials: a pod's value changes, and the time until the aggregator's answer shows it is measured.")
	fresh.DurationVar(&o.quiet, "quiet", o.quiet, "The quiet window over which the adapter's CPU per pod-scrape and its RSS are measured, at least 1s.")

	latency := fss.FlagSet("answer latency")
	latency.StringVar(&o.clientsFlag, "clients", o.clientsFlag, "Concurrent clients of each answer-latency run, comma-separated.")
	latency.StringVar(&o.questionsFlag, "questions", o.questionsFlag, "Questions of the latency runs, comma-separated: list (the N-pod list of a Pods metric), sum (the sum over the N pods, an External metric), floor (a Namespace from kube-apiserver's cache: no aggregator, no adapter; the least any answer costs here) and direct (the N-pod list asked of the adapter itself, as the aggregator asks it: the adapter's own part, no kube-apiserver).")
	latency.StringVar(&o.encodingsFlag, "encodings", o.encodingsFlag, "Encodings each latency run's question is asked in, comma-separated: json (accepting gzip, as kubectl asks) and protobuf (without compression, as the HPA controller asks).")
	latency.DurationVar(&o.loadDuration, "load-duration", o.loadDuration, "Length of each answer-latency run, at least 1s.")
	latency.DurationVar(&o.pace, "pace", o.pace, "Each client of the latency runs starts a question every pace (at once when the last answer took longer), e.g. 100ms for 10 answers/s per client; 0 asks back to back.")

	output := fss.FlagSet("output")
	output.StringVar(&o.profileDir, "profile", o.profileDir, "Directory for the adapter's pprof profiles: CPU over the quiet window (cpu-quiet.pprof) and each latency run (cpu-QUESTION-ENCODING-clients-N.pprof, QUESTION list, sum, floor or direct, ENCODING json or protobuf), heap after the quiet window (heap.pprof).")
	output.BoolVar(&o.keep, "keep", o.keep, "Keep the run's directory (certificates, logs) even on success.")
	return fss
}

// flagSet returns one set holding fss's flags and the hidden flags of a
// fake-fleet child process, for parsing.
func (o *options) flagSet(fss cliflag.NamedFlagSets) *pflag.FlagSet {
	fs := cli.FlagSet("fleet", fss)
	fs.IntVar(&o.child.from, "serve-from", o.child.from, "internal: serve pods from this index (child process)")
	fs.IntVar(&o.child.to, "serve-to", o.child.to, "internal: serve pods up to this index, exclusive (child process)")
	fs.StringVar(&o.child.page, "serve-page", o.child.page, "internal: the page file (child process)")
	fs.StringVar(&o.child.control, "serve-control", o.child.control, "internal: the command address (child process)")
	fs.StringVar(&o.child.certFile, "serve-cert", o.child.certFile, "internal: serve TLS with this certificate (child process)")
	fs.StringVar(&o.child.keyFile, "serve-key", o.child.keyFile, "internal: the key of --serve-cert (child process)")
	for _, name := range []string{"serve-from", "serve-to", "serve-page", "serve-control", "serve-cert", "serve-key"} {
		_ = fs.MarkHidden(name) // the flags were just defined
	}
	return fs
}

// check is validate for cli.ParseAndCheck; a fake-fleet child has nothing
// to check.
func (o *options) check() []error {
	if o.isChild() {
		return nil
	}
	if err := o.validate(); err != nil {
		return []error{err}
	}
	return nil
}

// isChild says whether the flags make this process a fake-fleet child.
func (o *options) isChild() bool { return o.child.from >= 0 }

func parseClients(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("--clients: %q is not a positive number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// validate checks the options, listing every problem at once, and fills in
// what they give: the parsed lists, the memory limit in bytes, and the
// number of fake-fleet processes.
func (o *options) validate() error {
	var errs []error
	if err := framework.RequireBinDir(o.binDir, "fleet"); err != nil {
		errs = append(errs, err)
	}
	if o.pods < 1 || o.pods > 250*250 {
		errs = append(errs, fmt.Errorf("--pods must be in 1..62500, got %d", o.pods))
	}
	if o.interval < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("--interval must be at least 100ms, got %s", o.interval))
	}
	if o.trials < 1 {
		errs = append(errs, fmt.Errorf("--trials must be at least 1, got %d", o.trials))
	}
	if o.procs < 0 {
		errs = append(errs, fmt.Errorf("--procs must not be negative, got %d", o.procs))
	}
	if o.quiet < time.Second || o.loadDuration < time.Second {
		errs = append(errs, errors.New("--quiet and --load-duration must be at least 1s"))
	}
	if o.pace < 0 || o.pace >= o.loadDuration {
		errs = append(errs, fmt.Errorf("--pace must be 0 (back to back) or shorter than --load-duration (%s), got %s", o.loadDuration, o.pace))
	}
	var err error
	if o.clients, err = parseClients(o.clientsFlag); err != nil {
		errs = append(errs, err)
	}
	if o.questions, err = parseQuestions(o.questionsFlag); err != nil {
		errs = append(errs, err)
	}
	if o.encodings, err = parseEncodings(o.encodingsFlag); err != nil {
		errs = append(errs, err)
	}
	o.adapterArgs = strings.Fields(o.adapterArgsFlag)
	o.adapterEnvVars = strings.Fields(o.adapterEnvFlag)
	for _, kv := range o.adapterEnvVars {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			errs = append(errs, fmt.Errorf("--adapter-env: %q is not KEY=VALUE", kv))
		}
	}
	if o.memoryLimit != "" {
		q, err := resource.ParseQuantity(o.memoryLimit)
		if err != nil || q.Sign() <= 0 {
			errs = append(errs, fmt.Errorf("--memory-limit %q is not a positive quantity such as 200Mi", o.memoryLimit))
		}
		o.memoryLimitBytes = q.Value()
	}
	if o.scrapeScheme != schemeHTTP && o.scrapeScheme != schemeHTTPS {
		errs = append(errs, fmt.Errorf("--scrape-scheme must be %s or %s, got %q", schemeHTTP, schemeHTTPS, o.scrapeScheme))
	}
	if o.enforceMemoryLimit && o.memoryLimit == "" {
		errs = append(errs, errors.New("--enforce-memory-limit needs --memory-limit"))
	}
	if o.procs == 0 {
		o.procs = (o.pods + podsPerProc - 1) / podsPerProc
	}
	o.procs = min(o.procs, o.pods)
	return errors.Join(errs...)
}
