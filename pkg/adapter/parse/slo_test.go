// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package parse

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
)

// sloRef is what expfmt's reading of a page says one model's counters and
// latency histograms are, following the dialect table: counters summed
// over the model's series, buckets summed bound by bound.
type sloRef struct {
	counters   [catalog.NumCounters]float64
	hasCounter uint8
	buckets    [numHistSlots]map[float64]float64 // upper bound -> cumulative count
}

func referenceSLO(t *testing.T, page []byte, d dialect) map[string]*sloRef {
	t.Helper()
	tp := expfmt.NewTextParser(model.UTF8Validation)
	if !bytes.HasSuffix(page, []byte{'\n'}) {
		page = append(page[:len(page):len(page)], '\n')
	}
	fams, err := tp.TextToMetricFamilies(bytes.NewReader(page))
	if err != nil {
		t.Fatalf("expfmt: %v", err)
	}
	out := map[string]*sloRef{}
	ref := func(m *dto.Metric) *sloRef {
		name := ""
		for _, lp := range m.GetLabel() {
			if d.modelLabel != "" && lp.GetName() == d.modelLabel {
				name = lp.GetValue()
			}
		}
		if out[name] == nil {
			out[name] = &sloRef{}
		}
		return out[name]
	}
	for _, se := range d.series {
		switch slot, isBucket := se.role.bucket(); {
		case se.role.isCounter():
			if fam := fams[se.name]; fam != nil {
				for _, m := range fam.GetMetric() {
					r := ref(m)
					r.counters[se.role.counter()] += m.GetCounter().GetValue() + m.GetUntyped().GetValue()
					r.hasCounter |= 1 << se.role.counter()
				}
			} else if fam := fams[strings.TrimSuffix(se.name, "_sum")]; fam != nil && fam.GetType() == dto.MetricType_HISTOGRAM {
				for _, m := range fam.GetMetric() {
					r := ref(m)
					r.counters[se.role.counter()] += m.GetHistogram().GetSampleSum()
					r.hasCounter |= 1 << se.role.counter()
				}
			}
		case isBucket:
			fam := fams[strings.TrimSuffix(se.name, "_bucket")]
			if fam == nil || fam.GetType() != dto.MetricType_HISTOGRAM {
				continue
			}
			for _, m := range fam.GetMetric() {
				r := ref(m)
				if r.buckets[slot] == nil {
					r.buckets[slot] = map[float64]float64{}
				}
				inf := false
				for _, b := range m.GetHistogram().GetBucket() {
					r.buckets[slot][b.GetUpperBound()] += float64(b.GetCumulativeCount())
					inf = inf || math.IsInf(b.GetUpperBound(), 1)
				}
				if !inf {
					r.buckets[slot][math.Inf(1)] += float64(m.GetHistogram().GetSampleCount())
				}
			}
		}
	}
	return out
}

// TestParseCountersAndHistograms checks the counters and latency histograms
// the parser reads from every fixture against expfmt's reading of the same
// page, and that the fixtures carry what docs/metrics.md says they do.
func TestParseCountersAndHistograms(t *testing.T) {
	for _, tt := range []struct {
		file string
		// what the page must carry, per docs/metrics.md
		counters  []catalog.Counter
		latencies []catalog.Latency
	}{
		{"vllm-v1.prom", []catalog.Counter{catalog.GenerationTokens, catalog.PromptTokens, catalog.Requests, catalog.Preemptions},
			[]catalog.Latency{catalog.TimeToFirstToken, catalog.InterTokenLatency, catalog.QueueTime, catalog.E2ELatency}},
		{"vllm-v1-scaled.prom", []catalog.Counter{catalog.GenerationTokens, catalog.PromptTokens, catalog.Requests, catalog.Preemptions},
			[]catalog.Latency{catalog.TimeToFirstToken, catalog.InterTokenLatency, catalog.QueueTime, catalog.E2ELatency}},
		{"vllm-v0.prom", []catalog.Counter{catalog.GenerationTokens, catalog.PromptTokens, catalog.Requests, catalog.Preemptions},
			[]catalog.Latency{catalog.TimeToFirstToken, catalog.InterTokenLatency, catalog.E2ELatency}},
		{"tgi-v3.prom", []catalog.Counter{catalog.GenerationTokens, catalog.PromptTokens, catalog.Requests},
			[]catalog.Latency{catalog.InterTokenLatency, catalog.QueueTime, catalog.E2ELatency}},
		{"sglang-v0.4.prom", []catalog.Counter{catalog.GenerationTokens, catalog.PromptTokens},
			[]catalog.Latency{catalog.TimeToFirstToken, catalog.InterTokenLatency, catalog.E2ELatency}},
		{"trtllm-serve.prom", []catalog.Counter{catalog.Requests}, []catalog.Latency{catalog.TimeToFirstToken}},
		{"triton-trtllm.prom", nil, nil},
		{"jetstream.prom", []catalog.Counter{catalog.Requests}, []catalog.Latency{catalog.QueueTime}},
	} {
		t.Run(tt.file, func(t *testing.T) {
			page := readFixture(t, tt.file)
			got, err := NewParser().Parse(page)
			if err != nil {
				t.Fatal(err)
			}
			want := referenceSLO(t, page, dialects[got.Server])
			if len(got.Models) == 0 {
				t.Fatal("no models")
			}
			for _, m := range got.Models {
				r := want[m.Name]
				if r == nil {
					r = &sloRef{}
				}
				if m.HasCounter != r.hasCounter || m.Counters != r.counters {
					t.Errorf("model %q: counters %v (has %b), expfmt says %v (has %b)", m.Name, m.Counters, m.HasCounter, r.counters, r.hasCounter)
				}
				if !m.Has.Has(catalog.QueueSize) {
					continue // vLLM's lora_requests_info model, with no model label
				}
				for _, c := range tt.counters {
					if _, ok := m.Counter(c); !ok {
						t.Errorf("model %q: no counter %d", m.Name, c)
					}
				}
				for l := range catalog.NumLatencies {
					if err := sameHist(m.Hists[l], refBuckets(r, l)); err != nil {
						t.Errorf("model %q: %s: %v", m.Name, l, err)
					}
				}
				for _, l := range tt.latencies {
					if m.Hists[l] == nil {
						t.Errorf("model %q: no %s histogram", m.Name, l)
					}
				}
			}
		})
	}
}

// refBuckets are the buckets that stand for latency l: the inter-token
// latency's fallback only when the newer series is absent; nil if none.
func refBuckets(r *sloRef, l catalog.Latency) map[float64]float64 {
	for slot, sl := range slotLatency {
		if sl == l && r.buckets[slot] != nil {
			return r.buckets[slot]
		}
	}
	return nil
}

func sameHist(h *Histogram, ref map[float64]float64) error {
	if ref == nil || h == nil {
		if h != nil || ref != nil {
			return fmt.Errorf("histogram %v, expfmt found %v", h != nil, ref != nil)
		}
		return nil
	}
	if h.N != len(ref) {
		return fmt.Errorf("%d buckets, expfmt %d", h.N, len(ref))
	}
	for i := range h.N {
		if i > 0 && h.Le[i] <= h.Le[i-1] {
			return fmt.Errorf("bounds not ascending at %d: %v", i, h.Le[:h.N])
		}
		if c, ok := ref[h.Le[i]]; !ok || c != h.Count[i] {
			return fmt.Errorf("bucket le=%v: %v, expfmt %v (present %v)", h.Le[i], h.Count[i], c, ok)
		}
	}
	return nil
}

// TestParseHistogramCases covers histograms split over engines, out of order,
// too large, with a bad bound or count, and the inter-token fallback.
func TestParseHistogramCases(t *testing.T) {
	const (
		ttft = "vllm:time_to_first_token_seconds_bucket"
		itl  = "vllm:inter_token_latency_seconds_bucket"
		tpot = "vllm:time_per_output_token_seconds_bucket"
	)
	line := func(name, engine, le string, v float64) string {
		return fmt.Sprintf("%s{engine=%q,le=%q,model_name=\"m\"} %v\n", name, engine, le, v)
	}
	base := "vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} 1\nvllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m\"} 0.5\n"
	big := base
	for i := range MaxBuckets {
		big += line(ttft, "0", fmt.Sprint(i+1), float64(i))
	}
	big += line(ttft, "0", "+Inf", 99)
	for _, tt := range []struct {
		name    string
		page    string
		lat     catalog.Latency
		wantLe  []float64
		wantCnt []float64
	}{
		{"engines summed", base + line(ttft, "0", "0.1", 1) + line(ttft, "0", "+Inf", 2) + line(ttft, "1", "0.1", 3) + line(ttft, "1", "+Inf", 5),
			catalog.TimeToFirstToken, []float64{0.1, math.Inf(1)}, []float64{4, 7}},
		{"out of order", base + line(ttft, "0", "+Inf", 2) + line(ttft, "0", "1", 2) + line(ttft, "0", "0.1", 1),
			catalog.TimeToFirstToken, []float64{0.1, 1, math.Inf(1)}, []float64{1, 2, 2}},
		{"no +Inf bucket", base + line(ttft, "0", "0.1", 1), catalog.TimeToFirstToken, nil, nil},
		{"bad bound", base + line(ttft, "0", "x", 1) + line(ttft, "0", "+Inf", 1), catalog.TimeToFirstToken, nil, nil},
		{"negative count", base + line(ttft, "0", "0.1", -1) + line(ttft, "0", "+Inf", 1), catalog.TimeToFirstToken, nil, nil},
		{"too many buckets", big, catalog.TimeToFirstToken, nil, nil},
		{"old inter-token name", base + line(tpot, "0", "0.1", 1) + line(tpot, "0", "+Inf", 1),
			catalog.InterTokenLatency, []float64{0.1, math.Inf(1)}, []float64{1, 1}},
		{"new inter-token name wins", base + line(tpot, "0", "0.1", 1) + line(tpot, "0", "+Inf", 1) + line(itl, "0", "0.2", 5) + line(itl, "0", "+Inf", 6),
			catalog.InterTokenLatency, []float64{0.2, math.Inf(1)}, []float64{5, 6}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pg, err := NewParser().Parse([]byte(tt.page))
			if err != nil {
				t.Fatal(err)
			}
			if len(pg.Models) != 1 {
				t.Fatalf("%d models", len(pg.Models))
			}
			h := pg.Models[0].Hists[tt.lat]
			if h == nil {
				h = &Histogram{}
			}
			if h.N != len(tt.wantLe) {
				t.Fatalf("%d buckets %v, want %v", h.N, h.Le[:h.N], tt.wantLe)
			}
			for i := range h.N {
				if h.Le[i] != tt.wantLe[i] || h.Count[i] != tt.wantCnt[i] {
					t.Errorf("bucket %d: le=%v count=%v, want le=%v count=%v", i, h.Le[i], h.Count[i], tt.wantLe[i], tt.wantCnt[i])
				}
			}
			if got := pg.Models[0].Values[catalog.QueueSize]; got != 1 {
				t.Errorf("queue %v: the gauges must not suffer from a bad histogram", got)
			}
		})
	}
}

// TestVLLMV0QueueTime: a pod annotated vllm-v0 is read with the V0 table,
// which must read the queue-time histogram that later V0 releases publish
// under the same name as V1 (an auto-detected V0 page is read with the V1
// table and had it already).
func TestVLLMV0QueueTime(t *testing.T) {
	page := []byte(`vllm:num_requests_waiting{model_name="m"} 2
vllm:request_queue_time_seconds_bucket{model_name="m",le="0.5"} 3
vllm:request_queue_time_seconds_bucket{model_name="m",le="+Inf"} 4
vllm:request_queue_time_seconds_count{model_name="m"} 4
`)
	for _, server := range []Server{Unknown, VLLMV0} {
		got, err := NewParser().ParseAs(page, server)
		if err != nil {
			t.Fatalf("as %s: %v", server, err)
		}
		if len(got.Models) != 1 {
			t.Fatalf("as %s: %d models, want 1", server, len(got.Models))
		}
		h := got.Models[0].Hists[catalog.QueueTime]
		if h == nil {
			t.Errorf("as %s: no queue-time histogram", server)
			continue
		}
		if err := sameHist(h, map[float64]float64{0.5: 3, math.Inf(1): 4}); err != nil {
			t.Errorf("as %s: queue time: %v", server, err)
		}
	}
}
