// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/forecast"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/capacity"
)

// sweepFamilies maps each family of --sweep to the metric term its policies
// scale on (the short syntax's [KIND/]METRIC); fixed is a fixed fleet. The
// forecast families scale on the demand forecast alone (Object, Value):
// forecast with the adapter's default method, forecast-METHOD with the
// metric selector method=METHOD (forecastMethod).
var sweepFamilies = map[string]string{
	"gpu":          metricGPU,
	"queue":        metricQueue,
	"batch":        metricBatch,
	"kv":           metricKV,
	"demand":       "object/" + catalog.DemandPerReplica,
	familyForecast: "object/" + catalog.DemandForecastPerReplica,
	familyForecast + "-" + string(forecast.Envelope): "object/" + catalog.DemandForecastPerReplica,
	familyForecast + "-" + string(forecast.Holt):     "object/" + catalog.DemandForecastPerReplica,
	familyForecast + "-" + string(forecast.Staffing): "object/" + catalog.DemandForecastPerReplica,
	familyForecast + "-" + string(forecast.Auto):     "object/" + catalog.DemandForecastPerReplica,
	"rps":    "inference_requests_per_second",
	"tokens": "inference_generation_tokens_per_second",
	"fixed":  "fixed",
}

// familyForecast is the family of the demand forecast at the adapter's
// default method; forecast-METHOD picks a method.
const familyForecast = "forecast"

// forecastMethod reports whether fam is a forecast family and the method
// its selector names (empty: the adapter's default).
func forecastMethod(fam string) (method string, ok bool) {
	if fam == familyForecast {
		return "", true
	}
	m, ok := strings.CutPrefix(fam, familyForecast+"-")
	return m, ok && sweepFamilies[fam] != ""
}

// minSweepTargets is the fewest targets a sweep tries: enough to span
// "scales too late" to "over-provisions".
const minSweepTargets = 4

// probeMargin is the headroom of a probe-derived target: the signal's mean
// at the SLO capacity × (1 - probeMargin), as the capacity policy's. The
// forecast families take the recipe's target instead, with no margin.
const probeMargin = 0.2

// targetProbe is the --sweep target that stands for the probe-derived one.
const targetProbe = "probe"

// sweep is one --sweep flag: a family and its targets.
type sweep struct {
	Family  string
	Targets []string
}

// sweepList is the --sweep flags, parsed.
type sweepList []sweep

// parseSweeps parses every --sweep value (parseSweep), listing every bad
// one.
func parseSweeps(values []string) (sweepList, error) {
	var out sweepList
	var errs []error
	for _, v := range values {
		s, err := parseSweep(out, v)
		if err != nil {
			errs = append(errs, fmt.Errorf("--sweep %w", err))
			continue
		}
		out = append(out, s)
	}
	return out, errors.Join(errs...)
}

// parseSweep parses FAMILY=T1,T2,...: a known family not already in
// earlier, at least minSweepTargets targets besides "probe", each a
// positive quantity (a replica count for fixed), none twice.
func parseSweep(earlier sweepList, v string) (sweep, error) {
	fam, list, ok := strings.Cut(v, "=")
	if !ok {
		return sweep{}, fmt.Errorf("%q: want FAMILY=T1,T2,... (families: %s)", v, joinFamilies())
	}
	if _, ok := sweepFamilies[fam]; !ok {
		return sweep{}, fmt.Errorf("%q: unknown family %q (families: %s)", v, fam, joinFamilies())
	}
	if slices.ContainsFunc(earlier, func(s sweep) bool { return s.Family == fam }) {
		return sweep{}, fmt.Errorf("%q: family %s swept twice", v, fam)
	}
	s := sweep{Family: fam}
	n := 0
	for _, t := range strings.Split(list, ",") {
		t = strings.TrimSpace(t)
		if slices.Contains(s.Targets, t) {
			return sweep{}, fmt.Errorf("%q: target %q given twice", v, t)
		}
		s.Targets = append(s.Targets, t)
		if t == targetProbe {
			if fam == "fixed" {
				return sweep{}, fmt.Errorf("%q: a fixed fleet has no probe-derived target", v)
			}
			continue
		}
		n++
		if fam == "fixed" {
			if k, err := strconv.Atoi(t); err != nil || k < 1 {
				return sweep{}, fmt.Errorf("%q: a fixed fleet's target is a replica count, got %q", v, t)
			}
			continue
		}
		if q, err := resource.ParseQuantity(t); err != nil || q.Sign() <= 0 {
			return sweep{}, fmt.Errorf("%q: target %q is not a positive quantity", v, t)
		}
	}
	if n < minSweepTargets {
		return sweep{}, fmt.Errorf("%q: %d targets; a sweep needs at least %d, from one that scales too late to one that over-provisions", v, n, minSweepTargets)
	}
	return s, nil
}

func familyNames() []string {
	var out []string
	for k := range sweepFamilies {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// joinFamilies is the families, for messages and --help.
func joinFamilies() string { return strings.Join(familyNames(), ", ") }

// sweepPolicy is policy name of family fam at target q: the family's
// metric term at q, with the forecast method's selector for
// forecast-METHOD.
func sweepPolicy(fam, name string, q resource.Quantity, maxReplicas int) (policy, error) {
	p, err := userPolicy(name, sweepFamilies[fam]+":"+q.String(), maxReplicas)
	if err != nil {
		return policy{}, err
	}
	p.Family = fam
	if method, ok := forecastMethod(fam); ok && method != "" {
		p.Spec.Metrics[0].Object.Metric.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{catalog.ForecastMethodLabel: method}}
	}
	return p, nil
}

// sweepPolicies generates the policies of the sweeps: FAMILY-TARGET for
// each target (the target as a quantity, lower case: gpu-800m, queue-3,
// fixed-4), FAMILY-probe for the probe-derived one. With probe nil the
// probe-derived policies are placeholders that the probe run on each trace
// fills in (resolveProbePolicies).
func sweepPolicies(sweeps sweepList, probe *probeResult, maxReplicas int) ([]policy, error) {
	var out []policy
	var errs []error
	for _, s := range sweeps {
		for _, t := range s.Targets {
			if t == targetProbe {
				if probe == nil {
					out = append(out, policy{Name: s.Family + "-" + targetProbe, Family: s.Family, probeFamily: s.Family,
						Why: "the target derived from the capacity probe run on the trace"})
					continue
				}
				p, err := probePolicy(s.Family, probe, maxReplicas)
				if err != nil {
					errs = append(errs, err)
					continue
				}
				out = append(out, p)
				continue
			}
			if s.Family == "fixed" {
				p, err := userPolicy("fixed-"+t, "fixed:"+t, maxReplicas)
				if err != nil {
					errs = append(errs, fmt.Errorf("--sweep fixed: %w", err))
					continue
				}
				p.Family = s.Family
				out = append(out, p)
				continue
			}
			q := resource.MustParse(t)
			name := s.Family + "-" + strings.ToLower(q.String())
			p, err := sweepPolicy(s.Family, name, q, maxReplicas)
			if err != nil {
				errs = append(errs, fmt.Errorf("--sweep %s: %w", s.Family, err))
				continue
			}
			p.Why = fmt.Sprintf("sweep of %s: target %s", s.Family, q.String())
			out = append(out, p)
		}
	}
	return out, errors.Join(errs...)
}

// probeTarget derives a family's target from a capacity probe: the
// signal's mean per replica at the SLO capacity (the highest rate whose
// step and every step below it met the SLO) × (1 - probeMargin). The
// probe measures the server's queue, batch and KV cache, and its rates
// (completed requests and output tokens per second); demand is queue +
// batch. It has no GPU utilization (the probe runs without a gpu-agent).
func probeTarget(fam string, probe *probeResult) (float64, string, error) {
	if probe == nil || !probe.Analysis.Found || probe.Analysis.CapacityStep < 0 || probe.Analysis.CapacityStep >= len(probe.Steps) {
		return 0, "", fmt.Errorf("--sweep %s=probe: the capacity probe found no capacity", fam)
	}
	st := probe.Steps[probe.Analysis.CapacityStep]
	sig := st.Server
	need := func(name string, v ...*float64) (float64, error) {
		var sum float64
		for _, x := range v {
			if x == nil {
				return 0, fmt.Errorf("--sweep %s=probe: the probe did not measure the %s at capacity", fam, name)
			}
			sum += *x
		}
		return sum, nil
	}
	var v float64
	var what string
	var err error
	switch fam {
	case "queue":
		v, err = need("queue", sig.Queue)
		what = "queue"
	case "batch":
		v, err = need("batch", sig.Batch)
		what = "batch"
	case "kv":
		v, err = need("KV-cache usage", sig.KV)
		what = "KV-cache usage"
	case "demand":
		v, err = need("queue and batch", sig.Queue, sig.Batch)
		what = "queue + batch"
	case "rps":
		v, what = st.Throughput, "completed requests per second"
	case "tokens":
		v, what = st.OutputTokens, "output tokens per second"
	default:
		return 0, "", fmt.Errorf("--sweep %s=probe: the capacity probe does not measure the %s signal (it runs without a gpu-agent)", fam, fam)
	}
	if err != nil {
		return 0, "", err
	}
	t := v * (1 - probeMargin)
	if !(t > 0) {
		return 0, "", fmt.Errorf("--sweep %s=probe: the %s at capacity was %g: no positive target", fam, what, v)
	}
	return t, fmt.Sprintf("%s at the SLO capacity (%.3g req/s per replica): %.3g × (1 - %g)", what, probe.Analysis.Capacity, v, probeMargin), nil
}

// probePolicy is the policy FAMILY-probe on the probe-derived target: for
// a forecast family the recipe's (forecastProbeTarget), for any other
// probeTarget's.
func probePolicy(fam string, probe *probeResult, maxReplicas int) (policy, error) {
	var t float64
	var why string
	var err error
	if _, ok := forecastMethod(fam); ok {
		t, why, err = forecastProbeTarget(fam, probe, maxReplicas)
	} else {
		t, why, err = probeTarget(fam, probe)
	}
	if err != nil {
		return policy{}, err
	}
	q := resource.NewMilliQuantity(max(1, int64(t*1000+0.5)), resource.DecimalSI)
	p, err := sweepPolicy(fam, fam+"-"+targetProbe, *q, maxReplicas)
	if err != nil {
		return policy{}, fmt.Errorf("--sweep %s=probe: %w", fam, err)
	}
	p.Why = "probe-derived: " + why
	return p, nil
}

// forecastProbeTarget is a forecast family's probe-derived target, the
// recipe's own (capacity.NewRecipe, as the recipe policies run it): the
// requests waiting plus running one replica held at the SLO capacity, with
// no margin (the forecast's headroom is the margin).
func forecastProbeTarget(fam string, probe *probeResult, maxReplicas int) (float64, string, error) {
	if probe == nil || !probe.Analysis.Found || probe.Analysis.CapacityStep < 0 || probe.Analysis.CapacityStep >= len(probe.Steps) {
		return 0, "", fmt.Errorf("--sweep %s=probe: the capacity probe found no capacity", fam)
	}
	method, _ := forecastMethod(fam)
	r, err := capacity.NewRecipe(probe.Steps, probe.Analysis, capacity.HPAOptions{
		Name: deploymentName, MinReplicas: 1, MaxReplicas: maxReplicas, Method: method,
	})
	if err != nil {
		return 0, "", fmt.Errorf("--sweep %s=probe: %w", fam, err)
	}
	sig := probe.Steps[probe.Analysis.CapacityStep].Server
	return r.ForecastTarget, fmt.Sprintf("the recipe's forecast target, queue + batch at the SLO capacity (%.3g req/s per replica): %.3g + %.3g, no margin",
		probe.Analysis.Capacity, *sig.Queue, *sig.Batch), nil
}

// readProbeFile reads a recorded capacity probe: a shootout report
// (<trace>.json, its "capacity") or the capacity command's --json report.
func readProbeFile(path string) (*probeResult, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--probe-file: %w", err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, fmt.Errorf("--probe-file %s: %w", path, err)
	}
	if c, ok := top["capacity"]; ok {
		var p probeResult
		if err := json.Unmarshal(c, &p); err != nil {
			return nil, fmt.Errorf("--probe-file %s: capacity: %w", path, err)
		}
		return &p, nil
	}
	if top["steps"] != nil && top["analysis"] != nil {
		var r capacity.Report
		if err := json.Unmarshal(raw, &r); err != nil {
			return nil, fmt.Errorf("--probe-file %s: %w", path, err)
		}
		return &probeResult{How: "the capacity report " + path, Setup: r.Setup, Steps: r.Steps, Analysis: r.Analysis, Recommendation: r.Recommendation}, nil
	}
	return nil, fmt.Errorf("--probe-file %s: neither a shootout report with a capacity probe nor a capacity report (steps, analysis)", path)
}

// resolveProbePolicies fills in the probe-derived placeholders of pols
// from probe.
func resolveProbePolicies(pols []policy, probe *probeResult, tm timing, maxReplicas int) ([]policy, error) {
	out := slices.Clone(pols)
	for i, p := range out {
		if p.probeFamily == "" {
			continue
		}
		if p.probeFamily == policyBatch90 || p.probeFamily == policyKV80 {
			np, err := guidelinePolicy(p.probeFamily, probe, maxReplicas)
			if err != nil {
				return nil, err
			}
			out[i] = np
			continue
		}
		if p.probeFamily == policyRecipe || p.probeFamily == policyRecipeSignal {
			np, err := recipePolicy(p.probeFamily, probe, tm, maxReplicas)
			if err != nil {
				return nil, err
			}
			out[i] = np
			continue
		}
		np, err := probePolicy(p.probeFamily, probe, maxReplicas)
		if err != nil {
			return nil, err
		}
		out[i] = np
	}
	return out, nil
}

// The recipe policies: the whole HPA the capacity probe writes (docs/capacity.md,
// "The recipe"), from the same probe run as every probe-derived target.
const (
	// policyRecipe is the recipe as written: the demand forecast at its
	// Value target, the per-pod queue as its guard, and its behavior (the
	// scale-down window for the shootout's cold start, at most half the
	// replicas removed per minute).
	policyRecipe = "recipe"
	// policyRecipeSignal is the recipe's two metrics and targets under every
	// policy's behavior: beside policyRecipe it tells the signal's part
	// from the behavior's.
	policyRecipeSignal = "recipe-signal"
)

// recipePolicy is policyRecipe or policyRecipeSignal for a probe run: the
// recipe's HPA as capacity.NewRecipe writes it (its model load time the
// shootout's cold start), read back as a policy file's HPA is.
// minReplicas stays the shootout's, as for every policy.
func recipePolicy(name string, probe *probeResult, tm timing, maxReplicas int) (policy, error) {
	if probe == nil {
		return policy{}, fmt.Errorf("%s: the capacity probe did not run", name)
	}
	r, err := capacity.NewRecipe(probe.Steps, probe.Analysis, capacity.HPAOptions{
		Name: deploymentName, Namespace: "shootout-" + name, MinReplicas: 1, MaxReplicas: maxReplicas, ModelLoadTime: tm.ColdStart,
	})
	if err != nil {
		return policy{}, fmt.Errorf("%s: %w", name, err)
	}
	var h autoscalingv2.HorizontalPodAutoscaler
	if err := yaml.UnmarshalStrict([]byte(r.HPA), &h); err != nil {
		return policy{}, fmt.Errorf("%s: reading the recipe's HPA back: %w", name, err)
	}
	p := hpaPolicy(h, "the capacity probe's recipe")
	p.Name, p.Family = name, "recipe"
	p.Spec.MinReplicas = nil
	p.Why = fmt.Sprintf("the capacity probe's recipe: %s at %s (Value) + %s at %s per pod, scale-down window %d s",
		r.ForecastMetric, r.ForecastQuantity, r.GuardMetric, r.GuardQuantity, r.ScaleDownWindowSeconds)
	if name == policyRecipeSignal {
		p.Spec.Behavior = nil
		p.Family = "forecast+queue"
		p.Why = fmt.Sprintf("the recipe's metrics and targets (%s at %s + %s at %s) under every policy's behavior",
			r.ForecastMetric, r.ForecastQuantity, r.GuardMetric, r.GuardQuantity)
	}
	if err := validateSpec(p.Spec, maxReplicas); err != nil {
		return policy{}, fmt.Errorf("%s: %w", name, err)
	}
	return p, nil
}

// The guideline policies whose targets are read from the probe.
const (
	policyBatch90 = "batch-90pct"
	policyKV80    = "kv-80"
)

// guidelinePolicy is batch-90pct or kv-80 on a target the signal can reach:
// 90% of the batch, or 80% of the KV-cache usage, that a saturated replica
// holds (the largest step mean of the probe, whose plan goes past the
// model's saturation). With a step budget of 2,048 tokens and prompts of
// about 2,000, a saturated replica runs about 30 requests and fills about a
// sixth of its KV cache: 90% of max-num-seqs (230) or 80% of the cache
// would never be reached, and the HPA would never scale.
func guidelinePolicy(name string, probe *probeResult, maxReplicas int) (policy, error) {
	frac, fam, what := 0.9, "batch", "batch"
	read := func(s capacity.Signals) *float64 { return s.Batch }
	if name == policyKV80 {
		frac, fam, what = 0.8, "kv", "KV-cache usage"
		read = func(s capacity.Signals) *float64 { return s.KV }
	}
	if probe == nil {
		return policy{}, fmt.Errorf("%s: the capacity probe did not run", name)
	}
	peak, at := 0.0, -1
	for i, st := range probe.Steps {
		if v := read(st.Server); v != nil && *v > peak {
			peak, at = *v, i
		}
	}
	if at < 0 {
		return policy{}, fmt.Errorf("%s: the capacity probe measured no %s above 0", name, what)
	}
	t := frac * peak
	q := resource.NewMilliQuantity(max(1, int64(t*1000+0.5)), resource.DecimalSI)
	p, err := userPolicy(name, sweepFamilies[fam]+":"+q.String(), maxReplicas)
	if err != nil {
		return policy{}, fmt.Errorf("%s: %w", name, err)
	}
	st := probe.Steps[at]
	p.Family = fam
	p.Why = fmt.Sprintf("%s %.0f%% of the largest the probe saw a replica hold: %.3g at %.3g req/s (step %d; the probe's plan goes past saturation)",
		what, frac*100, peak, st.Offered, st.Index)
	return p, nil
}
