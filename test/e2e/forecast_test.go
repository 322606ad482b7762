// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/test/e2e/framework"
)

// The forecast comparison runs in wall time (no --time-scale): the HPA
// controller syncs every 1 s, a simulator loads its model for fcLoadTime
// (five syncs), runs at most fcSeqs requests at once with a 20 ms engine
// step (32 output tokens: about 0.7 s a request). Load is a fixed population
// of open requests, as in TestColdStartOvershoot: arrivals far above what
// the pods serve, capped in flight, so the demand (waiting plus running) is
// the cap whatever the replicas: fcBaseline between bursts (2 replicas'
// worth), fcBaseline + fcBurstExtra during a burst (fcNeeded = 5 replicas'
// worth). A burst's requests are short (fcBurstOutput tokens: about 0.2 s),
// a burst of quick questions on top of the long baseline ones.
const (
	fcLoadTime      = 5 * time.Second
	fcSeqs          = 4
	fcBaseline      = 8
	fcBurstExtra    = 12
	fcBurstOutput   = 8 // output tokens of a burst's requests; the baseline's have 32
	fcNeeded        = (fcBaseline + fcBurstExtra) / fcSeqs
	fcInitial       = fcBaseline / fcSeqs // replicas before the HPAs exist
	fcMaxReplicas   = 8
	fcArrivals      = 200.0 // per wall second, per generator: far above what the cap lets in
	fcDownWindow    = 8     // seconds of scale-down stabilization: one model load plus 3 s
	fcFirstGap      = 20 * time.Second
	fcBurst         = 12 * time.Second // longer than the model load
	fcGap           = 22 * time.Second // longer than the scale-down window and a cold start
	fcBursts        = 3
	fcSampleEvery   = 500 * time.Millisecond
	fcQueueTarget   = "2" // the guard and the queue-only HPA: AverageValue per pod
	fcForecastValue = "4" // the recipe: Value, the per-replica concurrency (--max-num-seqs)
	// fcWant is the method the adapter's default, auto, must choose on
	// these bursts from the second on.
	fcWant = "staffing"
	// fcZ is the adapter's default --forecast-z, for the log's implied
	// index of dispersion only.
	fcZ = 1.645

	// metricForecast is the anticipating workload metric.
	metricForecast = "inference_demand_forecast_per_replica"
)

// TestForecastAheadOfBursts: the anticipating HPA recipe has the replicas a
// recurring burst needs Ready when the burst starts, where an HPA on the
// per-pod queue alone has fewer; and while the forecast's history is too
// short the metric is absent (a 404 that says why) and the HPA holds its
// replicas.
//
// Two Deployments side by side, each in its own namespace, with the same
// cold start (fcLoadTime, readiness probe on /health), the same arrival
// pattern (a baseline of fcBaseline open requests; fcBursts bursts of
// fcBurstExtra more, fcBurst long, fcGap apart), the same behavior (scale up
// at once, scale down after fcDownWindow s) and the same min 1, max
// fcMaxReplicas. One HPA is the recipe: the Object metric
// inference_demand_forecast_per_replica on the Deployment with no metric
// selector (the adapter's default method, auto, as `capacity` writes the
// recipe), Value fcForecastValue (the per-replica concurrency), plus the
// per-pod queue (Pods inference_queue_size, AverageValue fcQueueTarget) as
// the guard; the other HPA is that queue
// metric alone. The adapter is the suite's: the forecast's default method
// and horizon (the pods' own start-up time), its windows 1m
// (framework.AdapterArgs: the suite's time runs about 15 times faster, and
// 64 samples over the default 15m are 14 s apart, longer than a burst: on
// CI the samples kept missed the first burst's busiest seconds and auto
// read B 0.077 at the second).
//
// Why staffing, and auto's choice of it. Between bursts the demand is the
// baseline and the gaps are longer than the scale-down window, so only an estimate that remembers how
// bursty the workload has been can keep the burst's replicas through a
// gap. The envelope is the peak within the horizon (one model load, shorter
// than a gap) and Holt's method projects the level and trend of the last
// samples over the horizon (flat in a gap): both come back to the
// baseline's 2 replicas before the next burst, as the queue does (0 on 2
// replicas, so the queue-only HPA falls to 1 and climbs back to 2).
// Staffing adds the headroom z·√(I·D) to the demand D, with I the index of
// dispersion of the arrivals over the window (1m here), which the
// bursts raise. The burst is sized so that the headroom of Poisson arrivals
// (I = 1) is not enough: at the baseline, 8 + 1.645·√8 ≈ 12.7 requests ask
// for 4 replicas, not the 5 a burst needs; only I > 3 (8 + 1.645·√(8·I) >
// 16) keeps 5. With the open requests capped, arrivals follow completions,
// so the arrivals' dispersion is the throughput's: with requests of one
// length, a burst 2.5 times the baseline's demand gave I from 1.6 (the CI
// machine, after the first burst: too little) to 22 (a local run), while the burst's short requests make its
// arrivals several times the baseline's and I far above 3 (55 to 135 at
// the second burst in three runs on a 2-core machine), on a slow machine too.
// The default method, auto, is staffing when the arrivals' burstiness
// B = (I − 1) ÷ the mean arrivals per sample is at least the adapter's
// --forecast-auto-burstiness (0.25), Holt's method below: the steady
// baseline alone reads B near or below 0, so before the first burst auto
// is Holt; the bursts raise it. So the recipe may be short at the first
// burst, and the test asserts from then on: at the start of the second and
// later bursts the recipe's Deployment has at least fcNeeded Ready
// replicas, the queue-only one fewer (from the Deployments' status), and
// auto's last choice for the recipe's Deployment before the burst (the
// adapter's "Forecast chose" log line, -v=4 in forecast.go) was fcWant.
// At every burst start it logs each HPA's replicas, desired replicas and the values it read, and
// for the recipe the demand D (inference_demand_per_replica times the
// replicas), the forecast F it is asked for at the same moment and the
// index of dispersion they imply at the default z, so that a failure says
// whether the demand, the dispersion or the HPA fell short.
//
// Before the recipe's HPA exists, the forecast is asked for as the HPA asks
// (the typed custom metrics client, the same selector): a 404 whose message
// says how much history there is and how much is needed. The HPA's first
// syncs then find the history still short (the adapter records a sample
// per question): the test waits until the HPA reads a value and asserts
// that before it its status showed the metric's failure (ScalingActive
// False, the adapter's reason quoted) while its desiredReplicas and the
// Deployment's replicas did not change: with one metric missing the HPA
// does not scale down on the others.
func TestForecastAheadOfBursts(t *testing.T) {
	e := requireEnv(t, framework.ComponentSim, framework.ComponentAdapter)
	t.Parallel()
	recipe := newFCWorkload(t, e, "recipe")
	queue := newFCWorkload(t, e, "queue-only")
	ws := []*fcWorkload{recipe, queue}

	// The baseline runs from here to the end; the first questions about
	// the pods make the adapter scrape them.
	total := fcFirstGap + time.Duration(fcBursts-1)*(fcBurst+fcGap) + fcBurst + 2*time.Second
	for _, w := range ws {
		startLoad(t, w.model.URL, fcArrivals, total+time.Minute, fcBaseline)
		w.waitScraped(t)
	}

	recipe.checkAbsentBeforeHPA(t)
	queueOnly := framework.PodsMetric(metricQueue, fcQueueTarget)
	createHPA(t, e, queue.model.Namespace, framework.HPA("model", 1, fcMaxReplicas, queueOnly, fcBehavior()))
	queue.metricDesc = fmt.Sprintf("Pods %s AverageValue %s", metricQueue, fcQueueTarget)
	recipeHPA := framework.HPA("model", 1, fcMaxReplicas, forecastMetric(), fcBehavior())
	recipeHPA.Spec.Metrics = append(recipeHPA.Spec.Metrics, framework.PodsMetric(metricQueue, fcQueueTarget))
	createHPA(t, e, recipe.model.Namespace, recipeHPA)
	recipe.metricDesc = fmt.Sprintf("Object %s (the default method) Value %s + Pods %s AverageValue %s",
		metricForecast, fcForecastValue, metricQueue, fcQueueTarget)
	recipe.checkHoldsWhileAbsent(t)

	// The bursts, sampled every fcSampleEvery; each burst start is sampled
	// just before its load starts.
	start := time.Now()
	var rows []fcRow
	var scaleRows []framework.ScaleRow // the same samples, for framework.ReplicaSeconds
	var starts []fcRow
	var diags []string
	var choices []fcChoice // auto's last choice for the recipe before each burst
	next := 0
	burstAt := func(k int) time.Duration { return fcFirstGap + time.Duration(k)*(fcBurst+fcGap) }
	for time.Since(start) < total {
		row, sr := fcSample(ws, time.Since(start))
		rows = append(rows, row)
		scaleRows = append(scaleRows, sr)
		if next < fcBursts && row.at >= burstAt(next) {
			starts = append(starts, row)
			diags = append(diags, recipe.demandAndForecast())
			choices = append(choices, recipe.lastChoice(t))
			for _, w := range ws {
				startLoadOutput(t, w.model.URL, simModel, fcBurstOutput, fcArrivals, fcBurst, fcBurstExtra)
			}
			next++
		}
		wake := fcSampleEvery - time.Since(start)%fcSampleEvery
		if next < fcBursts {
			wake = min(wake, burstAt(next)-time.Since(start))
		}
		time.Sleep(max(wake, 0))
	}
	logFCTable(t, ws, rows)
	logFCBurstStarts(t, ws, starts, diags, choices)
	for i, w := range ws {
		t.Logf("%s (%s): %.0f replica-seconds over %.0f s", w.label, w.metricDesc, framework.ReplicaSeconds(scaleRows, i), time.Since(start).Seconds())
		for k, s := range starts {
			t.Logf("%s, burst %d at %.1f s: %s", w.label, k+1, s.at.Seconds(), fcEnoughAfter(rows, i, s.at))
		}
	}

	if len(starts) != fcBursts {
		t.Fatalf("%d of %d bursts started", len(starts), fcBursts)
	}
	for i, w := range ws {
		if !fcSawValue(rows, i) {
			t.Errorf("%s: the HPA never reported its metrics with ScalingActive=True", w.label)
		}
	}
	for k := 1; k < fcBursts; k++ {
		r, q := starts[k].states[0], starts[k].states[1]
		if r.Ready < fcNeeded {
			t.Errorf("burst %d: the recipe's Deployment had %d Ready replicas at its start, fewer than the %d it needs (spec %d, desired %d; the HPA read a forecast of %s per replica and a queue of %s per pod; asked then: %s)",
				k+1, r.Ready, fcNeeded, r.Spec, r.Desired, fcValue(r.forecast), fcValue(r.queue), diags[k])
		}
		if !r.hasForecast() {
			t.Errorf("burst %d: the recipe's HPA had read no forecast at its start (ScalingActive %s %s: %s)", k+1, r.Active, r.Reason, r.Message)
		}
		if c := choices[k]; c.method != fcWant {
			t.Errorf("burst %d: auto's last choice for the recipe before it was %s, not %s", k+1, c, fcWant)
		}
		if q.Ready >= fcNeeded {
			t.Errorf("burst %d: the queue-only Deployment had %d Ready replicas at its start, as many as the %d needed: the pattern did not make it scale down in the gap (spec %d, desired %d, queue %s)",
				k+1, q.Ready, fcNeeded, q.Spec, q.Desired, fcValue(q.queue))
		}
	}
	checkChoicesCounted(t, e)
}

// checkChoicesCounted: the adapter's /metrics counts auto's choices, by
// the method asked and the estimator chosen; the recipe's HPA asked auto,
// which chose fcWant at least once (other tests may add to the counter).
func checkChoicesCounted(t *testing.T, e *framework.Environment) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	page, err := adapterPage(ctx, e)
	if err != nil {
		t.Fatalf("adapter /metrics: %v", err)
	}
	lines := seriesOf(page)["inference_metrics_adapter_forecasts_total"]
	want := fmt.Sprintf(`inference_metrics_adapter_forecasts_total{estimator=%q,method="auto"} `, fcWant)
	for _, line := range lines {
		if v, ok := strings.CutPrefix(line, want); ok {
			if n, err := strconv.ParseFloat(v, 64); err != nil || n < 1 {
				t.Errorf("%s: want a count of at least 1", line)
			}
			t.Logf("auto's choices counted: %s", strings.Join(lines, "; "))
			return
		}
	}
	t.Errorf("the adapter's /metrics has no %s… line; its forecasts_total lines: %q", want, lines)
}

// forecastMetric is the recipe's Object metric.
func forecastMetric() autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{
		Type: autoscalingv2.ObjectMetricSourceType,
		Object: &autoscalingv2.ObjectMetricSource{
			DescribedObject: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "model"},
			Metric:          autoscalingv2.MetricIdentifier{Name: metricForecast},
			Target:          autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: new(resource.MustParse(fcForecastValue))},
		},
	}
}

// fcBehavior is both HPAs' behavior: scale up at once (by up to 4 pods per
// 5 s), scale down after fcDownWindow s, all the way in one step.
func fcBehavior() *autoscalingv2.HorizontalPodAutoscalerBehavior {
	return framework.QuickBehavior(fcDownWindow, autoscalingv2.HPAScalingPolicy{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 1})
}

// fcWorkload is one Deployment "model" of cold-starting simulators in its
// own namespace and its Service stand-in.
type fcWorkload struct {
	label, metricDesc string
	e                 *framework.Environment
	model             *framework.Model
}

func newFCWorkload(t *testing.T, e *framework.Environment, label string) *fcWorkload {
	t.Helper()
	d := simDeployment("model", fcInitial, fmt.Sprintf("--max-num-seqs=%d", fcSeqs), "--decode-time-base=20ms",
		"--load-time="+fcLoadTime.String())
	return &fcWorkload{label: label, e: e, model: framework.StartModel(t, e, e.Namespace(t), d)}
}

// waitScraped waits until the adapter serves the queue of every pod.
func (w *fcWorkload) waitScraped(t *testing.T) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		vals, err := w.e.ControlPlane.Metrics.PodValues(ctx, w.model.Namespace, metricQueue, w.model.Selector)
		if err != nil {
			noteErr(ctx, &last, err)
			return false, nil
		}
		last = formatValues(vals)
		return len(vals) == fcInitial, nil
	})
	if err != nil {
		t.Fatalf("%s: the adapter never served the queue of its %d pods (last: %s): %v", w.label, fcInitial, last, err)
	}
}

// askForecast asks for the forecast of the Deployment as the HPA does (no
// metric selector).
func (w *fcWorkload) askForecast() (float64, error) {
	v, err := w.e.ControlPlane.Metrics.Custom.NamespacedMetrics(w.model.Namespace).GetForObject(framework.DeploymentKind, "model", metricForecast, labels.Everything())
	if err != nil {
		return 0, err
	}
	return v.Value.AsApproximateFloat64(), nil
}

// fcChoice is one "Forecast chose" line of the adapter's log: the method
// auto chose and the burstiness it read.
type fcChoice struct{ method, burstiness string }

func (c fcChoice) String() string {
	if c.method == "" {
		return "none logged"
	}
	return fmt.Sprintf("%s (burstiness %s)", c.method, c.burstiness)
}

// fcChoiceLine matches the adapter's "Forecast chose" line (klog's text
// format); the workload is matched apart.
var fcChoiceLine = regexp.MustCompile(`"Forecast chose" .*\bmethod="([a-z]+)" burstiness=(\S+)`)

// lastChoice reads the adapter's log for auto's last choice for the
// workload's Deployment.
func (w *fcWorkload) lastChoice(t *testing.T) fcChoice {
	t.Helper()
	b, err := os.ReadFile(w.e.Adapter.Process.LogPath)
	if err != nil {
		t.Errorf("%s: read the adapter's log: %v", w.label, err)
		return fcChoice{}
	}
	workload := fmt.Sprintf(`workload="%s/model"`, w.model.Namespace)
	var c fcChoice
	for line := range strings.Lines(string(b)) {
		if !strings.Contains(line, workload) {
			continue
		}
		if m := fcChoiceLine.FindStringSubmatch(line); m != nil {
			c = fcChoice{method: m[1], burstiness: m[2]}
		}
	}
	return c
}

// demandAndForecast asks for the workload's demand per replica and its
// forecast per replica at one moment (the same replicas divide both) and
// says what they imply: the demand D and forecast F in requests, and the
// index of dispersion I with F = D + z·√(I·D) at the default z.
func (w *fcWorkload) demandAndForecast() string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pods, err := w.e.ControlPlane.Client.CoreV1().Pods(w.model.Namespace).List(ctx, metav1.ListOptions{LabelSelector: w.model.Selector.String()})
	if err != nil {
		return "pods: " + err.Error()
	}
	n := 0
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			n++
		}
	}
	d, err := w.e.ControlPlane.Metrics.Object(ctx, w.model.Namespace, framework.DeploymentKind, "model", metricDemandPerReplica)
	if err != nil {
		return "demand: " + err.Error()
	}
	f, err := w.askForecast()
	if err != nil {
		return "forecast: " + err.Error()
	}
	perD := d.Value.AsApproximateFloat64()
	D, F := perD*float64(n), f*float64(n)
	implied := "-"
	if D > 0 {
		h := (F - D) / fcZ
		implied = fmt.Sprintf("%.1f", h*h/D)
	}
	return fmt.Sprintf("%d replicas (Ready + starting), demand %.2f/replica (D %.1f), forecast %.2f/replica (F %.1f), implied I %s",
		n, perD, D, f, F, implied)
}

// checkAbsentBeforeHPA: with no history yet, the forecast is a 404 whose
// message says how much history exists and how much is needed.
func (w *fcWorkload) checkAbsentBeforeHPA(t *testing.T) {
	t.Helper()
	v, err := w.askForecast()
	if err == nil {
		t.Fatalf("%s: the forecast was served (%g) before any history could exist", w.label, v)
	}
	var status apierrors.APIStatus
	if !apierrors.IsNotFound(err) || !errors.As(err, &status) {
		t.Fatalf("%s: the forecast without history: want a 404, got %v", w.label, err)
	}
	msg := status.Status().Message
	t.Logf("%s: the forecast before the HPA exists: 404 %q", w.label, msg)
	if !strings.Contains(msg, "history") || !strings.Contains(msg, "at least 3") {
		t.Errorf("%s: the forecast's 404 does not say how much history it has and needs (at least 3 samples): %q", w.label, msg)
	}
}

// checkHoldsWhileAbsent follows the recipe's new HPA until it reads the
// forecast: meanwhile its status must show the metric's failure with the
// adapter's reason, and neither its desiredReplicas nor the Deployment's
// replicas may change.
func (w *fcWorkload) checkHoldsWhileAbsent(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var seen []fcState
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		s := w.read(ctx)
		if len(seen) == 0 || s.String() != seen[len(seen)-1].String() {
			seen = append(seen, s)
		}
		return s.hasForecast(), nil
	})
	var b strings.Builder
	for _, s := range seen {
		b.WriteString("\n  " + s.String())
	}
	t.Logf("%s: the HPA's status until it read the forecast:%s", w.label, b.String())
	if err != nil {
		t.Fatalf("%s: the HPA never read the forecast: %v", w.label, err)
	}
	sawFailure := false
	for i, s := range seen[:len(seen)-1] {
		if s.Active == string(corev1.ConditionFalse) && strings.Contains(s.Message, metricForecast) && strings.Contains(s.Message, "history") {
			sawFailure = true
		}
		// The controller scales the Deployment before it writes the HPA's
		// status, so a read between the two shows the new spec beside the
		// old status. Such a state is the scale of the sync whose status
		// comes next; that status, not this state, says which metrics it read.
		inFlight := s.Spec != s.Desired && seen[i+1].Desired == s.Spec
		if s.Spec != fcInitial && !inFlight {
			t.Errorf("%s: the Deployment went to %d replicas while the forecast was absent (from %d)", w.label, s.Spec, fcInitial)
		}
		if i > 0 && s.Desired != seen[i-1].Desired {
			t.Errorf("%s: the HPA's desiredReplicas changed from %d to %d while the forecast was absent", w.label, seen[i-1].Desired, s.Desired)
		}
	}
	if !sawFailure {
		t.Errorf("%s: before the HPA read the forecast, its status never showed the metric's failure with the adapter's reason (ScalingActive False, a message naming %s and its history)", w.label, metricForecast)
	}
}

// fcState is one workload's Deployment and HPA at one moment, with the two
// values the HPAs read (NaN where not read).
type fcState struct {
	framework.ScaleState
	forecast, queue float64
}

func newFCState(s framework.ScaleState) fcState {
	return fcState{ScaleState: s, forecast: s.Value(metricForecast), queue: s.Value(metricQueue)}
}

func (s fcState) hasForecast() bool { return !math.IsNaN(s.forecast) }

func (s fcState) String() string {
	return fmt.Sprintf("spec %d ready %d desired %d forecast %s queue %s ScalingActive %s %s: %s",
		s.Spec, s.Ready, s.Desired, fcValue(s.forecast), fcValue(s.queue), s.Active, s.Reason, s.Message)
}

func (w *fcWorkload) read(ctx context.Context) fcState { return newFCState(w.model.Scale(ctx)) }

type fcRow struct {
	at     time.Duration // since the baseline phase began
	states []fcState
}

// fcSample reads every workload at once.
func fcSample(ws []*fcWorkload, at time.Duration) (fcRow, framework.ScaleRow) {
	models := make([]*framework.Model, len(ws))
	for i, w := range ws {
		models[i] = w.model
	}
	sr := framework.SampleScale(models, at, 4*fcSampleEvery)
	row := fcRow{at: sr.At, states: make([]fcState, len(ws))}
	for i, s := range sr.States {
		row.states[i] = newFCState(s)
	}
	return row, sr
}

// fcEnoughAfter says when workload i first had fcNeeded Ready replicas at
// or after from.
func fcEnoughAfter(rows []fcRow, i int, from time.Duration) string {
	for _, r := range rows {
		if r.at >= from && r.states[i].Ready >= fcNeeded {
			return fmt.Sprintf("%d Ready after %.1f s", fcNeeded, (r.at - from).Seconds())
		}
	}
	return fmt.Sprintf("never %d Ready", fcNeeded)
}

func fcSawValue(rows []fcRow, i int) bool {
	for _, r := range rows {
		s := r.states[i]
		if s.Active == string(corev1.ConditionTrue) && !math.IsNaN(s.queue) {
			return true
		}
	}
	return false
}

func fcValue(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.2f", v)
}

func logFCTable(t *testing.T, ws []*fcWorkload, rows []fcRow) {
	t.Helper()
	var b strings.Builder
	head := fmt.Sprintf("%4s %5s %7s %8s %6s %-6s", "spec", "ready", "desired", "forecast", "queue", "active")
	fmt.Fprintf(&b, "\n%6s", "")
	for _, w := range ws {
		fmt.Fprintf(&b, " | %-*s", len(head), w.label)
	}
	fmt.Fprintf(&b, "\n%6s", "t (s)")
	for range ws {
		fmt.Fprintf(&b, " | %s", head)
	}
	b.WriteByte('\n')
	for _, r := range rows {
		fmt.Fprintf(&b, "%6.1f", r.at.Seconds())
		for _, s := range r.states {
			fmt.Fprintf(&b, " | %4d %5d %7d %8s %6s %-6s", s.Spec, s.Ready, s.Desired, fcValue(s.forecast), fcValue(s.queue), s.Active)
		}
		b.WriteByte('\n')
	}
	t.Log(b.String())
}

func logFCBurstStarts(t *testing.T, ws []*fcWorkload, starts []fcRow, diags []string, choices []fcChoice) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "at each burst start (%d Ready needed):", fcNeeded)
	for k, r := range starts {
		if k < len(diags) {
			fmt.Fprintf(&b, "\n  burst %d at %5.1f s  recipe: %s", k+1, r.at.Seconds(), diags[k])
		}
		if k < len(choices) {
			fmt.Fprintf(&b, "\n  burst %d at %5.1f s  recipe: auto's last choice %s", k+1, r.at.Seconds(), choices[k])
		}
		for i, w := range ws {
			s := r.states[i]
			fmt.Fprintf(&b, "\n  burst %d at %5.1f s  %-10s ready %d spec %d desired %d  forecast/replica %s  queue/pod %s  ScalingActive %s %s",
				k+1, r.at.Seconds(), w.label, s.Ready, s.Spec, s.Desired, fcValue(s.forecast), fcValue(s.queue), s.Active, s.Reason)
		}
	}
	t.Log(b.String())
}
