// Package provider answers the custom metrics API
// (custom.metrics.k8s.io) from memory: pods come from the informer cache,
// values from the store. It serves every signal of package signals for pods,
// deployments and statefulsets, honours metric selectors on model_name, and
// answers 404 with the reason when there is no value: it never answers 0
// for what was not measured.
package provider

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

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

	"k8s.io/utils/clock"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/signals"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/store"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/targets"
)

// Values looks up one signal of one pod.
type Values interface {
	Get(pod types.NamespacedName, sig signals.Signal, match store.ModelMatcher, now time.Time, maxAge time.Duration) store.Sample
}

// Demand is told which pods a question was about, so that they get scraped.
type Demand interface {
	Want(ctx context.Context, namespace string, selector labels.Selector, pods []*corev1.Pod)
}

// Listers gives the provider read access to the informer caches.
type Listers struct {
	Pods         PodLister
	Deployments  DeploymentLister
	StatefulSets StatefulSetLister
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
}

// Provider implements the custom metrics provider interface.
type Provider struct {
	cfg    Config
	list   Listers
	values Values
	demand Demand
	clock  clock.PassiveClock
}

var _ cmprovider.CustomMetricsProvider = (*Provider)(nil)

// New returns a Provider.
func New(cfg Config, list Listers, values Values, demand Demand, clk clock.PassiveClock) *Provider {
	return &Provider{cfg: cfg, list: list, values: values, demand: demand, clock: clk}
}

type kind uint8

const (
	kindPod kind = iota
	kindDeployment
	kindStatefulSet
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
	}
	return 0, false
}

// ListAllMetrics lists every signal for pods, deployments and statefulsets.
func (p *Provider) ListAllMetrics() []cmprovider.CustomMetricInfo {
	var out []cmprovider.CustomMetricInfo
	for _, gr := range []schema.GroupResource{podsGR, deploymentsGR, statefulsetsGR} {
		for _, s := range signals.All() {
			out = append(out, cmprovider.CustomMetricInfo{GroupResource: gr, Namespaced: true, Metric: s.Name()})
		}
	}
	return out
}

// GetMetricByName returns the value of a metric for one pod, deployment or statefulset.
func (p *Provider) GetMetricByName(ctx context.Context, name types.NamespacedName, info cmprovider.CustomMetricInfo, metricSelector labels.Selector) (*custom_metrics.MetricValue, error) {
	sig, k, err := resolve(info)
	if err != nil {
		return nil, err
	}
	match := modelMatcher(metricSelector)
	now := p.clock.Now()
	switch k {
	case kindPod:
		pod, err := p.list.Pods.Pods(name.Namespace).Get(name.Name)
		if err != nil {
			return nil, notFound(info, fmt.Sprintf("pod %s/%s: %v", name.Namespace, name.Name, err))
		}
		// The pod's own labels keep it (and its siblings) scraped; a pod
		// without labels must not make its whole namespace wanted.
		sel := labels.Nothing()
		if len(pod.Labels) > 0 {
			sel = labels.SelectorFromSet(pod.Labels)
		}
		p.want(ctx, name.Namespace, sel, []*corev1.Pod{pod})
		now = p.clock.Now()
		s := p.podSample(pod, sig, match, now)
		if s.Status != store.OK {
			return nil, notFound(info, fmt.Sprintf("pod %s/%s: %s", name.Namespace, name.Name, describe(s)))
		}
		v := p.value(sig, ref(k, name), s.Value, s.Time, metricSelector)
		return &v, nil
	default:
		sel, err := p.objectSelector(k, name)
		if err != nil {
			return nil, notFound(info, err.Error())
		}
		v, err := p.objectValue(ctx, k, name, sel, sig, match, info, metricSelector)
		if err != nil {
			return nil, err
		}
		return v, nil
	}
}

// GetMetricBySelector returns the metric for every pod (or object) matching selector in namespace.
func (p *Provider) GetMetricBySelector(ctx context.Context, namespace string, selector labels.Selector, info cmprovider.CustomMetricInfo, metricSelector labels.Selector) (*custom_metrics.MetricValueList, error) {
	sig, k, err := resolve(info)
	if err != nil {
		return nil, err
	}
	match := modelMatcher(metricSelector)
	if k != kindPod {
		return p.objectsBySelector(ctx, k, namespace, selector, sig, match, info, metricSelector)
	}
	pods, err := p.list.Pods.Pods(namespace).List(selector)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("listing pods from cache: %w", err))
	}
	running := runningPods(pods)
	if len(running) == 0 {
		return nil, notFound(info, noPodsMessage(namespace, selector, len(pods)))
	}
	p.want(ctx, namespace, selector, running)
	now := p.clock.Now()
	items := make([]custom_metrics.MetricValue, 0, len(running))
	var why reasons
	for _, pod := range running {
		s := p.podSample(pod, sig, match, now)
		if s.Status != store.OK {
			why.add(pod, s)
			continue
		}
		items = append(items, p.value(sig, ref(kindPod, types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}), s.Value, s.Time, metricSelector))
	}
	if len(items) == 0 {
		return nil, notFound(info, fmt.Sprintf("%d running pods match %q in namespace %q, but none has a value: %s", len(running), selector.String(), namespace, why.String()))
	}
	return &custom_metrics.MetricValueList{Items: items}, nil
}

func (p *Provider) want(ctx context.Context, namespace string, selector labels.Selector, pods []*corev1.Pod) {
	if p.demand != nil {
		p.demand.Want(ctx, namespace, selector, pods)
	}
}

// podSample looks a signal up for one pod. inference_batch_fill falls back to
// batch size divided by the pod's max-batch-size annotation when the page
// does not report a fill itself.
func (p *Provider) podSample(pod *corev1.Pod, sig signals.Signal, match store.ModelMatcher, now time.Time) store.Sample {
	key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	s := p.values.Get(key, sig, match, now, p.cfg.MaxAge)
	if sig != signals.BatchFill || s.Status != store.Absent {
		return s
	}
	max, ok := targets.MaxBatchSize(pod)
	if !ok {
		s.Detail += fmt.Sprintf("; set the pod annotation %s to derive it from the batch size", targets.AnnotationMaxBatchSize)
		return s
	}
	b := p.values.Get(key, signals.BatchSize, match, now, p.cfg.MaxAge)
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

// objectValue aggregates a signal over the Ready pods an object selects. Every
// Ready pod must have a fresh value: a partial sum would understate the load,
// so a missing pod makes the whole answer a 404 naming it.
func (p *Provider) objectValue(ctx context.Context, k kind, name types.NamespacedName, sel labels.Selector, sig signals.Signal, match store.ModelMatcher, info cmprovider.CustomMetricInfo, metricSelector labels.Selector) (*custom_metrics.MetricValue, error) {
	pods, err := p.list.Pods.Pods(name.Namespace).List(sel)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("listing pods from cache: %w", err))
	}
	running := runningPods(pods)
	p.want(ctx, name.Namespace, sel, running)
	agg := p.aggregateReady(running, sig, match)
	if agg.ready == 0 {
		return nil, notFound(info, fmt.Sprintf("%s/%s: %s", name.Namespace, name.Name, noPodsMessage(name.Namespace, sel, len(pods))+" (object metrics cover Ready pods)"))
	}
	if agg.why.n > 0 {
		return nil, notFound(info, fmt.Sprintf("%s/%s: %d of %d ready pods have no value (an object's value needs every ready pod): %s", name.Namespace, name.Name, agg.why.n, agg.ready, agg.why.String()))
	}
	v := p.value(sig, ref(k, name), agg.value, agg.oldest, metricSelector)
	return &v, nil
}

// aggregate is a signal combined over the Ready pods of a set.
type aggregate struct {
	value  float64
	oldest time.Time // the oldest contributing scrape
	ready  int       // Ready pods in the set
	why    reasons   // Ready pods without a value, and why
}

// aggregateReady combines sig over the Ready pods among running, with the
// signal's aggregation, noting the pods without a value.
func (p *Provider) aggregateReady(running []*corev1.Pod, sig signals.Signal, match store.ModelMatcher) aggregate {
	now := p.clock.Now()
	var a aggregate
	n := 0
	for _, pod := range running {
		if !targets.IsReady(pod) {
			continue
		}
		a.ready++
		s := p.podSample(pod, sig, match, now)
		if s.Status != store.OK {
			a.why.add(pod, s)
			continue
		}
		a.value = signals.Combine(sig.Aggregation(), a.value, n, s.Value)
		n++
		if a.oldest.IsZero() || s.Time.Before(a.oldest) {
			a.oldest = s.Time
		}
	}
	return a
}

func (p *Provider) objectsBySelector(ctx context.Context, k kind, namespace string, selector labels.Selector, sig signals.Signal, match store.ModelMatcher, info cmprovider.CustomMetricInfo, metricSelector labels.Selector) (*custom_metrics.MetricValueList, error) {
	var names []string
	switch k {
	case kindDeployment:
		ds, err := p.list.Deployments.Deployments(namespace).List(selector)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		for _, d := range ds {
			names = append(names, d.Name)
		}
	case kindStatefulSet:
		ss, err := p.list.StatefulSets.StatefulSets(namespace).List(selector)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		for _, s := range ss {
			names = append(names, s.Name)
		}
	}
	sort.Strings(names)
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
		v, err := p.objectValue(ctx, k, nn, sel, sig, match, info, metricSelector)
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

func (p *Provider) windowSeconds() int64 {
	return max(1, int64(math.Ceil(p.cfg.Window.Seconds())))
}

func (p *Provider) value(sig signals.Signal, obj custom_metrics.ObjectReference, v float64, at time.Time, metricSelector labels.Selector) custom_metrics.MetricValue {
	window := p.windowSeconds()
	mv := custom_metrics.MetricValue{
		DescribedObject: obj,
		Metric:          custom_metrics.MetricIdentifier{Name: sig.Name()},
		Timestamp:       metav1.NewTime(at),
		WindowSeconds:   &window,
		Value:           quantity(v),
	}
	if metricSelector != nil && !metricSelector.Empty() {
		if ls, err := metav1.ParseToLabelSelector(metricSelector.String()); err == nil {
			mv.Metric.Selector = ls
		}
	}
	return mv
}

// quantity renders v with milli precision: 0.4213 -> "421m", 3 -> "3".
func quantity(v float64) resource.Quantity {
	return *resource.NewMilliQuantity(int64(math.Round(v*1000)), resource.DecimalSI)
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
	}
	return r
}

func resolve(info cmprovider.CustomMetricInfo) (signals.Signal, kind, error) {
	sig, ok := signals.ByName(info.Metric)
	if !ok {
		return 0, 0, notFound(info, fmt.Sprintf("unknown metric %q; served metrics: %s", info.Metric, servedNames()))
	}
	k, ok := kindOf(info.GroupResource)
	if !ok {
		return 0, 0, notFound(info, fmt.Sprintf("metrics are served for pods, deployments and statefulsets, not %s", info.GroupResource.String()))
	}
	return sig, k, nil
}

func servedNames() string {
	var names []string
	for _, s := range signals.All() {
		names = append(names, s.Name())
	}
	return strings.Join(names, ", ")
}

// modelMatcher turns the HPA's metric.selector into a model filter. The
// selector is matched against model_name (and Triton's model label).
func modelMatcher(sel labels.Selector) store.ModelMatcher {
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
	err.ErrStatus.Message = fmt.Sprintf("the server could not find the metric %s for %s: %s", info.Metric, info.GroupResource.String(), why)
	return err
}

// reasons summarizes why pods had no value, for 404 messages.
type reasons struct {
	n      int
	counts [5]int
	first  []string
}

func (r *reasons) add(pod *corev1.Pod, s store.Sample) {
	r.n++
	r.counts[s.Status]++
	if len(r.first) < 3 {
		msg := pod.Name + ": " + describe(s)
		r.first = append(r.first, msg)
	}
}

func (r *reasons) String() string {
	var parts []string
	for st, c := range r.counts {
		if c > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c, store.Status(st)))
		}
	}
	s := strings.Join(parts, ", ")
	if len(r.first) > 0 {
		s += " (" + strings.Join(r.first, "; ") + ")"
	}
	return s
}

func describe(s store.Sample) string {
	if s.Detail == "" {
		return s.Status.String()
	}
	return s.Status.String() + ": " + s.Detail
}
