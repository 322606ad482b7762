// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package helm

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/test/monitoring"
)

// renderObjects renders the chart with ci/monitoring-values.yaml and extra
// arguments and decodes it.
func renderObjects(t *testing.T, helm string, extra ...string) []map[string]any {
	t.Helper()
	out, err := render(t, helm, "monitoring", extra...)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := monitoring.Objects([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// documentedSelfMetrics returns the names in docs/metrics.md's table of the
// adapter's own metrics, with a histogram's _bucket, _sum and _count.
func documentedSelfMetrics(t *testing.T) map[string]bool {
	t.Helper()
	doc, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `("+monitoring.SelfMetricPrefix+"[a-z_]+)` \\| (\\w+) \\|").FindAllStringSubmatch(string(doc), -1) {
		out[m[1]] = true
		if m[2] == "histogram" {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				out[m[1]+s] = true
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("docs/metrics.md lists no self-metrics")
	}
	return out
}

// checkSeriesKnown parses each query and checks that it names only the
// adapter's documented self-metrics and the series in monitoring.OtherSeries.
func checkSeriesKnown(t *testing.T, queries []monitoring.Query) {
	t.Helper()
	if len(queries) == 0 {
		t.Fatal("no queries")
	}
	self := documentedSelfMetrics(t)
	p := monitoring.NewParser()
	for _, q := range queries {
		names, err := monitoring.Series(p, q.Expr)
		if err != nil {
			t.Errorf("%s: %v\n%s", q.Where, err, q.Expr)
			continue
		}
		if len(names) == 0 {
			t.Errorf("%s names no series: %s", q.Where, q.Expr)
		}
		for _, n := range names {
			_, other := monitoring.OtherSeries[n]
			if strings.HasPrefix(n, monitoring.SelfMetricPrefix) && !self[n] || !strings.HasPrefix(n, monitoring.SelfMetricPrefix) && !other {
				t.Errorf("%s names %s, which is neither a self-metric in docs/metrics.md nor in monitoring.OtherSeries", q.Where, n)
			}
		}
	}
}

// TestVerifyMonitoringOptIn: without monitoring values the chart renders neither
// the dashboard nor the PrometheusRule; with them, each once, where and as
// labelled as the values say.
func TestVerifyMonitoringOptIn(t *testing.T) {
	helm := helmBinary(t)
	for _, tc := range []struct {
		name                      string
		ci                        string
		args                      []string
		wantDashboards, wantRules int
		wantNamespace             string
		wantLabel                 [2]string
	}{
		{name: "defaults"},
		{name: "servicemonitor only", ci: "servicemonitor"},
		{name: "monitoring", ci: "monitoring", wantDashboards: 1, wantRules: 1, wantNamespace: namespace, wantLabel: [2]string{"release", "prometheus"}},
		{name: "other namespace and label", ci: "monitoring",
			args:           []string{"--set", "monitoring.dashboard.namespace=grafana", "--set", "monitoring.prometheusRule.namespace=grafana", "--set", "monitoring.dashboard.labels.grafana_dashboard=yes", "--set", "monitoring.prometheusRule.additionalLabels.team=ml"},
			wantDashboards: 1, wantRules: 1, wantNamespace: "grafana", wantLabel: [2]string{"team", "ml"}},
		{name: "rules only, own job", args: []string{"--set", "monitoring.prometheusRule.enabled=true", "--set", "monitoring.prometheusRule.job=my-adapter"}, wantRules: 1, wantNamespace: namespace},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := render(t, helm, tc.ci, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			objs, err := monitoring.Objects([]byte(out))
			if err != nil {
				t.Fatal(err)
			}
			var dashboards []map[string]any
			for _, cm := range monitoring.Find(objs, "ConfigMap") {
				if data, _ := cm["data"].(map[string]any); data[monitoring.DashboardKey] != nil {
					dashboards = append(dashboards, cm)
				}
			}
			rules := monitoring.Find(objs, "PrometheusRule")
			if len(dashboards) != tc.wantDashboards || len(rules) != tc.wantRules {
				t.Fatalf("%d dashboard ConfigMaps and %d PrometheusRules, want %d and %d", len(dashboards), len(rules), tc.wantDashboards, tc.wantRules)
			}
			for _, o := range append(dashboards, rules...) {
				if ns := str(o, "metadata", "namespace"); ns != tc.wantNamespace {
					t.Errorf("%s in namespace %q, want %q", o["kind"], ns, tc.wantNamespace)
				}
			}
			for _, cm := range dashboards {
				want := "1"
				if strings.Contains(strings.Join(tc.args, " "), "grafana_dashboard=yes") {
					want = "yes"
				}
				if got := str(cm, "metadata", "labels", "grafana_dashboard"); got != want {
					t.Errorf("dashboard ConfigMap label grafana_dashboard=%q, want %q", got, want)
				}
			}
			for _, r := range rules {
				if k := tc.wantLabel[0]; k != "" && str(r, "metadata", "labels", k) != tc.wantLabel[1] {
					t.Errorf("PrometheusRule labels %v lack %s=%s", get(r, "metadata", "labels"), k, tc.wantLabel[1])
				}
				if strings.Contains(strings.Join(tc.args, " "), "job=my-adapter") && !strings.Contains(fmt.Sprint(r["spec"]), `job="my-adapter"`) {
					t.Errorf("the rules do not select job=\"my-adapter\": %v", r["spec"])
				}
			}
		})
	}
}

// TestVerifyPrometheusRuleNeedsSelfMetrics: the alerts read the self-metrics, so
// enabling them with neither the ServiceMonitor nor a job of one's own is
// refused with a message that says what to set.
func TestVerifyPrometheusRuleNeedsSelfMetrics(t *testing.T) {
	helm := helmBinary(t)
	_, err := render(t, helm, "", "--set", "monitoring.prometheusRule.enabled=true")
	if err == nil || !strings.Contains(err.Error(), "metrics.serviceMonitor.enabled=true, or monitoring.prometheusRule.job") {
		t.Fatalf("render error %v, want the message naming metrics.serviceMonitor.enabled and monitoring.prometheusRule.job", err)
	}
}

// TestVerifyDashboard: the dashboard JSON in the ConfigMap is the chart's file,
// loads, has panels, every panel but a row has a datasource and targets,
// panel ids are unique, and every query parses and names known series.
func TestVerifyDashboard(t *testing.T) {
	helm := helmBinary(t)
	b, err := monitoring.DashboardJSON(renderObjects(t, helm))
	if err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(chartDir + "/dashboards/inference-metrics-adapter.json")
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(file)) != string(b) {
		t.Error("the ConfigMap's dashboard differs from dashboards/inference-metrics-adapter.json")
	}
	d, err := monitoring.LoadDashboard(b)
	if err != nil {
		t.Fatal(err)
	}
	if d.Title == "" || d.UID == "" {
		t.Errorf("dashboard title %q uid %q: both must be set", d.Title, d.UID)
	}
	panels := d.AllPanels()
	if len(panels) == 0 {
		t.Fatal("dashboard has no panels")
	}
	ids := map[int]string{}
	var titles []string
	for _, p := range panels {
		if prev, dup := ids[p.ID]; dup {
			t.Errorf("panels %q and %q share id %d", prev, p.Title, p.ID)
		}
		ids[p.ID] = p.Title
		if p.Type == "row" {
			continue
		}
		titles = append(titles, p.Title)
		if p.Title == "" || p.Datasource["uid"] == nil {
			t.Errorf("panel %d %q: no title or no datasource uid (%v)", p.ID, p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no targets", p.Title)
		}
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" || tg.Datasource["uid"] == nil {
				t.Errorf("panel %q target %s: empty expr or no datasource", p.Title, tg.RefID)
			}
		}
	}
	// The panels the operations guide describes.
	for _, want := range []string{"Scrapes: successful and failed", "Scrape failures by reason", "Target pods by state", "Value age", "Metrics API latency", "Answer cache", "Demand forecasts by estimator", "Queue", "Batch", "KV-cache usage", "GPU utilization"} {
		found := false
		for _, title := range titles {
			found = found || strings.HasPrefix(title, want)
		}
		if !found {
			t.Errorf("no panel titled %q…; panels: %q", want, titles)
		}
	}
	queries, err := d.Queries()
	if err != nil {
		t.Fatal(err)
	}
	checkSeriesKnown(t, queries)
}

// TestVerifyPrometheusRule: the rendered PrometheusRule's spec loads as a rules
// file with Prometheus's own rule loading (the checks `promtool check rules`
// makes), every alert has a for, a severity, a summary, a description and a
// runbook_url whose anchor is a heading of docs/operations.md, and every
// expression names known series.
func TestVerifyPrometheusRule(t *testing.T) {
	helm := helmBinary(t)
	for _, tc := range []struct {
		name string
		args []string
		want []string // alerts
		apis []string // APIServices the unavailable alert watches
	}{
		{name: "custom metrics", want: alertNames, apis: []string{"v1beta1.custom.metrics.k8s.io", "v1beta2.custom.metrics.k8s.io"}},
		{name: "external metrics too", args: []string{"--set", "externalMetrics.enabled=true"}, want: alertNames, apis: []string{"v1beta1.custom.metrics.k8s.io", "v1beta2.custom.metrics.k8s.io", "v1beta1.external.metrics.k8s.io"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := monitoring.RuleGroups(renderObjects(t, helm, tc.args...))
			if err != nil {
				t.Fatal(err)
			}
			groups, err := monitoring.LoadRules(monitoring.NewParser(), spec)
			if err != nil {
				t.Fatalf("%v\n%s", err, spec)
			}
			anchors := operationsAnchors(t)
			var got []string
			for _, g := range groups.Groups {
				for _, r := range g.Rules {
					got = append(got, r.Alert)
					if r.Alert == "" || r.For == 0 || r.Labels["severity"] == "" {
						t.Errorf("rule %q: want an alert with a for and a severity label, got for %v labels %v", r.Alert+r.Record, r.For, r.Labels)
					}
					for _, a := range []string{"summary", "description", "runbook_url"} {
						if r.Annotations[a] == "" {
							t.Errorf("alert %s has no %s", r.Alert, a)
						}
					}
					_, anchor, _ := strings.Cut(r.Annotations["runbook_url"], "#")
					if !strings.HasPrefix(r.Annotations["runbook_url"], "https://") || !strings.Contains(r.Annotations["runbook_url"], "docs/operations.md#") || !anchors[anchor] {
						t.Errorf("alert %s: runbook_url %q is not a heading of docs/operations.md", r.Alert, r.Annotations["runbook_url"])
					}
					if r.Alert == "InferenceMetricsAdapterAPIServiceUnavailable" {
						for _, api := range tc.apis {
							if !strings.Contains(r.Expr, api) {
								t.Errorf("%s does not watch %s: %s", r.Alert, api, r.Expr)
							}
						}
					}
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("alerts %v, want %v", got, tc.want)
			}
			checkSeriesKnown(t, monitoring.RuleQueries(groups))
		})
	}
}

var alertNames = []string{
	"InferenceMetricsAdapterDown",
	"InferenceMetricsAdapterAPIServiceUnavailable",
	"InferenceMetricsAdapterTargetsFailing",
	"InferenceMetricsAdapterValuesStale",
	"InferenceMetricsAdapterAnswersSlow",
}

// operationsAnchors returns the GitHub anchors of docs/operations.md's headings.
func operationsAnchors(t *testing.T) map[string]bool {
	t.Helper()
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	drop := regexp.MustCompile("[^a-z0-9 _-]")
	for _, m := range regexp.MustCompile(`(?m)^#+ (.+)$`).FindAllStringSubmatch(string(doc), -1) {
		out[strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(m[1]), ""), " ", "-")] = true
	}
	return out
}

// TestVerifyExpandRefusesUnknownVariables: a dashboard query with a variable the
// checks do not know fails them rather than parsing by luck.
func TestVerifyExpandRefusesUnknownVariables(t *testing.T) {
	for _, tc := range []struct {
		expr    string
		want    string
		wantErr bool
	}{
		{expr: `rate(x{job=~"$job"}[$__rate_interval])`, want: `rate(x{job=~".+"}[2m])`},
		{expr: `label_replace(x, "d", "$1", "pod", "(.+)")`, want: `label_replace(x, "d", "$1", "pod", "(.+)")`},
		{expr: `x{cluster="${cluster}"}`, wantErr: true},
		{expr: `x{cluster="$cluster"}`, wantErr: true},
	} {
		got, err := monitoring.Expand(tc.expr)
		if (err != nil) != tc.wantErr || err == nil && got != tc.want {
			t.Errorf("Expand(%q) = %q, %v; want %q, error %v", tc.expr, got, err, tc.want, tc.wantErr)
		}
	}
}

// TestVerifySeries: the names a query uses are found through functions,
// aggregations, binary operators and __name__ matchers; a selector without
// a name is refused, and so is PromQL that does not parse.
func TestVerifySeries(t *testing.T) {
	p := monitoring.NewParser()
	for _, tc := range []struct {
		expr    string
		want    string
		wantErr bool
	}{
		{expr: `sum(rate(a_total[5m])) - sum(rate(b_total{x="y"}[5m]))`, want: "a_total,b_total"},
		{expr: `{__name__=~"vllm:x|tgi_y"} or z`, want: "tgi_y,vllm:x,z"},
		{expr: `absent(up{job="j"} == 1)`, want: "up"},
		{expr: `{job="j"}`, wantErr: true},
		{expr: `{__name__=~"vllm:.*"}`, wantErr: true},
		{expr: `sum(rate(a[5m])`, wantErr: true},
	} {
		names, err := monitoring.Series(p, tc.expr)
		if got := strings.Join(names, ","); (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("Series(%q) = %q, %v; want %q, error %v", tc.expr, got, err, tc.want, tc.wantErr)
		}
	}
}

// TestVerifyLoadRulesRefuses: the rule loading refuses what promtool refuses.
func TestVerifyLoadRulesRefuses(t *testing.T) {
	p := monitoring.NewParser()
	for name, rules := range map[string]string{
		"bad PromQL":       "groups:\n- name: g\n  rules:\n  - alert: A\n    expr: sum(rate(x[5m])\n",
		"unknown field":    "groups:\n- name: g\n  rules:\n  - alert: A\n    expr: up == 0\n    severity: x\n",
		"bad template":     "groups:\n- name: g\n  rules:\n  - alert: A\n    expr: up == 0\n    annotations:\n      summary: '{{ $value '\n",
		"duplicate alerts": "groups:\n- name: g\n  rules:\n  - alert: A\n    expr: up == 0\n  - alert: A\n    expr: up == 1\n",
	} {
		if _, err := monitoring.LoadRules(p, []byte(rules)); err == nil {
			t.Errorf("%s: loaded without error", name)
		}
	}
	if _, err := monitoring.LoadRules(p, []byte("groups:\n- name: g\n  rules:\n  - alert: A\n    expr: up == 0\n    for: 5m\n")); err != nil {
		t.Errorf("a good rule: %v", err)
	}
}

// TestVerifyOtherSeriesDocumented: the model servers' and the gpu-agent's series
// in monitoring.OtherSeries are the ones the docs name (docs/metrics.md's
// source series by server, docs/gpu-agent.md's page), so that the list
// cannot drift from what the adapter reads.
func TestVerifyOtherSeriesDocumented(t *testing.T) {
	docs := map[monitoring.Source]string{
		monitoring.SourceModelServer: "../../docs/metrics.md",
		monitoring.SourceGPUAgent:    "../../docs/gpu-agent.md",
	}
	text := map[monitoring.Source]string{}
	for src, path := range docs {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		text[src] = string(b)
	}
	checked := 0
	for name, src := range monitoring.OtherSeries {
		doc, ok := text[src]
		if !ok {
			continue
		}
		checked++
		if !strings.Contains(doc, "`"+name+"`") {
			t.Errorf("%s (%s) is not named in %s", name, src, docs[src])
		}
	}
	if checked == 0 {
		t.Fatal("no model-server or gpu-agent series checked")
	}
}
