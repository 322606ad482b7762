// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/test/e2e/framework"
)

// row is one line of the table, the CSV and the chart.
type row struct {
	t          time.Duration // since the load started
	offered    float64       // scheduled arrivals per second
	served     float64       // responses completed per second
	desired    int32         // HPA status
	current    int32         // HPA status
	ready      int32         // the Deployment's ready pods
	hpaQueue   float64       // the HPA's current average queue per pod; NaN when it has none
	pods       []podValues   // from the custom metrics API, by pod name
	ttftP90    time.Duration
	ttftCount  int
	sampleErrs []string
}

// podValues are one pod's signals as the adapter serves them; a signal the
// adapter left out (stale, failed scrape) is NaN, never 0.
type podValues struct {
	name             string
	queue, batch, kv float64
}

// sampler reads what the HPA sees and does: the pods' values with the
// HPA's typed custom metrics client.
type sampler struct {
	client   kubernetes.Interface
	metrics  *framework.MetricsClient
	selector labels.Selector
}

// sample reads the HPA, the Deployment and each pod's queue, batch and KV
// through the aggregated custom metrics API. Failures are noted in the row.
func (s *sampler) sample(ctx context.Context, r *row) {
	r.hpaQueue = nan()
	if h, err := s.client.AutoscalingV2().HorizontalPodAutoscalers(namespace).Get(ctx, name, metav1.GetOptions{}); err != nil {
		r.sampleErrs = append(r.sampleErrs, "hpa: "+err.Error())
	} else {
		r.desired, r.current = h.Status.DesiredReplicas, h.Status.CurrentReplicas
		for _, m := range h.Status.CurrentMetrics {
			if m.Pods != nil && m.Pods.Current.AverageValue != nil {
				r.hpaQueue = m.Pods.Current.AverageValue.AsApproximateFloat64()
			}
		}
	}
	if d, err := s.client.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{}); err != nil {
		r.sampleErrs = append(r.sampleErrs, "deployment: "+err.Error())
	} else {
		r.ready = d.Status.ReadyReplicas
	}
	byPod := map[string]*podValues{}
	for _, metric := range []string{queueMetric, batchMetric, kvMetric} {
		vals, err := s.metrics.PodValues(ctx, namespace, metric, s.selector)
		if err != nil {
			r.sampleErrs = append(r.sampleErrs, metric+": "+err.Error())
			continue
		}
		for pod, v := range vals {
			pv, ok := byPod[pod]
			if !ok {
				pv = &podValues{name: pod, queue: nan(), batch: nan(), kv: nan()}
				byPod[pod] = pv
			}
			switch metric {
			case queueMetric:
				pv.queue = v
			case batchMetric:
				pv.batch = v
			case kvMetric:
				pv.kv = v
			}
		}
	}
	for _, pv := range byPod {
		r.pods = append(r.pods, *pv)
	}
	sort.Slice(r.pods, func(i, j int) bool { return r.pods[i].name < r.pods[j].name })
}

// stats are the mean and max over the pods that reported v.
func stats(pods []podValues, v func(podValues) float64) (mean, maxV float64, n int) {
	sum := 0.0
	maxV = nan()
	for _, p := range pods {
		x := v(p)
		if x != x { // NaN: left out by the adapter
			continue
		}
		sum += x
		if n == 0 || x > maxV {
			maxV = x
		}
		n++
	}
	if n == 0 {
		return nan(), nan(), 0
	}
	return sum / float64(n), maxV, n
}

// header and format render the live table.
func header() string {
	return fmt.Sprintf("%6s %6s %6s %9s %5s %8s %9s  %s", "time", "load", "served", "replicas", "ready", "HPA q/pod", "TTFT p90", "per pod: queue/batch/KV (custom metrics API)")
}

func (r row) format() string {
	t := r.t.Round(time.Second)
	ttft := "-"
	if r.ttftCount > 0 {
		ttft = r.ttftP90.Round(time.Millisecond).String()
	}
	var pods []string
	for _, p := range r.pods {
		pods = append(pods, fmt.Sprintf("%s %s/%s/%s", p.name[max(0, len(p.name)-5):], num(p.queue), num(p.batch), pct(p.kv)))
	}
	podCol := strings.Join(pods, "  ")
	if len(r.sampleErrs) > 0 && len(pods) == 0 {
		podCol = "(" + firstLine(r.sampleErrs[0]) + ")"
	}
	return fmt.Sprintf("%3d:%02d %6.1f %6.1f %4d/%-4d %5d %8s %9s  %s",
		int(t.Minutes()), int(t.Seconds())%60, r.offered, r.served, r.desired, r.current, r.ready, num(r.hpaQueue), ttft, podCol)
}

func num(v float64) string {
	if v != v {
		return "-"
	}
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.1f", v), "0"), ".")
}

func pct(v float64) string {
	if v != v {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", v*100)
}

func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	if len(first) > 100 {
		first = first[:100] + "…"
	}
	return first
}
