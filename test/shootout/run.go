// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/loadgen"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/sim"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/test/e2e/framework"
)

// deploymentName is the Deployment (and HPA) of every policy's namespace.
const deploymentName = "model"

// sampleEvery is how often (wall clock) the fleet is sampled.
const sampleEvery = 250 * time.Millisecond

// env is the control plane, the node and the adapter shared by every run.
type env struct {
	dir     string
	cp      *framework.ControlPlane
	kubelet *framework.Kubelet
	adapter *framework.Adapter
}

// setUp builds the binaries, starts the control plane with the compressed
// HPA sync period, the kubelet stand-in with sim-driven GPUs on one
// modelled node per --side-by-side slot, the adapter with the compressed
// scrape settings and a gpu-agent on the sim backend on every node.
// It first refuses a policy whose forecast window cannot be compressed
// (checkForecastDurations), before anything starts.
func setUp(ctx context.Context, cfg config, tm timing, say func(string, ...any)) (e *env, err error) {
	var errs []error
	for _, p := range cfg.pols {
		errs = append(errs, checkForecastDurations(p, tm))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	root, err := framework.RepoRoot()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "ima-shootout-")
	if err != nil {
		return nil, fmt.Errorf("create temp dir: %w", err)
	}
	e = &env{dir: dir}
	defer func() {
		if err != nil {
			err = errors.Join(err, e.tearDown())
		}
	}()
	bins := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bins, 0o755); err != nil {
		return e, err
	}
	built := map[string]string{}
	for _, c := range []string{framework.ComponentAdapter, framework.ComponentSim, framework.ComponentGPUAgent} {
		say("building %s", c)
		if built[c], err = framework.BuildCommand(ctx, root, bins, c); err != nil {
			return e, fmt.Errorf("build %s: %w", c, err)
		}
	}
	say("starting etcd, kube-apiserver, kube-controller-manager (HPA sync period %s wall = %s simulated)", tm.wall(tm.HPASync), tm.HPASync)
	if e.cp, err = framework.StartControlPlane(ctx, cfg.binDir, dir, "--horizontal-pod-autoscaler-sync-period="+tm.wall(tm.HPASync).String()); err != nil {
		return e, fmt.Errorf("start control plane: %w", err)
	}
	if e.kubelet, err = framework.StartKubelet(ctx, e.cp.Client, built[framework.ComponentSim], e.cp.LogDir); err != nil {
		return e, err
	}
	if err := e.kubelet.EnableGPUs(built[framework.ComponentGPUAgent], dir); err != nil {
		return e, err
	}
	if err := e.kubelet.UseSimGPUs(dir); err != nil {
		return e, err
	}
	// Each further slot is a node of its own: its own GPUs, pod-resources
	// socket and sim map, read by its own gpu-agent (the adapter believes
	// an agent only about pods on its node, and an agent's fake NVML has
	// the 8 GPUs of one node).
	nodes := []string{slotNode(0)}
	for slot := 1; slot < cfg.sideBySide; slot++ {
		node := slotNode(slot)
		nodeDir := filepath.Join(dir, "nodes", node)
		if err := os.MkdirAll(nodeDir, 0o755); err != nil {
			return e, err
		}
		if err := e.kubelet.AddGPUNode(node, nodeDir); err != nil {
			return e, err
		}
		nodes = append(nodes, node)
	}
	args := append(framework.AdapterArgs(),
		"--scrape-interval="+tm.wall(tm.ScrapeInterval).String(),
		"--scrape-timeout="+tm.wall(tm.ScrapeTimeout).String(),
		"--max-age="+tm.wall(tm.MaxAge).String(),
		"--slo-window="+tm.wall(tm.SLOWindow).String(),
		"--forecast-window="+tm.wall(tm.ForecastWindow).String(),
		"--forecast-floor-window="+tm.wall(tm.ForecastFloorWindow).String(),
		"--v=1")
	say("starting the adapter (scrape every %s wall = %s simulated)", tm.wall(tm.ScrapeInterval), tm.ScrapeInterval)
	if e.adapter, err = framework.StartAdapter(ctx, e.cp, framework.AdapterConfig{
		Binary: built[framework.ComponentAdapter], Namespace: framework.AdapterNamespace, Service: framework.AdapterService, Args: args,
		EnableExternalMetrics: true, // for the policies on External metrics
	}); err != nil {
		return e, fmt.Errorf("start adapter: %w", err)
	}
	if err := startGPUAgents(ctx, e.cp, tm, len(nodes)); err != nil {
		return e, err
	}
	return e, nil
}

// tearDown stops every process by PID and removes the directory.
func (e *env) tearDown() error {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var errs []error
	if e.adapter != nil {
		errs = append(errs, e.adapter.Stop(ctx))
	}
	if e.kubelet != nil {
		errs = append(errs, e.kubelet.Stop())
	}
	if e.cp != nil {
		errs = append(errs, e.cp.Stop())
	}
	err := errors.Join(errs...)
	if err == nil {
		err = os.RemoveAll(e.dir)
	}
	return err
}

// startGPUAgents runs the gpu-agent as its DaemonSet would: in the
// adapter's namespace, owned by a DaemonSet, one pod on each of the slots'
// nodes, on the sim backend.
func startGPUAgents(ctx context.Context, cp *framework.ControlPlane, tm timing, slots int) error {
	c := cp.Client
	ns := framework.AdapterNamespace
	key, value, _ := strings.Cut(framework.GPUAgentLabel, "=")
	lbls := map[string]string{key: value}
	spec := corev1.PodSpec{
		AutomountServiceAccountToken: new(false),
		Containers: []corev1.Container{{
			Name:  "agent",
			Image: framework.GPUAgentImage,
			Args:  []string{"--testing-fake-nvml=sim", "--interval=" + tm.wall(tm.AgentInterval).String()},
			Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9410}},
		}},
	}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-agent"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: lbls},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbls}, Spec: spec},
		},
	}
	ds, err := c.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create gpu-agent DaemonSet: %w", err)
	}
	for slot := range slots {
		podSpec := *spec.DeepCopy()
		podSpec.NodeName = slotNode(slot)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name:            slotAgentPod(slot),
				Labels:          lbls,
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ds, appsv1.SchemeGroupVersion.WithKind("DaemonSet"))},
			},
			Spec: podSpec,
		}
		if _, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create gpu-agent pod on node %s: %w", podSpec.NodeName, err)
		}
		if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			p, err := c.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "", nil
		}); err != nil {
			return fmt.Errorf("gpu-agent pod on node %s not running: %w", podSpec.NodeName, err)
		}
	}
	return nil
}

// simArgs are the flags of every replica: the calibrated profile, the
// compression, the cold start and the termination grace period.
func simArgs(tm timing) []string {
	return []string{
		"--profile=" + sim.ProfileLlama3_8BA100,
		fmt.Sprintf("--time-scale=%g", tm.Compress),
		"--load-time=" + tm.ColdStart.String(),
		"--shutdown-timeout=" + tm.wall(tm.TerminationGrace).String(),
	}
}

// deployment is the fleet: replicas of the simulator, each holding one
// GPU, bound to node, Ready when /health answers (after the cold start).
func deployment(replicas int32, tm timing, maxNumSeqs int, node string) *appsv1.Deployment {
	d := framework.SimDeployment(deploymentName, replicas, simArgs(tm))
	tmpl := &d.Spec.Template
	tmpl.Annotations = map[string]string{"inference-metrics-adapter/max-batch-size": fmt.Sprint(maxNumSeqs)}
	tmpl.Spec.NodeName = node
	grace := int64(tm.TerminationGrace.Seconds())
	tmpl.Spec.TerminationGracePeriodSeconds = &grace
	c := &tmpl.Spec.Containers[0]
	c.Resources.Limits = corev1.ResourceList{framework.GPUResource: resource.MustParse("1")}
	c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromString("http")}}}
	return d
}

// runResult is one policy's raw outcome on one trace.
type runResult struct {
	Policy policy `json:"policy"`
	// Repeat is which repeat of the policy this is (from 1); Order its
	// place in the trace's run order (from 1).
	Repeat int `json:"repeat,omitempty"`
	Order  int `json:"order,omitempty"`
	// With --side-by-side above 1: Slot is the slot it ran on (from 1),
	// Node that slot's modelled node, and Beside the most other runs in
	// flight at once while it ran (absent: 0, it ran alone). All absent
	// when runs went one at a time.
	Slot    int                                    `json:"slot,omitempty"`
	Node    string                                 `json:"node,omitempty"`
	Beside  int                                    `json:"beside,omitempty"`
	HPA     *autoscalingv2.HorizontalPodAutoscaler `json:"hpa,omitempty"`
	Records []Record                               `json:"-"`
	Samples []Sample                               `json:"samples"`
	Summary Summary                                `json:"summary"`
	Wall    time.Duration                          `json:"wall"`
}

// runPolicy replays reqs against a fresh fleet sized by p, in a namespace
// of its own on slot's node, and deletes the namespace afterwards, waiting
// until its pods are gone so that the slot's next run starts from the
// same empty node.
func runPolicy(ctx context.Context, e *env, cfg config, tm timing, traceName string, reqs []loadgen.TraceRequest, p policy, slot int, say func(string, ...any)) (res runResult, err error) {
	c := e.cp.Client
	res.Policy = p
	ns := slotNamespace(p.Name, slot)
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return res, fmt.Errorf("create namespace %s: %w", ns, err)
	}
	defer func() { err = errors.Join(err, removeNamespace(ctx, c, ns, namespaceDeleteTimeout)) }()
	if err := waitServiceAccount(ctx, e.cp, ns); err != nil {
		return res, err
	}
	start := int32(cfg.minReplicas)
	var steps []oracleStep
	switch {
	case p.Oracle != nil:
		steps = p.Oracle.schedule(reqs, oracleLead(tm), cfg.minReplicas, cfg.maxReplicas)
		start = int32(steps[0].Replicas)
	case !p.isHPA():
		start = int32(p.Fixed)
	case p.Spec != nil && p.Spec.MinReplicas != nil:
		start = *p.Spec.MinReplicas
	}
	d := deployment(start, tm, cfg.maxNumSeqs, slotNode(slot))
	if _, err := c.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return res, fmt.Errorf("create deployment: %w", err)
	}
	say("%s: waiting for %d replica(s) to load (%s simulated, %s wall)", p.Name, start, tm.ColdStart, tm.wall(tm.ColdStart))
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, tm.wall(tm.ColdStart)+2*time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := c.AppsV1().Deployments(ns).Get(ctx, deploymentName, metav1.GetOptions{})
		return err == nil && got.Status.ReadyReplicas >= start, nil
	}); err != nil {
		return res, fmt.Errorf("%s: deployment never had %d ready replicas: %w", p.Name, start, err)
	}
	if p.isHPA() {
		if err := checkForecastDurations(p, tm); err != nil {
			return res, err
		}
		res.HPA = hpa(p, deploymentName, int32(cfg.minReplicas), int32(cfg.maxReplicas), tm)
		if _, err := c.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, res.HPA, metav1.CreateOptions{}); err != nil {
			return res, fmt.Errorf("create HPA: %w", err)
		}
	}
	selector := labels.SelectorFromSet(d.Spec.Selector.MatchLabels)
	fe, err := startFrontEnd(func() []string { return e.kubelet.Endpoints(ns, selector) }, cfg.pick, cfg.maxInFlight/cfg.maxReplicas)
	if err != nil {
		return res, err
	}
	defer fe.Close()

	// The adapter's forecast counter is over every workload: read only
	// when this run is the only one.
	var forecasts forecastReader
	if cfg.sideBySide <= 1 && p.isHPA() {
		if forecasts, err = adapterForecasts(e); err != nil {
			return res, err
		}
	}
	say("%s: replaying %s: %d requests over %s simulated (%s wall)", p.Name, traceName, len(reqs), reqs[len(reqs)-1].At.Round(time.Second), tm.wall(reqs[len(reqs)-1].At).Round(time.Second))
	replayStart := time.Now()
	sampleCtx, stopSampling := context.WithCancel(ctx)
	var samples []Sample
	var wg sync.WaitGroup
	wg.Go(func() { samples = sample(sampleCtx, e, ns, selector, replayStart, tm, p.Name, forecasts, say) })
	var scheduleErr error
	if len(steps) > 1 {
		say("%s: %d replica changes on the oracle's schedule", p.Name, len(steps)-1)
		wg.Go(func() { scheduleErr = followSchedule(sampleCtx, c, ns, steps, replayStart, tm) })
	}
	rep, lerr := loadgen.Run(ctx, loadgen.Config{
		URL:            fe.URL,
		Model:          cfg.model,
		Endpoint:       loadgen.EndpointCompletions,
		Trace:          reqs,
		TimeScale:      tm.Compress,
		MaxInFlight:    cfg.maxInFlight,
		RequestTimeout: tm.wall(cfg.requestTimeout),
	})
	stopSampling()
	wg.Wait()
	if lerr != nil && rep == nil {
		return res, fmt.Errorf("%s: replay: %w", p.Name, lerr)
	}
	if scheduleErr != nil {
		return res, scheduleErr
	}
	res.Samples = samples
	res.Records = records(rep)
	return res, lerr
}

// records are the replay's requests in the order they were sent or due:
// those sent, and those dropped at the in-flight cap, failed.
func records(rep *loadgen.Report) []Record {
	out := make([]Record, 0, len(rep.Results)+len(rep.Drops))
	for _, r := range rep.Results {
		rec := Record{Sent: r.Sent, PromptTokens: r.PromptTokens, OutputTokens: r.MaxTokens, Tokens: r.Tokens, TTFT: r.TTFT, E2E: r.E2E, Source: r.Source}
		if r.Err != nil {
			rec.Err = r.Err.Error()
		}
		out = append(out, rec)
	}
	for _, d := range rep.Drops {
		out = append(out, Record{Sent: d.At, PromptTokens: d.PromptTokens, OutputTokens: d.MaxTokens, Err: errDropped, Source: d.Source})
	}
	slices.SortStableFunc(out, func(a, b Record) int { return cmp.Compare(a.Sent, b.Sent) })
	return out
}

// podSignalNames are the pod signals sampled per pod, in PodSample's order.
var podSignalNames = []string{metricQueue, metricBatch, metricKV, metricGPU}

// sample records the fleet every sampleEvery until ctx ends: the pods, the
// Deployment's desired and Ready replicas, what the HPA's status says it
// read for each of its metrics, and, once per HPA sync period, each pod's
// queue, batch, KV cache and GPU utilization as the adapter serves them
// and, with forecasts, the forecasts the adapter made since the previous
// such sample. It prints a line every 40 samples.
func sample(ctx context.Context, e *env, ns string, selector labels.Selector, start time.Time, tm timing, name string, forecasts forecastReader, say func(string, ...any)) []Sample {
	c := e.cp.Client
	tick := time.NewTicker(sampleEvery)
	defer tick.Stop()
	podEvery := max(1, int(math.Round(float64(tm.wall(tm.HPASync))/float64(sampleEvery))))
	var out []Sample
	var madeBefore map[string]float64 // the forecast counter at the previous read
	for i := 0; ; i++ {
		now := time.Now()
		s := Sample{T: time.Duration(float64(now.Sub(start)) * tm.Compress)}
		gctx, cancel := context.WithTimeout(context.Background(), sampleEvery*4)
		var pods []corev1.Pod
		d, err := c.AppsV1().Deployments(ns).Get(gctx, deploymentName, metav1.GetOptions{})
		if err == nil {
			s.Desired, s.Replicas, s.Ready = int(*d.Spec.Replicas), int(d.Status.Replicas), int(d.Status.ReadyReplicas)
			if list, err := c.CoreV1().Pods(ns).List(gctx, metav1.ListOptions{}); err == nil {
				pods = list.Items
				s.Replicas = len(pods) // every pod holds its GPU, loading or terminating
			}
		}
		var metrics []autoscalingv2.MetricSpec
		if h, herr := c.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(gctx, deploymentName, metav1.GetOptions{}); herr == nil && err == nil {
			metrics = h.Spec.Metrics
			s.HPA = hpaReads(h, tm, fleetCounts{Ready: int(d.Status.ReadyReplicas), Current: int(d.Status.Replicas)})
			s.RecommendedMax = recommendedMax(s.HPA)
			if len(s.HPA) > 0 {
				s.Metric = s.HPA[0].Value
			}
		}
		cancel()
		if pods != nil && i%podEvery == 0 {
			pctx, cancel := context.WithTimeout(context.Background(), sampleEvery*4)
			s.Pods = samplePods(pctx, e, ns, selector, pods)
			if forecasts != nil {
				// A failed read leaves this sample without counts; the next
				// one counts from the last good read.
				if made, err := forecasts(pctx); err == nil {
					if madeBefore != nil {
						s.Forecasts = countsSince(made, madeBefore)
					}
					madeBefore = made
				} else {
					klog.InfoS("shootout: reading the adapter's forecast counter failed", "namespace", ns, "err", err)
				}
			}
			cancel()
			if v, _, ok := sampledDemand(s.Pods); ok {
				s.Demand = &v
				s.Dispersion = sampleDispersion(metrics, s)
			}
		}
		if err == nil {
			out = append(out, s)
		} else {
			klog.InfoS("shootout: sample failed", "namespace", ns, "err", err)
		}
		if i%40 == 0 {
			var read []string
			for _, m := range s.HPA {
				v := "-"
				if m.Value != nil {
					v = fmt.Sprintf("%.3g", *m.Value)
				}
				read = append(read, m.Metric+" "+v)
			}
			if len(read) == 0 {
				read = []string{"no HPA metric"}
			}
			say("%s: t=%s replicas %d ready %d desired %d; %s", name, s.T.Round(time.Second), s.Replicas, s.Ready, s.Desired, strings.Join(read, ", "))
		}
		select {
		case <-ctx.Done():
			return out
		case <-tick.C:
		}
	}
}

// hpaReads is what the HPA's status says it read, metric by metric, in the
// spec's order: every metric of the spec, its value absent while the
// status has none, with the replicas it alone asks for (recommend, from
// the value as read against the HPA's own target, by n, clamped to the
// HPA's bounds). Rates are turned back into per simulated second
// (latencies are the simulator's, in simulated seconds already).
func hpaReads(h *autoscalingv2.HorizontalPodAutoscaler, tm timing, n fleetCounts) []HPARead {
	current := map[string]*float64{}
	raw := map[string]float64{}
	for _, m := range h.Status.CurrentMetrics {
		var q *resource.Quantity
		switch {
		case m.Pods != nil:
			q = m.Pods.Current.AverageValue
		case m.Object != nil:
			q = m.Object.Current.Value
			if q == nil {
				q = m.Object.Current.AverageValue
			}
		case m.External != nil:
			q = m.External.Current.Value
			if q == nil {
				q = m.External.Current.AverageValue
			}
		}
		if q == nil {
			continue
		}
		v := q.AsApproximateFloat64()
		key := statusKey(m)
		raw[key] = v
		if isRate(keyName(key)) {
			v /= tm.Compress
		}
		current[key] = &v
	}
	lo, hi := hpaBounds(h)
	var out []HPARead
	for _, m := range h.Spec.Metrics {
		key := metricKey(m)
		read := HPARead{Metric: key, Value: current[key]}
		if v, ok := raw[key]; ok {
			// The HPA's spec is in wall-clock terms, as the status is.
			if r, ok := recommend(m, v, n); ok {
				r = clampReplicas(r, lo, hi)
				read.Recommended = &r
			}
		}
		out = append(out, read)
	}
	return out
}

// statusKey is metricKey of a metric in an HPA's status: the key of the
// spec's metric it reports on.
func statusKey(m autoscalingv2.MetricStatus) string {
	spec := autoscalingv2.MetricSpec{Type: m.Type}
	switch {
	case m.Pods != nil:
		spec.Pods = &autoscalingv2.PodsMetricSource{Metric: m.Pods.Metric}
	case m.Object != nil:
		spec.Object = &autoscalingv2.ObjectMetricSource{Metric: m.Object.Metric}
	case m.External != nil:
		spec.External = &autoscalingv2.ExternalMetricSource{Metric: m.External.Metric}
	}
	return metricKey(spec)
}

// samplePods reads each pod's queue, batch, KV cache and GPU utilization
// from the adapter, as an HPA would per pod. A value the adapter does not
// answer for a pod is absent.
func samplePods(ctx context.Context, e *env, ns string, selector labels.Selector, pods []corev1.Pod) []PodSample {
	values := make([]map[string]float64, len(podSignalNames))
	for i, m := range podSignalNames {
		values[i], _ = e.cp.Metrics.PodValues(ctx, ns, m, selector)
	}
	out := make([]PodSample, 0, len(pods))
	for _, p := range pods {
		ps := PodSample{Name: p.Name, Terminating: p.DeletionTimestamp != nil}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				ps.Ready = true
			}
		}
		for i, dst := range []**float64{&ps.Queue, &ps.Batch, &ps.KV, &ps.GPU} {
			if v, ok := values[i][p.Name]; ok {
				*dst = &v
			}
		}
		out = append(out, ps)
	}
	return out
}

// waitServiceAccount waits for the namespace's default ServiceAccount,
// without which pods are not admitted.
func waitServiceAccount(ctx context.Context, cp *framework.ControlPlane, ns string) error {
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cp.Client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
}

// namespaceDeleteTimeout bounds the wait for a run's namespace to go.
const namespaceDeleteTimeout = 3 * time.Minute

// removeNamespace deletes a run's namespace after the run, unless ctx is
// done: on an interrupt (Ctrl-C, SIGTERM) the kubelet stand-in has stopped
// with ctx, so the namespace's pods would never finish terminating and the
// wait would last its whole timeout; the tear-down that follows stops the
// control plane and removes its data, namespace and all.
func removeNamespace(ctx context.Context, c kubernetes.Interface, ns string, timeout time.Duration) error {
	if ctx.Err() != nil {
		return nil
	}
	return deleteNamespace(c, ns, timeout)
}

// deleteNamespace deletes ns and waits until it is gone: its pods
// stopped and their GPUs free for the next run.
func deleteNamespace(c kubernetes.Interface, ns string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := c.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete namespace %s: %w", ns, err)
	}
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := c.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		return fmt.Errorf("namespace %s not gone: %w", ns, err)
	}
	return nil
}

// writeFile creates path and writes it with fn.
func writeFile(path string, fn func(io.Writer) error) error {
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
