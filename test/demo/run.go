// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/loadgen"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/test/e2e/framework"
)

// run sets up the environment, runs the scenario until cfg.duration has
// passed or ctx ends, writes the CSV and the chart, and tears everything
// down, checking that no child process is left.
func run(ctx context.Context, cfg config, out io.Writer) (err error) {
	say := func(format string, args ...any) { fmt.Fprintf(out, "demo: "+format+"\n", args...) }
	if err := os.MkdirAll(filepath.Dir(cfg.csvPath), 0o755); err != nil {
		return fmt.Errorf("create output directory: %w", err)
	}
	logFile, err := os.Create(cfg.logPath)
	if err != nil {
		return fmt.Errorf("create log: %w", err)
	}
	defer logFile.Close()
	if err := framework.LogTo(logFile); err != nil {
		return err
	}
	defer klog.Flush()

	root, err := framework.RepoRoot()
	if err != nil {
		return err
	}
	say("building the adapter and inference-sim, starting etcd, kube-apiserver and kube-controller-manager from %s", cfg.binDir)
	start := time.Now()
	e, err := framework.Setup(ctx, root, cfg.binDir)
	if e != nil {
		defer func() { err = errors.Join(err, teardown(e, err != nil, say)) }()
	}
	if err != nil {
		return fmt.Errorf("set up: %w", err)
	}
	if e.Adapter == nil || e.Kubelet == nil {
		return fmt.Errorf("set up: %s", e.Unavailable())
	}
	say("control plane ready in %s; files in %s", time.Since(start).Round(100*time.Millisecond), e.Dir)
	say("watch it from another terminal: kubectl --kubeconfig=%s -n %s get hpa,pods -w", e.ControlPlane.AdminKubeconfig, namespace)

	c := simConfig()
	phases := schedule(cfg.duration)
	d := deployment(simArgs(c))
	selector := labels.SelectorFromSet(d.Spec.Selector.MatchLabels)
	if err := createWorkload(ctx, e, d, hpa(scaleDownWindow(cfg.duration))); err != nil {
		return err
	}
	for _, line := range describe(c, phases, cfg.duration) {
		say("%s", line)
	}
	svc, err := framework.StartServiceProxy(func() []string { return e.Kubelet.Endpoints(namespace, selector) })
	if err != nil {
		return err
	}
	defer svc.Close()

	rows, report, interrupted := drive(ctx, cfg, e, svc.URL, selector, phases, out)
	if interrupted {
		say("interrupted: stopping the load")
	}
	if report != nil {
		s := loadgen.Summarize(report)
		say("load: %d requests sent, %d completed, %d failed or cut off at the end, %d arrivals dropped; TTFT p50 %s p90 %s p99 %s",
			s.Sent, s.Completed, s.Failed, s.Dropped, s.TTFT.P50.Round(time.Millisecond), s.TTFT.P90.Round(time.Millisecond), s.TTFT.P99.Round(time.Millisecond))
	}
	return writeOutputs(cfg, rows, say)
}

// createWorkload creates the namespace and the Deployment, waits for its
// first pod to be ready, and creates the HPA.
func createWorkload(ctx context.Context, e *framework.Environment, d *appsv1.Deployment, h *autoscalingv2.HorizontalPodAutoscaler) error {
	c := e.ControlPlane.Client
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create namespace %s: %w", namespace, err)
	}
	if _, err := c.AppsV1().Deployments(namespace).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create deployment: %w", err)
	}
	if err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		got, err := c.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
		return err == nil && got.Status.ReadyReplicas >= minReplicas, nil
	}); err != nil {
		return fmt.Errorf("deployment %s/%s has no ready pod: %w", namespace, name, err)
	}
	if _, err := c.AutoscalingV2().HorizontalPodAutoscalers(namespace).Create(ctx, h, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create HPA: %w", err)
	}
	return nil
}

// drive runs the load and samples every sampleEvery, printing each row,
// until the schedule ends or ctx does. It stops the load before returning.
func drive(ctx context.Context, cfg config, e *framework.Environment, url string, selector labels.Selector,
	phases []loadgen.Phase, out io.Writer) (rows []row, report *loadgen.Report, interrupted bool) {
	transport := &http.Transport{MaxIdleConnsPerHost: maxInFlight, DisableCompression: true}
	defer transport.CloseIdleConnections()
	rec := newRecorder(transport, time.Now)
	loadCtx, stopLoad := context.WithCancel(context.Background())
	defer stopLoad()
	done := make(chan struct{})
	lcfg := loadgen.Config{
		URL:            url,
		Model:          model,
		Endpoint:       loadgen.EndpointCompletions,
		Schedule:       phases,
		PromptLen:      loadgen.Fixed{N: promptTokens},
		OutputLen:      loadgen.Fixed{N: outputTokens},
		Seed:           1,
		TimeScale:      1,
		MaxInFlight:    maxInFlight,
		RequestTimeout: requestTimeout,
		Client:         &http.Client{Transport: rec},
	}
	s := &sampler{client: e.ControlPlane.Client, metrics: e.ControlPlane.Metrics, selector: selector}
	start := time.Now()
	go func() {
		defer close(done)
		report, _ = loadgen.Run(loadCtx, lcfg) // cancelled at the end: open requests count as failed
	}()
	fmt.Fprintln(out, header())
	end := time.NewTimer(cfg.duration)
	defer end.Stop()
	tick := time.NewTicker(sampleEvery)
	defer tick.Stop()
	for stop := false; !stop; {
		select {
		case <-ctx.Done():
			interrupted, stop = true, true
			continue
		case <-end.C:
			stop = true
		case <-tick.C:
		}
		now := time.Now()
		r := row{t: now.Sub(start), offered: rateAt(phases, now.Sub(start))}
		r.ttftP90, r.ttftCount, r.served = rec.window(now, ttftWindow)
		sctx, cancel := context.WithTimeout(ctx, sampleEvery)
		s.sample(sctx, &r)
		cancel()
		if ctx.Err() != nil {
			interrupted = true
			break
		}
		rows = append(rows, r)
		fmt.Fprintln(out, r.format())
		for _, msg := range r.sampleErrs {
			klog.InfoS("demo: sample failed", "t", r.t.Round(time.Millisecond), "err", msg)
		}
	}
	stopLoad()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		fmt.Fprintln(out, "demo: the load generator did not stop within 20s")
	}
	return rows, report, interrupted
}

// writeOutputs writes the CSV and the chart.
func writeOutputs(cfg config, rows []row, say func(string, ...any)) error {
	if len(rows) == 0 {
		say("no rows recorded; no chart written")
		return nil
	}
	write := func(path string, fn func(io.Writer) error) error {
		f, err := os.Create(path)
		if err != nil {
			return fmt.Errorf("create %s: %w", path, err)
		}
		if err := fn(f); err != nil {
			f.Close()
			return fmt.Errorf("write %s: %w", path, err)
		}
		return f.Close()
	}
	title := fmt.Sprintf("make demo: HPA on %s (target %d per pod), %d..%d replicas, %s",
		queueMetric, queueTarget, minReplicas, maxReplicas, rows[len(rows)-1].t.Round(time.Second))
	err := errors.Join(
		write(cfg.csvPath, func(w io.Writer) error { return writeCSV(w, rows) }),
		write(cfg.svgPath, func(w io.Writer) error { return writeSVG(w, rows, title) }),
	)
	if err == nil {
		say("wrote %s and %s", cfg.csvPath, cfg.svgPath)
	}
	return err
}

// teardown stops every process by PID (framework.Environment.Teardown),
// then checks that this process has no children left, killing any by PID.
// The environment's directory is removed unless something failed.
func teardown(e *framework.Environment, failed bool, say func(string, ...any)) error {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	say("stopping the adapter, the simulators and the control plane")
	var errs []error
	if err := e.Teardown(ctx); err != nil {
		klog.ErrorS(err, "demo: teardown")
		say("teardown reported: %s (details in the log)", firstLine(err.Error()))
	}
	left, err := childProcesses(os.Getpid())
	switch {
	case err != nil:
		say("child-process check skipped: %v", err)
	case len(left) == 0:
		say("no child processes left")
	default:
		for _, p := range left {
			pid, _, _ := strings.Cut(p, " ")
			if n, err := strconv.Atoi(pid); err == nil {
				_ = syscall.Kill(n, syscall.SIGKILL)
			}
		}
		errs = append(errs, fmt.Errorf("child processes left after teardown, killed: %s", strings.Join(left, ", ")))
	}
	if failed || len(errs) > 0 {
		say("files kept in %s (process logs in %s/logs)", e.Dir, e.Dir)
	} else if err := os.RemoveAll(e.Dir); err != nil {
		errs = append(errs, fmt.Errorf("remove %s: %w", e.Dir, err))
	}
	return errors.Join(errs...)
}
