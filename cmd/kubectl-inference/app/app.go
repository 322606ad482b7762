// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Package app is the kubectl-inference command: its subcommands (contrast,
// top), their flags (kubectl's kubeconfig flags among them) and the loop
// that prints once or every --watch. The values come from pkg/tools/kubectlplugin.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/escape"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/cli"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/kubectlplugin"
)

const usage = `Usage: kubectl inference COMMAND [flags]

Reads the inference-metrics-adapter's custom metrics API as the HPA reads it.

Commands:
  contrast  per pod: GPU activity next to the model server's queue, batch and KV cache, with a reading
  top       per Deployment: GPUs allocated, how busy they are, tokens and requests per second, and what follows

Run 'kubectl inference COMMAND --help' for a command's flags.
`

// Main runs the plugin with args (without the program name) and returns the
// exit code (pkg/cli's): 0, 1 when reading failed, 2 for bad usage.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "contrast":
		return Contrast("kubectl inference contrast", args[1:], stdout, stderr)
	case "top":
		return Top("kubectl inference top", args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "error: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
}

// common are the flags both commands take.
type common struct {
	kubeconfig string
	overrides  clientcmd.ConfigOverrides
	selector   string
	output     string
	watch      time.Duration
}

// defaultRequestTimeout bounds each API request unless --request-timeout says otherwise.
const defaultRequestTimeout = "10s"

func (c *common) flags(fs, kube *pflag.FlagSet, selectorHelp string) {
	fs.StringVarP(&c.selector, "selector", "l", "", selectorHelp)
	fs.StringVarP(&c.output, "output", "o", "", "Output format: empty for a table, or json (missing values are null).")
	fs.DurationVar(&c.watch, "watch", 0, "Print again every this long until interrupted (0: print once).")
	kube.StringVar(&c.kubeconfig, "kubeconfig", "", "Path to the kubeconfig file. Empty means $KUBECONFIG or ~/.kube/config, as kubectl.")
	names := clientcmd.RecommendedConfigOverrideFlags("")
	names.Timeout.Default = defaultRequestTimeout
	clientcmd.BindOverrideFlags(&c.overrides, kube, names)
}

// problems lists what is wrong with the common flags.
func (c *common) problems() []error {
	var errs []error
	if c.output != "" && c.output != "json" {
		errs = append(errs, fmt.Errorf("--output %q: want json or nothing (a table)", c.output))
	}
	if c.watch < 0 {
		errs = append(errs, fmt.Errorf("--watch %s must not be negative", c.watch))
	}
	if d, err := time.ParseDuration(c.overrides.Timeout); c.overrides.Timeout != "0" && (err != nil || d < 0) {
		errs = append(errs, fmt.Errorf("--request-timeout %q: want a duration such as 10s", c.overrides.Timeout))
	}
	return errs
}

// requestTimeout is --request-timeout as a duration (0: none).
func (c *common) requestTimeout() time.Duration {
	d, _ := time.ParseDuration(c.overrides.Timeout) // checked by problems
	return d
}

// config loads the kubeconfig as kubectl does and returns the client
// configuration and the namespace (-n, else the context's).
func (c *common) config() (*rest.Config, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = c.kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &c.overrides)
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("loading kubeconfig: %w", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, "", fmt.Errorf("namespace from kubeconfig: %w", err)
	}
	cfg.UserAgent = "kubectl-inference"
	return cfg, ns, nil
}

// parse parses args into fs and kube with pkg/cli and checks them: it
// prints the usage for --help (exit 0), or the flag that cannot be parsed,
// or every problem check and the stray arguments give at once (exit 2, a
// usage error); it returns done when the caller should exit with code.
func parse(prog, summary string, fs, kube *pflag.FlagSet, args []string, check func() []error, stdout, stderr io.Writer) (code int, done bool) {
	all := pflag.NewFlagSet(prog, pflag.ContinueOnError)
	all.AddFlagSet(fs)
	all.AddFlagSet(kube)
	all.SetOutput(io.Discard)
	all.Usage = func() {
		fmt.Fprintf(stdout, "Usage: %s [flags]\n\n%s\n\nFlags:\n%s\nKubeconfig flags (as kubectl's):\n%s", prog, summary, fs.FlagUsages(), kube.FlagUsages())
	}
	helped, err := cli.ParseAndCheck(all, args, check)
	if helped { // pflag has printed the usage
		return 0, true
	}
	if err != nil {
		fmt.Fprintf(stderr, "error: %v\nRun '%s --help' for usage.\n", err, prog)
		return cli.ExitCode(err), true
	}
	return 0, false
}

// run prints once, or every c.watch until SIGINT or SIGTERM. A failed
// round ends a single print with exit 1 and is reported and retried when
// watching.
func run(c *common, stdout, stderr io.Writer, header func() string, once func(ctx context.Context, client *kubectlplugin.Client, ns string) error) int {
	cfg, ns, err := c.config()
	if err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return 1
	}
	client, err := kubectlplugin.NewClient(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	for {
		if c.watch > 0 {
			fmt.Fprintf(stdout, "\n%s  namespace %s%s\n", time.Now().Format(time.TimeOnly), ns, header())
		}
		// A round asks many questions; the request timeout bounds each one,
		// this bounds the round.
		rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		err := once(rctx, client, ns)
		cancel()
		if err != nil {
			// The API's messages quote tenant text (names, scrape errors).
			fmt.Fprintf(stderr, "error: %s\n", escape.Printable(err.Error()))
			if c.watch == 0 {
				return 1
			}
		}
		if c.watch == 0 {
			return 0
		}
		select {
		case <-ctx.Done():
			return 0
		case <-time.After(c.watch):
		}
	}
}

// Contrast runs the contrast command; prog names it in its usage (the
// adapter binary's `contrast` subcommand runs it too).
func Contrast(prog string, args []string, stdout, stderr io.Writer) int {
	var c common
	fs := pflag.NewFlagSet("contrast", pflag.ContinueOnError)
	kube := pflag.NewFlagSet("kubeconfig", pflag.ContinueOnError)
	c.flags(fs, kube, "Label selector of the pods, e.g. app=llm (required).")
	check := func() []error {
		errs := c.problems()
		if c.selector == "" {
			errs = append(errs, errors.New("--selector (-l) is required, e.g. -l app=llm"))
		}
		return errs
	}
	const summary = "Shows, per Running pod, GPU activity next to the model server's own saturation signals, with a reading."
	if code, done := parse(prog, summary, fs, kube, args, check, stdout, stderr); done {
		return code
	}
	return run(&c, stdout, stderr, func() string { return ", pods " + c.selector },
		func(ctx context.Context, client *kubectlplugin.Client, ns string) error {
			rows, err := client.Pods(ctx, ns, c.selector)
			if err != nil {
				return err
			}
			if c.output == "json" {
				return kubectlplugin.WriteJSON(stdout, kubectlplugin.NewPodsReport(ns, c.selector, rows))
			}
			return kubectlplugin.Write(stdout, rows)
		})
}

// Top runs the top command.
func Top(prog string, args []string, stdout, stderr io.Writer) int {
	var c common
	var slo kubectlplugin.SLO
	var price float64
	var openCostURL, openCostWindow string
	fs := pflag.NewFlagSet("top", pflag.ContinueOnError)
	kube := pflag.NewFlagSet("kubeconfig", pflag.ContinueOnError)
	c.flags(fs, kube, "Label selector of the Deployments (their own labels), e.g. team=ml. Empty means every Deployment in the namespace.")
	fs.DurationVar(&slo.TimeToFirstToken, "slo-ttft", 0, "SLO bound on each request's time to first token, e.g. 1s; with it, the share of requests meeting the SLO is bounded from the TTFT percentiles (0: no bound).")
	fs.DurationVar(&slo.E2ELatency, "slo-e2e-latency", 0, "SLO bound on each request's end-to-end latency, e.g. 20s (0: no bound). With --slo-ttft too, a request must meet both.")
	fs.Float64Var(&price, "gpu-hour-price", 0, "Price of one GPU for one hour, in any currency; with an SLO, adds the cost per 1,000 SLO-meeting requests (0: no cost).")
	fs.StringVar(&openCostURL, "opencost-url", "", "Base URL of OpenCost's API (e.g. http://opencost.opencost:9003); with an SLO, the cost per 1,000 SLO-meeting requests uses each Deployment's OpenCost totalCost over its running time in --opencost-window instead of a GPU-hour price.")
	fs.StringVar(&openCostWindow, "opencost-window", "1h", "OpenCost window of the allocation the cost comes from, in OpenCost's syntax (e.g. 1h, 30m, 1d).")
	check := func() []error {
		errs := c.problems()
		if slo.TimeToFirstToken < 0 || slo.E2ELatency < 0 {
			errs = append(errs, errors.New("--slo-ttft and --slo-e2e-latency must not be negative"))
		}
		if price < 0 || math.IsNaN(price) || math.IsInf(price, 0) {
			errs = append(errs, fmt.Errorf("--gpu-hour-price %v must be a finite number, 0 or more", price))
		}
		if price > 0 && !slo.IsSet() {
			errs = append(errs, errors.New("--gpu-hour-price needs an SLO (--slo-ttft or --slo-e2e-latency): the cost is per 1,000 SLO-meeting requests"))
		}
		if openCostURL != "" {
			if u, err := url.Parse(openCostURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				errs = append(errs, fmt.Errorf("--opencost-url %q: want an http or https URL such as http://opencost.opencost:9003", openCostURL))
			}
			if !slo.IsSet() {
				errs = append(errs, errors.New("--opencost-url needs an SLO (--slo-ttft or --slo-e2e-latency): the cost is per 1,000 SLO-meeting requests"))
			}
			if price > 0 {
				errs = append(errs, errors.New("--opencost-url and --gpu-hour-price both price the Deployments: give one"))
			}
			if openCostWindow == "" || strings.ContainsAny(openCostWindow, "&?#/ ") {
				errs = append(errs, fmt.Errorf("--opencost-window %q: want an OpenCost window such as 1h", openCostWindow))
			}
		}
		return errs
	}
	const summary = "Shows, per Deployment: GPUs allocated (the Running pods' nvidia.com/gpu requests), how busy they were (NVML utilization and SM activity, weighted by GPUs), the useful output (generated tokens/s, finished requests/s, TTFT and end-to-end p90), tokens per GPU-second and, with an SLO, the share of requests meeting it. Missing values are shown as -, never 0."
	if code, done := parse(prog, summary, fs, kube, args, check, stdout, stderr); done {
		return code
	}
	return run(&c, stdout, stderr, func() string {
		if c.selector == "" {
			return ", every Deployment"
		}
		return ", Deployments " + c.selector
	}, func(ctx context.Context, client *kubectlplugin.Client, ns string) error {
		ws, err := client.Deployments(ctx, ns, c.selector)
		if err != nil {
			return err
		}
		pricing := kubectlplugin.Pricing{GPUHourPrice: price}
		var costs map[string]float64
		if openCostURL != "" {
			pricing.OpenCost = &kubectlplugin.OpenCost{URL: openCostURL, Window: openCostWindow, Client: &http.Client{Timeout: c.requestTimeout()}}
			if costs, err = pricing.OpenCost.DeploymentCosts(ctx, ns); err != nil {
				return err
			}
		}
		rows := make([]kubectlplugin.Summary, 0, len(ws))
		for _, w := range ws {
			row := kubectlplugin.Summarize(w, slo, price)
			if pricing.OpenCost != nil {
				if perSecond, ok := costs[w.Name]; ok {
					row.PriceAt(perSecond)
				} else {
					if row.Missing == nil {
						row.Missing = map[string]string{}
					}
					row.Missing["costPer1000SLOMetRequests"] = fmt.Sprintf("OpenCost has no allocation with running time for Deployment %s/%s in window %s", ns, w.Name, openCostWindow)
				}
			}
			rows = append(rows, row)
		}
		if c.output == "json" {
			return kubectlplugin.WriteJSON(stdout, kubectlplugin.NewTopReport(ns, c.selector, slo, pricing, rows))
		}
		if len(rows) == 0 {
			fmt.Fprintf(stderr, "No Deployments match %q in namespace %s.\n", c.selector, ns)
			return nil
		}
		return kubectlplugin.WriteTop(stdout, rows, slo, pricing)
	})
}
