// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/forecast"
)

// nameRE is a policy name: it names a namespace (shootout-NAME) and files.
var nameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$`)

// Metric kinds of the short syntax: KIND/METRIC:TARGET.
const (
	kindPods        = "pods"         // Pods metric, AverageValue per pod
	kindObject      = "object"       // Object metric on the Deployment, Value
	kindObjectAvg   = "object-avg"   // Object metric on the Deployment, AverageValue
	kindExternal    = "external"     // External metric over the fleet's pods, Value
	kindExternalAvg = "external-avg" // External metric over the fleet's pods, AverageValue
)

var metricKinds = []string{kindPods, kindObject, kindObjectAvg, kindExternal, kindExternalAvg}

// podSignals are the metrics the adapter serves per pod (and on
// Deployments, and as external metrics): every signal of the catalogue.
func podSignals() []string {
	var out []string
	for _, s := range catalog.All() {
		out = append(out, s.Name())
	}
	return out
}

// fleetSelector picks the fleet's pods: the Deployment's labels.
func fleetSelector() *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{"app": deploymentName}}
}

// shortSyntax is the short syntax in words, for error messages.
const shortSyntax = "want NAME=[KIND/]METRIC:TARGET[+[KIND/]METRIC:TARGET...][@up-window=DURATION][@down-window=DURATION][@min=N], " +
	"KIND pods (the default; inference_demand_per_replica: object), object, object-avg, external or external-avg, e.g. queue-1=inference_queue_size:1; or NAME=fixed:N; or NAME=oracle:CAPACITY[@lag=D][@hold=D]"

// userPolicy parses a policy of the command line:
//
//	NAME=fixed:N                               a fixed fleet of N replicas
//	NAME=oracle:CAPACITY[@lag=D][@hold=D]      a clairvoyant fleet (oracle.go)
//	NAME=TERM[+TERM...][@OPTION...]            an HPA on every TERM
//	TERM   = [KIND/]METRIC:TARGET
//	KIND   = pods | object | object-avg | external | external-avg
//	OPTION = up-window=DURATION | down-window=DURATION | min=N
//
// A pods TERM is a Pods metric at TARGET per pod (AverageValue); object an
// Object metric on the fleet's Deployment at a Value (object-avg: an
// AverageValue); external an External metric over the fleet's pods. A TERM
// without KIND is pods, but for inference_demand_per_replica, which only
// workloads serve: object. The windows are the scale-up and scale-down
// stabilization windows in simulated time (the rest of the behavior is
// every policy's); min is the HPA's minReplicas. Rate targets
// (inference_*_per_second) are per simulated second.
func userPolicy(name, def string, maxReplicas int) (policy, error) {
	bad := func(format string, args ...any) (policy, error) {
		return policy{}, fmt.Errorf("policy %q: %s (%s)", name+"="+def, fmt.Sprintf(format, args...), shortSyntax)
	}
	if !nameRE.MatchString(name) || name == policyCapacity {
		return bad("the name must be 1-40 lower-case letters, digits and '-', and not %q", policyCapacity)
	}
	if rest, ok := strings.CutPrefix(def, "fixed:"); ok {
		n, err := strconv.Atoi(rest)
		if err != nil || n < 1 || n > maxReplicas {
			return bad("a fixed fleet needs 1 to %d replicas (--max-replicas), got %q", maxReplicas, rest)
		}
		return policy{Name: name, Fixed: n, Why: fmt.Sprintf("a fixed fleet of %d replicas, defined by the user", n)}, nil
	}
	if rest, ok := strings.CutPrefix(def, "oracle:"); ok {
		o, err := parseOracle(rest)
		if err != nil {
			return bad("%v", err)
		}
		return policy{Name: name, Oracle: o, Why: oracleWhy(o)}, nil
	}
	terms, options, _ := strings.Cut(def, "@")
	spec := &autoscalingv2.HorizontalPodAutoscalerSpec{}
	for _, term := range strings.Split(terms, "+") {
		m, err := parseTerm(strings.TrimSpace(term))
		if err != nil {
			return bad("%v", err)
		}
		spec.Metrics = append(spec.Metrics, m)
	}
	if options != "" {
		for _, opt := range strings.Split(options, "@") {
			if err := applyOption(spec, opt); err != nil {
				return bad("%v", err)
			}
		}
	}
	if err := validateSpec(spec, maxReplicas); err != nil {
		return bad("%v", err)
	}
	p := policy{Name: name, Spec: spec, Why: fmt.Sprintf("%s at %s, defined by the user", policy{Spec: spec}.metricText(), policy{Spec: spec}.targetText())}
	// The short form of old: one Pods metric, default behavior and bounds.
	if len(spec.Metrics) == 1 && spec.Metrics[0].Pods != nil && spec.Behavior == nil && spec.MinReplicas == nil {
		q := spec.Metrics[0].Pods.Target.AverageValue
		p = policy{Name: name, Metric: spec.Metrics[0].Pods.Metric.Name, Target: q.String(),
			Why: fmt.Sprintf("%s at %s per pod, defined by the user", spec.Metrics[0].Pods.Metric.Name, q.String())}
	}
	return p, nil
}

// isWorkloadMetric reports whether metric is served on the Deployment only
// (an Object metric at a Value): the demand per replica and its forecast.
func isWorkloadMetric(metric string) bool {
	return metric == catalog.DemandPerReplica || metric == catalog.DemandForecastPerReplica
}

// workloadMetricsText names the metrics isWorkloadMetric accepts.
const workloadMetricsText = catalog.DemandPerReplica + " and " + catalog.DemandForecastPerReplica

// parseTerm parses [KIND/]METRIC:TARGET.
func parseTerm(term string) (autoscalingv2.MetricSpec, error) {
	kind, rest, hasKind := strings.Cut(term, "/")
	if !hasKind {
		kind, rest = "", term
	}
	metric, target, ok := strings.Cut(rest, ":")
	if !ok {
		return autoscalingv2.MetricSpec{}, fmt.Errorf("term %q: no ':' between the metric and its target", term)
	}
	if kind == "" {
		kind = kindPods
		if isWorkloadMetric(metric) {
			kind = kindObject
		}
	}
	if !slices.Contains(metricKinds, kind) {
		return autoscalingv2.MetricSpec{}, fmt.Errorf("term %q: unknown kind %q (known: %s)", term, kind, strings.Join(metricKinds, ", "))
	}
	q, err := resource.ParseQuantity(target)
	if err != nil || q.Sign() <= 0 {
		return autoscalingv2.MetricSpec{}, fmt.Errorf("term %q: the target must be a positive quantity, got %q", term, target)
	}
	id := autoscalingv2.MetricIdentifier{Name: metric}
	value := autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: &q}
	average := autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &q}
	var m autoscalingv2.MetricSpec
	switch kind {
	case kindPods:
		m = podsMetric(metric, q)
	case kindObject, kindObjectAvg:
		t := value
		if kind == kindObjectAvg {
			t = average
		}
		m = autoscalingv2.MetricSpec{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricSource{
			DescribedObject: deploymentRef(), Metric: id, Target: t}}
	default:
		t := value
		if kind == kindExternalAvg {
			t = average
		}
		id.Selector = fleetSelector()
		m = autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{Metric: id, Target: t}}
	}
	return m, nil
}

// applyOption applies one @OPTION of the short syntax.
func applyOption(spec *autoscalingv2.HorizontalPodAutoscalerSpec, opt string) error {
	key, val, ok := strings.Cut(opt, "=")
	if !ok {
		return fmt.Errorf("option %q: want KEY=VALUE (up-window, down-window, min)", opt)
	}
	switch key {
	case "up-window", "down-window":
		d, err := time.ParseDuration(val)
		if err != nil || d < 0 || d > time.Hour || d%time.Second != 0 {
			return fmt.Errorf("option %q: want whole seconds from 0 to 1h, got %q", opt, val)
		}
		b := defaultBehavior()
		if spec.Behavior != nil {
			b = spec.Behavior
		}
		w := int32(d / time.Second)
		if key == "up-window" {
			b.ScaleUp.StabilizationWindowSeconds = &w
		} else {
			b.ScaleDown.StabilizationWindowSeconds = &w
		}
		spec.Behavior = b
	case "min":
		n, err := strconv.Atoi(val)
		if err != nil || n < 1 {
			return fmt.Errorf("option %q: want a positive replica count, got %q", opt, val)
		}
		n32 := int32(n)
		spec.MinReplicas = &n32
	default:
		return fmt.Errorf("option %q: unknown option %q (known: up-window, down-window, min)", opt, key)
	}
	return nil
}

// deploymentRef is the fleet's Deployment.
func deploymentRef() autoscalingv2.CrossVersionObjectReference {
	return autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: deploymentName}
}

// defaultBehavior is every policy's behavior in simulated seconds: the
// Kubernetes defaults (scale up by up to 100% or 4 pods per 15 s, no
// stabilization; scale down after a 300 s window by up to 100% per 15 s).
func defaultBehavior() *autoscalingv2.HorizontalPodAutoscalerBehavior {
	maxPolicy := autoscalingv2.MaxChangePolicySelect
	return &autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleUp: &autoscalingv2.HPAScalingRules{
			StabilizationWindowSeconds: new(int32(0)),
			SelectPolicy:               &maxPolicy,
			Policies: []autoscalingv2.HPAScalingPolicy{
				{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15},
				{Type: autoscalingv2.PodsScalingPolicy, Value: 4, PeriodSeconds: 15},
			},
		},
		ScaleDown: &autoscalingv2.HPAScalingRules{
			StabilizationWindowSeconds: new(int32(300)),
			Policies: []autoscalingv2.HPAScalingPolicy{
				{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15},
			},
		},
	}
}

// metricKey is "KIND/NAME" of a metric: pods/, object/, external/ (or
// the type's name for a kind the shootout does not run).
func metricKey(m autoscalingv2.MetricSpec) string {
	switch {
	case m.Pods != nil:
		return "pods/" + m.Pods.Metric.Name
	case m.Object != nil:
		return "object/" + m.Object.Metric.Name
	case m.External != nil:
		return "external/" + m.External.Metric.Name
	}
	return strings.ToLower(string(m.Type))
}

// metricName is a metric's name, empty for a kind the shootout does not run.
func metricName(m autoscalingv2.MetricSpec) string { return keyName(metricKey(m)) }

// keyName is the name part of a "KIND/NAME" key.
func keyName(key string) string {
	_, name, _ := strings.Cut(key, "/")
	return name
}

// metricTarget is a metric's target, nil for a kind the shootout does not run.
func metricTarget(m autoscalingv2.MetricSpec) *autoscalingv2.MetricTarget {
	switch {
	case m.Pods != nil:
		return &m.Pods.Target
	case m.Object != nil:
		return &m.Object.Target
	case m.External != nil:
		return &m.External.Target
	}
	return nil
}

// validateSpec refuses what the shootout cannot run, naming it: a metric
// the adapter does not serve in that shape, a target that is not a
// positive quantity of an allowed type, an object other than the fleet's
// Deployment, a resource metric (no metrics-server), replica bounds out
// of 1..maxReplicas, and a behavior the API server would refuse. An unset
// scaleTargetRef or describedObject is filled in with the Deployment; an
// unset external selector with the fleet's pods.
func validateSpec(spec *autoscalingv2.HorizontalPodAutoscalerSpec, maxReplicas int) error {
	var errs []error
	if ref := spec.ScaleTargetRef; ref != (autoscalingv2.CrossVersionObjectReference{}) && ref != deploymentRef() {
		errs = append(errs, fmt.Errorf("scaleTargetRef %s %s/%s: the shootout scales its Deployment (apps/v1 Deployment %s); leave it out", ref.Kind, ref.APIVersion, ref.Name, deploymentName))
	}
	spec.ScaleTargetRef = deploymentRef()
	if len(spec.Metrics) == 0 {
		errs = append(errs, errors.New("no metrics"))
	}
	signals := podSignals()
	seen := map[string]bool{}
	for i := range spec.Metrics {
		m := &spec.Metrics[i]
		key := metricKey(*m)
		if seen[key] {
			errs = append(errs, fmt.Errorf("metric %s given twice", key))
		}
		seen[key] = true
		var allowed []autoscalingv2.MetricTargetType
		switch m.Type {
		case autoscalingv2.PodsMetricSourceType:
			if m.Pods == nil {
				errs = append(errs, fmt.Errorf("metric %d: type Pods without pods", i+1))
				continue
			}
			if !slices.Contains(signals, m.Pods.Metric.Name) {
				errs = append(errs, fmt.Errorf("metric %s: pods do not serve %q (Pods metrics: %s; %s is an Object metric on the Deployment)",
					key, m.Pods.Metric.Name, strings.Join(signals, ", "), workloadMetricsText))
			}
			allowed = []autoscalingv2.MetricTargetType{autoscalingv2.AverageValueMetricType}
		case autoscalingv2.ObjectMetricSourceType:
			if m.Object == nil {
				errs = append(errs, fmt.Errorf("metric %d: type Object without object", i+1))
				continue
			}
			if d := m.Object.DescribedObject; d != (autoscalingv2.CrossVersionObjectReference{}) && d != deploymentRef() {
				errs = append(errs, fmt.Errorf("metric %s: describedObject %s %s/%s: the shootout serves Object metrics on its Deployment (apps/v1 Deployment %s) only; it has no front door Service", key, d.Kind, d.APIVersion, d.Name, deploymentName))
			}
			m.Object.DescribedObject = deploymentRef()
			if name := m.Object.Metric.Name; !isWorkloadMetric(name) && !slices.Contains(signals, name) {
				errs = append(errs, fmt.Errorf("metric %s: the Deployment does not serve %q (Object metrics: %s and every Pods metric)", key, name, workloadMetricsText))
			}
			allowed = []autoscalingv2.MetricTargetType{autoscalingv2.ValueMetricType, autoscalingv2.AverageValueMetricType}
		case autoscalingv2.ExternalMetricSourceType:
			if m.External == nil {
				errs = append(errs, fmt.Errorf("metric %d: type External without external", i+1))
				continue
			}
			if !slices.Contains(signals, m.External.Metric.Name) {
				errs = append(errs, fmt.Errorf("metric %s: no external metric %q (external metrics: %s)", key, m.External.Metric.Name, strings.Join(signals, ", ")))
			}
			if m.External.Metric.Selector == nil {
				m.External.Metric.Selector = fleetSelector()
			}
			allowed = []autoscalingv2.MetricTargetType{autoscalingv2.ValueMetricType, autoscalingv2.AverageValueMetricType}
		default:
			errs = append(errs, fmt.Errorf("metric %d: type %q is not run by the shootout (Pods, Object or External; it has no metrics-server for Resource metrics)", i+1, m.Type))
			continue
		}
		t := metricTarget(*m)
		if !slices.Contains(allowed, t.Type) {
			errs = append(errs, fmt.Errorf("metric %s: target type %q (want %s)", key, t.Type, joinTypes(allowed)))
			continue
		}
		q := t.AverageValue
		if t.Type == autoscalingv2.ValueMetricType {
			q = t.Value
		}
		if q == nil || q.Sign() <= 0 {
			errs = append(errs, fmt.Errorf("metric %s: the %s target must be a positive quantity", key, t.Type))
		}
		if t.AverageUtilization != nil || (t.Type == autoscalingv2.ValueMetricType && t.AverageValue != nil) || (t.Type == autoscalingv2.AverageValueMetricType && t.Value != nil) {
			errs = append(errs, fmt.Errorf("metric %s: a %s target has only %s", key, t.Type, map[autoscalingv2.MetricTargetType]string{autoscalingv2.ValueMetricType: "value", autoscalingv2.AverageValueMetricType: "averageValue"}[t.Type]))
		}
	}
	lo := int32(1)
	if spec.MinReplicas != nil {
		lo = *spec.MinReplicas
	}
	if lo < 1 || (spec.MaxReplicas != 0 && (spec.MaxReplicas < lo || spec.MaxReplicas > int32(maxReplicas))) || lo > int32(maxReplicas) {
		errs = append(errs, fmt.Errorf("replicas: want 1 <= minReplicas <= maxReplicas <= %d (--max-replicas), got %d and %d", maxReplicas, lo, spec.MaxReplicas))
	}
	if b := spec.Behavior; b != nil {
		for dir, r := range map[string]*autoscalingv2.HPAScalingRules{"scaleUp": b.ScaleUp, "scaleDown": b.ScaleDown} {
			if r == nil {
				continue
			}
			if w := r.StabilizationWindowSeconds; w != nil && (*w < 0 || *w > 3600) {
				errs = append(errs, fmt.Errorf("behavior.%s.stabilizationWindowSeconds %d: want 0 to 3600", dir, *w))
			}
			if sp := r.SelectPolicy; sp != nil && !slices.Contains([]autoscalingv2.ScalingPolicySelect{autoscalingv2.MaxChangePolicySelect, autoscalingv2.MinChangePolicySelect, autoscalingv2.DisabledPolicySelect}, *sp) {
				errs = append(errs, fmt.Errorf("behavior.%s.selectPolicy %q: want Max, Min or Disabled", dir, *sp))
			}
			for _, pol := range r.Policies {
				if pol.Type != autoscalingv2.PodsScalingPolicy && pol.Type != autoscalingv2.PercentScalingPolicy {
					errs = append(errs, fmt.Errorf("behavior.%s policy type %q: want Pods or Percent", dir, pol.Type))
				}
				if pol.Value <= 0 || pol.PeriodSeconds <= 0 || pol.PeriodSeconds > 1800 {
					errs = append(errs, fmt.Errorf("behavior.%s policy %s: want a positive value and periodSeconds from 1 to 1800, got %d and %d", dir, pol.Type, pol.Value, pol.PeriodSeconds))
				}
			}
		}
	}
	return errors.Join(errs...)
}

func joinTypes(ts []autoscalingv2.MetricTargetType) string {
	var out []string
	for _, t := range ts {
		out = append(out, string(t))
	}
	return strings.Join(out, " or ")
}

// isRate reports whether the metric is a counter rate (per second), whose
// values the adapter measures per wall-clock second.
func isRate(name string) bool {
	s, ok := catalog.ByName(name)
	if !ok {
		return false
	}
	_, rate := s.Rate()
	return rate
}

// isLatency reports whether the metric is a latency percentile (seconds).
// The simulator observes its latencies in simulated time, so their values
// and targets need no compression.
func isLatency(name string) bool {
	s, ok := catalog.ByName(name)
	if !ok {
		return false
	}
	_, _, q := s.Quantile()
	return q
}

// wallTarget is q in wall-clock terms: a rate (per simulated second) times
// the compression; other metrics (a latency percentile too: isLatency) as
// they are.
func wallTarget(q resource.Quantity, name string, tm timing) resource.Quantity {
	if isRate(name) {
		return *resource.NewMilliQuantity(int64(float64(q.MilliValue())*tm.Compress), resource.DecimalSI)
	}
	return q
}

// hpa is the HorizontalPodAutoscaler of policy p for Deployment name, in
// wall-clock terms: every policy gets minReplicas, maxReplicas and the
// default behavior unless its spec sets its own; behavior seconds are
// compressed, the forecast's metric selector windows and rate floors too
// (wallForecastWindow, wallRateFloor),
// and rate targets (per simulated second) multiplied by the compression,
// since the adapter measures rates per wall-clock second. p is not changed:
// the report keeps the policy as written, in simulated time.
func hpa(p policy, name string, minReplicas, maxReplicas int32, tm timing) *autoscalingv2.HorizontalPodAutoscaler {
	spec := autoscalingv2.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: name},
		MinReplicas:    &minReplicas,
		MaxReplicas:    maxReplicas,
		Behavior:       defaultBehavior(),
	}
	for _, m := range p.metrics() {
		m = *m.DeepCopy()
		// The forecast's windows and rate floors; checkForecastDurations
		// refuses, before the run, every one that cannot be converted (it
		// would reach the adapter as written, which refuses it with a 400).
		for _, fd := range tm.forecastDurations() {
			mapForecastSelector(&m, fd.key, func(v string) string {
				w, err := fd.wall(v)
				if err != nil {
					return v
				}
				return w.String()
			})
		}
		if t := metricTarget(m); t != nil {
			for _, q := range []*resource.Quantity{t.Value, t.AverageValue} {
				if q != nil {
					*q = wallTarget(*q, metricName(m), tm)
				}
			}
		}
		spec.Metrics = append(spec.Metrics, m)
	}
	if p.Spec != nil {
		if p.Spec.MinReplicas != nil {
			spec.MinReplicas = new(*p.Spec.MinReplicas)
		}
		if p.Spec.MaxReplicas != 0 {
			spec.MaxReplicas = p.Spec.MaxReplicas
		}
		if b := p.Spec.Behavior; b != nil {
			b = b.DeepCopy()
			if b.ScaleUp == nil {
				b.ScaleUp = defaultBehavior().ScaleUp
			}
			if b.ScaleDown == nil {
				b.ScaleDown = defaultBehavior().ScaleDown
			}
			spec.Behavior = b
		}
	}
	for _, r := range []*autoscalingv2.HPAScalingRules{spec.Behavior.ScaleUp, spec.Behavior.ScaleDown} {
		if w := r.StabilizationWindowSeconds; w != nil {
			c := compressSeconds(*w, tm)
			r.StabilizationWindowSeconds = &c
		}
		for i := range r.Policies {
			r.Policies[i].PeriodSeconds = max(1, compressSeconds(r.Policies[i].PeriodSeconds, tm))
		}
	}
	return &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
}

// compressSeconds is s simulated seconds in whole wall-clock seconds (0
// stays 0; anything else at least 1).
func compressSeconds(s int32, tm timing) int32 {
	if s == 0 {
		return 0
	}
	return tm.wallSeconds(time.Duration(s) * time.Second)
}

// mapForecastSelector replaces each value of key in an Object metric's
// selector of catalog.DemandForecastPerReplica (matchLabels and
// matchExpressions; simulated time as a policy is written) with fn's.
func mapForecastSelector(m *autoscalingv2.MetricSpec, key string, fn func(value string) string) {
	if m.Object == nil || m.Object.Metric.Name != catalog.DemandForecastPerReplica || m.Object.Metric.Selector == nil {
		return
	}
	sel := m.Object.Metric.Selector
	if v, ok := sel.MatchLabels[key]; ok {
		sel.MatchLabels[key] = fn(v)
	}
	for i := range sel.MatchExpressions {
		if e := &sel.MatchExpressions[i]; e.Key == key {
			for j := range e.Values {
				e.Values[j] = fn(e.Values[j])
			}
		}
	}
}

// forecastDurations are the forecast's metric selector keys whose values
// are durations in simulated time, each with its conversion to wall-clock
// time.
func (t timing) forecastDurations() []forecastDuration {
	return []forecastDuration{
		{catalog.ForecastWindowLabel, t.wallForecastWindow},
		{catalog.ForecastRateFloorLabel, t.wallRateFloor},
	}
}

// forecastDuration is a forecast selector key whose value is a duration in
// simulated time, and its conversion to wall-clock time.
type forecastDuration struct {
	key  string
	wall func(simulated string) (time.Duration, error)
}

// wallRateFloor is a rate floor's time in system written in simulated
// time (a Go duration from 0 to forecast.MaxRateFloor) in wall-clock time,
// rounded to whole microseconds: the simulator serves a request that many
// times faster, and the adapter measures the arrival rate per wall-clock
// second that many times higher, so their product, the floor in requests,
// is the simulated one.
func (t timing) wallRateFloor(simulated string) (time.Duration, error) {
	d, err := time.ParseDuration(simulated)
	if err != nil || d < 0 || d > forecast.MaxRateFloor {
		return 0, fmt.Errorf("the forecast's %s %q: want a Go duration from 0 to %s in simulated time, such as 1500ms", catalog.ForecastRateFloorLabel, simulated, forecast.MaxRateFloor)
	}
	return t.wall(d).Round(time.Microsecond), nil
}

// wallForecastWindow is a forecast window written in simulated time (a
// Go duration) in wall-clock time, rounded to whole milliseconds. It
// refuses a window above the adapter's forecast window (the history holds
// no more) and one the conversion makes shorter than the adapter's scrape
// interval (no two samples in it).
func (t timing) wallForecastWindow(simulated string) (time.Duration, error) {
	d, err := time.ParseDuration(simulated)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("the forecast's %s %q: want a positive Go duration in simulated time, such as 2m", catalog.ForecastWindowLabel, simulated)
	}
	if d > t.ForecastWindow {
		return 0, fmt.Errorf("the forecast's %s %s is over the adapter's forecast window, %s simulated: its history holds no more", catalog.ForecastWindowLabel, d, t.ForecastWindow)
	}
	w := t.wall(d).Round(time.Millisecond)
	// Both rounded: a window of one scrape interval is one.
	if scrape := t.wall(t.ScrapeInterval); w < scrape.Round(time.Millisecond) {
		return 0, fmt.Errorf("the forecast's %s %s simulated is %s wall at compression ×%g, shorter than the adapter's scrape interval (%s wall, %s simulated): no two samples would fall in it", catalog.ForecastWindowLabel, d, w, t.Compress, scrape, t.ScrapeInterval)
	}
	// Rounding must not take it past the adapter's --forecast-window.
	return min(w, t.wall(t.ForecastWindow)), nil
}

// checkForecastDurations refuses a policy whose forecast windows or rate
// floors cannot be converted to wall-clock time at this compression
// (wallForecastWindow, wallRateFloor), naming the policy and the metric.
func checkForecastDurations(p policy, tm timing) error {
	var errs []error
	for _, m := range p.metrics() {
		for _, fd := range tm.forecastDurations() {
			m := *m.DeepCopy()
			mapForecastSelector(&m, fd.key, func(v string) string {
				if _, err := fd.wall(v); err != nil {
					errs = append(errs, fmt.Errorf("policy %q: metric %s: %w", p.Name, metricKey(m), err))
				}
				return v
			})
		}
	}
	return errors.Join(errs...)
}

// policyFile is the --policy-file form of policies: a name, why and an
// autoscaling/v2 HorizontalPodAutoscalerSpec each, in simulated time.
type policyFile struct {
	Policies []struct {
		Name   string                                     `json:"name"`
		Why    string                                     `json:"why,omitempty"`
		Family string                                     `json:"family,omitempty"`
		Spec   *autoscalingv2.HorizontalPodAutoscalerSpec `json:"spec"`
	} `json:"policies"`
}

// readPolicyFile reads the policies of a --policy-file, in JSON or YAML, in
// one of three forms:
//
//   - {"policies": [{"name": ..., "why": ..., "spec": HorizontalPodAutoscalerSpec}]},
//     the spec's times in simulated (real-cluster) seconds;
//   - a shootout JSON report (<trace>.json): each run's policy, once;
//   - a HorizontalPodAutoscaler, or a List of them (kubectl get hpa -o
//     yaml): its spec as a real cluster runs it; the policy is named after
//     the HPA (or its namespace shootout-NAME), the scale target replaced
//     by the fleet's Deployment.
//
// Every policy is validated as the command line's are.
func readPolicyFile(path string, maxReplicas int) ([]policy, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--policy-file: %w", err)
	}
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("--policy-file %s: not JSON or YAML: %w", path, err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(js, &top); err != nil {
		return nil, fmt.Errorf("--policy-file %s: want an object at the top: %w", path, err)
	}
	var pols []policy
	var kind string
	_ = json.Unmarshal(top["kind"], &kind)
	switch {
	case top["policies"] != nil:
		var f policyFile
		if err := yaml.UnmarshalStrict(raw, &f); err != nil {
			return nil, fmt.Errorf("--policy-file %s: %w", path, err)
		}
		for i, e := range f.Policies {
			if e.Spec == nil {
				return nil, fmt.Errorf("--policy-file %s: policy %d (%q): no spec", path, i+1, e.Name)
			}
			why := e.Why
			if why == "" {
				why = "from " + path
			}
			pols = append(pols, policy{Name: e.Name, Spec: e.Spec, Family: e.Family, Why: why})
		}
	case top["runs"] != nil:
		var rep report
		if err := json.Unmarshal(js, &rep); err != nil {
			return nil, fmt.Errorf("--policy-file %s: a shootout report: %w", path, err)
		}
		seen := map[string]bool{}
		for _, run := range rep.Runs {
			if !seen[run.Policy.Name] {
				seen[run.Policy.Name] = true
				pols = append(pols, run.Policy)
			}
		}
	case kind == "HorizontalPodAutoscaler":
		var h autoscalingv2.HorizontalPodAutoscaler
		if err := yaml.UnmarshalStrict(raw, &h); err != nil {
			return nil, fmt.Errorf("--policy-file %s: %w", path, err)
		}
		pols = append(pols, hpaPolicy(h, path))
	case kind == "List" || kind == "HorizontalPodAutoscalerList":
		var l autoscalingv2.HorizontalPodAutoscalerList
		if err := yaml.UnmarshalStrict(raw, &l); err != nil {
			return nil, fmt.Errorf("--policy-file %s: %w", path, err)
		}
		for _, h := range l.Items {
			pols = append(pols, hpaPolicy(h, path))
		}
	default:
		return nil, fmt.Errorf("--policy-file %s: want {\"policies\": [...]}, a shootout report, a HorizontalPodAutoscaler or a List of them", path)
	}
	if len(pols) == 0 {
		return nil, fmt.Errorf("--policy-file %s: no policies", path)
	}
	for i := range pols {
		p := &pols[i]
		if !nameRE.MatchString(p.Name) || p.Name == policyCapacity {
			return nil, fmt.Errorf("--policy-file %s: policy %q: the name must be 1-40 lower-case letters, digits and '-', and not %q", path, p.Name, policyCapacity)
		}
		kinds := 0
		for _, set := range []bool{p.Spec != nil, p.Metric != "", p.Fixed != 0, p.Oracle != nil} {
			if set {
				kinds++
			}
		}
		if kinds > 1 {
			return nil, fmt.Errorf("--policy-file %s: policy %q: give one of spec, metric, fixed and oracle", path, p.Name)
		}
		if p.Spec != nil {
			if err := validateSpec(p.Spec, maxReplicas); err != nil {
				return nil, fmt.Errorf("--policy-file %s: policy %q: %w", path, p.Name, err)
			}
		} else if p.Metric != "" {
			if _, err := userPolicy(p.Name, p.Metric+":"+p.Target, maxReplicas); err != nil {
				return nil, fmt.Errorf("--policy-file %s: %w", path, err)
			}
		} else if p.Oracle != nil {
			if err := p.Oracle.validate(); err != nil {
				return nil, fmt.Errorf("--policy-file %s: policy %q: %w", path, p.Name, err)
			}
		} else if p.Fixed < 1 || p.Fixed > maxReplicas {
			return nil, fmt.Errorf("--policy-file %s: policy %q: neither an HPA, a fixed fleet of 1 to %d replicas nor an oracle", path, p.Name, maxReplicas)
		}
	}
	return pols, nil
}

// hpaPolicy is the policy of an HPA object: named after the HPA, or after
// the namespace for one of the shootout's own (shootout-NAME, or
// shootoutK-NAME from slot K of --side-by-side: slotNamespace).
func hpaPolicy(h autoscalingv2.HorizontalPodAutoscaler, path string) policy {
	name := h.Name
	if n, ok := policyOfNamespace(h.Namespace); ok {
		name = n
	}
	spec := h.Spec.DeepCopy()
	spec.ScaleTargetRef = deploymentRef()
	// The HPA's own workload is the fleet's Deployment here: its object
	// metrics are read on it, its external metrics over its pods.
	for i := range spec.Metrics {
		m := &spec.Metrics[i]
		if m.Object != nil && m.Object.DescribedObject.Kind == "Deployment" {
			m.Object.DescribedObject = deploymentRef()
		}
		if m.External != nil {
			m.External.Metric.Selector = nil
		}
	}
	return policy{Name: name, Spec: spec, Why: fmt.Sprintf("the HPA %s from %s", h.Name, path)}
}

// family is the signal family of a policy, for the frontier's lines:
// "fixed", "gpu", "queue", "batch", "kv", "demand", "forecast", "rate" (a
// request or token rate), "latency" (a latency percentile), "oracle", or
// for several metrics their families joined by "+".
func family(p policy) string {
	if p.Family != "" {
		return p.Family
	}
	if p.Oracle != nil {
		return "oracle"
	}
	if !p.isHPA() {
		return "fixed"
	}
	var out []string
	for _, m := range p.metrics() {
		name := metricName(m)
		f := name
		switch {
		case name == catalog.DemandPerReplica:
			f = "demand"
		case name == catalog.DemandForecastPerReplica:
			f = "forecast"
		case name == metricGPU:
			f = "gpu"
		case name == metricQueue:
			f = "queue"
		case name == metricBatch:
			f = "batch"
		case name == metricKV:
			f = "kv"
		case isRate(name):
			f = "rate"
		case isLatency(name):
			f = "latency"
		}
		out = append(out, f)
	}
	return strings.Join(out, "+")
}

// policyOfNamespace is the policy name in one of the shootout's namespaces
// (slotNamespace's inverse): NAME of shootout-NAME or shootoutK-NAME, K a
// slot number from 2.
func policyOfNamespace(ns string) (string, bool) {
	rest, ok := strings.CutPrefix(ns, "shootout")
	if !ok {
		return "", false
	}
	digits := 0
	for digits < len(rest) && rest[digits] >= '0' && rest[digits] <= '9' {
		digits++
	}
	if digits > 0 && (rest[0] == '0' || rest[:digits] == "1") {
		return "", false // slot 1 is shootout-NAME
	}
	name, ok := strings.CutPrefix(rest[digits:], "-")
	if !ok || name == "" {
		return "", false
	}
	return name, true
}
