// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package kedascaler

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/targets"
)

// The trigger metadata keys the scaler reads (docs/keda.md).
const (
	KeyMetricName            = "metricName"
	KeyTargetValue           = "targetValue"
	KeyActivationTargetValue = "activationTargetValue"
	KeyPodSelector           = "podSelector"
	KeyDeployment            = "deployment"
	KeyStatefulSet           = "statefulSet"
	KeyService               = "service"
	KeyModelName             = "modelName"
	// KeyRole restricts the question to the pods of one role of a
	// disaggregated deployment (prefill, decode): the metric selector's
	// role=VALUE (docs/disaggregated.md).
	KeyRole = "role"
)

// kedaKeys are KEDA's own keys of an external trigger, which KEDA passes in
// the metadata too: they are allowed and ignored.
var kedaKeys = []string{"scalerAddress", "enableTLS", "unsafeSsl"}

var ownKeys = []string{KeyMetricName, KeyTargetValue, KeyActivationTargetValue, KeyPodSelector, KeyDeployment, KeyStatefulSet, KeyService, KeyModelName, KeyRole}

// workloadKeys name what a trigger measures; exactly one is set.
var workloadKeys = []string{KeyPodSelector, KeyDeployment, KeyStatefulSet, KeyService}

// Bounds on what one call may ask, so that its work stays small.
const (
	maxKeys         = 32
	maxValueLen     = 1024
	maxRequirements = 16
)

// workloadKind is what a trigger measures.
type workloadKind uint8

const (
	kindPods workloadKind = iota // the pods a label selector picks
	kindDeployment
	kindStatefulSet
	kindService // the front door's held requests for a Service
)

// query is a validated trigger: what to read, in which namespace, and the
// thresholds.
type query struct {
	namespace  string
	metric     string // a served metric's name
	target     float64
	activation float64
	kind       workloadKind
	name       string          // the Deployment, StatefulSet or Service
	pods       labels.Selector // kindPods: the pod selector
	model      string          // empty: every model
	role       string          // empty: every pod, whatever its role
}

// parseQuery validates a ScaledObjectRef's namespace and metadata. Its
// errors are meant for the ScaledObject's author: they name the key.
func parseQuery(namespace string, md map[string]string) (query, error) {
	q := query{namespace: namespace}
	if namespace == "" {
		return q, fmt.Errorf("the ScaledObjectRef has no namespace: the scaler answers only within the ScaledObject's namespace")
	}
	if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		return q, fmt.Errorf("the ScaledObjectRef's namespace %.64q is not a valid namespace name: %s", namespace, strings.Join(errs, "; "))
	}
	if len(md) > maxKeys {
		return q, fmt.Errorf("the trigger metadata has %d keys, more than %d", len(md), maxKeys)
	}
	vals, err := resolveKeys(md)
	if err != nil {
		return q, err
	}

	q.metric = vals[KeyMetricName]
	if _, ok := catalog.ByName(q.metric); !ok && !catalog.IsFrontDoorMetric(q.metric) && !isWorkloadMetric(q.metric) {
		if q.metric == "" {
			return q, fmt.Errorf("%s is required: one of %s", KeyMetricName, servedNames())
		}
		return q, fmt.Errorf("%s %q is not a served metric: one of %s", KeyMetricName, q.metric, servedNames())
	}

	if q.target, err = parseNumber(KeyTargetValue, vals[KeyTargetValue], true); err != nil {
		return q, err
	}
	if v, ok := vals[KeyActivationTargetValue]; ok {
		if q.activation, err = parseNumber(KeyActivationTargetValue, v, false); err != nil {
			return q, err
		}
	}

	var set []string
	for _, k := range workloadKeys {
		if _, ok := vals[k]; ok {
			set = append(set, k)
		}
	}
	if len(set) != 1 {
		return q, fmt.Errorf("set exactly one of %s (got %d: %s)", strings.Join(workloadKeys, ", "), len(set), strings.Join(set, ", "))
	}
	switch set[0] {
	case KeyPodSelector:
		q.kind = kindPods
		if q.pods, err = parsePodSelector(vals[KeyPodSelector]); err != nil {
			return q, err
		}
	case KeyDeployment, KeyStatefulSet, KeyService:
		q.kind = map[string]workloadKind{KeyDeployment: kindDeployment, KeyStatefulSet: kindStatefulSet, KeyService: kindService}[set[0]]
		q.name = vals[set[0]]
		if errs := validation.IsDNS1123Subdomain(q.name); len(errs) > 0 {
			return q, fmt.Errorf("%s %q is not a valid name: %s", set[0], q.name, strings.Join(errs, "; "))
		}
	}

	// The metrics served on one kind of object only.
	switch {
	case catalog.IsFrontDoorMetric(q.metric) && q.kind != kindService:
		return q, fmt.Errorf("%s is served on a Service (the one its front door's pods name): set %s, not %s", q.metric, KeyService, set[0])
	case !catalog.IsFrontDoorMetric(q.metric) && q.kind == kindService:
		return q, fmt.Errorf("a %s serves only %s (its front door's held requests, requests in flight and pool saturation), not %s", KeyService, strings.Join(catalog.FrontDoorMetrics(), ", "), q.metric)
	case isWorkloadMetric(q.metric) && q.kind != kindDeployment && q.kind != kindStatefulSet:
		return q, fmt.Errorf("%s is served on a Deployment or StatefulSet: set %s or %s, not %s", q.metric, KeyDeployment, KeyStatefulSet, set[0])
	}

	if m, ok := vals[KeyModelName]; ok {
		if q.kind == kindService {
			return q, fmt.Errorf("%s does not apply to a %s: its front door's held requests are counted whatever the model", KeyModelName, KeyService)
		}
		if errs := validation.IsValidLabelValue(m); m == "" || len(errs) > 0 {
			return q, fmt.Errorf("%s %q must be usable as a label value, as in an HPA's metric selector (serve the model under such a name, e.g. with vLLM's --served-model-name): %s", KeyModelName, m, strings.Join(errs, "; "))
		}
		q.model = m
	}
	if r, ok := vals[KeyRole]; ok {
		if q.kind == kindService {
			return q, fmt.Errorf("%s does not apply to a %s: a front door's metrics are not per role", KeyRole, KeyService)
		}
		if errs := validation.IsValidLabelValue(r); r == "" || len(errs) > 0 {
			return q, fmt.Errorf("%s %q must be a label value (1 to 63 letters, digits, '-', '_' or '.'), the value of the pods' role label, e.g. prefill or decode: %s", KeyRole, r, strings.Join(errs, "; "))
		}
		q.role = r
	}
	return q, nil
}

// resolveKeys maps KEDA's "<key>FromEnv" (whose value KEDA has already
// resolved from the workload's environment) onto <key>, drops KEDA's own
// keys, and refuses unknown keys and oversized values.
func resolveKeys(md map[string]string) (map[string]string, error) {
	vals := make(map[string]string, len(md))
	keys := make([]string, 0, len(md))
	for k := range md {
		keys = append(keys, k)
	}
	slices.Sort(keys) // deterministic errors
	for _, k := range keys {
		v := md[k]
		if slices.Contains(kedaKeys, k) {
			continue
		}
		key := strings.TrimSuffix(k, "FromEnv")
		if !slices.Contains(ownKeys, key) {
			return nil, fmt.Errorf("unknown metadata key %q: the keys are %s (and KEDA's %s)", k, strings.Join(ownKeys, ", "), strings.Join(kedaKeys, ", "))
		}
		if len(v) > maxValueLen {
			return nil, fmt.Errorf("%s is %d bytes long, more than %d", k, len(v), maxValueLen)
		}
		if _, dup := vals[key]; dup {
			return nil, fmt.Errorf("%s is set both directly and through %sFromEnv", key, key)
		}
		vals[key] = strings.TrimSpace(v)
	}
	return vals, nil
}

// parseNumber reads a finite number; positive when required (a target),
// otherwise not negative (an activation threshold).
func parseNumber(key, s string, target bool) (float64, error) {
	if s == "" {
		if target {
			return 0, fmt.Errorf("%s is required: a positive number, e.g. \"5\"", key)
		}
		return 0, fmt.Errorf("%s is empty: set a number or leave the key out", key)
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%s %q is not a finite number", key, s)
	}
	if target && v <= 0 {
		return 0, fmt.Errorf("%s must be positive, got %s", key, s)
	}
	if v < 0 {
		return 0, fmt.Errorf("%s must not be negative, got %s", key, s)
	}
	return v, nil
}

// parsePodSelector parses a label selector that must pick pods: not empty
// nor negations only (targets.SelectsWholeNamespace), at most maxRequirements requirements, and no model keys (modelName picks
// models).
func parsePodSelector(s string) (labels.Selector, error) {
	sel, err := labels.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", KeyPodSelector, s, err)
	}
	if targets.SelectsWholeNamespace(sel) {
		return nil, fmt.Errorf("%s %.64q must pick pods by a label they have (e.g. app=llm): an empty selector, or one of negations only (!x, x!=y, x notin (...)), would sum a whole namespace", KeyPodSelector, s)
	}
	reqs, _ := sel.Requirements()
	if len(reqs) > maxRequirements {
		return nil, fmt.Errorf("%s has %d requirements, more than %d", KeyPodSelector, len(reqs), maxRequirements)
	}
	for _, r := range reqs {
		if r.Key() == "model_name" || r.Key() == "model" {
			return nil, fmt.Errorf("%s picks pods; pick a model with %s instead of %q", KeyPodSelector, KeyModelName, r.Key())
		}
	}
	return sel, nil
}

// isWorkloadMetric reports whether metric is served on a Deployment or
// StatefulSet only: the demand per replica and its forecast.
func isWorkloadMetric(metric string) bool {
	return metric == catalog.DemandPerReplica || metric == catalog.DemandForecastPerReplica
}

func servedNames() string {
	var names []string
	for _, s := range catalog.All() {
		names = append(names, s.Name())
	}
	names = append(names, catalog.DemandPerReplica+" (deployment or statefulSet)", catalog.DemandForecastPerReplica+" (deployment or statefulSet)")
	for _, m := range catalog.FrontDoorMetrics() {
		names = append(names, m+" (service)")
	}
	return strings.Join(names, ", ")
}
