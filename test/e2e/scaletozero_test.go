// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/targets"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/loadgen"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/test/e2e/framework"
)

// The scale-to-zero scenario: a model Deployment behind a Service, a front
// door (inference-sim --front-door-backend) in front of that Service, and an
// HPA with minReplicas 0 on the front door's held requests (an Object metric
// on the Service) and the pods' queue and running batch.
const (
	zeroLoadTime   = 5 * time.Second // the model's cold start (--load-time)
	zeroDownWindow = 5               // seconds of scale-down stabilization
	zeroLoadRate   = 4               // requests/s through the front door
	zeroLoadFor    = 12 * time.Second
	zeroMax        = 2 // maxReplicas
	zeroTarget     = "10"
	zeroStepMax    = 90 * time.Second // bound of each waiting step
)

// TestScaleFromAndToZero: on the real HPA with HPAScaleToZero, an idle
// model Deployment goes 1 → 0; requests that arrive at its front door are
// held and counted; the HPA reads the count on the Service and scales 0 → 1+;
// the held requests are answered once a pod is Ready; after the load the
// Deployment returns to 0. It logs the timeline from the first request to
// the first token: scrape and adapter, HPA sync, pod start, model load,
// dispatch.
//
// Kubernetes 1.37's HPA scales from zero only a workload it scaled to zero
// itself (its ScaledToZero condition): a Deployment created at 0 replicas is
// paused, as before the feature. Hence the first step, 1 → 0.
func TestScaleFromAndToZero(t *testing.T) {
	e := requireEnv(t, framework.ComponentSim, framework.ComponentAdapter)
	t.Parallel()
	ns := e.Namespace(t)
	c := e.ControlPlane.Client
	ctx, cancel := context.WithTimeout(context.Background(), 4*zeroStepMax)
	defer cancel()

	// The model: a cold start of zeroLoadTime, Ready when /health answers.
	const name = "model"
	model := framework.StartModel(t, e, ns, simDeployment(name, 1, "--max-num-seqs=4", "--load-time="+zeroLoadTime.String()))
	service := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{{Name: "http", Port: 8000, TargetPort: intstr.FromString("http")}}},
	}
	if _, err := c.CoreV1().Services(ns).Create(ctx, service, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create service: %v", err)
	}

	// The front door: its pods name the Service in their own namespace.
	router := framework.SimDeployment("router", 1, []string{"--model=" + simModel, "--shutdown-timeout=1s",
		"--front-door-backend=" + model.URL, "--front-door-pool=" + name})
	router.Spec.Template.Annotations = map[string]string{targets.AnnotationFrontDoor: name}
	routers := createSimDeployment(t, e, ns, router, 1)
	frontDoorURL := "http://" + routers[0].Status.PodIP + ":8000"

	hpa := newHPA(name, 0, zeroMax, frontDoorMetric(name, zeroTarget), zeroDownWindow)
	// The pods' queue and running batch: while requests run, the batch keeps
	// at least one replica (a queue alone is 0 under light load, and the
	// HPA would go to zero between requests).
	hpa.Spec.Metrics = append(hpa.Spec.Metrics, framework.PodsMetric(metricQueue, "5"), framework.PodsMetric(metricBatch, "4"))
	createHPA(t, e, ns, hpa)

	w := startZeroWatch(t, e, ns, name, model.Selector)

	// 1 → 0: idle, with every metric present.
	if err := waitScaledToZero(ctx, e, ns, name); err != nil {
		w.stop()
		t.Fatalf("the idle Deployment never went to 0 replicas: %v (HPA: %s)", err, zeroHPAState(e, ns, name))
	}
	t.Logf("idle: scaled 1 → 0 by the HPA (ScaledToZero=True)")

	// Requests arrive at the front door while nothing serves them.
	w.markLoad()
	l := startLoad(t, frontDoorURL, zeroLoadRate, zeroLoadFor, 64)
	report := l.wait(t, zeroLoadFor+zeroStepMax)
	loadEnd := time.Now()

	// Back to 0 after the load.
	back := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, zeroStepMax, true, func(ctx context.Context) (bool, error) {
		dep, err := c.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && *dep.Spec.Replicas == 0, nil
	})
	backAfter := time.Since(loadEnd)
	tl := w.stop()

	// The timeline from the first request to the first token.
	first, firstTok, answered := firstTokens(report, l.start)
	t.Logf("load: %s", summary(report))
	rows := []struct {
		what string
		at   time.Time
	}{
		{"first request arrives at the front door", first},
		{"adapter serves " + catalog.FrontDoorPendingRequests + " > 0", tl.pendingServed},
		{"HPA scales the Deployment 0 → 1+", tl.scaledUp},
		{"first model pod Running (kubelet stand-in started it)", tl.podRunning},
		{"first model pod Ready (model loaded)", tl.podReady},
		{"first token of a held request", firstTok},
	}
	var b strings.Builder
	fmt.Fprintf(&b, "0 → first token timeline (model load %s, scrape interval 1s, HPA sync 1s):\n", zeroLoadTime)
	prev := first
	for _, r := range rows {
		if r.at.IsZero() {
			fmt.Fprintf(&b, "  %-58s  not seen\n", r.what)
			continue
		}
		fmt.Fprintf(&b, "  %-58s  +%6.2fs  (step %+.2fs)\n", r.what, r.at.Sub(first).Seconds(), r.at.Sub(prev).Seconds())
		prev = r.at
	}
	fmt.Fprintf(&b, "  replicas:")
	for _, ch := range tl.changes {
		fmt.Fprintf(&b, " %d at %+.1fs,", ch.replicas, ch.at.Sub(first).Seconds())
	}
	fmt.Fprintf(&b, " load ended at %+.1fs\n", loadEnd.Sub(first).Seconds())
	fmt.Fprintf(&b, "  peak %d replicas; %d of %d requests answered; back to 0 replicas %s after the load ended", tl.peak, answered, len(report.Results), backAfter.Round(time.Second))
	t.Log(b.String())

	switch {
	case first.IsZero():
		t.Fatalf("no request was sent")
	case tl.pendingServed.IsZero():
		t.Errorf("the adapter never served %s > 0 on service %s/%s", catalog.FrontDoorPendingRequests, ns, name)
	case tl.scaledUp.IsZero() || tl.peak < 1:
		t.Errorf("the HPA never scaled the Deployment up from 0 (HPA: %s)", zeroHPAState(e, ns, name))
	case tl.podReady.IsZero():
		t.Errorf("no model pod turned Ready")
	case firstTok.IsZero():
		t.Errorf("no held request got a first token")
	case firstTok.Before(tl.noneReady):
		// tl.podReady is when the poll first saw a Ready pod, up to a poll
		// later than the pod turned Ready; tl.noneReady is before a pod
		// list that still showed none, so a token before it is certainly
		// too early.
		t.Errorf("a first token at %s came before any model pod was Ready: a pod list begun at %s showed none Ready", firstTok, tl.noneReady)
	}
	if answered != len(report.Results) {
		t.Errorf("%d of %d requests held at the front door were not answered", len(report.Results)-answered, len(report.Results))
	}
	if back != nil {
		t.Errorf("not back to 0 replicas %s after the load ended (HPA: %s)", zeroStepMax, zeroHPAState(e, ns, name))
	}
}

// frontDoorMetric is the Object metric of the front door's held requests on
// the Service: AverageValue target per replica, so that at zero replicas
// the HPA asks for ceil(held / target) replicas.
func frontDoorMetric(service, averageValue string) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{
		Type: autoscalingv2.ObjectMetricSourceType,
		Object: &autoscalingv2.ObjectMetricSource{
			DescribedObject: autoscalingv2.CrossVersionObjectReference{APIVersion: "v1", Kind: "Service", Name: service},
			Metric:          autoscalingv2.MetricIdentifier{Name: catalog.FrontDoorPendingRequests},
			Target:          autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: new(resource.MustParse(averageValue))},
		},
	}
}

// waitScaledToZero waits until the Deployment has 0 replicas and the HPA
// says it put it there.
func waitScaledToZero(ctx context.Context, e *framework.Environment, ns, name string) error {
	return wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, zeroStepMax, true, func(ctx context.Context) (bool, error) {
		dep, err := e.ControlPlane.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || *dep.Spec.Replicas != 0 {
			return false, nil
		}
		hpa, err := e.ControlPlane.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range hpa.Status.Conditions {
			if c.Type == autoscalingv2.ScaledToZero && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
}

// zeroHPAState is the HPA's status in one line, for failure messages.
func zeroHPAState(e *framework.Environment, ns, name string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	hpa, err := e.ControlPlane.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	var parts []string
	parts = append(parts, fmt.Sprintf("current %d desired %d", hpa.Status.CurrentReplicas, hpa.Status.DesiredReplicas))
	for _, c := range hpa.Status.Conditions {
		parts = append(parts, fmt.Sprintf("%s=%s (%s: %s)", c.Type, c.Status, c.Reason, c.Message))
	}
	return strings.Join(parts, "; ")
}

// firstTokens returns when the first request was sent, when the first token
// of any request came, and how many requests were answered in full.
func firstTokens(r *loadgen.Report, start time.Time) (first, firstToken time.Time, answered int) {
	for _, res := range r.Results {
		sent := start.Add(res.Sent)
		if first.IsZero() || sent.Before(first) {
			first = sent
		}
		if res.Err != nil || res.Tokens == 0 {
			continue
		}
		answered++
		if tok := sent.Add(res.TTFT); firstToken.IsZero() || tok.Before(firstToken) {
			firstToken = tok
		}
	}
	return first, firstToken, answered
}

// timeline is what zeroWatch saw after markLoad: the first time of each
// event, stamped before the observation that saw it (so up to one poll
// late), and noneReady, the stamp of the last observation whose pod list
// showed no Ready pod (so the first pod turned Ready after it).
type timeline struct {
	pendingServed, scaledUp, podRunning, podReady time.Time
	noneReady                                     time.Time
	peak                                          int32
	changes                                       []replicaChange // spec.replicas as it changed
}

type replicaChange struct {
	at       time.Time
	replicas int32
}

// zeroWatch polls the adapter, the Deployment and its pods every 100 ms.
type zeroWatch struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	loading bool
	tl      timeline
}

func startZeroWatch(t *testing.T, e *framework.Environment, ns, name string, selector labels.Selector) *zeroWatch {
	// The HPA's question about the Service, each answer bounded by 2 s like
	// the rest of an observation.
	cfg := rest.CopyConfig(e.ControlPlane.Config)
	cfg.Timeout = 2 * time.Second
	metrics, err := framework.NewMetricsClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &zeroWatch{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			w.observe(ctx, e, metrics, ns, name, selector)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() { w.stop() })
	return w
}

// markLoad starts recording: events before it are the idle phase's.
func (w *zeroWatch) markLoad() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.loading = true
}

func (w *zeroWatch) observe(ctx context.Context, e *framework.Environment, metrics *framework.MetricsClient, ns, name string, selector labels.Selector) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	w.mu.Lock()
	loading := w.loading
	w.mu.Unlock()
	if !loading {
		return
	}
	now := time.Now()
	pending := -1.0
	if v, err := metrics.Object(ctx, ns, framework.ServiceKind, name, catalog.FrontDoorPendingRequests); err == nil {
		pending = v.Value.AsApproximateFloat64()
	}
	var replicas int32 = -1
	if dep, err := e.ControlPlane.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
		replicas = *dep.Spec.Replicas
	}
	running, ready, listed := false, false, false
	if pods, err := e.ControlPlane.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector.String()}); err == nil {
		listed = true
		for _, p := range pods.Items {
			running = running || (p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "")
			for _, c := range p.Status.Conditions {
				ready = ready || (c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue)
			}
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	set := func(at *time.Time, ok bool) {
		if ok && at.IsZero() {
			*at = now
		}
	}
	set(&w.tl.pendingServed, pending > 0)
	set(&w.tl.scaledUp, replicas > 0)
	set(&w.tl.podRunning, running)
	set(&w.tl.podReady, ready)
	if listed && !ready && w.tl.podReady.IsZero() {
		w.tl.noneReady = now
	}
	w.tl.peak = max(w.tl.peak, replicas)
	if n := len(w.tl.changes); replicas >= 0 && (n == 0 || w.tl.changes[n-1].replicas != replicas) {
		w.tl.changes = append(w.tl.changes, replicaChange{at: now, replicas: replicas})
	}
}

// stop ends the polling and returns the timeline.
func (w *zeroWatch) stop() timeline {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.tl
}
