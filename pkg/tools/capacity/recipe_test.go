// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package capacity

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"sigs.k8s.io/yaml"
)

// recordedRuns are probe results recorded by real runs (testdata/README.md).
var recordedRuns = []string{"probe-code-trace.json", "probe-sim-64-slots.json"}

// loadRecorded reads a recorded run and re-analyses its steps.
func loadRecorded(t *testing.T, name string) ([]Step, Analysis) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	a := Analyze(rep.Steps, rep.Setup.Cost)
	if !a.Found || a.CapacityStep != rep.Analysis.CapacityStep {
		t.Fatalf("%s: analysis %+v, recorded %+v", name, a, rep.Analysis)
	}
	return rep.Steps, a
}

// scaledObject is the part of a KEDA ScaledObject the recipe writes.
type scaledObject struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Spec struct {
		ScaleTargetRef struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Name       string `json:"name"`
		} `json:"scaleTargetRef"`
		MinReplicaCount *int32 `json:"minReplicaCount"`
		MaxReplicaCount *int32 `json:"maxReplicaCount"`
		Advanced        struct {
			HorizontalPodAutoscalerConfig struct {
				Behavior *autoscalingv2.HorizontalPodAutoscalerBehavior `json:"behavior"`
			} `json:"horizontalPodAutoscalerConfig"`
		} `json:"advanced"`
		Triggers []struct {
			Type              string            `json:"type"`
			MetricType        string            `json:"metricType"`
			Metadata          map[string]string `json:"metadata"`
			AuthenticationRef struct {
				Kind string `json:"kind"`
				Name string `json:"name"`
			} `json:"authenticationRef"`
		} `json:"triggers"`
	} `json:"spec"`
}

// checkBehavior: scale up without a window and at least doubling per 15 s;
// scale down after the window wanted.
func checkBehavior(t *testing.T, what string, b *autoscalingv2.HorizontalPodAutoscalerBehavior, wantDownWindow int32) {
	t.Helper()
	if b == nil || b.ScaleUp == nil || b.ScaleDown == nil {
		t.Fatalf("%s: behavior %+v", what, b)
	}
	if b.ScaleUp.StabilizationWindowSeconds == nil || *b.ScaleUp.StabilizationWindowSeconds != 0 {
		t.Errorf("%s: scale-up window %v, want 0", what, b.ScaleUp.StabilizationWindowSeconds)
	}
	doubles := false
	for _, p := range b.ScaleUp.Policies {
		if p.Type == autoscalingv2.PercentScalingPolicy && p.Value >= 100 && p.PeriodSeconds <= 15 {
			doubles = true
		}
	}
	if !doubles || b.ScaleUp.SelectPolicy == nil || *b.ScaleUp.SelectPolicy != autoscalingv2.MaxChangePolicySelect {
		t.Errorf("%s: scale-up %+v cannot double per 15 s", what, b.ScaleUp)
	}
	if w := b.ScaleDown.StabilizationWindowSeconds; w == nil || *w != wantDownWindow {
		t.Errorf("%s: scale-down window %v, want %d", what, w, wantDownWindow)
	}
}

// TestRecipeOnRecordedProbes: on real probe results, the recipe's targets
// are the capacity step's measurements, its HPA decodes as autoscaling/v2
// with the forecast on the workload and the queue guard, and the
// ScaledObject carries the same recipe.
func TestRecipeOnRecordedProbes(t *testing.T) {
	for _, file := range recordedRuns {
		for _, tc := range []struct {
			name string
			opts HPAOptions
			// wantWindow is the scale-down window for the options' load time.
			wantWindow int32
		}{
			{"defaults", HPAOptions{Name: "llama", MinReplicas: 1, MaxReplicas: 8}, 300},
			{"statefulset, long load, method, namespace", HPAOptions{Name: "llama", Namespace: "serving", MinReplicas: 2, MaxReplicas: 12,
				Kind: KindStatefulSet, ModelLoadTime: 4*time.Minute + 500*time.Millisecond, Method: "holt", ScalerAddress: "ima.ops.svc:9443"}, 481},
			{"peak rate", HPAOptions{Name: "llama", MinReplicas: 1, MaxReplicas: 3, PeakRate: 100, Margin: 0.2, ModelLoadTime: 30 * time.Minute}, 3600},
		} {
			t.Run(file+"/"+tc.name, func(t *testing.T) {
				steps, a := loadRecorded(t, file)
				r, err := NewRecipe(steps, a, tc.opts)
				if err != nil {
					t.Fatal(err)
				}
				s := steps[a.CapacityStep]
				wantDemand := math.Floor((*s.Server.Queue+*s.Server.Batch)*1000) / 1000
				wantGuard := math.Floor(max(*s.Server.Queue, 1)*1000) / 1000
				if r.ForecastTarget != wantDemand || r.GuardTarget != wantGuard || r.CapacityStep != s.Index {
					t.Errorf("targets %v and %v at step %d, want queue+batch %v and max(queue, 1) %v at step %d",
						r.ForecastTarget, r.GuardTarget, r.CapacityStep, wantDemand, wantGuard, s.Index)
				}
				wantKind := tc.opts.Kind
				if wantKind == "" {
					wantKind = KindDeployment
				}
				wantMax := int32(tc.opts.MaxReplicas)
				if tc.opts.PeakRate > 0 {
					wantMax = int32(math.Ceil(tc.opts.PeakRate / (s.Offered * (1 - tc.opts.Margin))))
				}

				// Strict: a misspelt field is an error, not a field left out.
				var hpa autoscalingv2.HorizontalPodAutoscaler
				if err := yaml.UnmarshalStrict([]byte(r.HPA), &hpa); err != nil {
					t.Fatalf("HPA does not decode: %v\n%s", err, r.HPA)
				}
				ref := hpa.Spec.ScaleTargetRef
				if hpa.APIVersion != "autoscaling/v2" || hpa.Kind != "HorizontalPodAutoscaler" || hpa.Name != "llama" || hpa.Namespace != tc.opts.Namespace ||
					ref.APIVersion != "apps/v1" || ref.Kind != wantKind || ref.Name != "llama" ||
					hpa.Spec.MinReplicas == nil || *hpa.Spec.MinReplicas != int32(tc.opts.MinReplicas) || hpa.Spec.MaxReplicas != wantMax || len(hpa.Spec.Metrics) != 2 {
					t.Fatalf("HPA %+v\n%s", hpa.Spec, r.HPA)
				}
				fc, guard := hpa.Spec.Metrics[0], hpa.Spec.Metrics[1]
				if fc.Type != autoscalingv2.ObjectMetricSourceType || fc.Object.DescribedObject.Kind != ref.Kind ||
					fc.Object.DescribedObject.Name != ref.Name || fc.Object.DescribedObject.APIVersion != ref.APIVersion ||
					fc.Object.Metric.Name != MetricDemandForecast || fc.Object.Target.Type != autoscalingv2.ValueMetricType ||
					fc.Object.Target.Value.AsApproximateFloat64() != wantDemand {
					t.Errorf("forecast metric %+v, want an Object metric on the scale target at Value %v", fc.Object, wantDemand)
				}
				sel := fc.Object.Metric.Selector
				switch {
				case tc.opts.Method == "" && sel != nil:
					t.Errorf("selector %v without a method", sel)
				case tc.opts.Method != "" && (sel == nil || sel.MatchLabels[ForecastMethodLabel] != tc.opts.Method):
					t.Errorf("selector %v, want %s=%s", sel, ForecastMethodLabel, tc.opts.Method)
				}
				if guard.Type != autoscalingv2.PodsMetricSourceType || guard.Pods.Metric.Name != MetricQueue ||
					guard.Pods.Target.Type != autoscalingv2.AverageValueMetricType || guard.Pods.Target.AverageValue.AsApproximateFloat64() != wantGuard {
					t.Errorf("guard %+v, want Pods %s AverageValue %v", guard.Pods, MetricQueue, wantGuard)
				}
				checkBehavior(t, "HPA", hpa.Spec.Behavior, tc.wantWindow)

				var so scaledObject
				if err := yaml.UnmarshalStrict([]byte(r.ScaledObject), &so); err != nil {
					t.Fatalf("ScaledObject does not parse: %v\n%s", err, r.ScaledObject)
				}
				sp := so.Spec
				if so.APIVersion != "keda.sh/v1alpha1" || so.Kind != "ScaledObject" || so.Metadata.Name != "llama" || so.Metadata.Namespace != tc.opts.Namespace ||
					sp.ScaleTargetRef.Kind != wantKind || sp.ScaleTargetRef.Name != "llama" || sp.ScaleTargetRef.APIVersion != "apps/v1" ||
					sp.MinReplicaCount == nil || *sp.MinReplicaCount != *hpa.Spec.MinReplicas || sp.MaxReplicaCount == nil || *sp.MaxReplicaCount != wantMax ||
					len(sp.Triggers) != 2 {
					t.Fatalf("ScaledObject %+v\n%s", so, r.ScaledObject)
				}
				checkBehavior(t, "ScaledObject", sp.Advanced.HorizontalPodAutoscalerConfig.Behavior, tc.wantWindow)
				workloadKey, otherKey := "deployment", "statefulSet"
				if wantKind == KindStatefulSet {
					workloadKey, otherKey = otherKey, workloadKey
				}
				wantAddress := tc.opts.ScalerAddress
				if wantAddress == "" {
					wantAddress = DefaultScalerAddress
				}
				for i, want := range []struct {
					metricType, metric string
					target             float64
				}{{"Value", MetricDemandForecast, wantDemand}, {"AverageValue", MetricQueue, wantGuard}} {
					tr := sp.Triggers[i]
					v, err := strconv.ParseFloat(tr.Metadata["targetValue"], 64)
					if tr.Type != "external" || tr.MetricType != want.metricType || tr.Metadata["metricName"] != want.metric || err != nil || v != want.target ||
						tr.Metadata[workloadKey] != "llama" || tr.Metadata[otherKey] != "" || tr.Metadata["scalerAddress"] != wantAddress ||
						tr.Metadata["enableTLS"] != "true" || len(tr.Metadata) != 5 ||
						tr.AuthenticationRef.Kind != "ClusterTriggerAuthentication" || tr.AuthenticationRef.Name != TriggerAuthentication {
						t.Errorf("trigger %d %+v, want %s %s at %v on %s", i, tr, want.metricType, want.metric, want.target, workloadKey)
					}
				}
				if tc.opts.Method != "" && !strings.Contains(r.ScaledObject, "not "+tc.opts.Method) {
					t.Errorf("the ScaledObject does not say it cannot pick method %s:\n%s", tc.opts.Method, r.ScaledObject)
				}

				// The reasons: each piece, with the step and the figures it comes from.
				forecastWhy := r.Reasons[1]
				for _, want := range []string{
					"forecast: " + MetricDemandForecast, r.ForecastQuantity + " requests per replica",
					"queue " + strconv.FormatFloat(*s.Server.Queue, 'g', 3, 64), "batch " + strconv.FormatFloat(*s.Server.Batch, 'g', 3, 64),
					"step " + strconv.Itoa(s.Index) + " at",
				} {
					if !strings.Contains(forecastWhy, want) {
						t.Errorf("the forecast's reason lacks %q: %s", want, forecastWhy)
					}
				}
				all := strings.Join(r.Reasons, "\n")
				for _, want := range []string{"guard: " + MetricQueue, "minReplicas: " + strconv.Itoa(tc.opts.MinReplicas),
					"maxReplicas: " + strconv.Itoa(int(wantMax)), "scale up: no stabilization window",
					"scale down: a stabilization window of " + strconv.Itoa(int(tc.wantWindow)) + " s"} {
					if !strings.Contains(all, want) {
						t.Errorf("reasons lack %q:\n%s", want, all)
					}
				}
				for _, e := range r.Reasons {
					if !strings.Contains(r.HPA, "# - "+e+"\n") || !strings.Contains(r.ScaledObject, "# - "+e+"\n") {
						t.Errorf("a manifest lacks the reason %q", e)
					}
				}
			})
		}
	}
}

// TestRecipeCodeTrace pins the recipe of the recorded code-trace probe
// (step 4, 3.25 req/s: queue 0.242, batch 2.742 per pod), so that a change
// of rule shows as a change of figures.
func TestRecipeCodeTrace(t *testing.T) {
	steps, a := loadRecorded(t, "probe-code-trace.json")
	r, err := NewRecipe(steps, a, HPAOptions{Name: "model", MinReplicas: 1, MaxReplicas: 8})
	if err != nil {
		t.Fatal(err)
	}
	if r.CapacityStep != 4 || r.ForecastQuantity != "2.983" || r.GuardQuantity != "1" || r.ScaleDownWindowSeconds != 300 || r.Kind != KindDeployment {
		t.Errorf("recipe %+v, want step 4, forecast 2.983, guard 1, window 300 s on a Deployment", r)
	}
	if !strings.Contains(r.Reasons[2], "the queue at capacity was 0.242 per pod") {
		t.Errorf("the guard's reason does not say why it is 1: %s", r.Reasons[2])
	}
}

// TestRecipeOptionErrors: every option is validated, each problem named,
// all of them at once.
func TestRecipeOptionErrors(t *testing.T) {
	steps, a := loadRecorded(t, "probe-code-trace.json")
	for _, tc := range []struct {
		name string
		opts HPAOptions
		want []string
	}{
		{"kind", HPAOptions{Kind: "deployment"}, []string{`workload kind must be Deployment or StatefulSet, got "deployment"`}},
		{"negative load", HPAOptions{ModelLoadTime: -time.Second}, []string{"model-load-time must be more than 0 and at most 30m0s", "got -1s"}},
		{"load past the HPA's window", HPAOptions{ModelLoadTime: 31 * time.Minute}, []string{"at most 3600s", "got 31m0s"}},
		{"method", HPAOptions{Method: "arima"}, []string{`forecast-method must be empty (the adapter's default) or one of envelope, holt, staffing, auto, got "arima"`}},
		{"address", HPAOptions{ScalerAddress: "a b:9443"}, []string{`keda-scaler-address must be HOST:PORT, got "a b:9443"`}},
		{"all at once", HPAOptions{Kind: "Pod", ModelLoadTime: -1, Method: "x"}, []string{"workload kind", "model-load-time", "forecast-method"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Name, tc.opts.MinReplicas, tc.opts.MaxReplicas = "m", 1, 2
			err := tc.opts.ValidateRecipe()
			_, rerr := NewRecipe(steps, a, tc.opts)
			for _, e := range []error{err, rerr} {
				for _, want := range tc.want {
					if e == nil || !strings.Contains(e.Error(), want) {
						t.Errorf("error %v, want one containing %q", e, want)
					}
				}
			}
		})
	}
	for _, ok := range []HPAOptions{{}, {Kind: KindStatefulSet, ModelLoadTime: 30 * time.Minute, Method: "staffing", ScalerAddress: "x:1"}} {
		if err := ok.ValidateRecipe(); err != nil {
			t.Errorf("options %+v: %v", ok, err)
		}
	}
}

// TestRecipeWithoutMeasurement: no capacity, no signals at the capacity
// step, or nothing there to target: no recipe, and the reason.
func TestRecipeWithoutMeasurement(t *testing.T) {
	steps, a := loadRecorded(t, "probe-code-trace.json")
	opts := HPAOptions{Name: "m", MinReplicas: 1, MaxReplicas: 2}
	if _, err := NewRecipe(steps, Analysis{CapacityStep: -1}, opts); err == nil || !strings.Contains(err.Error(), "no step met the SLOs") {
		t.Errorf("no capacity: %v", err)
	}
	s := &steps[a.CapacityStep]
	queue, batch := s.Server.Queue, s.Server.Batch
	s.Server.Batch = nil
	if _, err := NewRecipe(steps, a, opts); err == nil || !strings.Contains(err.Error(), "not measured at the capacity step") {
		t.Errorf("no batch measured: %v", err)
	}
	s.Server.Queue, s.Server.Batch = new(0.0), new(0.0)
	if _, err := NewRecipe(steps, a, opts); err == nil || !strings.Contains(err.Error(), "too small for a target") {
		t.Errorf("nothing waiting or running: %v", err)
	}
	s.Server.Queue, s.Server.Batch = queue, batch
	if _, err := NewRecipe(steps, a, opts); err != nil {
		t.Errorf("restored: %v", err)
	}
}
