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

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/test/e2e/framework"
)

// The prefill/decode scenario (docs/disaggregated.md): one model, llama,
// served by prefill pods and decode pods, labelled llm-d.ai/role (the
// adapter's default --role-label) prefill or decode, each role its own
// Deployment (llama-prefill, llama-decode) so that an HPA can scale it. A
// StatefulSet llama whose selector is the model's label only (app=llama)
// spans both roles: it is the describedObject of both HPAs' Object metrics,
// each asking for its own role with the metric selector role=VALUE. It has
// 0 replicas (and no StatefulSet controller runs here): it stands for any
// workload whose selector covers both roles, which is what the role
// selection is for; the adapter reads only its selector.
const (
	pdRoleLabel = "llm-d.ai/role" // the adapter's default --role-label, llm-d's
	pdModel     = "llama"
	pdMax       = 3
	pdInFlight  = 8 // the load's cap, over a role's pods with --max-num-seqs=2
	pdStepMax   = 60 * time.Second
	pdHoldFor   = 10 * time.Second // the shortest phase
)

// TestDisaggregatedTwoHPAs: the two-HPA recipe of docs/disaggregated.md on
// the real HPA controller. The prefill HPA scales llama-prefill on
// inference_queue_size{role=prefill} (the waiting requests, AverageValue 2),
// the decode HPA scales llama-decode on inference_batch_size{role=decode}
// (the running requests, AverageValue 1), both Object metrics on the
// StatefulSet that spans both roles. Each role is loaded in turn through a
// Service stand-in over its own pods, past its pods' batch of 2, so that
// the loaded pods have both a queue and a batch:
//
//  1. decode load: the decode HPA scales llama-decode up; the prefill HPA
//     reads 0 and keeps llama-prefill at 1 all along, although the decode
//     pods have requests waiting (a queue read over both roles would have
//     scaled prefill);
//  2. prefill load: the prefill HPA scales llama-prefill up; the decode HPA
//     never sets more replicas than it had when the phase began, and reads
//     0 once the decode pods are idle, although the prefill pods run
//     requests (a batch read over both roles would not be 0).
//
// It logs both HPAs' table every 0.5 s. About a minute.
func TestDisaggregatedTwoHPAs(t *testing.T) {
	e := requireEnv(t, framework.ComponentSim, framework.ComponentAdapter)
	t.Parallel()
	ns := e.Namespace(t)
	c := e.ControlPlane.Client
	ctx, cancel := context.WithTimeout(context.Background(), 3*pdStepMax)
	defer cancel()

	roles := []string{"prefill", "decode"}
	selectors := map[string]labels.Selector{}
	for _, role := range roles {
		lbls := map[string]string{"app": pdModel, pdRoleLabel: role}
		d := simDeployment(pdModel+"-"+role, 1, "--max-num-seqs=2")
		d.Spec.Selector.MatchLabels = lbls
		d.Spec.Template.Labels = lbls
		createSimDeployment(t, e, ns, d, 1)
		selectors[role] = labels.SelectorFromSet(lbls)
	}
	span := framework.SimDeployment(pdModel, 0, []string{"--model=" + simModel})
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: pdModel},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    new(int32),
			ServiceName: pdModel,
			Selector:    span.Spec.Selector,
			Template:    span.Spec.Template,
		},
	}
	if _, err := c.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the StatefulSet spanning both roles: %v", err)
	}

	signal := map[string]string{"prefill": metricQueue, "decode": metricBatch}
	targets := map[string]string{"prefill": "2", "decode": "1"}
	for _, role := range roles {
		target := resource.MustParse(targets[role])
		hpa := newHPA(pdModel+"-"+role, 1, pdMax, autoscalingv2.MetricSpec{
			Type: autoscalingv2.ObjectMetricSourceType,
			Object: &autoscalingv2.ObjectMetricSource{
				DescribedObject: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: pdModel},
				Metric: autoscalingv2.MetricIdentifier{Name: signal[role],
					Selector: &metav1.LabelSelector{MatchLabels: map[string]string{catalog.RoleSelectorLabel: role}}},
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &target},
			},
		}, 5)
		createHPA(t, e, ns, hpa)
	}

	w := startPDWatch(t, e, ns, selectors)
	// Both HPAs read their role's idle value before any load.
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, pdStepMax, true, func(context.Context) (bool, error) {
		r := w.last()
		return r.value["prefill"] == "0" && r.value["decode"] == "0", nil
	}); err != nil {
		t.Fatalf("the idle HPAs never both read 0 (last: %s): %v", w.last(), err)
	}

	// One phase: load on role's pods until its HPA has scaled up; the other
	// role's HPA must not scale up meanwhile.
	phase := func(loaded, other string) {
		t.Helper()
		begin := w.last()
		svc, err := framework.StartServiceProxy(func() []string { return e.Kubelet.Endpoints(ns, selectors[loaded]) })
		if err != nil {
			t.Fatal(err)
		}
		defer svc.Close()
		l := startLoad(t, svc.URL, 40, pdStepMax, pdInFlight)
		defer l.stop()
		from := time.Now()
		// Until the loaded role has scaled, the other role's HPA has read 0,
		// and pdHoldFor has passed: that many HPA syncs in which the other
		// role's HPA could have scaled on the loaded pods' signal.
		otherZero := false
		err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, pdStepMax, false, func(context.Context) (bool, error) {
			r := w.last()
			otherZero = otherZero || r.value[other] == "0"
			return r.replicas[loaded] >= 2 && otherZero && time.Since(from) >= pdHoldFor, nil
		})
		l.stop()
		rows := w.since(from)
		logPDTable(t, loaded+" load", rows)
		if err != nil {
			t.Fatalf("%s load: the %s HPA never scaled %s-%s up, or the %s HPA never read 0 (last: %s): %v", loaded, loaded, pdModel, loaded, other, w.last(), err)
		}
		sawOtherZero, sawCross := false, false
		for _, r := range rows {
			if r.replicas[other] > begin.replicas[other] {
				t.Errorf("%s load: the %s HPA scaled %s-%s up to %d (from %d) at %s: it read %s", loaded, other, pdModel, other, r.replicas[other], begin.replicas[other], r.at.Format("15:04:05.0"), r.value[other])
			}
			sawOtherZero = sawOtherZero || r.value[other] == "0"
			// The loaded pods' own value of the other role's signal: what a
			// question over both roles would have counted.
			sawCross = sawCross || r.cross[loaded] > 0
		}
		if !sawOtherZero {
			t.Errorf("%s load: the %s HPA never read 0 for its own idle pods", loaded, other)
		}
		if !sawCross {
			t.Errorf("%s load: the %s pods never showed a %s above 0, so the role selection was not put to the test", loaded, loaded, signal[other])
		}
		// The load's requests drain: the next phase begins once the
		// loaded role's HPA reads its idle pods' 0, so that a scale-up of
		// this role then is not this phase's.
		if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, pdStepMax, false, func(context.Context) (bool, error) {
			return w.last().value[loaded] == "0", nil
		}); err != nil {
			t.Fatalf("after the %s load the %s HPA never read 0 (last: %s): %v", loaded, loaded, w.last(), err)
		}
	}
	phase("decode", "prefill")
	phase("prefill", "decode")
}

// pdRow is one sample of both roles: each Deployment's replicas, each
// HPA's value and ScalingActive, and each role's pods' sum of the other
// role's signal (from the adapter, per pod).
type pdRow struct {
	at       time.Time
	replicas map[string]int32
	desired  map[string]int32
	value    map[string]string // the HPA's current value, "" before one
	active   map[string]string
	cross    map[string]float64 // prefill: the prefill pods' batch; decode: the decode pods' queue
}

func (r pdRow) String() string {
	var b strings.Builder
	for _, role := range []string{"prefill", "decode"} {
		fmt.Fprintf(&b, "%s: replicas %d desired %d value %q active %s; ", role, r.replicas[role], r.desired[role], r.value[role], r.active[role])
	}
	return b.String()
}

// pdWatch samples both roles every 0.5 s.
type pdWatch struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	rows   []pdRow
}

func startPDWatch(t *testing.T, e *framework.Environment, ns string, selectors map[string]labels.Selector) *pdWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &pdWatch{cancel: cancel, done: make(chan struct{})}
	cross := map[string]string{"prefill": metricBatch, "decode": metricQueue}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			r := pdRow{at: time.Now(), replicas: map[string]int32{}, desired: map[string]int32{}, value: map[string]string{}, active: map[string]string{}, cross: map[string]float64{}}
			for role, sel := range selectors {
				name := pdModel + "-" + role
				octx, ocancel := context.WithTimeout(ctx, 2*time.Second)
				if d, err := e.ControlPlane.Client.AppsV1().Deployments(ns).Get(octx, name, metav1.GetOptions{}); err == nil {
					r.replicas[role] = *d.Spec.Replicas
				}
				if h, err := e.ControlPlane.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(octx, name, metav1.GetOptions{}); err == nil {
					r.desired[role] = h.Status.DesiredReplicas
					for _, m := range h.Status.CurrentMetrics {
						if m.Object != nil && m.Object.Current.AverageValue != nil {
							r.value[role] = m.Object.Current.AverageValue.String()
						}
					}
					for _, cond := range h.Status.Conditions {
						if cond.Type == autoscalingv2.ScalingActive {
							r.active[role] = string(cond.Status) + "/" + cond.Reason
						}
					}
				}
				if vals, err := e.ControlPlane.Metrics.PodValues(octx, ns, cross[role], sel); err == nil {
					for _, v := range vals {
						r.cross[role] += v
					}
				}
				ocancel()
			}
			w.mu.Lock()
			w.rows = append(w.rows, r)
			w.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() {
		w.cancel()
		<-w.done
	})
	return w
}

func (w *pdWatch) last() pdRow {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.rows) == 0 {
		return pdRow{}
	}
	return w.rows[len(w.rows)-1]
}

func (w *pdWatch) since(from time.Time) []pdRow {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []pdRow
	for _, r := range w.rows {
		if !r.at.Before(from) {
			out = append(out, r)
		}
	}
	return out
}

// logPDTable logs a phase's samples: per role, the Deployment's replicas,
// the HPA's desired replicas and value, and the role's pods' value of the
// other role's signal.
func logPDTable(t *testing.T, title string, rows []pdRow) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "%s:\n   t(s)  prefill: spec desired value  active              batch | decode: spec desired value  active              queue\n", title)
	for _, r := range rows {
		fmt.Fprintf(&b, "  %5.1f         %4d %7d %-6s %-19s %5g |         %4d %7d %-6s %-19s %5g\n", r.at.Sub(rows[0].at).Seconds(),
			r.replicas["prefill"], r.desired["prefill"], r.value["prefill"], abbrev(r.active["prefill"]), r.cross["prefill"],
			r.replicas["decode"], r.desired["decode"], r.value["decode"], abbrev(r.active["decode"]), r.cross["decode"])
	}
	t.Log(b.String())
}
