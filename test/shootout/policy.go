package main

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Metric names of the adapter (pkg/catalog).
const (
	metricGPU   = "gpu_utilization"
	metricQueue = "inference_queue_size"
	metricBatch = "inference_batch_size"
	metricKV    = "inference_kv_cache_usage"
)

// policy is one way to size the fleet: an HPA on one metric at one target,
// or a fixed number of replicas (Metric empty).
type policy struct {
	Name   string `json:"name"`
	Metric string `json:"metric,omitempty"`
	// Target is the per-pod averageValue, as a Kubernetes quantity.
	Target string `json:"target,omitempty"`
	// Fixed is the replica count of a fixed fleet.
	Fixed int `json:"fixed,omitempty"`
	// Why says where the target comes from.
	Why string `json:"why"`
}

// defaultPolicies are the policies of the issue: the GPU-utilization HPA
// at two typical targets, the queue at GKE's guidance, the batch just under
// the maximum batch, the KV cache, the capacity probe's recommendation, and
// a fixed fleet of peakReplicas.
func defaultPolicies(maxNumSeqs, peakReplicas int) []policy {
	return []policy{
		{Name: "gpu-80", Metric: metricGPU, Target: "800m", Why: "GPU utilization 80%: the usual CPU-style target"},
		{Name: "gpu-60", Metric: metricGPU, Target: "600m", Why: "GPU utilization 60%: a more cautious target"},
		{Name: "queue-3", Metric: metricQueue, Target: "3", Why: "queue size 3 per pod: the low end of GKE's 3-5 guidance"},
		{Name: "batch-90pct", Metric: metricBatch, Target: fmt.Sprint(int(math.Floor(0.9 * float64(maxNumSeqs)))), Why: "batch size 90% of max-num-seqs: GKE's 'just under the maximum batch'"},
		{Name: "kv-80", Metric: metricKV, Target: "800m", Why: "KV-cache usage 80%"},
		// Metric and target set by the capacity probe before the policy runs (probe.go).
		{Name: policyCapacity, Why: "the metric and target the capacity probe recommends for the trace's mix and the SLO"},
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
			return nil, fmt.Errorf("unknown policy %q (known: %s; or NAME=METRIC:TARGET, NAME=fixed:N)", n, strings.Join(known, ", "))
		}
	}
	seen := map[string]bool{}
	for _, p := range out {
		if seen[p.Name] {
			return nil, fmt.Errorf("policy %q is named twice: each runs in its own namespace and report row", p.Name)
		}
		seen[p.Name] = true
	}
	return out, nil
}

// userMetrics are the metrics a user-defined policy may scale on: the pod
// metrics that the simulator's pages and the sim GPUs give a value.
var userMetrics = []string{metricGPU, metricQueue, metricBatch, metricKV}

// nameRE is a policy name: it names a namespace (shootout-NAME) and files.
var nameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$`)

// userPolicy parses a user-defined policy: NAME=METRIC:TARGET or
// NAME=fixed:N.
func userPolicy(name, def string, maxReplicas int) (policy, error) {
	bad := func(format string, args ...any) (policy, error) {
		return policy{}, fmt.Errorf("policy %q: %s (want NAME=METRIC:TARGET, e.g. queue-1=%s:1, or NAME=fixed:N)", name+"="+def, fmt.Sprintf(format, args...), metricQueue)
	}
	if !nameRE.MatchString(name) || name == policyCapacity {
		return bad("the name must be 1-40 lower-case letters, digits and '-', and not %q", policyCapacity)
	}
	metric, target, ok := strings.Cut(def, ":")
	if !ok {
		return bad("no ':'")
	}
	if metric == "fixed" {
		n, err := strconv.Atoi(target)
		if err != nil || n < 1 || n > maxReplicas {
			return bad("a fixed fleet needs 1 to %d replicas (-max-replicas), got %q", maxReplicas, target)
		}
		return policy{Name: name, Fixed: n, Why: fmt.Sprintf("a fixed fleet of %d replicas, defined by the user", n)}, nil
	}
	if !slices.Contains(userMetrics, metric) {
		return bad("unknown metric %q (known: %s)", metric, strings.Join(userMetrics, ", "))
	}
	q, err := resource.ParseQuantity(target)
	if err != nil || q.Sign() <= 0 {
		return bad("the target must be a positive quantity, got %q", target)
	}
	return policy{Name: name, Metric: metric, Target: q.String(), Why: fmt.Sprintf("%s at %s per pod, defined by the user", metric, q.String())}, nil
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

// hpa is the HorizontalPodAutoscaler of policy p for Deployment name, with
// the same replicas bounds and the same (compressed) default behavior for
// every policy.
func hpa(p policy, name string, minReplicas, maxReplicas int32, tm timing) *autoscalingv2.HorizontalPodAutoscaler {
	maxPolicy := autoscalingv2.MaxChangePolicySelect
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: name},
			MinReplicas:    &minReplicas,
			MaxReplicas:    maxReplicas,
			Metrics: []autoscalingv2.MetricSpec{{
				Type: autoscalingv2.PodsMetricSourceType,
				Pods: &autoscalingv2.PodsMetricSource{
					Metric: autoscalingv2.MetricIdentifier{Name: p.Metric},
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: new(resource.MustParse(p.Target))},
				},
			}},
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
				ScaleUp: &autoscalingv2.HPAScalingRules{
					StabilizationWindowSeconds: new(int32(0)),
					SelectPolicy:               &maxPolicy,
					Policies: []autoscalingv2.HPAScalingPolicy{
						{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: tm.wallSeconds(tm.ScaleUpPeriod)},
						{Type: autoscalingv2.PodsScalingPolicy, Value: 4, PeriodSeconds: tm.wallSeconds(tm.ScaleUpPeriod)},
					},
				},
				ScaleDown: &autoscalingv2.HPAScalingRules{
					StabilizationWindowSeconds: new(tm.wallSeconds(tm.ScaleDownWindow)),
					Policies: []autoscalingv2.HPAScalingPolicy{
						{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: tm.wallSeconds(tm.ScaleDownPeriod)},
					},
				},
			},
		},
	}
}
