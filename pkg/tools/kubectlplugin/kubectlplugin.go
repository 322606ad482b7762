// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Package kubectlplugin renders the side-by-side view of GPU activity and the
// model server's own saturation signals, one row per pod, with a one-line
// reading of what the two say together. It owns the reading rules and the
// table; fetching the values is the caller's business (see Fetch).
package kubectlplugin

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/escape"
)

// Row is what is known about one pod. A signal missing from Values was not
// measured (the API answered nothing for it) and is shown as "-".
type Row struct {
	Pod string
	// GPUs is the number of GPUs the pod requests (nvidia.com/gpu limits).
	GPUs   int64
	Values map[catalog.Signal]float64
}

func (r Row) get(s catalog.Signal) (float64, bool) {
	v, ok := r.Values[s]
	return v, ok
}

// Thresholds of the reading.
const (
	busyGPU    = 0.8 // utilization at or above this reads as "GPU busy"
	idleGPU    = 0.3 // at or below this reads as "GPU looks idle"
	fullKV     = 0.9 // KV usage at or above this is memory-bound
	roomyBatch = 0.7 // batch fill below this leaves headroom
)

// Reading returns the one-line reading for a row.
func Reading(r Row) string {
	q, hasQ := r.get(catalog.QueueSize)
	util, hasU := r.get(catalog.GPUUtilization)
	kv, hasKV := r.get(catalog.KVCacheUsage)
	fill, hasFill := r.get(catalog.BatchFill)
	_, hasB := r.get(catalog.BatchSize)
	switch {
	case !hasQ && !hasB:
		return "no serving signals: the server's page was not scraped or lacks the series"
	case hasQ && q > 0 && hasKV && kv >= fullKV:
		return fmt.Sprintf("queue %s waiting, KV cache %s full: saturated (memory-bound), add replicas", num(q), pct(kv))
	case hasQ && q > 0 && hasU && util <= idleGPU:
		return fmt.Sprintf("queue %s waiting while the GPU reads %s busy: a server limit (max running requests) binds, not the GPU", num(q), pct(util))
	case hasQ && q > 0:
		return fmt.Sprintf("queue %s waiting: saturated, add replicas", num(q))
	case hasU && util >= busyGPU && hasFill && fill < roomyBatch:
		return fmt.Sprintf("GPU busy (%s), batch at %s of its running maximum, no queue: headroom", pct(util), pct(fill))
	case hasU && util >= busyGPU:
		return fmt.Sprintf("GPU busy (%s) but no queue: headroom, do not scale on GPU utilization", pct(util))
	case hasFill && fill >= roomyBatch:
		return fmt.Sprintf("batch at %s of its maximum, no queue yet: near saturation", pct(fill))
	default:
		return "no queue: headroom"
	}
}

// Write prints rows as an aligned table.
func Write(w io.Writer, rows []Row) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POD\tGPUS\tGPU UTIL\tSM ACTIVE\tBATCH\tQUEUE\tKV\tREADING")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", escape.Printable(r.Pod), gpus(r.GPUs),
			cell(r, catalog.GPUUtilization, pct), cell(r, catalog.GPUSMActive, pct),
			batchCell(r), cell(r, catalog.QueueSize, num), cell(r, catalog.KVCacheUsage, pct), Reading(r))
	}
	return tw.Flush()
}

func gpus(n int64) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

func cell(r Row, s catalog.Signal, f func(float64) string) string {
	v, ok := r.get(s)
	if !ok {
		return "-"
	}
	return f(v)
}

func batchCell(r Row) string {
	b, ok := r.get(catalog.BatchSize)
	if !ok {
		return "-"
	}
	if fill, ok := r.get(catalog.BatchFill); ok {
		return fmt.Sprintf("%s (%s)", num(b), pct(fill))
	}
	return num(b)
}

func pct(v float64) string { return fmt.Sprintf("%.0f%%", v*100) }

func num(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.2f", v), "0"), ".")
}
