// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/test/e2e/framework"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/test/monitoring"
)

// TestDashboardSeriesExist: every series the chart's Grafana dashboard and
// PrometheusRule name that the adapter or kube-apiserver exports is on
// their live /metrics: the adapter's own (inference_metrics_adapter_*) and
// its API server library's request metrics for custom.metrics.k8s.io on
// the adapter's page, aggregator_unavailable_apiservice on kube-apiserver's.
// The model servers', the gpu-agent's and Prometheus's own series are
// checked against monitoring.OtherSeries by test/helm.
func TestDashboardSeriesExist(t *testing.T) {
	e := requireEnv(t, framework.ComponentAdapter)
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	want := chartSeries(ctx, t)
	// A metrics question, so that the request metrics have a series for
	// the custom.metrics.k8s.io group; its answer (a 404 is fine) does not
	// matter.
	if _, err := e.ControlPlane.Metrics.Pods(ctx, "default", metricQueue, labels.Everything(), nil); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("ask the metrics API: %v", err)
	}

	var adapter, apiserver map[string][]string
	var last string
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		page, err := adapterPage(ctx, e)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		adapter = seriesOf(page)
		for _, line := range adapter["apiserver_request_duration_seconds_bucket"] {
			if strings.Contains(line, `group="custom.metrics.k8s.io"`) {
				return true, nil
			}
		}
		last = "no apiserver_request_duration_seconds_bucket for group custom.metrics.k8s.io on the adapter's /metrics yet"
		return false, nil
	})
	if err != nil {
		t.Fatalf("adapter /metrics: %s: %v", last, err)
	}
	kube, err := rawGet(ctx, e.ControlPlane.Config, "/metrics")
	if err != nil {
		t.Fatalf("kube-apiserver /metrics: %v", err)
	}
	apiserver = seriesOf(kube)

	var checked []string
	for _, name := range want {
		var page map[string][]string
		where := ""
		switch {
		case strings.HasPrefix(name, monitoring.SelfMetricPrefix) || monitoring.OtherSeries[name] == monitoring.SourceAdapterAPIServer:
			page, where = adapter, "the adapter's /metrics"
		case monitoring.OtherSeries[name] == monitoring.SourceKubeAPIServer:
			page, where = apiserver, "kube-apiserver's /metrics"
		default:
			continue // model server, gpu-agent, Prometheus: see test/helm
		}
		checked = append(checked, name)
		if len(page[name]) == 0 {
			t.Errorf("the dashboard or the alerts use %s, which %s does not expose", name, where)
		}
	}
	if len(checked) == 0 {
		t.Fatal("the dashboard and the alerts name no adapter or kube-apiserver series")
	}
	t.Logf("on the live pages: %s", strings.Join(checked, ", "))
}

// chartSeries renders the chart's dashboard and PrometheusRule and returns
// the series their queries name, sorted.
func chartSeries(ctx context.Context, t *testing.T) []string {
	t.Helper()
	chart, err := framework.ChartDir()
	if err != nil {
		t.Fatal(err)
	}
	helm, err := framework.HelmBinary(os.Getenv(binEnv))
	if err != nil {
		t.Fatal(err)
	}
	rendered, err := monitoring.Render(ctx, helm, chart,
		"--kube-version", framework.KubeVersion, "--namespace", framework.ChartNamespace, "-f", framework.ChartCIValues(chart, "monitoring"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := monitoring.Objects(rendered)
	if err != nil {
		t.Fatal(err)
	}
	dashJSON, err := monitoring.DashboardJSON(objs)
	if err != nil {
		t.Fatal(err)
	}
	dash, err := monitoring.LoadDashboard(dashJSON)
	if err != nil {
		t.Fatal(err)
	}
	queries, err := dash.Queries()
	if err != nil {
		t.Fatal(err)
	}
	spec, err := monitoring.RuleGroups(objs)
	if err != nil {
		t.Fatal(err)
	}
	p := monitoring.NewParser()
	groups, err := monitoring.LoadRules(p, spec)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, q := range append(queries, monitoring.RuleQueries(groups)...) {
		ns, err := monitoring.Series(p, q.Expr)
		if err != nil {
			t.Fatalf("%s: %v", q.Where, err)
		}
		for _, n := range ns {
			names[n] = true
		}
	}
	var out []string
	for n := range names {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// adapterPage reads the adapter's whole /metrics page as the admin.
func adapterPage(ctx context.Context, e *framework.Environment) ([]byte, error) {
	c, err := e.Adapter.HTTPClient(e.ControlPlane.Admin)
	if err != nil {
		return nil, err
	}
	return framework.GetPage(ctx, c, e.Adapter.URL()+"/metrics")
}

// seriesOf maps each sample name on a text-format page to its lines.
func seriesOf(page []byte) map[string][]string {
	out := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(page))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name := line
		if i := strings.IndexAny(line, "{ "); i >= 0 {
			name = line[:i]
		}
		out[name] = append(out[name], line)
	}
	return out
}
