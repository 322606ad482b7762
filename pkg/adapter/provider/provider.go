// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Package provider answers the custom metrics API
// (custom.metrics.k8s.io) from memory: pods come from the informer cache,
// values from the store. It serves every signal of package catalog for pods,
// deployments and statefulsets, honours metric selectors on model_name (or
// Triton's model), refuses selectors longer than MaxSelectorLen, and
// answers 404 with the reason when there is no value: it never answers 0
// for what was not measured. Deployments and statefulsets also serve
// inference_demand_per_replica, their demand over their Ready plus starting
// replicas (coldstart.go); leaderworkersets, when watched, serve the same
// object metrics over their groups (lws.go). Pods, deployments and statefulsets also serve
// inference_lora_adapter_running and _waiting for the LoRA adapters a
// lora_name metric selector picks: per pod 1 or 0, per workload the number
// of its pods where a picked adapter runs or waits (lora.go). Services
// serve inference_front_door_pending_requests, the requests held by the
// Ready pods of their namespace annotated as their front door (frontdoor.go).
//
// A question with a label selector in a namespace (what the HPA asks), or
// about one object by name, becomes bounded demand (package targets). A
// pods question without a selector, or across all namespaces, creates no
// demand and scrapes nothing: it is answered from the pods that already have
// a scrape outcome. Deployments and statefulsets across all namespaces are
// refused (400). Values are served only when finite; a value too large for
// milli precision keeps its magnitude in a decimal-exponent quantity.
package provider

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/metrics/pkg/apis/custom_metrics"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	inf "gopkg.in/inf.v0"
	"k8s.io/utils/clock"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/answercache"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/escape"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/forecast"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/store"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/targets"
)

// Values looks up one signal of one pod.
type Values interface {
	Get(pod types.NamespacedName, sig catalog.Signal, match store.ModelMatcher, now time.Time, maxAge time.Duration) store.Sample
	// Scraped reports whether pod has any recorded scrape outcome.
	Scraped(pod types.NamespacedName) bool
}

// Demand is told which pods a question was about, so that they get scraped
// (targets.Tracker implements it).
type Demand interface {
	// Want records a selector question in a namespace about pods.
	Want(ctx context.Context, namespace string, selector labels.Selector, pods []*corev1.Pod)
	// WantPod records a question about one pod by name.
	WantPod(ctx context.Context, pod *corev1.Pod)
	// Shadowed reports whether a newer Running pod has pod's IP, and which.
	Shadowed(pod types.NamespacedName) (types.NamespacedName, bool)
}

// Listers gives the provider read access to the informer caches.
type Listers struct {
	Pods         PodLister
	Deployments  DeploymentLister
	StatefulSets StatefulSetLister
	// LeaderWorkerSets is nil when the adapter does not watch them (lws.go).
	LeaderWorkerSets LeaderWorkerSetLister
}

// PodLister reads pods of a namespace from a cache.
type PodLister interface {
	Pods(namespace string) corelisters.PodNamespaceLister
}

// DeploymentLister reads deployments of a namespace from a cache.
type DeploymentLister interface {
	Deployments(namespace string) appslisters.DeploymentNamespaceLister
}

// StatefulSetLister reads statefulsets of a namespace from a cache.
type StatefulSetLister interface {
	StatefulSets(namespace string) appslisters.StatefulSetNamespaceLister
}

// Config holds the provider's settings.
type Config struct {
	// MaxAge is the age past which a sample is stale and left out.
	MaxAge time.Duration
	// Window is reported as windowSeconds on every value: the scrape interval.
	Window time.Duration
	// SLOWindow is reported as windowSeconds on the latency percentiles.
	SLOWindow time.Duration
	// Latency records the questions about latency percentiles, which turn
	// on the parsing of the servers' latency histograms; nil records none.
	Latency *LatencyDemand
	// RoleLabel is the pod label a role=VALUE metric selector reads
	// (role.go); "" is DefaultRoleLabel.
	RoleLabel string
	// Forecast sets inference_demand_forecast_per_replica (forecast.go);
	// a zero ForecastConfig (no Method) is DefaultForecastConfig().
	Forecast ForecastConfig
	// Registerer takes the provider's counters (forecasts made, by method
	// and estimator); nil registers them nowhere.
	Registerer prometheus.Registerer
}

// Provider implements the custom metrics provider interface.
type Provider struct {
	cfg    Config
	list   Listers
	values Values
	demand Demand
	clock  clock.PassiveClock
	// histories are the workloads' demand histories the forecast reads.
	histories *forecast.Histories
	// forecasts counts the forecasts made, by method asked and estimator
	// used (newForecastCounter).
	forecasts *prometheus.CounterVec
}

var _ cmprovider.CustomMetricsProvider = (*Provider)(nil)

// New returns a Provider.
func New(cfg Config, list Listers, values Values, demand Demand, clk clock.PassiveClock) *Provider {
	if cfg.Forecast.Method == "" {
		cfg.Forecast = DefaultForecastConfig()
	}
	p := &Provider{cfg: cfg, list: list, values: values, demand: demand, clock: clk, histories: newHistories(cfg), forecasts: newForecastCounter()}
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(p.forecasts)
	}
	return p
}

type kind uint8

const (
	kindPod kind = iota
	kindDeployment
	kindStatefulSet
	kindLeaderWorkerSet // lws.go
)

var (
	podsGR         = schema.GroupResource{Resource: "pods"}
	deploymentsGR  = schema.GroupResource{Group: "apps", Resource: "deployments"}
	statefulsetsGR = schema.GroupResource{Group: "apps", Resource: "statefulsets"}
)

// kindOf accepts the spellings clients use: "pods", "deployments",
// "deployments.apps", singular forms.
func kindOf(gr schema.GroupResource) (kind, bool) {
	res := strings.TrimSuffix(strings.ToLower(gr.Resource), "s")
	switch {
	case res == "pod" && gr.Group == "":
		return kindPod, true
	case res == "deployment" && (gr.Group == "" || gr.Group == "apps"):
		return kindDeployment, true
	case res == "statefulset" && (gr.Group == "" || gr.Group == "apps"):
		return kindStatefulSet, true
	case res == "leaderworkerset" && (gr.Group == "" || gr.Group == LeaderWorkerSetGroup):
		return kindLeaderWorkerSet, true
	}
	return 0, false
}

// ListAllMetrics lists every signal for pods, deployments and statefulsets
// (and leaderworkersets, when watched).
func (p *Provider) ListAllMetrics() []cmprovider.CustomMetricInfo {
	var out []cmprovider.CustomMetricInfo
	workloads := []schema.GroupResource{deploymentsGR, statefulsetsGR}
	if p.list.LeaderWorkerSets != nil {
		workloads = append(workloads, leaderWorkerSetsGR)
	}
	for _, gr := range append([]schema.GroupResource{podsGR}, workloads...) {
		for _, s := range catalog.All() {
			out = append(out, cmprovider.CustomMetricInfo{GroupResource: gr, Namespaced: true, Metric: s.Name()})
		}
	}
	for _, gr := range append([]schema.GroupResource{servicesGR}, inferencePoolGRs...) {
		for _, m := range catalog.FrontDoorMetrics() {
			out = append(out, cmprovider.CustomMetricInfo{GroupResource: gr, Namespaced: true, Metric: m})
		}
	}
	for _, gr := range workloads {
		out = append(out, cmprovider.CustomMetricInfo{GroupResource: gr, Namespaced: true, Metric: catalog.DemandPerReplica})
		out = append(out, cmprovider.CustomMetricInfo{GroupResource: gr, Namespaced: true, Metric: catalog.DemandForecastPerReplica})
	}
	for _, gr := range append([]schema.GroupResource{podsGR}, workloads...) {
		for _, m := range catalog.LoRAAdapterMetrics() {
			out = append(out, cmprovider.CustomMetricInfo{GroupResource: gr, Namespaced: true, Metric: m})
		}
	}
	return out
}

// MaxSelectorLen is the longest label or metric selector (its String()) a
// question may carry; a longer one is refused (400). A reader chooses the
// selectors, and a URL may carry one of about 1 MiB: every pod of the
// namespace is matched against each of its requirements (40,000 of them
// took about a second over 1,000 pods), and every value of a custom-metrics
// answer echoes the metric selector, so a 1 MiB one over 1,000 pods would
// be an answer of 1 GiB to build, encode and keep. A workload's selector,
// and a metric selector naming a few models, are far shorter. It is the
// length past which a selector is not kept as demand either.
const MaxSelectorLen = targets.MaxSelectorLen

// checkSelectors refuses selectors longer than MaxSelectorLen.
func checkSelectors(metric string, selector, metricSelector labels.Selector) error {
	for _, s := range []struct {
		what string
		sel  labels.Selector
	}{{"label selector", selector}, {"metric selector", metricSelector}} {
		if s.sel == nil {
			continue
		}
		if n := len(s.sel.String()); n > MaxSelectorLen {
			return badRequest(fmt.Sprintf("%s: the %s is %d bytes long, more than the %d accepted", metric, s.what, n, MaxSelectorLen))
		}
	}
	return nil
}

// GetMetricByName returns the value of a metric for one pod, deployment or statefulset.
func (p *Provider) GetMetricByName(ctx context.Context, name types.NamespacedName, info cmprovider.CustomMetricInfo, metricSelector labels.Selector) (*custom_metrics.MetricValue, error) {
	if err := checkSelectors(info.Metric, nil, metricSelector); err != nil {
		return nil, err
	}
	p, err := p.forRole(info, metricSelector) // role.go: role=VALUE reads that role's pods only
	if err != nil {
		return nil, err
	}
	if isFrontDoorObject(info.GroupResource) || catalog.IsFrontDoorMetric(info.Metric) {
		return p.frontDoorByName(ctx, name, info, metricSelector) // frontdoor.go
	}
	if info.Metric == catalog.DemandPerReplica {
		return p.demandPerReplicaByName(ctx, name, info, metricSelector) // coldstart.go
	}
	if info.Metric == catalog.DemandForecastPerReplica {
		return p.forecastByName(ctx, name, info, metricSelector) // forecast.go
	}
	if isLoRAAdapterMetric(info.Metric) {
		return p.loraAdapterByName(ctx, name, info, metricSelector) // lora.go
	}
	sig, k, err := resolve(info)
	if err != nil {
		return nil, err
	}
	if name.Namespace == "" {
		return nil, badRequest(fmt.Sprintf("%s %q: ask within a namespace (/apis/custom.metrics.k8s.io/v1beta2/namespaces/NAMESPACE/%s/%s/%s)", info.GroupResource.String(), name.Name, info.GroupResource.String(), name.Name, info.Metric))
	}
	match := modelMatcher(metricSelector)
	if k == kindPod {
		return p.podByName(ctx, name, info, metricSelector, sig, func(pod *corev1.Pod, now time.Time) store.Sample {
			return p.podSample(pod, sig, match, now)
		})
	}
	sel, err := p.objectSelector(k, name)
	if err != nil {
		return nil, notFound(info, err.Error())
	}
	return p.objectValue(ctx, k, name, sel, sig, p.signalOver(sig, match), info, metricSelector, true)
}

// podReader reads one pod's value of a question at now.
type podReader func(pod *corev1.Pod, now time.Time) store.Sample

// podByName answers a question about one pod by name, read by read; sig
// gives the answer its window.
func (p *Provider) podByName(ctx context.Context, name types.NamespacedName, info cmprovider.CustomMetricInfo, metricSelector labels.Selector, sig catalog.Signal, read podReader) (*custom_metrics.MetricValue, error) {
	pod, err := p.list.Pods.Pods(name.Namespace).Get(name.Name)
	if err != nil {
		return nil, notFound(info, fmt.Sprintf("pod %s/%s: %v", name.Namespace, name.Name, err))
	}
	if newer, ok := p.shadowed(pod); ok {
		return nil, notFound(info, fmt.Sprintf("pod %s/%s: %s", name.Namespace, name.Name, shadowedMessage(newer)))
	}
	// The pod alone is wanted, and its histograms parsed for a
	// percentile: neither its siblings' nor, for a pod without labels,
	// its whole namespace's.
	p.cfg.Latency.Ask(sig, []*corev1.Pod{pod})
	if p.demand != nil {
		p.demand.WantPod(ctx, pod)
	}
	s := read(pod, p.clock.Now())
	if s.Status != store.OK {
		return nil, notFound(info, fmt.Sprintf("pod %s/%s: %s", name.Namespace, name.Name, describe(s)))
	}
	v, err := p.value(ctx, info, sig, ref(kindPod, name), s.Value, s.Time, metricSelector)
	if err != nil {
		return nil, err
	}
	return &v, nil
}

// GetMetricBySelector returns the metric for every pod (or object) matching selector in namespace.
func (p *Provider) GetMetricBySelector(ctx context.Context, namespace string, selector labels.Selector, info cmprovider.CustomMetricInfo, metricSelector labels.Selector) (*custom_metrics.MetricValueList, error) {
	if err := checkSelectors(info.Metric, selector, metricSelector); err != nil {
		return nil, err
	}
	p, err := p.forRole(info, metricSelector) // role.go: role=VALUE reads that role's pods only
	if err != nil {
		return nil, err
	}
	if isFrontDoorObject(info.GroupResource) || catalog.IsFrontDoorMetric(info.Metric) {
		return nil, frontDoorBySelector(namespace, info) // frontdoor.go
	}
	if info.Metric == catalog.DemandPerReplica {
		return p.demandPerReplicaBySelector(ctx, namespace, selector, info, metricSelector) // coldstart.go
	}
	if info.Metric == catalog.DemandForecastPerReplica {
		return p.forecastBySelector(ctx, namespace, selector, info, metricSelector) // forecast.go
	}
	if isLoRAAdapterMetric(info.Metric) {
		return p.loraAdapterBySelector(ctx, namespace, selector, info, metricSelector) // lora.go
	}
	sig, k, err := resolve(info)
	if err != nil {
		return nil, err
	}
	if selector == nil {
		selector = labels.Everything()
	}
	match := modelMatcher(metricSelector)
	if k != kindPod {
		if namespace == "" {
			return nil, badRequest(fmt.Sprintf("%s across all namespaces are not served: ask within a namespace (/apis/custom.metrics.k8s.io/v1beta2/namespaces/NAMESPACE/%s/*/%s)", info.GroupResource.String(), info.GroupResource.String(), info.Metric))
		}
		return p.objectsBySelector(ctx, k, namespace, selector, sig, p.signalOver(sig, match), info, metricSelector)
	}
	return p.podsBySelector(ctx, namespace, selector, info, metricSelector, sig, func(pod *corev1.Pod, now time.Time) store.Sample {
		return p.podSample(pod, sig, match, now)
	})
}

// podsBySelector answers a question about the pods matching selector in
// namespace, each read by read; sig gives the answers their window.
func (p *Provider) podsBySelector(ctx context.Context, namespace string, selector labels.Selector, info cmprovider.CustomMetricInfo, metricSelector labels.Selector, sig catalog.Signal, read podReader) (*custom_metrics.MetricValueList, error) {
	// Without a namespace or a selector the question is too wide to become
	// demand: answer from the pods that already have a scrape outcome.
	scrapedOnly := namespace == "" || selector.Empty()
	pods, err := p.list.Pods.Pods(namespace).List(selector)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("listing pods from cache: %w", err))
	}
	running := runningPods(pods)
	if scrapedOnly {
		running = p.scrapedPods(running)
		p.cfg.Latency.Ask(sig, running)
		if len(running) == 0 {
			return nil, notFound(info, fmt.Sprintf("no pod matching %q in %s has been scraped; a question without a namespace or a labelSelector only reads pods already scraped: ask within a namespace with a labelSelector (as the HPA does), e.g. ?labelSelector=app%%3Dmy-model", selector.String(), namespaceWords(namespace)))
		}
	} else {
		if len(running) == 0 {
			return nil, notFound(info, noPodsMessage(namespace, selector, len(pods)))
		}
		// Before the first scrape: it parses their histograms then.
		p.cfg.Latency.Ask(sig, running)
		p.want(ctx, namespace, selector, running)
	}
	now := p.clock.Now()
	items := make([]custom_metrics.MetricValue, 0, len(running))
	var why reasons
	for _, pod := range running {
		if newer, ok := p.shadowed(pod); ok {
			why.addText(pod, store.Absent, shadowedMessage(newer))
			continue
		}
		s := read(pod, now)
		if s.Status != store.OK {
			why.add(pod, s)
			continue
		}
		v, err := p.value(ctx, info, sig, ref(kindPod, types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}), s.Value, s.Time, metricSelector)
		if err != nil {
			why.addText(pod, store.Absent, err.Error())
			continue
		}
		items = append(items, v)
	}
	if len(items) == 0 {
		return nil, notFound(info, fmt.Sprintf("%d running pods match %q in %s, but none has a value: %s", len(running), selector.String(), namespaceWords(namespace), why.text(ctx)))
	}
	return &custom_metrics.MetricValueList{Items: items}, nil
}

func namespaceWords(namespace string) string {
	if namespace == "" {
		return "any namespace"
	}
	return fmt.Sprintf("namespace %q", namespace)
}

// scrapedPods returns the pods that have a scrape outcome.
func (p *Provider) scrapedPods(pods []*corev1.Pod) []*corev1.Pod {
	out := pods[:0:0]
	for _, pod := range pods {
		if p.values.Scraped(types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}) {
			out = append(out, pod)
		}
	}
	return out
}

func (p *Provider) want(ctx context.Context, namespace string, selector labels.Selector, pods []*corev1.Pod) {
	if p.demand != nil {
		p.demand.Want(ctx, namespace, selector, pods)
	}
}

// shadowed reports whether pod's IP belongs to a newer pod, whose page the
// IP serves: such a pod has no value of its own.
func (p *Provider) shadowed(pod *corev1.Pod) (types.NamespacedName, bool) {
	if p.demand == nil {
		return types.NamespacedName{}, false
	}
	return p.demand.Shadowed(types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name})
}

func shadowedMessage(newer types.NamespacedName) string {
	return fmt.Sprintf("its IP now belongs to the newer pod %s, so it has no page of its own", newer)
}

// podSample looks a signal up for one pod. inference_batch_fill falls back to
// batch size divided by the pod's max-batch-size annotation when the page
// does not report a fill itself.
func (p *Provider) podSample(pod *corev1.Pod, sig catalog.Signal, match store.ModelMatcher, now time.Time) store.Sample {
	key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	s := p.explainNotScraped(pod, p.values.Get(key, sig, match, now, p.cfg.MaxAge)) // notscraped.go
	if sig != catalog.BatchFill || s.Status != store.Absent {
		return s
	}
	max, ok := targets.MaxBatchSize(pod)
	if !ok {
		s.Detail += fmt.Sprintf("; set the pod annotation %s to derive it from the batch size", targets.AnnotationMaxBatchSize)
		return s
	}
	b := p.values.Get(key, catalog.BatchSize, match, now, p.cfg.MaxAge)
	if b.Status != store.OK {
		return b
	}
	b.Value /= max
	return b
}

func (p *Provider) objectSelector(k kind, name types.NamespacedName) (labels.Selector, error) {
	var ls *metav1.LabelSelector
	switch k {
	case kindDeployment:
		d, err := p.list.Deployments.Deployments(name.Namespace).Get(name.Name)
		if err != nil {
			return nil, fmt.Errorf("deployment %s/%s: %w", name.Namespace, name.Name, err)
		}
		ls = d.Spec.Selector
	case kindStatefulSet:
		s, err := p.list.StatefulSets.StatefulSets(name.Namespace).Get(name.Name)
		if err != nil {
			return nil, fmt.Errorf("statefulset %s/%s: %w", name.Namespace, name.Name, err)
		}
		ls = s.Spec.Selector
	case kindLeaderWorkerSet:
		return p.lwsServingSelector(name) // lws.go: the groups' serving pods
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return nil, fmt.Errorf("%s/%s has an invalid selector: %w", name.Namespace, name.Name, err)
	}
	if sel.Empty() {
		return nil, fmt.Errorf("%s/%s has an empty selector", name.Namespace, name.Name)
	}
	return sel, nil
}

// objectValue aggregates a question over the pods an object selects with
// over, by the rule of aggregatePods: every Ready pod must have a fresh
// value (a partial sum would understate the load, so a missing Ready pod
// makes the whole answer a 404 naming it), and a Running pod that is not
// Ready counts when it has a fresh value; sig gives the answer its window.
// With want false the question creates no demand.
func (p *Provider) objectValue(ctx context.Context, k kind, name types.NamespacedName, sel labels.Selector, sig catalog.Signal, over func(running []*corev1.Pod) aggregate, info cmprovider.CustomMetricInfo, metricSelector labels.Selector, want bool) (*custom_metrics.MetricValue, error) {
	pods, err := p.list.Pods.Pods(name.Namespace).List(sel)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("listing pods from cache: %w", err))
	}
	running := runningPods(pods)
	p.cfg.Latency.Ask(sig, running) // before the first scrape: it parses their histograms then
	if want {
		p.want(ctx, name.Namespace, sel, running)
	}
	agg := over(running)
	if agg.why.n > 0 {
		return nil, notFound(info, fmt.Sprintf("%s/%s: %d of %d ready pods have no value (an object's value needs every ready pod): %s", name.Namespace, name.Name, agg.why.n, agg.ready, agg.why.text(ctx)))
	}
	if agg.counted == 0 {
		return nil, notFound(info, fmt.Sprintf("%s/%s: %s", name.Namespace, name.Name, noPodsMessage(name.Namespace, sel, len(pods))+" (object metrics cover Ready pods, and pods not Ready that have a value)"))
	}
	if math.IsInf(agg.value, 0) || math.IsNaN(agg.value) {
		return nil, outOfRange(info, fmt.Sprintf("%s/%s", name.Namespace, name.Name), agg.value)
	}
	v, err := p.value(ctx, info, sig, ref(k, name), agg.value, agg.oldest, metricSelector)
	if err != nil {
		return nil, err
	}
	return &v, nil
}

// aggregate is a signal combined over the pods of a set.
type aggregate struct {
	value   float64
	oldest  time.Time // the oldest contributing scrape
	ready   int       // Ready pods in the set
	counted int       // pods whose value is in value
	why     reasons   // Ready pods without a value, and why
}

// aggregatePods combines sig over the Running pods of a set, with the
// signal's aggregation. The rule:
//   - a Ready pod with a fresh value counts;
//   - a Ready pod without one is noted in why (the caller answers 404);
//   - a pod that is not Ready but has a fresh value counts: an overloaded
//     server often fails its readiness probe, and its load is real;
//   - a pod that is not Ready and has no value is left out (still loading);
//   - a pod whose IP a newer pod has taken is left out.
func (p *Provider) aggregatePods(running []*corev1.Pod, sig catalog.Signal, match store.ModelMatcher) aggregate {
	if _, _, ok := sig.Quantile(); ok {
		return p.aggregateWindows(running, sig, match) // slo.go
	}
	return p.aggregateReads(running, sig.Aggregation(), func(pod *corev1.Pod, now time.Time) store.Sample {
		return p.podSample(pod, sig, match, now)
	})
}

// signalOver is aggregatePods of sig over the models match picks, for objectValue.
func (p *Provider) signalOver(sig catalog.Signal, match store.ModelMatcher) func(running []*corev1.Pod) aggregate {
	return func(running []*corev1.Pod) aggregate { return p.aggregatePods(running, sig, match) }
}

// aggregateReads combines each pod's value as read combines them with agg,
// by the rule of aggregatePods.
func (p *Provider) aggregateReads(running []*corev1.Pod, agg catalog.Aggregation, read podReader) aggregate {
	now := p.clock.Now()
	var a aggregate
	for _, pod := range running {
		if _, ok := p.shadowed(pod); ok {
			continue
		}
		ready := targets.IsReady(pod)
		if ready {
			a.ready++
		}
		s := read(pod, now)
		if s.Status != store.OK {
			if ready {
				a.why.add(pod, s)
			}
			continue
		}
		a.value = catalog.Combine(agg, a.value, a.counted, s.Value)
		a.counted++
		if a.oldest.IsZero() || s.Time.Before(a.oldest) {
			a.oldest = s.Time
		}
	}
	return a
}

// objectsBySelector is objectValue for every workload matching selector.
func (p *Provider) objectsBySelector(ctx context.Context, k kind, namespace string, selector labels.Selector, sig catalog.Signal, over func(running []*corev1.Pod) aggregate, info cmprovider.CustomMetricInfo, metricSelector labels.Selector) (*custom_metrics.MetricValueList, error) {
	// Every object of a namespace (no selector) would make nearly every pod
	// wanted: such a question reads only what is already scraped.
	want := !selector.Empty()
	return p.eachWorkload(k, namespace, selector, info, func(name types.NamespacedName, sel labels.Selector) (*custom_metrics.MetricValue, error) {
		return p.objectValue(ctx, k, name, sel, sig, over, info, metricSelector, want)
	})
}

// eachWorkload answers a question about every deployment or statefulset (k)
// matching selector in namespace, in name order: fn gives one workload's
// value from its name and pod selector. A workload without a value (fn's
// error, or a selector that is invalid) is left out; when none has one the
// answer is a 404 that joins their reasons.
func (p *Provider) eachWorkload(k kind, namespace string, selector labels.Selector, info cmprovider.CustomMetricInfo, fn func(name types.NamespacedName, sel labels.Selector) (*custom_metrics.MetricValue, error)) (*custom_metrics.MetricValueList, error) {
	names, err := p.workloadNames(k, namespace, selector)
	if errors.Is(err, errLWSNotWatched) {
		return nil, notFound(info, err.Error())
	}
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	if len(names) == 0 {
		return nil, notFound(info, fmt.Sprintf("no %s match %q in namespace %q", info.GroupResource.Resource, selector.String(), namespace))
	}
	var items []custom_metrics.MetricValue
	var errs []string
	for _, n := range names {
		nn := types.NamespacedName{Namespace: namespace, Name: n}
		sel, err := p.objectSelector(k, nn)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		v, err := fn(nn, sel)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		items = append(items, *v)
	}
	if len(items) == 0 {
		return nil, notFound(info, strings.Join(errs, "; "))
	}
	return &custom_metrics.MetricValueList{Items: items}, nil
}

// workloadNames lists the deployments or statefulsets matching selector,
// sorted.
func (p *Provider) workloadNames(k kind, namespace string, selector labels.Selector) ([]string, error) {
	var names []string
	switch k {
	case kindDeployment:
		ds, err := p.list.Deployments.Deployments(namespace).List(selector)
		if err != nil {
			return nil, fmt.Errorf("listing deployments from cache: %w", err)
		}
		for _, d := range ds {
			names = append(names, d.Name)
		}
	case kindStatefulSet:
		ss, err := p.list.StatefulSets.StatefulSets(namespace).List(selector)
		if err != nil {
			return nil, fmt.Errorf("listing statefulsets from cache: %w", err)
		}
		for _, s := range ss {
			names = append(names, s.Name)
		}
	case kindLeaderWorkerSet:
		ls, err := p.lwsNames(namespace, selector) // lws.go
		if err != nil {
			return nil, err
		}
		names = ls
	}
	sort.Strings(names)
	return names, nil
}

func (p *Provider) windowSeconds() int64 {
	return max(1, int64(math.Ceil(p.cfg.Window.Seconds())))
}

// windowOf is the windowSeconds of a value of sig: --slo-window for a
// latency percentile, the scrape interval otherwise.
func (p *Provider) windowOf(sig catalog.Signal) int64 {
	if _, _, ok := sig.Quantile(); ok && p.cfg.SLOWindow > 0 {
		return int64(math.Ceil(p.cfg.SLOWindow.Seconds()))
	}
	return p.windowSeconds()
}

// value builds the API's value of obj; a value that is not a finite number
// is a 404 saying so.
func (p *Provider) value(ctx context.Context, info cmprovider.CustomMetricInfo, sig catalog.Signal, obj custom_metrics.ObjectReference, v float64, at time.Time, metricSelector labels.Selector) (custom_metrics.MetricValue, error) {
	q, ok := quantity(v)
	if !ok {
		return custom_metrics.MetricValue{}, outOfRange(info, obj.Namespace+"/"+obj.Name, v)
	}
	answercache.Seen(ctx, at)
	window := p.windowOf(sig)
	mv := custom_metrics.MetricValue{
		DescribedObject: obj,
		Metric:          custom_metrics.MetricIdentifier{Name: sig.Name()},
		Timestamp:       metav1.NewTime(at),
		WindowSeconds:   &window,
		Value:           q,
	}
	if metricSelector != nil && !metricSelector.Empty() {
		if ls, err := metav1.ParseToLabelSelector(metricSelector.String()); err == nil {
			mv.Metric.Selector = ls
		}
	}
	return mv, nil
}

// maxMilli bounds the values rendered with milli precision: |v| × 1000 must
// fit an int64 (about 9.2e18) with room for rounding.
const maxMilli = 9e15

// quantity renders v with milli precision where that fits an int64:
// 0.4213 -> "421m", 3 -> "3". Larger values keep 15 significant digits in a
// decimal-exponent quantity ("123456789012345e10"), truncated toward zero so
// that the value read back never exceeds v, nor overflows to infinity. It
// reports false for NaN and infinities, which have no quantity.
func quantity(v float64) (resource.Quantity, bool) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return resource.Quantity{}, false
	}
	if math.Abs(v) < maxMilli {
		return *resource.NewMilliQuantity(int64(math.Round(v*1000)), resource.DecimalSI), true
	}
	exp := int(math.Floor(math.Log10(math.Abs(v)))) - 14
	mant := math.Trunc(v / math.Pow10(exp)) // |mant| < 1e16: fits an int64
	return *resource.NewDecimalQuantity(*inf.NewDec(int64(mant), inf.Scale(-exp)), resource.DecimalExponent), true
}

// outOfRange is the 404 for a value that is not a finite number, e.g. a sum
// over pods that overflowed.
func outOfRange(info cmprovider.CustomMetricInfo, what string, v float64) error {
	return notFound(info, fmt.Sprintf("%s: the value (%g) is out of range: not a finite number", what, v))
}

func ref(k kind, name types.NamespacedName) custom_metrics.ObjectReference {
	r := custom_metrics.ObjectReference{Namespace: name.Namespace, Name: name.Name}
	switch k {
	case kindPod:
		r.Kind, r.APIVersion = "Pod", "v1"
	case kindDeployment:
		r.Kind, r.APIVersion = "Deployment", appsv1.SchemeGroupVersion.String()
	case kindStatefulSet:
		r.Kind, r.APIVersion = "StatefulSet", appsv1.SchemeGroupVersion.String()
	case kindLeaderWorkerSet:
		r.Kind, r.APIVersion = "LeaderWorkerSet", LeaderWorkerSetGroup+"/"+LeaderWorkerSetVersion
	}
	return r
}

func resolve(info cmprovider.CustomMetricInfo) (catalog.Signal, kind, error) {
	sig, ok := catalog.ByName(info.Metric)
	if !ok {
		return 0, 0, notFound(info, fmt.Sprintf("unknown metric %q; served metrics: %s", info.Metric, servedNames()))
	}
	k, ok := kindOf(info.GroupResource)
	if !ok {
		return 0, 0, notFound(info, fmt.Sprintf("metrics are served for pods, deployments, statefulsets and leaderworkersets, not %s", info.GroupResource.String()))
	}
	return sig, k, nil
}

func servedNames() string {
	var names []string
	for _, s := range catalog.All() {
		names = append(names, s.Name())
	}
	names = append(names, catalog.DemandPerReplica+" (deployments, statefulsets and leaderworkersets)")
	names = append(names, catalog.DemandForecastPerReplica+" (deployments, statefulsets and leaderworkersets)")
	for _, m := range catalog.LoRAAdapterMetrics() {
		names = append(names, m+" (custom metrics only, with a "+catalog.LoRANameLabel+" metric selector)")
	}
	return strings.Join(names, ", ")
}

// modelMatcher turns the HPA's metric.selector into a model filter. The
// selector is matched against model_name (and Triton's model label).
func modelMatcher(sel labels.Selector) store.ModelMatcher {
	sel = withoutKey(sel, catalog.RoleSelectorLabel) // role.go: a role picks pods, not models
	if sel == nil || sel.Empty() {
		return nil
	}
	return func(model string) bool {
		return sel.Matches(labels.Set{"model_name": model, "model": model})
	}
}

func runningPods(pods []*corev1.Pod) []*corev1.Pod {
	out := make([]*corev1.Pod, 0, len(pods))
	for _, p := range pods {
		if targets.IsRunning(p) {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func noPodsMessage(namespace string, selector labels.Selector, matched int) string {
	if matched == 0 {
		return fmt.Sprintf("no pods match %q in namespace %q", selector.String(), namespace)
	}
	return fmt.Sprintf("%d pods match %q in namespace %q but none is Running with an IP", matched, selector.String(), namespace)
}

// notFound is the typed 404 of the custom metrics API, with our reason.
func notFound(info cmprovider.CustomMetricInfo, why string) error {
	err := cmprovider.NewMetricNotFoundError(info.GroupResource, info.Metric)
	err.ErrStatus.Message = escape.Printable(fmt.Sprintf("the server could not find the metric %s for %s: %s", info.Metric, info.GroupResource.String(), why))
	return err
}

// reasons summarizes why pods had no value, for 404 messages.
type reasons struct {
	n      int
	counts [5]int
	first  []string
}

func (r *reasons) add(pod *corev1.Pod, s store.Sample) {
	r.addText(pod, s.Status, describe(s))
}

func (r *reasons) addText(pod *corev1.Pod, st store.Status, text string) {
	r.n++
	r.counts[st]++
	if len(r.first) < 3 {
		r.first = append(r.first, pod.Name+": "+text)
	}
}

func (r *reasons) String() string {
	s := r.countsText()
	if len(r.first) > 0 {
		s += " (" + strings.Join(r.first, "; ") + ")"
	}
	return s
}

func describe(s store.Sample) string {
	if s.Detail == "" {
		return s.Status.String()
	}
	if isNotScrapedDetail(s) { // notscraped.go: never scraped as it is, not "yet"
		return s.Detail
	}
	return s.Status.String() + ": " + s.Detail
}

// badRequest is the 400 of the custom metrics API, with our reason made
// printable.
func badRequest(why string) error {
	return apierrors.NewBadRequest(escape.Printable(why))
}
