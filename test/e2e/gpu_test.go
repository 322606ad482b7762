// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/test/e2e/framework"
)

// The GPU contrast scenario: two identical Deployments of idle simulated
// model servers, each pod holding one of the node's fake H100s that NVML
// reads as 100% busy. One Deployment has an HPA on inference_queue_size,
// the other an HPA on gpu_utilization; both start at 2 replicas with
// minReplicas 2.
const (
	metricGPUUtil = "gpu_utilization"

	gpuStartReplicas = 2
	gpuMaxReplicas   = 4 // 2 + 4 pods fit the node's 8 GPUs
	gpuUtilTarget    = "800m"
	gpuQueueTarget   = "5"
	gpuMaxNumSeqs    = 8
	// gpuWatchAtLeast is how long both HPAs are watched at the least: 20
	// syncs of the HPA controller, time for the queue HPA to move if it
	// were going to.
	gpuWatchAtLeast = 20 * time.Second
	gpuWatchAtMost  = 75 * time.Second
	// gpuScenarioLabel marks the pods of both Deployments, for contrast.
	gpuScenarioLabel = "scenario"
)

// TestGPUContrast: pods whose GPUs read 100% busy while their queue is
// empty. An HPA on inference_queue_size holds its replicas; an HPA on
// gpu_utilization scales an identical Deployment to its maximum. The
// `contrast` subcommand, run against the same control plane, reads them as
// headroom.
func TestGPUContrast(t *testing.T) {
	e := requireEnv(t, framework.ComponentSim, framework.ComponentAdapter, framework.ComponentGPUAgent)
	t.Parallel()
	ns := e.Namespace(t)

	// The node agent as its DaemonSet runs it: in the adapter's namespace,
	// owned by the DaemonSet, on the node, on the fake backend.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	agent := startGPUAgent(ctx, t, e)

	queueDep := gpuSimDeployment("queue-hpa")
	gpuDep := gpuSimDeployment("gpu-hpa")
	queuePods := createSimDeployment(t, e, ns, queueDep, gpuStartReplicas)
	gpuPods := createSimDeployment(t, e, ns, gpuDep, gpuStartReplicas)
	queueSel := labels.SelectorFromSet(queueDep.Spec.Selector.MatchLabels)
	gpuSel := labels.SelectorFromSet(gpuDep.Spec.Selector.MatchLabels)

	agentURL, ok := e.Kubelet.Endpoint(agent.Namespace, agent.Name)
	if !ok {
		t.Fatalf("no process for the gpu-agent pod")
	}
	page := agentPage(t, agentURL, append(podNames(queuePods), podNames(gpuPods)...))
	t.Logf("gpu-agent page (%s/metrics), the lines about the backend and these pods:\n%s", agentURL, page)
	if want := `gpu_agent_up{backend="testing-fake-nvml/` + framework.FakeGPUProfile + `",reason="ok"} 1`; !strings.Contains(page, want) {
		t.Errorf("the agent's page lacks %s", want)
	}

	// Through the aggregator, as the HPA reads them: every pod busy, no queue.
	for _, sel := range []labels.Selector{queueSel, gpuSel} {
		got, err := waitBusyAndIdle(e, ns, sel, gpuStartReplicas)
		if err != nil {
			t.Fatalf("pods %s: %v", sel, err)
		}
		t.Logf("pods %s through the API: %s", sel, got)
	}

	createHPA(t, e, ns, newHPA(queueDep.Name, gpuStartReplicas, gpuMaxReplicas, framework.PodsMetric(metricQueue, gpuQueueTarget), 0))
	createHPA(t, e, ns, newHPA(gpuDep.Name, gpuStartReplicas, gpuMaxReplicas, framework.PodsMetric(metricGPUUtil, gpuUtilTarget), 0))
	rows := watchTwoHPAs(t, e, ns, queueDep.Name, gpuDep.Name)
	logTwoHPATable(t, rows, queueDep.Name, gpuDep.Name)

	last := rows[len(rows)-1]
	if last.gpu.spec != gpuMaxReplicas {
		t.Errorf("the HPA on %s ended at %d replicas, want its maximum %d", metricGPUUtil, last.gpu.spec, gpuMaxReplicas)
	}
	if v := last.gpu.value; v < 0.99 {
		t.Errorf("the HPA on %s last read %.3f per pod, want about 1", metricGPUUtil, v)
	}
	sawQueue := false
	for _, r := range rows {
		if r.queue.spec != gpuStartReplicas {
			t.Errorf("at %.0fs the HPA on %s set %d replicas, want it to hold %d", r.t.Seconds(), metricQueue, r.queue.spec, gpuStartReplicas)
		}
		if r.queue.hasValue && r.queue.value == 0 && r.queue.active == string(corev1.ConditionTrue) {
			sawQueue = true
		}
	}
	if !sawQueue {
		t.Errorf("the HPA on %s never reported a current value of 0 with ScalingActive=True", metricQueue)
	}
	utilTarget, queueTarget := resource.MustParse(gpuUtilTarget), resource.MustParse(gpuQueueTarget)
	wants := math.Ceil(float64(last.gpu.spec) * last.gpu.value / utilTarget.AsApproximateFloat64())
	t.Logf("the HPA on %s wants ceil(%d × %.2f / %s) = %.0f replicas and is held at its maximum %d (ScalingLimited %q); "+
		"the HPA on %s wants ceil(%d × %.2f / %s) = %.0f and stays at its minimum %d (ScalingLimited %q)",
		metricGPUUtil, last.gpu.spec, last.gpu.value, gpuUtilTarget, wants, gpuMaxReplicas, last.gpu.limited,
		metricQueue, last.queue.spec, last.queue.value, gpuQueueTarget, math.Ceil(float64(last.queue.spec)*last.queue.value/queueTarget.AsApproximateFloat64()), gpuStartReplicas, last.queue.limited)

	// The contrast view, over the pods of both Deployments.
	out, err := runContrast(e, ns, gpuScenarioLabel+"=gpu-contrast", gpuStartReplicas+gpuMaxReplicas)
	t.Logf("kubectl-inference contrast -n %s -l %s=gpu-contrast:\n%s", ns, gpuScenarioLabel, out)
	if err != nil {
		t.Error(err)
	}

	// The same through the kubectl plugin, per pod and per Deployment.
	checkPlugin(t, e, ns, gpuScenarioLabel+"=gpu-contrast", map[string]int{queueDep.Name: gpuStartReplicas, gpuDep.Name: gpuMaxReplicas}, queueDep.Name)
}

// startGPUAgent runs the node agent as the chart's DaemonSet does: a pod in
// the adapter's namespace, controlled by a DaemonSet, bound to the node (the
// adapter believes no other agent), with the label the adapter's default
// --gpu-agent-selector matches, the fake NVML backend and a 1 s interval.
// The DaemonSet controller does not run here, so the test makes the pod
// itself; both are deleted when the test ends.
func startGPUAgent(ctx context.Context, t *testing.T, e *framework.Environment) *corev1.Pod {
	t.Helper()
	c := e.ControlPlane.Client
	ns := framework.AdapterNamespace
	key, value, _ := strings.Cut(framework.GPUAgentLabel, "=")
	lbls := map[string]string{key: value}
	spec := corev1.PodSpec{
		AutomountServiceAccountToken: new(false),
		Containers: []corev1.Container{{
			Name:  "agent",
			Image: framework.GPUAgentImage,
			Args:  []string{"--testing-fake-nvml=" + framework.FakeGPUProfile, "--interval=1s"},
			Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9410}},
		}},
	}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-agent-" + strings.ToLower(rand.String(5))},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: lbls},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbls}, Spec: spec},
		},
	}
	ds, err := c.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create gpu-agent DaemonSet: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.AppsV1().DaemonSets(ns).Delete(ctx, ds.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete gpu-agent DaemonSet: %v", err)
		}
	})
	podSpec := *spec.DeepCopy()
	podSpec.NodeName = framework.NodeName
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:            ds.Name + "-pod",
			Labels:          lbls,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ds, appsv1.SchemeGroupVersion.WithKind("DaemonSet"))},
		},
		Spec: podSpec,
	}
	if pod, err = c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create gpu-agent pod: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete gpu-agent pod: %v", err)
		}
	})
	if err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		p, err := c.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "", nil
	}); err != nil {
		t.Fatalf("gpu-agent pod %s/%s never Running: %v", ns, pod.Name, err)
	}
	return pod
}

// gpuSimDeployment is an idle simulator Deployment whose pods each request
// one GPU and declare their maximum batch.
func gpuSimDeployment(name string) *appsv1.Deployment {
	d := simDeployment(name, gpuStartReplicas, fmt.Sprintf("--max-num-seqs=%d", gpuMaxNumSeqs))
	tmpl := &d.Spec.Template
	tmpl.Labels[gpuScenarioLabel] = "gpu-contrast"
	d.Labels = map[string]string{gpuScenarioLabel: "gpu-contrast"} // for kubectl inference top -l
	tmpl.Annotations = map[string]string{"inference-metrics-adapter/max-batch-size": fmt.Sprint(gpuMaxNumSeqs)}
	tmpl.Spec.Containers[0].Resources.Limits = corev1.ResourceList{framework.GPUResource: resource.MustParse("1")}
	tmpl.Spec.NodeName = framework.NodeName // the agent speaks only for pods on its node
	return d
}

func podNames(pods []corev1.Pod) []string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

// agentPage reads the agent's /metrics (retrying until it names every pod
// in pods, at most 20 s) and returns its gpu_agent_up line and the lines
// about pods.
func agentPage(t *testing.T, baseURL string, pods []string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var body []byte
	var last string
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var err error
		if body, err = framework.GetPage(ctx, nil, baseURL+"/metrics"); err != nil {
			noteErr(ctx, &last, err)
			return false, nil
		}
		for _, p := range pods {
			if !bytes.Contains(body, []byte(`pod="`+p+`"`)) {
				last = "no series for pod " + p
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the gpu-agent page at %s does not name every pod (last: %s): %v", baseURL, last, err)
	}
	var b strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		keep := strings.HasPrefix(line, "gpu_agent_up") || strings.HasPrefix(line, "gpu_agent_gpus ")
		for _, p := range pods {
			keep = keep || (strings.Contains(line, `pod="`+p+`"`) && !strings.HasPrefix(line, "gpu_agent_gpu_memory_total"))
		}
		if keep {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// waitBusyAndIdle waits (at most 45 s) until the API answers, for each of
// the want pods matching sel, gpu_utilization about 1 and
// inference_queue_size 0, and describes what it answered.
func waitBusyAndIdle(e *framework.Environment, ns string, sel labels.Selector, want int) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	var last string
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		util, err := e.ControlPlane.Metrics.PodValues(ctx, ns, metricGPUUtil, sel)
		if err != nil {
			noteErr(ctx, &last, err)
			return false, nil
		}
		queue, err := e.ControlPlane.Metrics.PodValues(ctx, ns, metricQueue, sel)
		if err != nil {
			noteErr(ctx, &last, err)
			return false, nil
		}
		last = fmt.Sprintf("%s: %s; %s: %s", metricGPUUtil, formatValues(util), metricQueue, formatValues(queue))
		if len(util) != want || len(queue) != want {
			return false, nil
		}
		for pod, u := range util {
			if q, ok := queue[pod]; !ok || u < 0.99 || q != 0 {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return "", fmt.Errorf("want %d pods with %s about 1 and %s 0 (last: %s): %w", want, metricGPUUtil, metricQueue, last, err)
	}
	return last, nil
}

// hpaState is what one HPA and its Deployment said at one moment.
type hpaState struct {
	spec, ready      int32 // the Deployment's replicas
	desired, current int32 // the HPA's status
	value            float64
	hasValue         bool
	active, activeBy string // ScalingActive status and reason
	limited          string // ScalingLimited reason when True
}

type twoHPARow struct {
	t          time.Duration // since the HPAs were created
	queue, gpu hpaState
}

// watchTwoHPAs samples both HPAs every hpaSampleEvery, for at least
// gpuWatchAtLeast and until the gpu HPA's Deployment has been at its
// maximum for three samples, at most gpuWatchAtMost.
func watchTwoHPAs(t *testing.T, e *framework.Environment, ns, queueName, gpuName string) []twoHPARow {
	t.Helper()
	start := time.Now()
	var rows []twoHPARow
	atMax := 0
	for time.Since(start) < gpuWatchAtMost {
		ctx, cancel := context.WithTimeout(context.Background(), hpaSampleEvery)
		var wg sync.WaitGroup
		var q, g hpaState
		wg.Go(func() { q = readHPA(ctx, e, ns, queueName) })
		wg.Go(func() { g = readHPA(ctx, e, ns, gpuName) })
		wg.Wait()
		cancel()
		rows = append(rows, twoHPARow{t: time.Since(start), queue: q, gpu: g})
		if g.spec == gpuMaxReplicas {
			atMax++
		} else {
			atMax = 0
		}
		if atMax >= 3 && time.Since(start) >= gpuWatchAtLeast {
			break
		}
		time.Sleep(hpaSampleEvery)
	}
	return rows
}

func readHPA(ctx context.Context, e *framework.Environment, ns, name string) hpaState {
	var s hpaState
	c := e.ControlPlane.Client
	if d, err := c.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
		s.spec, s.ready = *d.Spec.Replicas, d.Status.ReadyReplicas
	}
	h, err := c.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return s
	}
	s.desired, s.current = h.Status.DesiredReplicas, h.Status.CurrentReplicas
	for _, m := range h.Status.CurrentMetrics {
		if m.Pods != nil && m.Pods.Current.AverageValue != nil {
			s.value, s.hasValue = m.Pods.Current.AverageValue.AsApproximateFloat64(), true
		}
	}
	for _, cond := range h.Status.Conditions {
		switch cond.Type {
		case autoscalingv2.ScalingActive:
			s.active, s.activeBy = string(cond.Status), cond.Reason
		case autoscalingv2.ScalingLimited:
			if cond.Status == corev1.ConditionTrue {
				s.limited = cond.Reason
			}
		}
	}
	return s
}

func (s hpaState) cells() string {
	v := "-"
	if s.hasValue {
		v = fmt.Sprintf("%.2f", s.value)
	}
	active, limited := "-", "-"
	if s.active != "" {
		active = s.active + "/" + s.activeBy
	}
	if s.limited != "" {
		limited = s.limited
	}
	return fmt.Sprintf("%4d %5d %7d %6s  %-22s %-15s", s.spec, s.ready, s.desired, v, active, limited)
}

func logTwoHPATable(t *testing.T, rows []twoHPARow, queueName, gpuName string) {
	t.Helper()
	var b strings.Builder
	head := fmt.Sprintf("%4s %5s %7s %6s  %-22s %-15s", "spec", "ready", "desired", "value", "ScalingActive", "ScalingLimited")
	fmt.Fprintf(&b, "\n%6s | %-*s | %s\n", "", len(head), fmt.Sprintf("%s: HPA on %s, target %s/pod", queueName, metricQueue, gpuQueueTarget),
		fmt.Sprintf("%s: HPA on %s, target %s/pod", gpuName, metricGPUUtil, gpuUtilTarget))
	fmt.Fprintf(&b, "%6s | %s | %s\n", "t(s)", head, head)
	for _, r := range rows {
		fmt.Fprintf(&b, "%6.1f | %s | %s\n", r.t.Seconds(), r.queue.cells(), r.gpu.cells())
	}
	t.Log(b.String())
}

// runContrast builds cmd/kubectl-inference and runs its contrast command as
// the admin until its table has want rows, each with GPU UTIL 100%, QUEUE 0
// and a reading that says headroom (at most 30 s after the build), and
// returns its last output.
func runContrast(e *framework.Environment, ns, selector string, want int) (string, error) {
	root, err := framework.RepoRoot()
	if err != nil {
		return "", err
	}
	bctx, bcancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer bcancel()
	bin, err := framework.BuildCommand(bctx, root, filepath.Join(e.Dir, "bin"), "kubectl-inference")
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out string
	var problem error
	err = wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		rctx, rcancel := context.WithTimeout(ctx, 15*time.Second)
		defer rcancel()
		cmd := exec.CommandContext(rctx, bin, "contrast", "-n", ns, "-l", selector, "--kubeconfig", e.ControlPlane.AdminKubeconfig)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		runErr := cmd.Run()
		out = stdout.String() + stderr.String()
		if runErr != nil {
			problem = fmt.Errorf("contrast: %w", runErr)
			return false, nil
		}
		problem = checkContrast(stdout.String(), want)
		return problem == nil, nil
	})
	if err != nil {
		return out, fmt.Errorf("the contrast table never showed %d busy, idle pods read as headroom: %w (%w)", want, problem, err)
	}
	return out, nil
}

// checkContrast checks the table: want pod rows, each with GPU UTIL 100%,
// QUEUE 0 and "headroom" in its reading. Columns are found by the
// header's positions, as the table is aligned.
func checkContrast(table string, want int) error {
	lines := strings.Split(strings.TrimRight(table, "\n"), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "POD") {
		return fmt.Errorf("no table header in %q", table)
	}
	head := lines[0]
	col := func(name string) int { return strings.Index(head, name) }
	util, sm, queue, kv, reading := col("GPU UTIL"), col("SM ACTIVE"), col("QUEUE"), col("KV"), col("READING")
	if util < 0 || sm < 0 || queue < 0 || kv < 0 || reading < 0 {
		return fmt.Errorf("header %q lacks a column", head)
	}
	rows := lines[1:]
	if len(rows) != want {
		return fmt.Errorf("%d rows, want %d", len(rows), want)
	}
	for _, r := range rows {
		if len(r) < reading {
			return fmt.Errorf("short row %q", r)
		}
		u := strings.TrimSpace(r[util:sm])
		q := strings.TrimSpace(r[queue:kv])
		if u != "100%" || q != "0" || !strings.Contains(r[reading:], "headroom") {
			return fmt.Errorf("row %q: GPU UTIL %q, QUEUE %q, want 100%%, 0 and a headroom reading", r, u, q)
		}
	}
	return nil
}
