// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/forecast"
)

// Metric names of the adapter (pkg/adapter/catalog).
const (
	metricGPU   = "gpu_utilization"
	metricQueue = "inference_queue_size"
	metricBatch = "inference_batch_size"
	metricKV    = "inference_kv_cache_usage"
)

// policy is one way to size the fleet: an HPA, or a fixed number of
// replicas (no HPA). The HPA is either the short form, one Pods metric
// (Metric) at a per-pod averageValue (Target), as the default policies and
// the older reports have it, or any HPA spec (Spec).
type policy struct {
	Name   string `json:"name"`
	Metric string `json:"metric,omitempty"`
	// Target is the per-pod averageValue, as a Kubernetes quantity.
	Target string `json:"target,omitempty"`
	// Fixed is the replica count of a fixed fleet.
	Fixed int `json:"fixed,omitempty"`
	// Oracle is a clairvoyant fleet: no HPA, its replicas set on a
	// schedule computed from the trace (oracle.go).
	Oracle *oracle `json:"oracle,omitempty"`
	// Spec is an HPA of any shape: Pods, Object and External metrics,
	// several of them, its own behavior and replica bounds. Its times are
	// simulated (real-cluster) seconds, compressed when the HPA is created;
	// rate targets are per simulated second. Its scaleTargetRef is the
	// fleet's Deployment. Unset bounds and behavior are every policy's.
	Spec *autoscalingv2.HorizontalPodAutoscalerSpec `json:"spec,omitempty"`
	// Family is the signal family for the frontier (family()); empty: derived.
	Family string `json:"family,omitempty"`
	// Why says where the target comes from.
	Why string `json:"why"`
	// probeFamily, when set, is a sweep policy whose target the capacity
	// probe sets before it runs (sweep.go).
	probeFamily string
}

// isHPA reports whether p scales with an HPA (not a fixed fleet or an
// oracle).
func (p policy) isHPA() bool { return p.Metric != "" || p.Spec != nil }

// metrics are the HPA's metrics, in simulated units.
func (p policy) metrics() []autoscalingv2.MetricSpec {
	if p.Spec != nil {
		return p.Spec.Metrics
	}
	if p.Metric == "" {
		return nil
	}
	return []autoscalingv2.MetricSpec{podsMetric(p.Metric, resource.MustParse(p.Target))}
}

// podsMetric is a Pods metric at a per-pod averageValue.
func podsMetric(name string, target resource.Quantity) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{
		Type: autoscalingv2.PodsMetricSourceType,
		Pods: &autoscalingv2.PodsMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: name},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &target},
		},
	}
}

// metricText names p's metrics as the tables show them, e.g.
// "inference_queue_size" or "object/inference_demand_per_replica + pods/gpu_utilization".
func (p policy) metricText() string {
	if p.Oracle != nil {
		return "oracle: the trace's arrivals per minute"
	}
	if p.Spec == nil {
		return p.Metric
	}
	var out []string
	for _, m := range p.Spec.Metrics {
		out = append(out, metricKey(m))
	}
	return strings.Join(out, " + ")
}

// targetText is p's targets as the tables show them, e.g. "800m",
// "3 (Value) + 800m" or "4 replicas".
func (p policy) targetText() string {
	if p.Oracle != nil {
		t := strconv.FormatFloat(p.Oracle.Capacity, 'g', -1, 64) + " req/s per replica"
		if p.Oracle.Lag > 0 {
			t += ", lag " + p.Oracle.Lag.String()
		}
		if p.Oracle.Hold > 0 {
			t += ", hold " + p.Oracle.Hold.String()
		}
		return t
	}
	if !p.isHPA() {
		return strconv.Itoa(p.Fixed) + " replicas"
	}
	if p.Spec == nil {
		return p.Target
	}
	var out []string
	for _, m := range p.Spec.Metrics {
		t := metricTarget(m)
		switch {
		case t == nil:
			out = append(out, "?")
		case t.Type == autoscalingv2.ValueMetricType && t.Value != nil:
			out = append(out, t.Value.String()+" (Value)")
		case t.AverageValue != nil:
			out = append(out, t.AverageValue.String())
		default:
			out = append(out, "?")
		}
	}
	return strings.Join(out, " + ")
}

// defaultPolicies are the policies of the issue: the GPU-utilization HPA
// at two typical targets, the queue at GKE's guidance, the batch just under
// the maximum batch, the KV cache, the capacity probe's recommendation, and
// a fixed fleet of peakReplicas.
func defaultPolicies(peakReplicas int) []policy {
	return []policy{
		{Name: "gpu-80", Metric: metricGPU, Target: "800m", Why: "GPU utilization 80%: the usual CPU-style target"},
		{Name: "gpu-60", Metric: metricGPU, Target: "600m", Why: "GPU utilization 60%: a more cautious target"},
		{Name: "queue-3", Metric: metricQueue, Target: "3", Why: "queue size 3 per pod: the low end of GKE's 3-5 guidance"},
		// Targets set from the probe before they run (sweep.go): 90% of the
		// batch, 80% of the KV-cache usage a saturated replica reaches.
		{Name: policyBatch90, Family: "batch", probeFamily: policyBatch90, Why: "batch size 90% of what a saturated replica reaches: GKE's 'just under the maximum batch'"},
		{Name: policyKV80, Family: "kv", probeFamily: policyKV80, Why: "KV-cache usage 80% of what a saturated replica reaches"},
		// Metric and target set by the capacity probe before the policy runs (probe.go).
		{Name: policyCapacity, Why: "the metric and target the capacity probe recommends for the trace's mix and the SLO"},
		// The whole HPA the capacity probe writes, as written and under every policy's behavior (sweep.go).
		{Name: policyRecipe, Family: "recipe", probeFamily: policyRecipe, Why: "the capacity probe's recipe: the demand forecast, the queue guard and their behavior"},
		{Name: policyRecipeSignal, Family: "forecast+queue", probeFamily: policyRecipeSignal, Why: "the recipe's metrics and targets under every policy's behavior"},
		{Name: "fixed-peak", Fixed: peakReplicas, Why: "a fixed fleet of max-replicas, sized for the trace's peak: the upper bound on cost"},
	}
}

// selectPolicies returns the policies named in names (comma-separated), in
// that order; "all" or "" is every policy. An entry NAME=METRIC:TARGET
// defines an HPA policy of the user's (METRIC one of the pod metrics the
// shootout's fleet serves, TARGET a positive per-pod quantity), and
// NAME=fixed:N a fixed fleet of N replicas, at most maxReplicas.
func selectPolicies(all []policy, names string, maxReplicas int) ([]policy, error) {
	if names == "" || names == "all" {
		return all, nil
	}
	var out []policy
	for _, n := range strings.Split(names, ",") {
		if name, def, ok := strings.Cut(n, "="); ok {
			p, err := userPolicy(strings.TrimSpace(name), strings.TrimSpace(def), maxReplicas)
			if err != nil {
				return nil, err
			}
			out = append(out, p)
			continue
		}
		found := false
		for _, p := range all {
			if p.Name == strings.TrimSpace(n) {
				out = append(out, p)
				found = true
			}
		}
		if !found {
			var known []string
			for _, p := range all {
				known = append(known, p.Name)
			}
			return nil, fmt.Errorf("unknown policy %q (known: %s; or NAME=[KIND/]METRIC:TARGET[+...][@OPTION...], NAME=fixed:N, NAME=oracle:CAPACITY[@lag=D][@hold=D])", n, strings.Join(known, ", "))
		}
	}
	if err := checkNames(out); err != nil {
		return nil, err
	}
	return out, nil
}

// checkNames refuses a policy name given twice (on the command line, in a
// policy file or by a sweep).
func checkNames(pols []policy) error {
	seen := map[string]bool{}
	for _, p := range pols {
		if seen[p.Name] {
			return fmt.Errorf("policy %q is named twice: each runs in its own namespace and report row", p.Name)
		}
		seen[p.Name] = true
	}
	return nil
}

// timing holds every time constant of a run, in simulated time, and the
// compression that maps them to wall-clock time.
type timing struct {
	Compress float64 `json:"compress"`
	// Kubernetes and adapter defaults, in simulated (real-cluster) time.
	HPASync           time.Duration `json:"hpaSync"`
	ScaleUpPeriod     time.Duration `json:"scaleUpPeriod"`
	ScaleDownWindow   time.Duration `json:"scaleDownWindow"`
	ScaleDownPeriod   time.Duration `json:"scaleDownPeriod"`
	ColdStart         time.Duration `json:"coldStart"`
	ScrapeInterval    time.Duration `json:"scrapeInterval"`
	ScrapeTimeout     time.Duration `json:"scrapeTimeout"`
	MaxAge            time.Duration `json:"maxAge"`
	AgentInterval     time.Duration `json:"agentInterval"`
	TerminationGrace  time.Duration `json:"terminationGrace"`
	ReadinessProbeGap time.Duration `json:"readinessProbeGap"`
	// SLOWindow is the adapter's window of the latency percentiles.
	SLOWindow time.Duration `json:"sloWindow"`
	// ForecastWindow is the history the adapter's demand forecast reads.
	ForecastWindow time.Duration `json:"forecastWindow"`
	// ForecastFloorWindow is the span whose largest demand the forecast's
	// floor (a metric selector's floor=) is a share of.
	ForecastFloorWindow time.Duration `json:"forecastFloorWindow"`
}

// newTiming is the real defaults: the HPA controller's 15 s sync and its
// default behavior (scale up by up to 100% or 4 pods per 15 s, scale down
// after a 300 s stabilization window by up to 100% per 15 s), the adapter's
// 5 s scrape (3 s timeout, 15 s max age), the gpu-agent's 5 s interval and
// a 30 s termination grace period, plus the cold start given.
func newTiming(compress float64, coldStart time.Duration) timing {
	return timing{
		Compress:          compress,
		HPASync:           15 * time.Second,
		ScaleUpPeriod:     15 * time.Second,
		ScaleDownWindow:   300 * time.Second,
		ScaleDownPeriod:   15 * time.Second,
		ColdStart:         coldStart,
		ScrapeInterval:    5 * time.Second,
		ScrapeTimeout:     3 * time.Second,
		MaxAge:            15 * time.Second,
		AgentInterval:     5 * time.Second,
		TerminationGrace:  30 * time.Second,
		ReadinessProbeGap: time.Duration(float64(100*time.Millisecond) * compress),
		SLOWindow:         time.Minute,
		ForecastWindow:    5 * time.Minute,
		// The adapter's default.
		ForecastFloorWindow: forecast.DefaultFloorWindow,
	}
}

// wall maps a simulated duration to wall-clock time.
func (t timing) wall(d time.Duration) time.Duration {
	return time.Duration(float64(d) / t.Compress)
}

// wallSeconds is the wall-clock length of d in whole seconds, at least 1:
// the HPA's behavior fields are whole seconds. The compressions that keep
// every constant exact are those that divide 15 (1, 3, 5, 15).
func (t timing) wallSeconds(d time.Duration) int32 {
	return int32(max(1, math.Round(t.wall(d).Seconds())))
}

// inexact lists the HPA behavior constants that whole wall-clock seconds
// cannot hold at this compression, with what they become in simulated time.
func (t timing) inexact() []string {
	var out []string
	for _, c := range []struct {
		name string
		d    time.Duration
	}{{"scale-up period", t.ScaleUpPeriod}, {"scale-down window", t.ScaleDownWindow}, {"scale-down period", t.ScaleDownPeriod}} {
		got := time.Duration(float64(time.Duration(t.wallSeconds(c.d))*time.Second) * t.Compress)
		if d := got - c.d; d > time.Millisecond || d < -time.Millisecond {
			out = append(out, fmt.Sprintf("%s %s becomes %s", c.name, c.d, got.Round(time.Millisecond)))
		}
	}
	return out
}
