// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package provider

import (
	"context"
	"fmt"
	"math"
	"time"

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
	// MaxWorkloads is the most histories kept.
	MaxWorkloads int
}

// DefaultMaxForecastWorkloads is the default of ForecastConfig.MaxWorkloads.
const DefaultMaxForecastWorkloads = 10000

// DefaultForecastConfig is the forecast's configuration by default.
func DefaultForecastConfig() ForecastConfig {
	return ForecastConfig{
		Method:       forecast.Staffing,
		Window:       forecast.DefaultWindow,
		Z:            forecast.DefaultZ,
		Alpha:        forecast.DefaultAlpha,
		Beta:         forecast.DefaultBeta,
		MaxWorkloads: DefaultMaxForecastWorkloads,
	}
}

// newHistories returns the forecast's histories; a sample closer than half
// a scrape interval to the previous one is skipped (the values change at
// each scrape).
func newHistories(cfg Config) *forecast.Histories {
	return forecast.NewHistories(forecast.Config{Window: cfg.Forecast.Window, MinSpacing: cfg.Window / 2, MaxWorkloads: cfg.Forecast.MaxWorkloads})
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

// forecastSelector splits a forecast question's metric selector into the
// method it names (the configured one when none) and the selector left
// (model and role), which keys the history. Keys other than method,
// model_name, model and role, and a method that is not one value of the
// estimators, are a 400 naming them.
func (p *Provider) forecastSelector(metricSelector labels.Selector) (forecast.Method, labels.Selector, error) {
	method := p.cfg.Forecast.Method
	if metricSelector == nil || metricSelector.Empty() {
		return method, nil, nil
	}
	reqs, _ := metricSelector.Requirements()
	model := labels.NewSelector()
	for _, r := range reqs {
		switch r.Key() {
		case catalog.ForecastMethodLabel:
			vals := r.Values().List()
			op := r.Operator()
			if (op != selection.Equals && op != selection.DoubleEquals && op != selection.In) || len(vals) != 1 {
				return "", nil, badRequest(fmt.Sprintf("%s: the metric selector's %q must name one method (%s=envelope, holt or staffing), got %q", catalog.DemandForecastPerReplica, catalog.ForecastMethodLabel, catalog.ForecastMethodLabel, r.String()))
			}
			m, err := forecast.ParseMethod(vals[0])
			if err != nil {
				return "", nil, badRequest(fmt.Sprintf("%s: the metric selector's %s: %v", catalog.DemandForecastPerReplica, catalog.ForecastMethodLabel, err))
			}
			method = m
		case "model_name", "model", catalog.RoleSelectorLabel:
			// A role picks pods (role.go), and keys its own history.
			model = model.Add(r)
		default:
			return "", nil, badRequest(fmt.Sprintf("%s: the metric selector's key %q is not read: it takes %s (envelope, holt or staffing), model_name and %s", catalog.DemandForecastPerReplica, r.Key(), catalog.ForecastMethodLabel, catalog.RoleSelectorLabel))
		}
	}
	if model.Empty() {
		return method, nil, nil
	}
	return method, model, nil
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
func (p *Provider) forecastValue(ctx context.Context, k kind, name types.NamespacedName, sel labels.Selector, method forecast.Method, model labels.Selector, info cmprovider.CustomMetricInfo, metricSelector labels.Selector, want bool) (*custom_metrics.MetricValue, error) {
	r, pods, why, err := p.workloadDemand(ctx, k, name, sel, modelMatcher(model), selectorKey(model), want)
	if err != nil {
		return nil, err
	}
	obj := name.Namespace + "/" + name.Name
	now := p.clock.Now()
	key := forecast.Key{Namespace: name.Namespace, Kind: kindName(k), Name: name.Name, Selector: selectorKey(model)}
	series := p.histories.Series(key, now)
	if why != "" {
		return nil, notFound(info, fmt.Sprintf("%s: the forecast needs the demand, which is unknown: %s; the history holds %d samples", obj, why, len(series)))
	}
	fc := p.cfg.Forecast
	params := forecast.Params{Method: method, Window: fc.Window, Horizon: p.forecastHorizon(pods), Z: fc.Z, Alpha: fc.Alpha, Beta: fc.Beta}
	res, err := forecast.Estimate(series, now, params)
	if err != nil {
		return nil, notFound(info, fmt.Sprintf("%s: %s forecast over a horizon of %s: %v", obj, method, params.Horizon, err))
	}
	if res.Note != "" {
		klog.FromContext(ctx).V(4).Info("Forecast fell back", "workload", obj, "kind", kindName(k), "method", method, "reason", res.Note)
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
	window := max(1, int64(math.Ceil(fc.Window.Seconds())))
	mv.WindowSeconds = &window
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
	method, model, err := p.forecastSelector(metricSelector)
	if err != nil {
		return nil, err
	}
	if name.Namespace == "" {
		return nil, badRequest(fmt.Sprintf("%s %q: ask within a namespace", info.GroupResource.String(), name.Name))
	}
	sel, err := p.objectSelector(k, name)
	if err != nil {
		return nil, notFound(info, err.Error())
	}
	return p.forecastValue(ctx, k, name, sel, method, model, info, metricSelector, true)
}

// forecastBySelector answers catalog.DemandForecastPerReplica for every
// workload matching selector in namespace; without a selector it reads only
// what is already scraped.
func (p *Provider) forecastBySelector(ctx context.Context, namespace string, selector labels.Selector, info cmprovider.CustomMetricInfo, metricSelector labels.Selector) (*custom_metrics.MetricValueList, error) {
	k, err := forecastKind(info)
	if err != nil {
		return nil, err
	}
	method, model, err := p.forecastSelector(metricSelector)
	if err != nil {
		return nil, err
	}
	if namespace == "" {
		return nil, badRequest(fmt.Sprintf("%s across all namespaces are not served: ask within a namespace", info.GroupResource.String()))
	}
	if selector == nil {
		selector = labels.Everything()
	}
	return p.eachWorkload(k, namespace, selector, info, func(name types.NamespacedName, sel labels.Selector) (*custom_metrics.MetricValue, error) {
		return p.forecastValue(ctx, k, name, sel, method, model, info, metricSelector, !selector.Empty())
	})
}
