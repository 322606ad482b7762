// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/loadgen"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/test/e2e/framework"
)

// simModel is the model name every simulated server serves.
const simModel = "e2e-model"

// Metric names the adapter serves.
const (
	metricQueue = "inference_queue_size"
	metricBatch = "inference_batch_size"
	metricKV    = "inference_kv_cache_usage"
	metricFill  = "inference_batch_fill"
)

// simDeployment is a Deployment whose pods the kubelet stand-in runs as
// inference-sim with the given flags.
func simDeployment(name string, replicas int32, simArgs ...string) *appsv1.Deployment {
	args := append([]string{"--model=" + simModel, "--seed=1", "--shutdown-timeout=1s"}, simArgs...)
	return framework.SimDeployment(name, replicas, args)
}

// createSimDeployment creates d in ns and waits until want pods are Running
// with an IP; it returns them sorted by name.
func createSimDeployment(t *testing.T, e *framework.Environment, ns string, d *appsv1.Deployment, want int) []corev1.Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if _, err := e.ControlPlane.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create deployment %s/%s: %v", ns, d.Name, err)
	}
	pods, err := waitRunningPods(ctx, e.ControlPlane.Client, ns, labels.SelectorFromSet(d.Spec.Selector.MatchLabels), want)
	if err != nil {
		t.Fatalf("deployment %s/%s: %v", ns, d.Name, err)
	}
	return pods
}

// waitRunningPods waits until exactly want pods match selector and all are
// Running with a pod IP.
func waitRunningPods(ctx context.Context, c kubernetes.Interface, ns string, selector labels.Selector, want int) ([]corev1.Pod, error) {
	var pods []corev1.Pod
	var last string
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		list, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
		if err != nil {
			return false, err
		}
		pods = list.Items
		running := 0
		for _, p := range pods {
			if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" && p.DeletionTimestamp == nil {
				running++
			}
		}
		last = fmt.Sprintf("%d pods, %d running", len(pods), running)
		return running == want && len(pods) == want, nil
	})
	if err != nil {
		return nil, fmt.Errorf("wait for %d running pods (last: %s): %w", want, last, err)
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	return pods, nil
}

// rawRequest is a GET of an API path (with an optional query) as config,
// for tests of the wire itself: what reading a metric means is
// framework.MetricsClient.
func rawRequest(config *rest.Config, path string) (*rest.Request, error) {
	c, err := kubernetes.NewForConfig(config)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	u, err := url.Parse(path)
	if err != nil {
		return nil, fmt.Errorf("parse %q: %w", path, err)
	}
	req := c.CoreV1().RESTClient().Get().AbsPath(u.Path)
	for k, vs := range u.Query() {
		for _, v := range vs {
			req = req.Param(k, v)
		}
	}
	return req, nil
}

// rawGet GETs an API path (with an optional query) as config and returns
// the body; an error status is an API status error.
func rawGet(ctx context.Context, config *rest.Config, path string) ([]byte, error) {
	req, err := rawRequest(config, path)
	if err != nil {
		return nil, err
	}
	return req.DoRaw(ctx)
}

// rawGetStatus GETs an API path (with an optional query) as config and
// returns the status code and body, for errors too.
func rawGetStatus(ctx context.Context, config *rest.Config, path string) (int, []byte, error) {
	req, err := rawRequest(config, path)
	if err != nil {
		return 0, nil, err
	}
	res := req.Do(ctx)
	var code int
	res.StatusCode(&code)
	body, err := res.Raw()
	if code != 0 {
		err = nil // an HTTP answer, error or not: the caller reads code and body
	}
	return code, body, err
}

// podMetricsPath is the v1beta2 path for metric over ns's pods matching
// selector, for raw questions.
func podMetricsPath(ns, metric string, selector labels.Selector) string {
	return fmt.Sprintf("/apis/custom.metrics.k8s.io/v1beta2/namespaces/%s/pods/*/%s?labelSelector=%s",
		ns, metric, url.QueryEscape(selector.String()))
}

// simGauge reads a simulator's /metrics page and sums the samples of name
// (over engines and models).
func simGauge(ctx context.Context, baseURL, name string) (float64, error) {
	byModel, err := simModelGauge(ctx, baseURL, name)
	if err != nil {
		return 0, err
	}
	sum := 0.0
	for _, v := range byModel {
		sum += v
	}
	return sum, nil
}

// simModelGauge reads a simulator's /metrics page (at most 2 s) and sums
// the samples of the gauge name per model_name label.
func simModelGauge(ctx context.Context, baseURL, name string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	families, err := framework.MetricFamilies(ctx, nil, baseURL+"/metrics")
	if err != nil {
		return nil, err
	}
	f, ok := families[name]
	if !ok {
		return nil, fmt.Errorf("%s/metrics has no %s", baseURL, name)
	}
	out := map[string]float64{}
	for _, m := range f.GetMetric() {
		model := ""
		for _, l := range m.GetLabel() {
			if l.GetName() == "model_name" {
				model = l.GetValue()
			}
		}
		out[model] += m.GetGauge().GetValue()
	}
	return out, nil
}

// load is a loadgen run in the background.
type load struct {
	start  time.Time
	cancel context.CancelFunc
	done   chan struct{}
	report *loadgen.Report
	err    error
}

// startLoad drives url with Poisson arrivals at rate per second for d,
// keeping at most maxInFlight requests open. Requests have 64 prompt and
// 32 output tokens.
func startLoad(t *testing.T, url string, rate float64, d time.Duration, maxInFlight int) *load {
	t.Helper()
	return startLoadFor(t, url, simModel, rate, d, maxInFlight)
}

// startLoadFor is startLoad with requests for the named model.
func startLoadFor(t *testing.T, url, model string, rate float64, d time.Duration, maxInFlight int) *load {
	t.Helper()
	return startLoadOutput(t, url, model, 32, rate, d, maxInFlight)
}

// startLoadOutput is startLoadFor with requests of output tokens each.
func startLoadOutput(t *testing.T, url, model string, output int, rate float64, d time.Duration, maxInFlight int) *load {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{start: time.Now(), cancel: cancel, done: make(chan struct{})}
	cfg := loadgen.Config{
		URL:            url,
		Model:          model,
		Endpoint:       loadgen.EndpointCompletions,
		Schedule:       []loadgen.Phase{{Rate: rate, Duration: d}},
		PromptLen:      loadgen.Fixed{N: 64},
		OutputLen:      loadgen.Fixed{N: output},
		Seed:           1,
		TimeScale:      1,
		MaxInFlight:    maxInFlight,
		RequestTimeout: time.Minute,
	}
	go func() {
		defer close(l.done)
		l.report, l.err = loadgen.Run(ctx, cfg)
	}()
	t.Cleanup(func() { l.stop() })
	return l
}

// stop cancels the load and waits (bounded) for it to end.
func (l *load) stop() {
	l.cancel()
	select {
	case <-l.done:
	case <-time.After(30 * time.Second):
	}
}

// finished returns the report once the load has ended, else nil.
func (l *load) finished() *loadgen.Report {
	select {
	case <-l.done:
		return l.report
	default:
		return nil
	}
}

// wait waits for the schedule to end and returns the report.
func (l *load) wait(t *testing.T, timeout time.Duration) *loadgen.Report {
	t.Helper()
	select {
	case <-l.done:
	case <-time.After(timeout):
		t.Fatalf("load did not finish within %s", timeout)
	}
	if l.err != nil {
		t.Fatalf("load: %v", l.err)
	}
	return l.report
}

// summary counts a report's requests and failures, for the log.
func summary(r *loadgen.Report) string {
	failed := 0
	var first error
	for _, res := range r.Results {
		if res.Err != nil {
			failed++
			if first == nil {
				first = res.Err
			}
		}
	}
	s := fmt.Sprintf("%d requests sent, %d failed, %d arrivals dropped at the in-flight cap, %s",
		len(r.Results), failed, len(r.Drops), r.Wall.Round(100*time.Millisecond))
	if first != nil {
		s += fmt.Sprintf(" (first failure: %v)", first)
	}
	return s
}

// p90TTFT is the 90th percentile time to first token of the successful
// requests sent in [from, to) after the load started.
func p90TTFT(r *loadgen.Report, from, to time.Duration) (time.Duration, int) {
	var ttfts []time.Duration
	for _, res := range r.Results {
		if res.Err == nil && res.Sent >= from && res.Sent < to {
			ttfts = append(ttfts, res.TTFT)
		}
	}
	if len(ttfts) == 0 {
		return 0, 0
	}
	sort.Slice(ttfts, func(i, j int) bool { return ttfts[i] < ttfts[j] })
	return ttfts[(len(ttfts)*9+9)/10-1], len(ttfts)
}

// formatValues renders per-pod values as "suffix=value ..." sorted by pod.
func formatValues(vals map[string]float64) string {
	if len(vals) == 0 {
		return "-"
	}
	names := make([]string, 0, len(vals))
	for n := range vals {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s=%g", n[max(0, len(n)-5):], vals[n]))
	}
	return strings.Join(parts, " ")
}

// noteErr records err in *last for a failure message, unless ctx has ended
// (the error is then about the deadline, not about what was polled).
func noteErr(ctx context.Context, last *string, err error) {
	if ctx.Err() == nil {
		*last = err.Error()
	}
}
