// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package kubectlplugin

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/escape"
)

// PodsReport is `contrast -o json`: one entry per Running pod.
type PodsReport struct {
	Namespace string    `json:"namespace"`
	Selector  string    `json:"selector"`
	Pods      []PodJSON `json:"pods"`
}

// PodJSON is one pod of PodsReport. Values holds every served signal by
// its API name, null when the API answered nothing for the pod.
type PodJSON struct {
	Pod     string              `json:"pod"`
	GPUs    int64               `json:"gpus"`
	Values  map[string]*float64 `json:"values"`
	Reading string              `json:"reading"`
}

// NewPodsReport is the JSON form of rows.
func NewPodsReport(namespace, selector string, rows []Row) PodsReport {
	r := PodsReport{Namespace: namespace, Selector: selector, Pods: make([]PodJSON, 0, len(rows))}
	for _, row := range rows {
		p := PodJSON{Pod: row.Pod, GPUs: row.GPUs, Values: make(map[string]*float64, catalog.Count), Reading: Reading(row)}
		for _, s := range catalog.All() {
			if v, ok := row.Values[s]; ok {
				p.Values[s.Name()] = &v
			} else {
				p.Values[s.Name()] = nil
			}
		}
		r.Pods = append(r.Pods, p)
	}
	return r
}

// TopReport is `top -o json`.
type TopReport struct {
	Namespace string `json:"namespace"`
	Selector  string `json:"selector"`
	// SLO holds the bounds the SLO figures use, in seconds (null: not set).
	SLO struct {
		TimeToFirstTokenSeconds *float64 `json:"timeToFirstTokenSeconds"`
		E2ELatencySeconds       *float64 `json:"e2eLatencySeconds"`
	} `json:"slo"`
	// GPUHourPrice is the price of one GPU-hour the cost figures use (null: not set).
	GPUHourPrice *float64 `json:"gpuHourPrice"`
	// OpenCost is where the cost figures come from instead (null: not used).
	OpenCost    *OpenCostSource `json:"openCost"`
	Deployments []Summary       `json:"deployments"`
}

// OpenCostSource names the OpenCost API and window of the cost figures.
type OpenCostSource struct {
	URL    string `json:"url"`
	Window string `json:"window"`
}

// NewTopReport is the JSON form of rows.
func NewTopReport(namespace, selector string, slo SLO, pricing Pricing, rows []Summary) TopReport {
	r := TopReport{Namespace: namespace, Selector: selector, Deployments: rows}
	if rows == nil {
		r.Deployments = []Summary{}
	}
	if slo.TimeToFirstToken > 0 {
		r.SLO.TimeToFirstTokenSeconds = ptr(slo.TimeToFirstToken.Seconds())
	}
	if slo.E2ELatency > 0 {
		r.SLO.E2ELatencySeconds = ptr(slo.E2ELatency.Seconds())
	}
	if pricing.GPUHourPrice > 0 {
		r.GPUHourPrice = ptr(pricing.GPUHourPrice)
	}
	if oc := pricing.OpenCost; oc != nil {
		r.OpenCost = &OpenCostSource{URL: oc.URL, Window: oc.Window}
	}
	return r
}

// WriteJSON writes v as indented JSON.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("writing JSON: %w", err)
	}
	return nil
}

// WriteTop prints the Deployment rows as an aligned table; the SLO column
// appears with an SLO, the cost column with a GPU-hour price.
func WriteTop(w io.Writer, rows []Summary, slo SLO, pricing Pricing) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := "DEPLOYMENT\tPODS\tGPUS\tGPU BUSY\tSM ACTIVE\tTOKENS/S\tREQ/S\tTTFT P90\tE2E P90\tTOKENS/GPU-S"
	if slo.IsSet() {
		head += "\tSLO MET"
		if pricing.IsSet() {
			head += "\tCOST/1K SLO REQ"
		}
	}
	fmt.Fprintln(tw, head)
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s", escape.Printable(r.Deployment), r.Pods, r.GPUsAllocated,
			opt(r.GPUBusyShare, pct), opt(r.GPUSMActiveShare, pct),
			opt(r.GenerationTokensPerSecond, num), opt(r.RequestsPerSecond, num),
			opt(r.TimeToFirstToken.P90, secs), opt(r.E2ELatency.P90, secs), opt(r.TokensPerGPUSecond, num))
		if slo.IsSet() {
			fmt.Fprintf(tw, "\t%s", shareCell(r.SLOMetShare))
			if pricing.IsSet() {
				fmt.Fprintf(tw, "\t%s", rangeCell(r.CostPer1000SLOMetRequests))
			}
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

func opt(v *float64, f func(float64) string) string {
	if v == nil {
		return "-"
	}
	return f(*v)
}

// secs prints a latency: milliseconds below a second, else seconds.
func secs(v float64) string {
	if v < 1 {
		return fmt.Sprintf("%.0fms", v*1000)
	}
	return num(v) + "s"
}

// shareCell prints a share range: "≥90%", "<50%" or "90-99%".
func shareCell(r *Range) string {
	if r == nil || r.Min == nil || r.Max == nil {
		return "-"
	}
	switch {
	case *r.Max >= 1:
		return "≥" + pct(*r.Min)
	case *r.Min <= 0:
		return "<" + pct(*r.Max)
	default:
		return pct(*r.Min) + "-" + pct(*r.Max)
	}
}

// rangeCell prints a range of amounts: "0.12-0.34", or "≥0.12" unbounded above.
func rangeCell(r *Range) string {
	switch {
	case r == nil || r.Min == nil:
		return "-"
	case r.Max == nil:
		return "≥" + money(*r.Min)
	default:
		return money(*r.Min) + "-" + money(*r.Max)
	}
}

func money(v float64) string { return fmt.Sprintf("%.4g", v) }
