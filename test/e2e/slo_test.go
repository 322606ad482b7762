// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/test/e2e/framework"
)

const (
	metricTokensPerSecond = "inference_generation_tokens_per_second"
	metricTTFTP90         = "inference_time_to_first_token_p90_seconds"

	sloLoadRate = 20 // arrivals/s, above one pod's ~12 requests/s at max-num-seqs=4
	sloLoadFor  = 30 * time.Second
	sloInFlight = 24
)

// TestSLOSignals: a 1-replica simulator Deployment under a known load (20
// arrivals/s of 64 prompt and 32 output tokens, at most 24 open) and an HPA
// with a Pods metric on generated tokens/s and an Object metric on the
// Deployment's TTFT p90. The HPA must show current values for both and
// scale up; after the load, the Deployment's TTFT p90 read through the
// aggregator must agree with the p90 loadgen measured client-side.
//
// Tolerance: the adapter computes the p90 from the servers' bucket counts,
// interpolating inside a bucket as histogram_quantile does, so the right
// comparison is with the client's TTFTs put through the same buckets and
// the same interpolation (the bucket error is then the same on both sides).
// What remains is where each side stops the clock: the client counts the
// HTTP round trip through the Service stand-in and its own scheduling on a
// busy 2-core machine, the server only its own time; a request's first
// token seen by the client up to a few tens of milliseconds later moves its
// TTFT by that much. So the two must agree within 25% + 50 ms; both, and
// the raw client p90, are logged.
func TestSLOSignals(t *testing.T) {
	e := requireEnv(t, framework.ComponentSim, framework.ComponentAdapter)
	t.Parallel()
	ns := e.Namespace(t)
	d := simDeployment("slo", 1, "--max-num-seqs=4")
	pods := createSimDeployment(t, e, ns, d, 1)
	selector := labels.SelectorFromSet(d.Spec.Selector.MatchLabels)

	// Before the load: the pod is scraped (the question makes it demand),
	// so its window starts before the first request; its p90 is missing,
	// never 0.
	ctx, cancel := context.WithTimeout(context.Background(), 80*time.Second)
	defer cancel()
	pre, cancelPre := context.WithTimeout(ctx, 20*time.Second)
	defer cancelPre()
	var last string
	if err := wait.PollUntilContextCancel(pre, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		v, err := e.ControlPlane.Metrics.Object(ctx, ns, framework.DeploymentKind, d.Name, metricTTFTP90)
		if err == nil {
			return false, fmt.Errorf("a TTFT p90 before any request: %s", v.Value.String())
		}
		noteErr(ctx, &last, err)
		return strings.Contains(last, "no request finished") || strings.Contains(last, "window yet"), nil
	}); err != nil {
		t.Fatalf("before the load, want a 404 saying no request finished; last: %s: %v", last, err)
	}
	buckets, err := ttftBuckets(ctx, e, ns, pods[0].Name)
	if err != nil {
		t.Fatal(err)
	}

	hpa := newHPA(d.Name, 1, 3, framework.PodsMetric(metricTokensPerSecond, "100"), 300) // no scale-down within the test
	hpa.Spec.Metrics = append(hpa.Spec.Metrics, autoscalingv2.MetricSpec{
		Type: autoscalingv2.ObjectMetricSourceType,
		Object: &autoscalingv2.ObjectMetricSource{
			DescribedObject: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name},
			Metric:          autoscalingv2.MetricIdentifier{Name: metricTTFTP90},
			Target:          autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: new(resource.MustParse("200m"))},
		},
	})
	createHPA(t, e, ns, hpa)
	svc, err := framework.StartServiceProxy(func() []string { return e.Kubelet.Endpoints(ns, selector) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	s := startSampler(t, e, ns, d.Name, metricTokensPerSecond, selector)
	l := startLoad(t, svc.URL, sloLoadRate, sloLoadFor, sloInFlight)
	report := l.wait(t, sloLoadFor+time.Minute)
	if l.err != nil {
		t.Fatalf("load: %v", l.err)
	}
	time.Sleep(3 * time.Second) // two scrapes at --scrape-interval=1s: the last observations are on a page
	rows := s.stop()
	t.Logf("load: %s", summary(report))
	logTable(t, metricTokensPerSecond, rows, report, l.start)

	// The HPA read both metrics (its status shows a current value of each)
	// and acted on them.
	if peak := s.peakSince(l.start); peak < 2 {
		t.Errorf("the HPA never scaled up under load (peak %d replicas)", peak)
	}
	var current string
	if err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		h, err := e.ControlPlane.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, d.Name, metav1.GetOptions{})
		if err != nil {
			noteErr(ctx, &current, err)
			return false, nil
		}
		var tokens, ttft string
		for _, m := range h.Status.CurrentMetrics {
			switch {
			case m.Pods != nil && m.Pods.Metric.Name == metricTokensPerSecond && m.Pods.Current.AverageValue != nil:
				tokens = m.Pods.Current.AverageValue.String()
			case m.Object != nil && m.Object.Metric.Name == metricTTFTP90 && m.Object.Current.Value != nil:
				ttft = m.Object.Current.Value.String()
			}
		}
		current = fmt.Sprintf("%s=%q/pod %s=%q", metricTokensPerSecond, tokens, metricTTFTP90, ttft)
		return tokens != "" && ttft != "", nil
	}); err != nil {
		t.Errorf("the HPA status lacks a current value of both metrics: %s: %v", current, err)
	} else {
		t.Logf("HPA status after the load: %s", current)
	}

	// The Deployment's TTFT p90 against the client's.
	var ttfts []float64
	for _, r := range report.Results {
		if r.Err == nil {
			ttfts = append(ttfts, r.TTFT.Seconds())
		}
	}
	if len(ttfts) < 100 {
		t.Fatalf("only %d successful requests", len(ttfts))
	}
	want := bucketedQuantile(0.9, buckets, ttfts)
	sort.Float64s(ttfts)
	raw := ttfts[int(math.Ceil(0.9*float64(len(ttfts))))-1]
	obj, err := e.ControlPlane.Metrics.Object(ctx, ns, framework.DeploymentKind, d.Name, metricTTFTP90)
	if err != nil {
		t.Fatalf("after the load: %v", err)
	}
	got := obj.Value.AsApproximateFloat64()
	tol := 0.25*want + 0.05
	t.Logf("TTFT p90 of %d requests: adapter %.3fs (window %ds), client through the same buckets %.3fs, client raw %.3fs; tolerance ±%.3fs",
		len(ttfts), got, *obj.WindowSeconds, want, raw, tol)
	if math.Abs(got-want) > tol {
		t.Errorf("the adapter's TTFT p90 %.3fs differs from the client's %.3fs (same buckets) by more than %.3fs", got, want, tol)
	}
}

// ttftBuckets reads the TTFT histogram's bucket bounds from a pod's page
// (with the Prometheus text parser, not the adapter's).
func ttftBuckets(ctx context.Context, e *framework.Environment, ns, pod string) ([]float64, error) {
	base, ok := e.Kubelet.Endpoint(ns, pod)
	if !ok {
		return nil, fmt.Errorf("no endpoint for %s/%s", ns, pod)
	}
	fams, err := framework.MetricFamilies(ctx, nil, base+"/metrics")
	if err != nil {
		return nil, err
	}
	f := fams["vllm:time_to_first_token_seconds"]
	if f == nil || len(f.GetMetric()) == 0 {
		return nil, fmt.Errorf("%s/metrics has no vllm:time_to_first_token_seconds", base)
	}
	var le []float64
	for _, b := range f.GetMetric()[0].GetHistogram().GetBucket() {
		le = append(le, b.GetUpperBound())
	}
	if !slices.Contains(le, math.Inf(1)) {
		le = append(le, math.Inf(1))
	}
	return le, nil
}

// bucketedQuantile is histogram_quantile of obs counted into buckets le
// (ascending, +Inf last): linear inside the bucket, from 0 in the first.
func bucketedQuantile(q float64, le, obs []float64) float64 {
	cum := make([]float64, len(le))
	for _, o := range obs {
		for i := range le {
			if o <= le[i] {
				cum[i]++
			}
		}
	}
	rank := q * cum[len(cum)-1]
	for i := range le {
		if cum[i] >= rank {
			if math.IsInf(le[i], 1) {
				return le[i-1]
			}
			lo, below := 0.0, 0.0
			if i > 0 {
				lo, below = le[i-1], cum[i-1]
			}
			return lo + (le[i]-lo)*(rank-below)/(cum[i]-below)
		}
	}
	return math.NaN()
}
