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
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/loadgen"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/test/e2e/framework"
)

// The HPA scenarios run a Deployment of simulators with max-num-seqs=4 and
// requests of 64 prompt and 32 output tokens, about 12 requests/s per pod.
// Arrivals (60/s) exceed what any replica count serves, so the in-flight
// cap holds the number of open requests constant, like a fixed population
// of clients: with C open requests over N pods each pod runs min(C/N, 4)
// and queues C/N-4. That gives each HPA a replica count where its metric
// meets the target (4 in every case below), below maxReplicas.
const (
	hpaLoadRate     = 60
	hpaLoadFor      = 45 * time.Second
	hpaHoldFor      = 15 * time.Second // the last part of the load, when the HPA must hold
	hpaMaxReplicas  = 6
	hpaSampleEvery  = 2 * time.Second
	hpaScaleDownMax = 90 * time.Second
)

// TestHPAScales: an autoscaling/v2 HPA on each served signal scales a
// 1-replica Deployment up while the load exceeds one pod's capacity, and
// back to 1 after the load stops.
func TestHPAScales(t *testing.T) {
	requireEnv(t, framework.ComponentSim, framework.ComponentAdapter)
	t.Parallel()
	cases := []struct {
		name   string
		metric func(deployment string) autoscalingv2.MetricSpec
		// show is the per-pod metric logged in the table.
		show string
		// inFlight is the number of open requests C.
		inFlight int
	}{{
		// Queue C/N-4 = 5 at N=4.
		name:     "pods-queue-size",
		metric:   func(string) autoscalingv2.MetricSpec { return framework.PodsMetric(metricQueue, "5") },
		show:     metricQueue,
		inFlight: 36,
	}, {
		// Batch min(C/N, 4) = 2 at N=4.
		name:     "pods-batch-size",
		metric:   func(string) autoscalingv2.MetricSpec { return framework.PodsMetric(metricBatch, "2") },
		show:     metricBatch,
		inFlight: 8,
	}, {
		// The Deployment's queue, the sum C-4N, is 5 per pod at N=4.
		name: "object-deployment-queue-size",
		metric: func(deployment string) autoscalingv2.MetricSpec {
			return autoscalingv2.MetricSpec{
				Type: autoscalingv2.ObjectMetricSourceType,
				Object: &autoscalingv2.ObjectMetricSource{
					DescribedObject: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: deployment},
					Metric:          autoscalingv2.MetricIdentifier{Name: metricQueue},
					Target:          autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: new(resource.MustParse("5"))},
				},
			}
		},
		show:     metricQueue,
		inFlight: 36,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := env
			ns := e.Namespace(t)
			d := simDeployment("model", 1, "--max-num-seqs=4")
			createSimDeployment(t, e, ns, d, 1)
			runScaleScenario(t, e, ns, d.Name, tc.metric(d.Name), tc.show, tc.inFlight)
		})
	}
}

// runScaleScenario is TestHPAScales' scenario for one metric on the
// Deployment name (pods labelled app=name): 60 arrivals/s for hpaLoadFor with
// at most inFlight requests open, through a Service stand-in over its pods.
// The HPA (min 1, max hpaMaxReplicas) must scale up, hold 2 or more replicas
// through the last hpaHoldFor of the load, report a current value with
// ScalingActive=True, and return to 1 replica within hpaScaleDownMax after
// the load stops. The table (with show's per-pod values) is logged.
func runScaleScenario(t *testing.T, e *framework.Environment, ns, name string, metric autoscalingv2.MetricSpec, show string, inFlight int) {
	t.Helper()
	selector := labels.SelectorFromSet(map[string]string{"app": name})
	createHPA(t, e, ns, newHPA(name, 1, hpaMaxReplicas, metric, 10))
	svc, err := framework.StartServiceProxy(func() []string { return e.Kubelet.Endpoints(ns, selector) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })

	s := startSampler(t, e, ns, name, show, selector)
	l := startLoad(t, svc.URL, hpaLoadRate, hpaLoadFor, inFlight)
	report := l.wait(t, hpaLoadFor+time.Minute)
	loadEnd := time.Now()
	peak := s.peakSince(l.start)
	held := s.lowestSince(loadEnd.Add(-hpaHoldFor))

	ctx, cancel := context.WithTimeout(context.Background(), hpaScaleDownMax)
	defer cancel()
	scaledDown := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		return s.last().specReplicas == 1, nil
	})
	downAfter := time.Since(loadEnd)
	rows := s.stop()
	t.Logf("load: %s", summary(report))
	logTable(t, show, rows, report, l.start)

	if peak < 2 {
		t.Errorf("the HPA never scaled up during %s of load past one pod's capacity (peak %d replicas)", hpaLoadFor, peak)
	}
	if held < 2 {
		t.Errorf("the HPA went down to %d replicas in the last %s of the load", held, hpaHoldFor)
	}
	if !s.sawMetric() {
		t.Errorf("the HPA never reported a current value with ScalingActive=True")
	}
	if scaledDown != nil {
		t.Errorf("not back to 1 replica %s after the load stopped (last %+v)", hpaScaleDownMax, s.last())
	} else {
		t.Logf("peak %d replicas, at least %d in the last %s of the load; back to 1 replica %s after it stopped",
			peak, held, hpaHoldFor, downAfter.Round(time.Second))
	}
}

// TestHPAKeepsPodWithoutMetrics: a pod whose server died (still Running and
// Ready in the API) is left out of the answer rather than reported as 0, so
// the HPA does not scale down a busy Deployment because of it.
func TestHPAKeepsPodWithoutMetrics(t *testing.T) {
	e := requireEnv(t, framework.ComponentSim, framework.ComponentAdapter)
	t.Parallel()
	ns := e.Namespace(t)
	d := simDeployment("model", 2, "--max-num-seqs=2")
	pods := createSimDeployment(t, e, ns, d, 2)
	selector := labels.SelectorFromSet(d.Spec.Selector.MatchLabels)
	alive, dead := pods[0].Name, pods[1].Name
	if err := e.Kubelet.KillSim(ns, dead); err != nil {
		t.Fatal(err)
	}
	aliveURL, _ := e.Kubelet.Endpoint(ns, alive)
	// Overloaded with at most 12 requests open: about 10 waiting. Arrivals
	// far above capacity refill the queue at once if a stalled machine lets
	// the simulator catch up in a burst; a queue read as 0 would rightly
	// let the HPA scale down.
	l := startLoad(t, aliveURL, 60, 60*time.Second, 12)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var last string
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		vals, err := e.ControlPlane.Metrics.PodValues(ctx, ns, metricQueue, selector)
		if err != nil {
			noteErr(ctx, &last, err)
			return false, nil
		}
		last = formatValues(vals)
		_, hasDead := vals[dead]
		return vals[alive] > 0 && !hasDead, nil
	})
	if err != nil {
		t.Fatalf("want %s listed with a queue and %s (dead server) left out; last: %s: %v", alive, dead, last, err)
	}
	t.Logf("API lists %s, leaves out %s", last, dead)

	// Target 20 per pod. Reported as 0, the dead pod would halve the
	// average and the HPA would scale to 1 at once (no stabilization).
	const target = 20.0
	createHPA(t, e, ns, newHPA(d.Name, 1, 2, framework.PodsMetric(metricQueue, "20"), 0))
	s := startSampler(t, e, ns, d.Name, metricQueue, selector)
	ctx2, cancel2 := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel2()
	if err := wait.PollUntilContextCancel(ctx2, 500*time.Millisecond, true, func(context.Context) (bool, error) {
		return s.sawMetric(), nil
	}); err != nil {
		s.stop()
		t.Fatalf("the HPA never reported a current value for %s: %v", metricQueue, err)
	}
	time.Sleep(20 * time.Second) // 20 HPA syncs at --horizontal-pod-autoscaler-sync-period=1s
	rows := s.stop()
	l.stop()
	logTable(t, metricQueue, rows, l.finished(), l.start)
	for _, r := range rows {
		if r.specReplicas != 2 && r.specReplicas != 0 {
			t.Errorf("at %s the Deployment had %d replicas; the pod with no metrics made the HPA scale down", r.at.Sub(l.start).Round(time.Second), r.specReplicas)
		}
	}
	if q := rows[len(rows)-1].values[alive]; q > 0 {
		t.Logf("had %s been reported as 0: average %.1f against target %.0f, desired replicas ceil(2*%.2f)=1",
			dead, q/2, target, q/2/target)
	}
}

// newHPA scales deployment on metric with the quick behavior
// (framework.QuickBehavior), scaling down all the way in one step once
// downWindow seconds of lower recommendations have passed.
func newHPA(deployment string, minReplicas, maxReplicas int32, metric autoscalingv2.MetricSpec, downWindow int32) *autoscalingv2.HorizontalPodAutoscaler {
	allAtOnce := autoscalingv2.HPAScalingPolicy{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 1}
	return framework.HPA(deployment, minReplicas, maxReplicas, metric, framework.QuickBehavior(downWindow, allAtOnce))
}

func createHPA(t *testing.T, e *framework.Environment, ns string, hpa *autoscalingv2.HorizontalPodAutoscaler) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := e.ControlPlane.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, hpa, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create HPA: %v", err)
	}
}

// sample is one row of the scaling table.
type sample struct {
	at                  time.Time
	specReplicas        int32 // the Deployment's spec.replicas, as the HPA set it
	readyPods           int32
	desired, current    int32 // HPA status
	hpaValue            string
	values              map[string]float64 // per pod, from the adapter
	scalingActive       string
	scalingActiveReason string
}

// sampler records the Deployment, HPA and per-pod metric every hpaSampleEvery.
type sampler struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex
	rows []sample
}

func startSampler(t *testing.T, e *framework.Environment, ns, name, metric string, selector labels.Selector) *sampler {
	ctx, cancel := context.WithCancel(context.Background())
	s := &sampler{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(hpaSampleEvery)
		defer tick.Stop()
		for {
			s.add(takeSample(ctx, e, ns, name, metric, selector))
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() { s.stop() })
	return s
}

func takeSample(ctx context.Context, e *framework.Environment, ns, name, metric string, selector labels.Selector) sample {
	ctx, cancel := context.WithTimeout(ctx, hpaSampleEvery)
	defer cancel()
	r := sample{at: time.Now(), hpaValue: "-"}
	c := e.ControlPlane.Client
	if d, err := c.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
		r.specReplicas = *d.Spec.Replicas
		r.readyPods = d.Status.ReadyReplicas
	}
	if h, err := c.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
		r.desired, r.current = h.Status.DesiredReplicas, h.Status.CurrentReplicas
		for _, m := range h.Status.CurrentMetrics {
			switch {
			case m.Pods != nil && m.Pods.Current.AverageValue != nil:
				r.hpaValue = m.Pods.Current.AverageValue.String() + "/pod"
			case m.Object != nil && m.Object.Current.AverageValue != nil:
				r.hpaValue = m.Object.Current.AverageValue.String() + "/pod"
			case m.Object != nil && m.Object.Current.Value != nil:
				r.hpaValue = m.Object.Current.Value.String()
			case m.External != nil && m.External.Current.AverageValue != nil:
				r.hpaValue = m.External.Current.AverageValue.String() + "/pod"
			case m.External != nil && m.External.Current.Value != nil:
				r.hpaValue = m.External.Current.Value.String()
			}
		}
		for _, cond := range h.Status.Conditions {
			if cond.Type == autoscalingv2.ScalingActive {
				r.scalingActive, r.scalingActiveReason = string(cond.Status), cond.Reason
			}
		}
	}
	r.values, _ = e.ControlPlane.Metrics.PodValues(ctx, ns, metric, selector)
	return r
}

func (s *sampler) add(r sample) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rows = append(s.rows, r)
}

func (s *sampler) last() sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.rows) == 0 {
		return sample{}
	}
	return s.rows[len(s.rows)-1]
}

// peakSince is the most replicas the HPA set since t.
func (s *sampler) peakSince(t time.Time) int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var peak int32
	for _, r := range s.rows {
		if !r.at.Before(t) {
			peak = max(peak, r.specReplicas)
		}
	}
	return peak
}

// lowestSince is the fewest replicas the HPA set since t.
func (s *sampler) lowestSince(t time.Time) int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	lowest := int32(-1)
	for _, r := range s.rows {
		if !r.at.Before(t) && r.specReplicas > 0 && (lowest < 0 || r.specReplicas < lowest) {
			lowest = r.specReplicas
		}
	}
	return lowest
}

// sawMetric reports whether the HPA ever computed a value from the adapter.
func (s *sampler) sawMetric() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.rows {
		if r.hpaValue != "-" && r.scalingActive == string(corev1.ConditionTrue) {
			return true
		}
	}
	return false
}

// stop ends sampling and returns the rows.
func (s *sampler) stop() []sample {
	s.cancel()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sample(nil), s.rows...)
}

// logTable logs the rows with the p90 TTFT of requests sent in each row's
// interval (when report is not nil).
func logTable(t *testing.T, metric string, rows []sample, report *loadgen.Report, loadStart time.Time) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "\n%7s %5s %5s %7s %7s %-12s %-10s %8s %5s  %s\n", "t(s)", "spec", "ready", "desired", "current", "HPA value", "active", "p90 TTFT", "reqs", metric+" per pod (adapter)")
	for _, r := range rows {
		at := r.at.Sub(loadStart)
		ttft, n := "-", 0
		if report != nil {
			if p, k := p90TTFT(report, at-hpaSampleEvery, at); k > 0 {
				ttft, n = p.Round(time.Millisecond).String(), k
			}
		}
		fmt.Fprintf(&b, "%7.1f %5d %5d %7d %7d %-12s %-10s %8s %5d  %s\n", at.Seconds(), r.specReplicas, r.readyPods,
			r.desired, r.current, r.hpaValue, r.scalingActive+"/"+abbrev(r.scalingActiveReason), ttft, n, formatValues(r.values))
	}
	t.Log(b.String())
}

func abbrev(s string) string {
	if len(s) > 8 {
		return s[:8]
	}
	return s
}
