// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Package monitoring takes apart the Grafana dashboard and the
// PrometheusRule that the chart ships (monitoring.dashboard,
// monitoring.prometheusRule): it finds them in a rendered chart, loads the
// rules with Prometheus's own rule loading (model/rulefmt, the checks
// `promtool check rules` makes), parses every PromQL expression with
// Prometheus's promql/parser and lists the series each one names. The tests
// in test/helm check syntax and rules without a cluster; test/e2e checks
// that the adapter and kube-apiserver really expose the series.
package monitoring

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"
)

// DashboardKey is the ConfigMap key holding the dashboard JSON.
const DashboardKey = "inference-metrics-adapter.json"

// Source says where a series that is not the adapter's own comes from.
type Source string

const (
	// SourceAdapterAPIServer: the API server library inside the adapter
	// (k8s.io/apiserver), on the adapter's own /metrics.
	SourceAdapterAPIServer Source = "adapter's API server library"
	// SourceKubeAPIServer: kube-apiserver's /metrics (its aggregator).
	SourceKubeAPIServer Source = "kube-apiserver"
	// SourcePrometheus: made by Prometheus itself for every target.
	SourcePrometheus Source = "Prometheus"
	// SourceModelServer: a model server's own /metrics page, as
	// Prometheus scrapes it (docs/metrics.md, "Source series by server").
	SourceModelServer Source = "model server"
	// SourceGPUAgent: the gpu-agent's page (docs/gpu-agent.md, "The page").
	SourceGPUAgent Source = "gpu-agent"
)

// SelfMetricPrefix starts the name of every series the adapter's own code
// exports.
const SelfMetricPrefix = "inference_metrics_adapter_"

// OtherSeries are the series the dashboard and the alerts may name besides
// the adapter's own (SelfMetricPrefix), and where each comes from.
var OtherSeries = map[string]Source{
	// k8s.io/apiserver's request metrics, for the custom.metrics.k8s.io
	// group; the e2e suite checks them on the adapter's live /metrics.
	"apiserver_request_duration_seconds_bucket": SourceAdapterAPIServer,
	"apiserver_request_total":                   SourceAdapterAPIServer,
	// kube-aggregator's gauge, 1 while an APIService is not Available; the
	// e2e suite checks it on kube-apiserver's live /metrics.
	"aggregator_unavailable_apiservice": SourceKubeAPIServer,
	// Prometheus's synthetic series of every scrape target.
	"up": SourcePrometheus,
	// The model servers' queue, batch and KV-cache gauges (the parser's
	// server table, docs/metrics.md).
	"vllm:num_requests_waiting":   SourceModelServer,
	"vllm:num_requests_running":   SourceModelServer,
	"vllm:kv_cache_usage_perc":    SourceModelServer,
	"vllm:gpu_cache_usage_perc":   SourceModelServer,
	"sglang:num_queue_reqs":       SourceModelServer,
	"sglang:num_running_reqs":     SourceModelServer,
	"sglang:token_usage":          SourceModelServer,
	"tgi_queue_size":              SourceModelServer,
	"tgi_batch_current_size":      SourceModelServer,
	"trtllm_num_requests_waiting": SourceModelServer,
	"trtllm_num_requests_running": SourceModelServer,
	"trtllm_kv_cache_utilization": SourceModelServer,
	// pkg/adapter/agentpage's per-GPU utilization, labelled with the workload pod.
	"gpu_agent_gpu_utilization_ratio": SourceGPUAgent,
}

// Query is one PromQL expression and where it is.
type Query struct {
	Where string
	Expr  string
}

// Render runs `helm template` of the chart with args and returns the output.
func Render(ctx context.Context, helm, chartDir string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, helm, append([]string{"template", "inference-metrics-adapter", chartDir}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("helm template %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes(), nil
}

// Objects splits a rendered chart into its objects.
func Objects(rendered []byte) ([]map[string]any, error) {
	var out []map[string]any
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(rendered), -1) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var o map[string]any
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			return nil, fmt.Errorf("rendered YAML does not parse: %w", err)
		}
		if o != nil {
			out = append(out, o)
		}
	}
	return out, nil
}

// Find returns the objects of a kind.
func Find(objs []map[string]any, kind string) []map[string]any {
	var out []map[string]any
	for _, o := range objs {
		if o["kind"] == kind {
			out = append(out, o)
		}
	}
	return out
}

// DashboardJSON returns the dashboard JSON of the one ConfigMap that holds
// DashboardKey.
func DashboardJSON(objs []map[string]any) ([]byte, error) {
	var found []string
	for _, cm := range Find(objs, "ConfigMap") {
		data, _ := cm["data"].(map[string]any)
		if s, ok := data[DashboardKey].(string); ok {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		return nil, fmt.Errorf("%d ConfigMaps hold %s, want 1", len(found), DashboardKey)
	}
	return []byte(found[0]), nil
}

// RuleGroups returns the spec of the one PrometheusRule, as the YAML of a
// Prometheus rules file.
func RuleGroups(objs []map[string]any) ([]byte, error) {
	rules := Find(objs, "PrometheusRule")
	if len(rules) != 1 {
		return nil, fmt.Errorf("%d PrometheusRules, want 1", len(rules))
	}
	b, err := yaml.Marshal(rules[0]["spec"])
	if err != nil {
		return nil, fmt.Errorf("marshal the PrometheusRule's spec: %w", err)
	}
	return b, nil
}

// NewParser returns the PromQL parser the checks use: Prometheus's
// defaults, as `promtool check rules` has them without feature flags.
func NewParser() parser.Parser { return parser.NewParser(parser.Options{}) }

// LoadRules loads a rules file as Prometheus and promtool do
// (rulefmt.Parse: unknown fields refused, every expression parsed, label
// names and annotation templates checked) and makes promtool's duplicate
// check (no two rules with the same name and labels).
func LoadRules(p parser.Parser, content []byte) (*rulefmt.RuleGroups, error) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	groups, errs := rulefmt.Parse(content, false, model.UTF8Validation, p, logger)
	if len(errs) > 0 {
		return nil, fmt.Errorf("rules do not load: %w", errors.Join(errs...))
	}
	seen := map[string]bool{}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			name := r.Alert + r.Record
			key := name + " " + labels.FromMap(mergeLabels(g.Labels, r.Labels)).String()
			if seen[key] {
				return nil, fmt.Errorf("rule %s is defined twice with the same labels", name)
			}
			seen[key] = true
		}
	}
	return groups, nil
}

func mergeLabels(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// RuleQueries lists the expressions of the rules.
func RuleQueries(groups *rulefmt.RuleGroups) []Query {
	var out []Query
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			out = append(out, Query{Where: "rule " + r.Alert + r.Record, Expr: r.Expr})
		}
	}
	return out
}

// Dashboard is the part of a Grafana dashboard the checks read.
type Dashboard struct {
	Title      string  `json:"title"`
	UID        string  `json:"uid"`
	Panels     []Panel `json:"panels"`
	Templating struct {
		List []Variable `json:"list"`
	} `json:"templating"`
}

// Panel is a dashboard panel; a row holds its collapsed panels.
type Panel struct {
	ID         int            `json:"id"`
	Type       string         `json:"type"`
	Title      string         `json:"title"`
	Datasource map[string]any `json:"datasource"`
	Targets    []Target       `json:"targets"`
	Panels     []Panel        `json:"panels"`
}

// Target is one query of a panel.
type Target struct {
	RefID      string         `json:"refId"`
	Expr       string         `json:"expr"`
	Datasource map[string]any `json:"datasource"`
}

// Variable is a template variable.
type Variable struct {
	Name  string          `json:"name"`
	Type  string          `json:"type"`
	Query json.RawMessage `json:"query"`
}

// LoadDashboard decodes dashboard JSON, refusing unknown trailing data.
func LoadDashboard(b []byte) (*Dashboard, error) {
	var d Dashboard
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("dashboard JSON does not load: %w", err)
	}
	if dec.More() {
		return nil, errors.New("dashboard JSON has data after the object")
	}
	return &d, nil
}

// AllPanels returns the dashboard's panels, rows' nested panels included.
func (d *Dashboard) AllPanels() []Panel {
	var out []Panel
	var walk func([]Panel)
	walk = func(ps []Panel) {
		for _, p := range ps {
			out = append(out, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

// labelValues matches a query variable's label_values(SELECTOR, LABEL).
var labelValues = regexp.MustCompile(`^label_values\((.*),\s*[a-zA-Z_][a-zA-Z0-9_]*\)$`)

// Queries lists the PromQL of every panel target and query variable, with
// the dashboard's variables replaced by example values (see Expand).
func (d *Dashboard) Queries() ([]Query, error) {
	var out []Query
	for _, p := range d.AllPanels() {
		for _, t := range p.Targets {
			e, err := Expand(t.Expr)
			if err != nil {
				return nil, fmt.Errorf("panel %q target %s: %w", p.Title, t.RefID, err)
			}
			out = append(out, Query{Where: fmt.Sprintf("panel %q target %s", p.Title, t.RefID), Expr: e})
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			return nil, fmt.Errorf("variable %s: query is not an object with a query: %w", v.Name, err)
		}
		m := labelValues.FindStringSubmatch(q.Query)
		if m == nil {
			return nil, fmt.Errorf("variable %s: query %q is not label_values(SELECTOR, LABEL)", v.Name, q.Query)
		}
		out = append(out, Query{Where: "variable " + v.Name, Expr: m[1]})
	}
	return out, nil
}

// variableValues are example values of the dashboard's variables and of
// Grafana's built-in ones the dashboard uses, so that its queries parse.
var variableValues = map[string]string{
	"__rate_interval": "2m",
	"job":             ".+",
	"namespace":       ".+",
	"deployment":      ".+",
}

var variableRef = regexp.MustCompile(`\$\{([a-zA-Z_][a-zA-Z0-9_]*)\}|\$([a-zA-Z_][a-zA-Z0-9_]*)`)

// Expand replaces the dashboard's variables in a query by example values;
// a variable it does not know is an error. $1 (label_replace) stays.
func Expand(expr string) (string, error) {
	var unknown []string
	out := variableRef.ReplaceAllStringFunc(expr, func(ref string) string {
		name := strings.Trim(ref, "${}")
		v, ok := variableValues[name]
		if !ok {
			unknown = append(unknown, ref)
			return ref
		}
		return v
	})
	if len(unknown) > 0 {
		return "", fmt.Errorf("unknown variables %v in %q", unknown, expr)
	}
	return out, nil
}

// Series parses expr and returns the metric names its selectors name,
// sorted. A selector must name its series: by name, by __name__="...", or
// by __name__=~"a|b|c" of plain names.
func Series(p parser.Parser, expr string) ([]string, error) {
	e, err := p.ParseExpr(expr)
	if err != nil {
		return nil, fmt.Errorf("PromQL does not parse: %w", err)
	}
	var names []string
	var bad error
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		if vs.Name != "" {
			names = append(names, vs.Name)
			return nil
		}
		for _, m := range vs.LabelMatchers {
			if m.Name != model.MetricNameLabel {
				continue
			}
			switch m.Type {
			case labels.MatchEqual:
				names = append(names, m.Value)
				return nil
			case labels.MatchRegexp:
				if regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*(\|[a-zA-Z_:][a-zA-Z0-9_:]*)*$`).MatchString(m.Value) {
					names = append(names, strings.Split(m.Value, "|")...)
					return nil
				}
			}
		}
		bad = fmt.Errorf("selector %s names no series by name", vs)
		return nil
	})
	if bad != nil {
		return nil, bad
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}
