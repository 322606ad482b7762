// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package provider

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/metrics/pkg/apis/custom_metrics"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/forecast"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/store"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/targets"
)

// ForecastConfig sets catalog.DemandForecastPerReplica's estimators and the
// bounds of its histories.
type ForecastConfig struct {
	// Method is the estimator used when the metric selector names none.
	Method forecast.Method
	// Window is the history the estimators read.
	Window time.Duration
	// Horizon is how far ahead; 0 is auto: the longest start-up time of
	// the workload's Ready pods, clamped to [scrape interval, 10m].
	Horizon time.Duration
	// Z is staffing's safety factor; Alpha and Beta holt's smoothing.
	Z, Alpha, Beta float64
	// Floor is the share, in [0, 1], of the largest demand of the last
	// FloorWindow below which the forecast does not fall (0: none), when
	// the metric selector sets none.
	Floor       float64
	FloorWindow time.Duration
	// RateFloor is the time in system the largest arrival rate of the last
	// FloorWindow is multiplied by for the forecast's rate floor (0: none),
	// when the metric selector sets none.
	RateFloor time.Duration
	// Bursty is the auto method's threshold on the arrivals' burstiness,
	// measured over the whole history (the longer of Window and
	// FloorWindow).
	Bursty float64
	// MaxWorkloads is the most histories kept.
	MaxWorkloads int
}

// DefaultMaxForecastWorkloads is the default of ForecastConfig.MaxWorkloads.
const DefaultMaxForecastWorkloads = 10000

// DefaultForecastConfig is the forecast's configuration by default.
func DefaultForecastConfig() ForecastConfig {
	return ForecastConfig{
		Method:       forecast.Auto,
		Window:       forecast.DefaultWindow,
		Z:            forecast.DefaultZ,
		Alpha:        forecast.DefaultAlpha,
		Beta:         forecast.DefaultBeta,
		FloorWindow:  forecast.DefaultFloorWindow,
		Bursty:       forecast.DefaultBursty,
		MaxWorkloads: DefaultMaxForecastWorkloads,
	}
}

// newForecastCounter is inference_metrics_adapter_forecasts_total: the
// forecasts made (answers computed, not those the answer cache kept), by
// the method asked (the default or the method= selector) and the
// estimator that made each, which for auto is the one it chose. Its
// series are the methods' own estimators and auto's two choices, set to 0
// from the start.
func newForecastCounter() *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "inference_metrics_adapter_forecasts_total",
		Help: "Forecasts of inference_demand_forecast_per_replica made (answers computed, not those the answer cache kept), by the method asked and the estimator that made each: for method auto, the one it chose (holt or staffing).",
	}, []string{"method", "estimator"})
	for _, m := range forecast.Methods() {
		if m == forecast.Auto {
			c.WithLabelValues(string(m), string(forecast.Holt))
			c.WithLabelValues(string(m), string(forecast.Staffing))
			continue
		}
		c.WithLabelValues(string(m), string(m))
	}
	return c
}

// newHistories returns the forecast's histories, spanning the longer of the
// forecast's window and the floor's; a sample closer than half a scrape
// interval to the previous one is skipped (the values change at each
// scrape).
func newHistories(cfg Config) *forecast.Histories {
	span := max(cfg.Forecast.Window, cfg.Forecast.FloorWindow)
	return forecast.NewHistories(forecast.Config{Window: span, MinSpacing: cfg.Window / 2, MaxWorkloads: cfg.Forecast.MaxWorkloads})
}

// selectorKey is a selector's string, "" for none.
func selectorKey(sel labels.Selector) string {
	if sel == nil {
		return ""
	}
	return sel.String()
}

// kindName is the kind in a history's key.
func kindName(k kind) string {
	switch k {
	case kindStatefulSet:
		return "statefulset"
	case kindLeaderWorkerSet:
		return "leaderworkerset"
	}
	return "deployment"
}

// recordDemand adds a workload's demand to its forecast history, with the
// completions rate summed over the pods (NaN when a Ready pod has none).
func (p *Provider) recordDemand(k kind, name types.NamespacedName, modelKey string, r replicaDemand, pods []*corev1.Pod, match store.ModelMatcher) {
	if p.histories == nil {
		return
	}
	completions := math.NaN()
	if agg := p.aggregatePods(runningPods(pods), catalog.RequestsPerSecond, match); agg.why.n == 0 && agg.counted > 0 {
		completions = agg.value
	}
	p.histories.Record(forecast.Key{Namespace: name.Namespace, Kind: kindName(k), Name: name.Name, Selector: modelKey},
		forecast.Sample{At: p.clock.Now(), Demand: r.demand, Completions: completions})
}

// forecastQuestion is what a forecast question's metric selector asks: the
// estimator and its settings (the adapter's where the selector names none)
// and the model selector left (model and role, nil for none), which keys
// the history. The settings do not key it: every question reads the same
// samples.
type forecastQuestion struct {
	method forecast.Method
	z      float64       // staffing's (and auto's) safety factor
	window time.Duration // the span holt fits and staffing measures dispersion over
	floor  float64       // the share of the floor window's largest demand
	// rateFloor is the time in system the floor window's largest arrival
	// rate is multiplied by.
	rateFloor time.Duration
	model     labels.Selector
}

// maxForecastZ bounds the metric selector's z.
const maxForecastZ = 10

// forecastSelector reads a forecast question's metric selector: method, z
// (staffing and auto only), window (all but envelope; at most the
// adapter's --forecast-window, all the history holds), floor and ratefloor
// each once, the rest the model selector. Other keys, a key given other
// than as one value, a value out of range and a setting its method does
// not read are a 400 naming them.
func (p *Provider) forecastSelector(metricSelector labels.Selector) (forecastQuestion, error) {
	fc := p.cfg.Forecast
	q := forecastQuestion{method: fc.Method, z: fc.Z, window: fc.Window, floor: fc.Floor, rateFloor: fc.RateFloor}
	if metricSelector == nil || metricSelector.Empty() {
		return q, nil
	}
	reqs, _ := metricSelector.Requirements()
	model := labels.NewSelector()
	var zSet, windowSet bool
	for _, r := range reqs {
		switch r.Key() {
		case catalog.ForecastMethodLabel:
			v, ok := oneValue(r)
			if !ok {
				return q, badRequest(fmt.Sprintf("%s: the metric selector's %q must name one method (%s=envelope, holt, staffing or auto), got %q", catalog.DemandForecastPerReplica, catalog.ForecastMethodLabel, catalog.ForecastMethodLabel, r.String()))
			}
			m, err := forecast.ParseMethod(v)
			if err != nil {
				return q, badRequest(fmt.Sprintf("%s: the metric selector's %s: %v", catalog.DemandForecastPerReplica, catalog.ForecastMethodLabel, err))
			}
			q.method = m
		case catalog.ForecastZLabel:
			v, ok := oneValue(r)
			if !ok {
				return q, badRequest(fmt.Sprintf("%s: the metric selector's %q must name one number from 0 to %d (%s=1), got %q", catalog.DemandForecastPerReplica, catalog.ForecastZLabel, maxForecastZ, catalog.ForecastZLabel, r.String()))
			}
			z, err := parseZ(v)
			if err != nil {
				return q, badRequest(fmt.Sprintf("%s: the metric selector's %s %q: %v", catalog.DemandForecastPerReplica, catalog.ForecastZLabel, v, err))
			}
			q.z, zSet = z, true
		case catalog.ForecastWindowLabel:
			v, ok := oneValue(r)
			if !ok {
				return q, badRequest(fmt.Sprintf("%s: the metric selector's %q must name one duration above 0 and at most %s (%s=2m), got %q", catalog.DemandForecastPerReplica, catalog.ForecastWindowLabel, fc.Window, catalog.ForecastWindowLabel, r.String()))
			}
			w, err := time.ParseDuration(v)
			if err != nil || w <= 0 || w > fc.Window {
				return q, badRequest(fmt.Sprintf("%s: the metric selector's %s %q: want a duration above 0 and at most the adapter's --forecast-window, %s (the history holds no more), such as 2m or 90s", catalog.DemandForecastPerReplica, catalog.ForecastWindowLabel, v, fc.Window))
			}
			q.window, windowSet = w, true
		case catalog.ForecastFloorLabel:
			v, ok := oneValue(r)
			if !ok {
				return q, badRequest(fmt.Sprintf("%s: the metric selector's %q must name one number from 0 to 1 (%s=0.5), got %q", catalog.DemandForecastPerReplica, catalog.ForecastFloorLabel, catalog.ForecastFloorLabel, r.String()))
			}
			f, err := parseDecimal(v, 1)
			if err != nil {
				return q, badRequest(fmt.Sprintf("%s: the metric selector's %s %q: %v (the share of the largest demand of the last %s below which the forecast does not fall), such as 0.5", catalog.DemandForecastPerReplica, catalog.ForecastFloorLabel, v, err, fc.FloorWindow))
			}
			q.floor = f
		case catalog.ForecastRateFloorLabel:
			v, ok := oneValue(r)
			if !ok {
				return q, badRequest(fmt.Sprintf("%s: the metric selector's %q must name one duration from 0 to %s (%s=1500ms), got %q", catalog.DemandForecastPerReplica, catalog.ForecastRateFloorLabel, forecast.MaxRateFloor, catalog.ForecastRateFloorLabel, r.String()))
			}
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 || d > forecast.MaxRateFloor {
				return q, badRequest(fmt.Sprintf("%s: the metric selector's %s %q: want a duration from 0 to %s (the time a request spends in a replica at SLO capacity, which the largest arrival rate of the last %s is multiplied by), such as 1500ms or 1.5s", catalog.DemandForecastPerReplica, catalog.ForecastRateFloorLabel, v, forecast.MaxRateFloor, fc.FloorWindow))
			}
			q.rateFloor = d
		case "model_name", "model", catalog.RoleSelectorLabel:
			// A role picks pods (role.go), and keys its own history.
			model = model.Add(r)
		default:
			return q, badRequest(fmt.Sprintf("%s: the metric selector's key %q is not read: it takes %s (envelope, holt, staffing or auto), %s, %s, %s, %s, model_name and %s", catalog.DemandForecastPerReplica, r.Key(), catalog.ForecastMethodLabel, catalog.ForecastZLabel, catalog.ForecastWindowLabel, catalog.ForecastFloorLabel, catalog.ForecastRateFloorLabel, catalog.RoleSelectorLabel))
		}
	}
	if zSet && q.method != forecast.Staffing && q.method != forecast.Auto {
		return q, badRequest(fmt.Sprintf("%s: the metric selector's %s applies to %s=staffing and auto only, not %s", catalog.DemandForecastPerReplica, catalog.ForecastZLabel, catalog.ForecastMethodLabel, q.method))
	}
	if windowSet && q.method == forecast.Envelope {
		return q, badRequest(fmt.Sprintf("%s: the metric selector's %s applies to %s=holt, staffing and auto only, not envelope, which reads the horizon", catalog.DemandForecastPerReplica, catalog.ForecastWindowLabel, catalog.ForecastMethodLabel))
	}
	if !model.Empty() {
		q.model = model
	}
	return q, nil
}

// oneValue is the value of a requirement that names exactly one (=, == or
// in of one value).
func oneValue(r labels.Requirement) (string, bool) {
	vals := r.Values().List()
	op := r.Operator()
	if (op != selection.Equals && op != selection.DoubleEquals && op != selection.In) || len(vals) != 1 {
		return "", false
	}
	return vals[0], true
}

// parseZ reads a metric selector's z: a plain decimal (digits, at most one
// point) from 0 to maxForecastZ.
func parseZ(s string) (float64, error) {
	z, err := parseDecimal(s, maxForecastZ)
	if err != nil {
		return 0, fmt.Errorf("%w (staffing's safety factor), such as 1 or 0.5", err)
	}
	return z, nil
}

// parseDecimal reads a plain decimal (digits, at most one point) from 0 to
// most.
func parseDecimal(s string, most float64) (float64, error) {
	want := fmt.Errorf("want a decimal number from 0 to %g", most)
	if s == "" || strings.Count(s, ".") > 1 || strings.Trim(s, "0123456789.") != "" {
		return 0, want
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v > most {
		return 0, want
	}
	return v, nil
}

// forecastHorizon is the configured horizon, or auto: the longest start-up
// time (the Ready condition's last transition less the creation time) of
// the Ready pods, clamped to [scrape interval, 10m].
func (p *Provider) forecastHorizon(pods []*corev1.Pod) time.Duration {
	if p.cfg.Forecast.Horizon > 0 {
		return p.cfg.Forecast.Horizon
	}
	var longest time.Duration
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning || !targets.IsReady(pod) {
			continue
		}
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodReady && !c.LastTransitionTime.IsZero() && !pod.CreationTimestamp.IsZero() {
				longest = max(longest, c.LastTransitionTime.Sub(pod.CreationTimestamp.Time))
			}
		}
	}
	return forecast.AutoHorizon(longest, p.cfg.Window)
}

// forecastValue answers catalog.DemandForecastPerReplica for one workload:
// the forecast demand within the horizon over the Ready plus starting
// replicas. It is absent (404) when the demand is (every reason of
// demandPerReplicaValue) and while the history is too short.
func (p *Provider) forecastValue(ctx context.Context, k kind, name types.NamespacedName, sel labels.Selector, q forecastQuestion, info cmprovider.CustomMetricInfo, metricSelector labels.Selector, want bool) (*custom_metrics.MetricValue, error) {
	r, pods, why, err := p.workloadDemand(ctx, k, name, sel, modelMatcher(q.model), selectorKey(q.model), want)
	if err != nil {
		return nil, err
	}
	obj := name.Namespace + "/" + name.Name
	now := p.clock.Now()
	key := forecast.Key{Namespace: name.Namespace, Kind: kindName(k), Name: name.Name, Selector: selectorKey(q.model)}
	series := p.histories.Series(key, now)
	if why != "" {
		return nil, notFound(info, fmt.Sprintf("%s: the forecast needs the demand, which is unknown: %s; the history holds %d samples", obj, why, len(series)))
	}
	fc := p.cfg.Forecast
	params := forecast.Params{Method: q.method, Window: q.window, Horizon: p.forecastHorizon(pods), Z: q.z, Alpha: fc.Alpha, Beta: fc.Beta, Floor: q.floor, FloorWindow: fc.FloorWindow, RateFloor: q.rateFloor,
		Bursty: fc.Bursty, BurstWindow: max(fc.Window, fc.FloorWindow)}
	res, err := forecast.Estimate(series, now, params)
	if err != nil {
		return nil, notFound(info, fmt.Sprintf("%s: %s forecast over a horizon of %s: %v", obj, q.method, params.Horizon, err))
	}
	if res.Note != "" {
		klog.FromContext(ctx).V(4).Info("Forecast fell back", "workload", obj, "kind", kindName(k), "method", res.Method, "reason", res.Note)
	}
	if q.method == forecast.Auto {
		klog.FromContext(ctx).V(4).Info("Forecast chose", "workload", obj, "kind", kindName(k), "method", res.Method, "burstiness", res.Burstiness, "threshold", fc.Bursty, "burstWindow", params.BurstWindow)
	}
	if res.RateFloor > 0 && res.Forecast == res.RateFloor {
		klog.FromContext(ctx).V(4).Info("Forecast held at the rate floor", "workload", obj, "kind", kindName(k), "peakRate", res.PeakRate, "timeInSystem", params.RateFloor, "rateFloor", res.RateFloor, "floorWindow", params.FloorWindow)
	}
	v := res.Forecast / float64(r.replicas())
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return nil, outOfRange(info, obj, v)
	}
	mv, err := p.value(ctx, info, catalog.QueueSize, ref(k, name), v, r.oldest, metricSelector)
	if err != nil {
		return nil, err
	}
	mv.Metric.Name = catalog.DemandForecastPerReplica
	window := max(1, int64(math.Ceil(q.window.Seconds())))
	mv.WindowSeconds = &window
	p.forecasts.WithLabelValues(string(q.method), string(res.Method)).Inc()
	return &mv, nil
}

// forecastKind resolves the object kind of a forecast question:
// deployments and statefulsets only.
func forecastKind(info cmprovider.CustomMetricInfo) (kind, error) {
	k, ok := kindOf(info.GroupResource)
	if !ok || k == kindPod {
		return 0, notFound(info, fmt.Sprintf("%s is served for deployments and statefulsets and leaderworkersets (an HPA Object metric), not %s: it divides a workload's forecast demand by its Ready plus starting replicas", catalog.DemandForecastPerReplica, info.GroupResource.String()))
	}
	return k, nil
}

// forecastByName answers catalog.DemandForecastPerReplica for one named workload.
func (p *Provider) forecastByName(ctx context.Context, name types.NamespacedName, info cmprovider.CustomMetricInfo, metricSelector labels.Selector) (*custom_metrics.MetricValue, error) {
	k, err := forecastKind(info)
	if err != nil {
		return nil, err
	}
	q, err := p.forecastSelector(metricSelector)
	if err != nil {
		return nil, err
	}
	return p.workloadByName(k, name, info, func(name types.NamespacedName, sel labels.Selector, want bool) (*custom_metrics.MetricValue, error) {
		return p.forecastValue(ctx, k, name, sel, q, info, metricSelector, want)
	})
}

// forecastBySelector answers catalog.DemandForecastPerReplica for every
// workload matching selector in namespace; without a selector it reads only
// what is already scraped.
func (p *Provider) forecastBySelector(ctx context.Context, namespace string, selector labels.Selector, info cmprovider.CustomMetricInfo, metricSelector labels.Selector) (*custom_metrics.MetricValueList, error) {
	k, err := forecastKind(info)
	if err != nil {
		return nil, err
	}
	q, err := p.forecastSelector(metricSelector)
	if err != nil {
		return nil, err
	}
	return p.workloadsBySelector(k, namespace, selector, info, func(name types.NamespacedName, sel labels.Selector, want bool) (*custom_metrics.MetricValue, error) {
		return p.forecastValue(ctx, k, name, sel, q, info, metricSelector, want)
	})
}
