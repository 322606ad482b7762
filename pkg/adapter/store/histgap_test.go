// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package store

import (
	"math"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
)

// TestLatencyWindowAcrossSkippedHistograms records pages parsed with and
// without the latency histograms (parse.Page.HistogramsSkipped): a page
// without them resets the pod's windows, the next page with them is a new
// baseline, and a percentile comes only from the deltas after the gap,
// while the counter rates go on across it.
func TestLatencyWindowAcrossSkippedHistograms(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pod := types.NamespacedName{Namespace: "ns", Name: "p"}
	type rec struct {
		sec  int
		ttft []float64 // cumulative counts over ttftLe; nil: parsed without histograms
	}
	fast := []float64{100, 100, 100, 100}
	// Between the scrapes at 5 s and 15 s, 100 fast requests that no page
	// parsed with histograms saw; after it, 10 slower ones.
	afterGap := []float64{200, 205, 210, 210}
	later := []float64{200, 210, 220, 220}
	for _, tt := range []struct {
		name   string
		recs   []rec
		status Status
		want   float64 // the p90 when OK
		detail string  // in the Detail when not OK
	}{
		{"skipped page: missing, and says why", []rec{{0, fast}, {5, fast}, {10, nil}}, Absent, 0, "parsed only while"},
		{"first page with histograms after the gap: missing", []rec{{0, fast}, {5, fast}, {10, nil}, {15, afterGap}}, Absent, 0, "window yet"},
		{"the delta starts after the gap", []rec{{0, fast}, {5, fast}, {10, nil}, {15, afterGap}, {20, later}}, OK,
			refQuantile(0.9, ttftLe, []float64{0, 5, 10, 10}), ""},
		{"no request after the gap: missing, not 0", []rec{{0, fast}, {5, fast}, {10, nil}, {15, afterGap}, {20, afterGap}}, Absent, 0, "no request finished"},
		{"skipped again: missing again", []rec{{0, fast}, {5, fast}, {10, nil}, {15, afterGap}, {20, later}, {25, nil}}, Absent, 0, "parsed only while"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := New()
			var last rec
			for i, r := range tt.recs {
				m := cmodel("a", float64(1000*i), float64(10*i), r.ttft...)
				p := page(m)
				p.HistogramsSkipped = r.ttft == nil
				s.Record(pod, t0.Add(time.Duration(r.sec)*time.Second), p, nil)
				last = r
			}
			now := t0.Add(time.Duration(last.sec) * time.Second)
			if last.ttft == nil {
				if ws := s.pods[pod].serving.good.slo.windows; len(ws) != 0 {
					t.Errorf("a page without histograms left %d windows (bounds %v)", len(ws), ws[0].lat[catalog.TimeToFirstToken].le)
				}
			}
			got := s.Get(pod, catalog.TimeToFirstTokenP90, nil, now, time.Minute)
			if got.Status != tt.status || (tt.status == OK && math.Abs(got.Value-tt.want) > 1e-9) {
				t.Errorf("p90 = %v %v (%s), want %v %v", got.Value, got.Status, got.Detail, tt.want, tt.status)
			}
			if tt.status != OK && got.Value != 0 {
				t.Errorf("a missing p90 carries the value %v", got.Value)
			}
			if !strings.Contains(got.Detail, tt.detail) {
				t.Errorf("detail %q, want it to say %q", got.Detail, tt.detail)
			}
			// Counters are parsed either way: the rate goes on across the gap.
			if r := s.Get(pod, catalog.RequestsPerSecond, nil, now, time.Minute); r.Status != OK || r.Value != 2 {
				t.Errorf("requests/s = %v %v (%s), want 2", r.Value, r.Status, r.Detail)
			}
		})
	}
}
