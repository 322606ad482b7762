// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/test/e2e/framework"
)

// The cold-start comparison runs simulated time csCompress times faster than
// the wall clock, as the shootout does: the simulators' clocks (--time-scale),
// their model load and engine step, and the HPAs' behavior periods and
// windows. The controller's 1 s sync period is then the default 15 s of
// simulated time, and the adapter's 1 s scrape interval is 15 s.
//
// Each simulator loads its model for csLoadTime, runs at most 4 requests with
// a 150 ms step (32 output tokens: about 5 s a request, 0.8 requests/s a
// pod, in simulated time). The step: from no load to csPopulation open
// requests at once (arrivals far above what csMaxReplicas pods serve, capped
// in flight, like a fixed population of clients). With C open requests over
// N Ready pods each runs 4 and queues C/N-4, so both HPAs settle at
// csNeeded replicas: the plain one (queue per pod, AverageValue 5) needs
// (34-4N)/N ≤ 5, the cold-start-aware one (demand per replica, Value 9)
// needs 34/N ≤ 9.
const (
	csCompress     = 15
	csLoadTime     = 60 * time.Second // simulated
	csPopulation   = 34
	csNeeded       = 4
	csMaxReplicas  = 10
	csArrivalsWall = 150                    // per wall second
	csObserve      = 16 * time.Second       // wall, after the step: 240 s simulated, inside the 300 s scale-down window
	csSampleEvery  = 250 * time.Millisecond // wall
	csPlainTarget  = "5"
	csAwareTarget  = "9"

	// metricDemandPerReplica is the cold-start-aware workload metric.
	metricDemandPerReplica = "inference_demand_per_replica"
)

// TestColdStartOvershoot: with a 60 s model load and a step in load, an HPA
// on the plain per-pod queue (Pods metric, AverageValue) keeps adding
// replicas while the new ones load, because the queue stays on the Ready
// pods; an HPA on inference_demand_per_replica (Object metric on the
// Deployment, Value), which counts the starting pods as replicas, does not.
// Two Deployments side by side, in their own namespaces, get the same step.
// It logs each one's replicas added beyond the needed count, replica-seconds
// and time to csNeeded Ready replicas (simulated time), and asserts that both
// HPAs read their metric and scale, and that the aware one never sets more
// replicas than the plain one, nor more than needed: its recommendation
// is at most ceil(demand / 9), and the demand is capped by the population.
func TestColdStartOvershoot(t *testing.T) {
	e := requireEnv(t, framework.ComponentSim, framework.ComponentAdapter)
	t.Parallel()
	plain := newCSWorkload(t, e, "plain", framework.PodsMetric(metricQueue, csPlainTarget))
	aware := newCSWorkload(t, e, "aware", autoscalingv2.MetricSpec{
		Type: autoscalingv2.ObjectMetricSourceType,
		Object: &autoscalingv2.ObjectMetricSource{
			DescribedObject: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "model"},
			Metric:          autoscalingv2.MetricIdentifier{Name: metricDemandPerReplica},
			Target:          autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: new(resource.MustParse(csAwareTarget))},
		},
	})
	ws := []*csWorkload{plain, aware}

	// Both HPAs read their metric at idle before the step.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, w := range ws {
		var last framework.ScaleState
		if err := wait.PollUntilContextCancel(ctx, csSampleEvery, true, func(ctx context.Context) (bool, error) {
			last = w.model.Scale(ctx)
			return w.hasValue(last) && last.ActiveTrue(), nil
		}); err != nil {
			t.Fatalf("%s: the HPA never read its metric at idle (last %+v): %v", w.label, last, err)
		}
	}

	step := time.Now()
	var loads []*load
	models := make([]*framework.Model, len(ws))
	for i, w := range ws {
		loads = append(loads, startLoad(t, w.model.URL, csArrivalsWall, csObserve+10*time.Second, csPopulation))
		models[i] = w.model
	}
	var rows []framework.ScaleRow
	for time.Since(step) < csObserve {
		rows = append(rows, framework.SampleScale(models, time.Since(step), csSampleEvery*4))
		time.Sleep(csSampleEvery)
	}
	for _, l := range loads {
		l.stop()
	}
	for i, l := range loads {
		if r := l.finished(); r != nil {
			t.Logf("%s load: %s", ws[i].label, summary(r))
		}
	}
	logCSTable(t, ws, rows)

	figures := make([]csFigures, len(ws))
	for i, w := range ws {
		figures[i] = csMeasure(rows, i, w)
		f := figures[i]
		enough := "never"
		if f.enoughAt >= 0 {
			enough = fmt.Sprintf("%.0f s", f.enoughAt.Seconds()*csCompress)
		}
		t.Logf("%s (%s): peak %d replicas, %d added beyond the %d needed; %.0f replica-seconds over %.0f s; %d Ready after %s (simulated time)",
			w.label, w.metricDesc, f.peak, max(0, f.peak-csNeeded), csNeeded, f.replicaSeconds*csCompress, csObserve.Seconds()*csCompress, csNeeded, enough)
		if !f.sawValue {
			t.Errorf("%s: the HPA never reported a current value with ScalingActive=True after the step", w.label)
		}
		if f.peak < 2 {
			t.Errorf("%s: the HPA never scaled up after the step (peak %d)", w.label, f.peak)
		}
	}
	p, a := figures[0], figures[1]
	if a.peak > p.peak {
		t.Errorf("the cold-start-aware HPA set %d replicas, more than the plain one's %d", a.peak, p.peak)
	}
	if a.peak > csNeeded {
		t.Errorf("the cold-start-aware HPA set %d replicas, more than the %d needed", a.peak, csNeeded)
	}
}

// csWorkload is one Deployment "model" of cold-starting simulators in its own
// namespace, its Service stand-in and its HPA on metric.
type csWorkload struct {
	label, metricDesc, metric string
	model                     *framework.Model
}

func newCSWorkload(t *testing.T, e *framework.Environment, label string, metric autoscalingv2.MetricSpec) *csWorkload {
	t.Helper()
	w := &csWorkload{label: label}
	switch {
	case metric.Pods != nil:
		w.metric = metric.Pods.Metric.Name
		w.metricDesc = fmt.Sprintf("Pods %s, AverageValue %s", metric.Pods.Metric.Name, csPlainTarget)
	case metric.Object != nil:
		w.metric = metric.Object.Metric.Name
		w.metricDesc = fmt.Sprintf("Object %s on the Deployment, Value %s", metric.Object.Metric.Name, csAwareTarget)
	}
	d := simDeployment("model", 1, "--max-num-seqs=4", "--decode-time-base=150ms",
		fmt.Sprintf("--time-scale=%d", csCompress), "--load-time="+csLoadTime.String())
	// The first pod is Ready (its model loaded) before the HPA exists.
	w.model = framework.StartModel(t, e, e.Namespace(t), d)
	createHPA(t, e, w.model.Namespace, csHPA(d.Name, metric))
	return w
}

// hasValue says whether the HPA's status holds a current value of its metric.
func (w *csWorkload) hasValue(s framework.ScaleState) bool { return !math.IsNaN(s.Value(w.metric)) }

// csHPA is the default behavior with its periods and windows compressed
// csCompress times: scale up at once by up to 4 pods or 100% per 15 s,
// scale down after 300 s of lower recommendations (simulated time).
func csHPA(deployment string, metric autoscalingv2.MetricSpec) *autoscalingv2.HorizontalPodAutoscaler {
	period := int32(15 / csCompress)
	down := int32(300 / csCompress)
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: deployment},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: deployment},
			MinReplicas:    new(int32(1)),
			MaxReplicas:    csMaxReplicas,
			Metrics:        []autoscalingv2.MetricSpec{metric},
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
				ScaleUp: &autoscalingv2.HPAScalingRules{
					StabilizationWindowSeconds: new(int32(0)),
					SelectPolicy:               new(autoscalingv2.MaxChangePolicySelect),
					Policies: []autoscalingv2.HPAScalingPolicy{
						{Type: autoscalingv2.PodsScalingPolicy, Value: 4, PeriodSeconds: period},
						{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: period},
					},
				},
				ScaleDown: &autoscalingv2.HPAScalingRules{
					StabilizationWindowSeconds: &down,
					Policies:                   []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: period}},
				},
			},
		},
	}
}

// csFigures are one workload's measurements over the observed window, in
// wall time (the caller scales them to simulated time).
type csFigures struct {
	peak           int32
	replicaSeconds float64       // spec.replicas integrated over the window
	enoughAt       time.Duration // first time csNeeded pods were Ready; -1 if never
	sawValue       bool
}

func csMeasure(rows []framework.ScaleRow, i int, w *csWorkload) csFigures {
	f := csFigures{enoughAt: -1, replicaSeconds: framework.ReplicaSeconds(rows, i)}
	for _, r := range rows {
		s := r.States[i]
		f.peak = max(f.peak, s.Spec)
		if s.Ready >= csNeeded && f.enoughAt < 0 {
			f.enoughAt = r.At
		}
		f.sawValue = f.sawValue || (w.hasValue(s) && s.ActiveTrue())
	}
	return f
}

func logCSTable(t *testing.T, ws []*csWorkload, rows []framework.ScaleRow) {
	t.Helper()
	var b strings.Builder
	head := fmt.Sprintf("%4s %5s %7s %7s %-6s", "spec", "ready", "desired", "value", "active")
	fmt.Fprintf(&b, "\n%8s", "")
	for _, w := range ws {
		fmt.Fprintf(&b, " | %-*s", len(head), w.label+": "+w.metricDesc)
	}
	fmt.Fprintf(&b, "\n%8s", "t sim(s)")
	for range ws {
		fmt.Fprintf(&b, " | %s", head)
	}
	b.WriteByte('\n')
	for _, r := range rows {
		fmt.Fprintf(&b, "%8.0f", math.Round(r.At.Seconds()*csCompress))
		for i, s := range r.States {
			v := "-"
			if ws[i].hasValue(s) {
				v = fmt.Sprintf("%.2f", s.Value(ws[i].metric))
			}
			fmt.Fprintf(&b, " | %4d %5d %7d %7s %-6s", s.Spec, s.Ready, s.Desired, v, s.Active)
		}
		b.WriteByte('\n')
	}
	t.Log(b.String())
}
