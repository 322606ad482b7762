// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package capacity

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/forecast"
)

// MetricDemandForecast is the adapter's anticipating signal: the demand
// (requests waiting plus running) the workload is forecast to hold within
// one model-load time, per replica (Ready plus starting), served as an
// Object metric on a Deployment or StatefulSet.
const MetricDemandForecast = catalog.DemandForecastPerReplica

// The workload kinds a recipe can scale.
const (
	KindDeployment  = "Deployment"
	KindStatefulSet = "StatefulSet"
)

// ForecastMethodLabel is the metric selector label that picks the forecast
// method (one of forecast.Methods); without it the adapter's default applies.
const ForecastMethodLabel = catalog.ForecastMethodLabel

// Defaults of the recipe's options, applied to their zero values.
const (
	DefaultModelLoadTime = 60 * time.Second
	// DefaultScalerAddress is the KEDA scaler port of the chart's default
	// release (docs/keda.md).
	DefaultScalerAddress = "inference-metrics-adapter.inference-metrics-adapter.svc:9443"
	// TriggerAuthentication is the ClusterTriggerAuthentication docs/keda.md sets up.
	TriggerAuthentication = "inference-metrics-adapter"
)

const (
	// minScaleDownWindow is the floor of the scale-down stabilization
	// window: the HPA's default, which the shootout's fleets already needed
	// between the code trace's bursts.
	minScaleDownWindow = 300 * time.Second
	// maxModelLoadTime keeps the window (twice the load time) within the
	// HPA's limit of 3600 s.
	maxModelLoadTime = 30 * time.Minute
	// scaleUpPeriod is the period of the scale-up policies: one HPA sync.
	scaleUpPeriod = 15
	// minGuardQueue is the lowest target of the queue guard.
	minGuardQueue = 1.0
)

// Recipe is the whole autoscaler derived from a measurement: the
// anticipating signal, a fast guard, the replica bounds and the behavior,
// as an autoscaling/v2 HPA and as a KEDA ScaledObject (docs/capacity.md#the-recipe).
type Recipe struct {
	// Kind and Name of the workload scaled (the scaleTargetRef and the
	// forecast's describedObject).
	Kind string `json:"kind"`
	Name string `json:"name"`
	// CapacityStep is the index of the step the targets come from.
	CapacityStep int `json:"capacityStep"`
	// ForecastMetric is an Object metric with a Value target: the requests
	// (waiting + running) one replica held at SLO capacity.
	ForecastMetric   string  `json:"forecastMetric"`
	ForecastMethod   string  `json:"forecastMethod,omitempty"`
	ForecastTarget   float64 `json:"forecastTarget"`
	ForecastQuantity string  `json:"forecastQuantity"`
	// GuardMetric is a Pods metric with an AverageValue target: the queue
	// one replica showed at SLO capacity, at least 1.
	GuardMetric   string  `json:"guardMetric"`
	GuardTarget   float64 `json:"guardTarget"`
	GuardQuantity string  `json:"guardQuantity"`
	MinReplicas   int     `json:"minReplicas"`
	MaxReplicas   int     `json:"maxReplicas"`
	// ScaleDownWindowSeconds is the scale-down stabilization window.
	ScaleDownWindowSeconds int `json:"scaleDownWindowSeconds"`
	// Reasons say where each piece comes from, in the order of the manifest.
	Reasons []string `json:"reasons"`
	// HPA is an autoscaling/v2 HorizontalPodAutoscaler in YAML;
	// ScaledObject the same recipe as a KEDA ScaledObject.
	HPA          string `json:"hpa"`
	ScaledObject string `json:"scaledObject"`
}

// ValidateRecipe lists every problem with the recipe's options at once.
// Zero values take the defaults.
func (o HPAOptions) ValidateRecipe() error {
	var errs []error
	if o.Kind != "" && o.Kind != KindDeployment && o.Kind != KindStatefulSet {
		errs = append(errs, fmt.Errorf("workload kind must be %s or %s, got %q", KindDeployment, KindStatefulSet, o.Kind))
	}
	if o.ModelLoadTime < 0 || o.ModelLoadTime > maxModelLoadTime {
		errs = append(errs, fmt.Errorf("model-load-time must be more than 0 and at most %s (the scale-down window is twice it, and an HPA's window is at most 3600s), got %s",
			maxModelLoadTime, o.ModelLoadTime))
	}
	if o.Method != "" {
		if _, err := forecast.ParseMethod(o.Method); err != nil {
			var names []string
			for _, m := range forecast.Methods() {
				names = append(names, string(m))
			}
			errs = append(errs, fmt.Errorf("forecast-method must be empty (the adapter's default) or one of %s, got %q", strings.Join(names, ", "), o.Method))
		}
	}
	if strings.ContainsAny(o.ScalerAddress, " \t\r\n\"'#") {
		errs = append(errs, fmt.Errorf("keda-scaler-address must be HOST:PORT, got %q", o.ScalerAddress))
	}
	return errors.Join(errs...)
}

// NewRecipe derives the whole HPA from the capacity step. It fails when
// there is no capacity, the server's signals were not measured there, or
// the options are invalid.
func NewRecipe(steps []Step, a Analysis, o HPAOptions) (*Recipe, error) {
	if err := o.ValidateRecipe(); err != nil {
		return nil, err
	}
	if !a.Found {
		return nil, fmt.Errorf("no recipe: no step met the SLOs")
	}
	s := steps[a.CapacityStep]
	if s.Server.Queue == nil || s.Server.Batch == nil {
		return nil, fmt.Errorf("no recipe: the server's queue and batch size were not measured at the capacity step (is --metrics-url right?)")
	}
	kind := o.Kind
	if kind == "" {
		kind = KindDeployment
	}
	load := o.ModelLoadTime
	if load == 0 {
		load = DefaultModelLoadTime
	}
	queue, batch := *s.Server.Queue, *s.Server.Batch
	demand := queue + batch
	demandMilli := int64(math.Floor(demand * 1000))
	if demandMilli < 1 {
		return nil, fmt.Errorf("no recipe: requests waiting plus running at the capacity step were %.3g, too small for a target (run with a plan that reaches higher rates)", demand)
	}
	guard := max(queue, minGuardQueue)
	guardMilli := int64(math.Floor(guard * 1000))
	r := &Recipe{
		Kind: kind, Name: o.Name, CapacityStep: s.Index,
		ForecastMetric: MetricDemandForecast, ForecastMethod: o.Method,
		ForecastTarget: float64(demandMilli) / 1000, ForecastQuantity: decimal(float64(demandMilli) / 1000),
		GuardMetric: MetricQueue, GuardTarget: float64(guardMilli) / 1000, GuardQuantity: decimal(float64(guardMilli) / 1000),
		MinReplicas: o.MinReplicas, MaxReplicas: o.MaxReplicas,
	}
	planned := s.Offered * (1 - o.Margin)
	if o.PeakRate > 0 && planned > 0 {
		r.MaxReplicas = max(o.MinReplicas, int(min(math.Ceil(o.PeakRate/planned), math.MaxInt32)))
	}
	window := max(minScaleDownWindow, 2*load)
	r.ScaleDownWindowSeconds = int(math.Ceil(window.Seconds()))

	where := fmt.Sprintf("step %d at %.4g req/s, the capacity", s.Index, s.Offered)
	method := "the adapter's default method (set one with --forecast-method)"
	if o.Method != "" {
		method = fmt.Sprintf("method %s (selector label %s=%s)", o.Method, ForecastMethodLabel, o.Method)
	}
	r.Reasons = []string{
		fmt.Sprintf("capacity: %.4g req/s per replica, the highest offered rate at which every step up to it met the SLOs (step %d)", s.Offered, s.Index),
		fmt.Sprintf("forecast: %s, an Object metric on the %s %q with a Value target of %s requests per replica = queue %.3g + batch %.3g, "+
			"the requests waiting plus running one replica held at SLO capacity (means over the window of %s); "+
			"the HPA asks for ceil(Ready × forecast ÷ target) replicas, so each is sized to hold what it held at capacity once the forecast demand arrives, "+
			"and replicas still loading count as replicas on the way; no margin on it: the forecast's own headroom is the margin; %s",
			MetricDemandForecast, kind, o.Name, r.ForecastQuantity, queue, batch, where, method),
	}
	if queue >= minGuardQueue {
		r.Reasons = append(r.Reasons, fmt.Sprintf("guard: %s, a Pods metric with an AverageValue target of %s per pod = the queue one replica showed at SLO capacity (mean over the window of %s); "+
			"a longer queue means the replicas are past capacity, which the forecast missed: the HPA takes the larger replica count of its metrics, so the guard adds replicas within one sync",
			MetricQueue, r.GuardQuantity, where))
	} else {
		r.Reasons = append(r.Reasons, fmt.Sprintf("guard: %s, a Pods metric with an AverageValue target of %s per pod: the queue at capacity was %.3g per pod (mean over the window of %s), under %.0f, "+
			"and a target below one waiting request would fire on requests that wait a single engine step; "+
			"a longer queue means the replicas are past capacity, which the forecast missed: the HPA takes the larger replica count of its metrics, so the guard adds replicas within one sync",
			MetricQueue, r.GuardQuantity, queue, where, minGuardQueue))
	}
	r.Reasons = append(r.Reasons, "while the forecast is absent (its history too short, e.g. right after an adapter restart, or no pod Ready) the HPA does not scale down, since one of its metrics is missing; the guard can still scale up")
	if o.MinReplicas == 1 {
		r.Reasons = append(r.Reasons, "minReplicas: 1 (--min-replicas): the forecast needs a Ready pod to measure demand and an HPA cannot go to 0 on its own; "+
			"raise it to what your quietest hour needs if the first burst after a quiet spell must not wait for a model load (to scale to zero see docs/scale-to-zero.md)")
	} else {
		r.Reasons = append(r.Reasons, fmt.Sprintf("minReplicas: %d as given with --min-replicas", o.MinReplicas))
	}
	if o.PeakRate > 0 {
		r.Reasons = append(r.Reasons, fmt.Sprintf("maxReplicas: %d = ceil(peak %.4g req/s ÷ planning rate %.4g req/s, capacity × (1 - margin %.2g))", r.MaxReplicas, o.PeakRate, planned, o.Margin))
	} else {
		r.Reasons = append(r.Reasons, fmt.Sprintf("maxReplicas: %d as given with --max-replicas; with --peak-rate it is derived from the planning rate", r.MaxReplicas))
	}
	r.Reasons = append(r.Reasons,
		fmt.Sprintf("scale up: no stabilization window, and per %d s (one HPA sync) double the replicas or add 4, whichever is more: a burst the forecast saw coming must not wait, and a model load already delays every replica added", scaleUpPeriod),
		fmt.Sprintf("scale down: a stabilization window of %d s = max(%.0f s, 2 × model load %s): the HPA keeps the highest recommendation of the window, so a replica stays through one model load plus as much again "+
			"(a replica removed takes a model load to come back, and the forecast and the queue fall to 0 between bursts), and never less than the HPA's default %.0f s; then at most half the replicas per minute",
			r.ScaleDownWindowSeconds, minScaleDownWindow.Seconds(), load, minScaleDownWindow.Seconds()),
	)
	r.HPA = r.hpaManifest(o.Namespace)
	address := o.ScalerAddress
	if address == "" {
		address = DefaultScalerAddress
	}
	r.ScaledObject = r.scaledObjectManifest(o.Namespace, address, o.Method)
	return r, nil
}

// behaviorYAML is the HPA's behavior, indented by indent spaces.
func (r *Recipe) behaviorYAML(indent int) string {
	b := fmt.Sprintf(`behavior:
  scaleUp:
    stabilizationWindowSeconds: 0
    selectPolicy: Max
    policies:
    - type: Percent
      value: 100
      periodSeconds: %d
    - type: Pods
      value: 4
      periodSeconds: %d
  scaleDown:
    stabilizationWindowSeconds: %d
    selectPolicy: Max
    policies:
    - type: Percent
      value: 50
      periodSeconds: 60
`, scaleUpPeriod, scaleUpPeriod, r.ScaleDownWindowSeconds)
	pad := strings.Repeat(" ", indent)
	lines := strings.SplitAfter(strings.TrimSuffix(b, "\n"), "\n")
	return pad + strings.Join(lines, pad) + "\n"
}

func (r *Recipe) header(b *strings.Builder, what string) {
	fmt.Fprintf(b, "# Recommended by `capacity` (%s): %s Value %s per replica, guarded by %s %s per pod\n",
		what, r.ForecastMetric, r.ForecastQuantity, r.GuardMetric, r.GuardQuantity)
	for _, e := range r.Reasons {
		fmt.Fprintf(b, "# - %s\n", e)
	}
}

func (r *Recipe) hpaManifest(namespace string) string {
	var b strings.Builder
	r.header(&b, "HPA")
	b.WriteString("apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata:\n")
	fmt.Fprintf(&b, "  name: %s\n", strconv.Quote(r.Name))
	if namespace != "" {
		fmt.Fprintf(&b, "  namespace: %s\n", strconv.Quote(namespace))
	}
	selector := ""
	if r.ForecastMethod != "" {
		selector = fmt.Sprintf("\n        selector:\n          matchLabels:\n            %s: %s", ForecastMethodLabel, r.ForecastMethod)
	}
	fmt.Fprintf(&b, `spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: %s
    name: %s
  minReplicas: %d
  maxReplicas: %d
  metrics:
  - type: Object
    object:
      describedObject:
        apiVersion: apps/v1
        kind: %s
        name: %s
      metric:
        name: %s%s
      target:
        type: Value
        value: %s
  - type: Pods
    pods:
      metric:
        name: %s
      target:
        type: AverageValue
        averageValue: %s
`, r.Kind, strconv.Quote(r.Name), r.MinReplicas, r.MaxReplicas, r.Kind, strconv.Quote(r.Name), r.ForecastMetric, selector,
		strconv.Quote(r.ForecastQuantity), r.GuardMetric, strconv.Quote(r.GuardQuantity))
	b.WriteString(r.behaviorYAML(2))
	return b.String()
}

func (r *Recipe) scaledObjectManifest(namespace, address, method string) string {
	var b strings.Builder
	r.header(&b, "KEDA")
	b.WriteString("# - KEDA: the triggers read the adapter's KEDA external scaler (docs/keda.md); no fallback: while a trigger fails, KEDA's HPA holds the replicas as an HPA does with a metric missing\n")
	if method != "" {
		fmt.Fprintf(&b, "# - KEDA: the scaler's metadata has no key for the forecast method: this trigger reads the adapter's default method, not %s\n", method)
	}
	b.WriteString("apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata:\n")
	fmt.Fprintf(&b, "  name: %s\n", strconv.Quote(r.Name))
	if namespace != "" {
		fmt.Fprintf(&b, "  namespace: %s\n", strconv.Quote(namespace))
	}
	workloadKey := "deployment"
	if r.Kind == KindStatefulSet {
		workloadKey = "statefulSet"
	}
	fmt.Fprintf(&b, `spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: %s
    name: %s
  minReplicaCount: %d
  maxReplicaCount: %d
  advanced:
    horizontalPodAutoscalerConfig:
`, r.Kind, strconv.Quote(r.Name), r.MinReplicas, r.MaxReplicas)
	b.WriteString(r.behaviorYAML(6))
	b.WriteString("  triggers:\n")
	for _, t := range []struct{ metricType, metric, target string }{
		{"Value", r.ForecastMetric, r.ForecastQuantity},
		{"AverageValue", r.GuardMetric, r.GuardQuantity},
	} {
		fmt.Fprintf(&b, `  - type: external
    metricType: %s
    metadata:
      scalerAddress: %s
      enableTLS: "true"
      metricName: %s
      targetValue: %s
      %s: %s
    authenticationRef:
      kind: ClusterTriggerAuthentication
      name: %s
`, t.metricType, strconv.Quote(address), t.metric, strconv.Quote(t.target), workloadKey, strconv.Quote(r.Name), TriggerAuthentication)
	}
	return b.String()
}

// decimal writes a target in thousandths as a plain number ("2.983"),
// which is both a Kubernetes quantity and what KEDA's targetValue reads.
func decimal(v float64) string {
	return strconv.FormatFloat(v, 'f', -1, 64)
}
