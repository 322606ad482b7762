// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/loadgen"
)

// TestSVGChart: names (trace, policy) are escaped and read back; a minute
// whose requests all failed has no TTFT point (not a 0 s one); each policy
// has its replica lines; a report without requests still draws.
func TestSVGChart(t *testing.T) {
	slo := SLO{TTFT: 2 * time.Second, TPOT: 100 * ms}
	recs := []Record{
		{Sent: 0, OutputTokens: 1, Tokens: 1, TTFT: time.Second, E2E: time.Second},
		{Sent: 90 * time.Second, OutputTokens: 3, Err: "boom"}, // minute 1: failed only
		{Sent: 150 * time.Second, OutputTokens: 1, Tokens: 1, TTFT: 3 * time.Second, E2E: 3 * time.Second},
	}
	samples := []Sample{{T: 0, Replicas: 1, Ready: 1}, {T: time.Minute, Replicas: 2, Ready: 1}, {T: 3 * time.Minute, Replicas: 2, Ready: 2}}
	tests := []struct {
		name      string
		trace     string
		policies  []string
		reqs      []loadgen.TraceRequest
		wantTTFT  int // TTFT points per policy
		wantTexts []string
	}{
		{name: "hostile names", trace: `t<r>&"ace"`, policies: []string{`<script>`, `a&b`},
			reqs: []loadgen.TraceRequest{{At: 0}, {At: 90 * time.Second}, {At: 150 * time.Second}}, wantTTFT: 2,
			wantTexts: []string{`shootout: t<r>&"ace"`, "<script>", "a&b"}},
		{name: "no requests", trace: "empty", policies: []string{"queue-3"}, wantTTFT: 2, wantTexts: []string{"queue-3"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := report{Trace: tc.trace, SLO: slo, Timing: newTiming(15, time.Minute), MaxReplicas: 4, Picker: pickLeastLoaded}
			for _, name := range tc.policies {
				p := policy{Name: name, Metric: metricQueue, Target: "3"}
				r.Runs = append(r.Runs, runResult{Policy: p, Records: recs, Samples: samples, Summary: summarize(p.Name, tc.trace, scoring{SLO: slo}, recs, samples)})
			}
			var b strings.Builder
			if err := r.writeSVG(&b, tc.reqs); err != nil {
				t.Fatal(err)
			}
			dec := xml.NewDecoder(strings.NewReader(b.String()))
			var text []string
			lines := map[string]int{}
			var ttft []string
			for {
				tok, err := dec.Token()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("not well-formed XML: %v\n%s", err, b.String())
				}
				switch tok := tok.(type) {
				case xml.CharData:
					text = append(text, string(tok))
				case xml.StartElement:
					attrs := map[string]string{}
					for _, a := range tok.Attr {
						attrs[a.Name.Local] = a.Value
					}
					if tok.Name.Local == "polyline" {
						lines[attrs["stroke"]]++
						if attrs["stroke"] == "#cb181d" {
							ttft = append(ttft, strings.Fields(attrs["points"])...)
						}
					}
				}
			}
			all := strings.Join(text, "|")
			for _, want := range tc.wantTexts {
				if !strings.Contains(all, want) {
					t.Errorf("texts lack %q: %s", want, all)
				}
			}
			n := len(tc.policies)
			if lines["#9ecae1"] != n || lines["#08519c"] != n || lines["#bbb"] != n {
				t.Errorf("polylines by colour %v, want %d of each series", lines, n)
			}
			// Minutes 0 and 2 have a TTFT; minute 1 has none.
			if len(ttft) != tc.wantTTFT*n {
				t.Errorf("TTFT points %v, want %d per policy", ttft, tc.wantTTFT)
			}
		})
	}
}

// TestMechanismChartFleet: the HPA panel draws, beside the desired
// replicas, the largest recommendation (dashed, broken where a sample has
// none) and the Ready replicas, and its note names them; the workload's
// demand has a panel of its own, only for a run that recorded it.
func TestMechanismChartFleet(t *testing.T) {
	n := intPtr
	f := func(v float64) *float64 { return &v }
	pods := []PodSample{{Name: "a", Ready: true, Queue: f(1), Batch: f(1)}}
	read := []HPARead{{Metric: "pods/" + metricQueue, Value: f(3)}}
	samples := []Sample{
		{T: 0, Replicas: 1, Ready: 1, Desired: 1, HPA: read, RecommendedMax: n(1), Pods: pods, Demand: f(2)},
		{T: time.Minute, Replicas: 3, Ready: 1, Desired: 3, HPA: read, RecommendedMax: n(3)},
		{T: 2 * time.Minute, Replicas: 3, Ready: 1, Desired: 3}, // no read: no recommendation
		{T: 3 * time.Minute, Replicas: 3, Ready: 3, Desired: 3, HPA: read, RecommendedMax: n(2), Pods: pods, Demand: f(5)},
		{T: 4 * time.Minute, Replicas: 3, Ready: 3, Desired: 3, HPA: read, RecommendedMax: n(1), Pods: pods, Demand: f(1)},
	}
	older := []Sample{{T: 0, Replicas: 1, Ready: 1, Desired: 1, HPA: read, Pods: pods}, {T: 4 * time.Minute, Replicas: 2, Ready: 2, Desired: 2, HPA: read, Pods: pods}}
	r := report{Trace: "tr", SLO: SLO{TTFT: time.Second, TPOT: 100 * ms}, Timing: newTiming(15, time.Minute), MaxReplicas: 4, Picker: pickLeastLoaded, Runs: []runResult{
		{Policy: policy{Name: "q", Metric: metricQueue, Target: "3"}, Repeat: 1, Samples: samples},
		{Policy: policy{Name: "old", Metric: metricQueue, Target: "3"}, Repeat: 1, Samples: older},
	}}
	var b strings.Builder
	if err := r.writeSVG(&b, nil); err != nil {
		t.Fatal(err)
	}
	texts, lines, _ := svgParts(t, b.String())
	for _, want := range []string{"q: the workload's demand", "the largest recommendation, without the scale-down window (pink, dashed), Ready (grey)",
		"requests waiting plus running over the fleet: the pods' queue + batch, summed (brown)"} {
		if !strings.Contains(texts, want) {
			t.Errorf("chart lacks %q: %s", want, texts)
		}
	}
	if strings.Contains(texts, "old: the workload's demand") {
		t.Errorf("a run without a demand has a demand panel: %s", texts)
	}
	// The recommendation: two dashed lines (the sample without one breaks
	// it), none for the run without recommendations; Ready grey on each HPA
	// panel; the demand one line, through the samples with pods.
	for col, want := range map[string]int{colorRecommended: 2, colorReadyGrey: 2, colorDemand: 1, colorDesired: 2} {
		if lines[col] != want {
			t.Errorf("%d lines of colour %s, want %d (all: %v)", lines[col], col, want, lines)
		}
	}
	dashed := 0
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(l, "<polyline") && strings.Contains(l, `stroke="`+colorRecommended+`"`) && strings.Contains(l, "stroke-dasharray") {
			dashed++
		}
	}
	if dashed != 2 {
		t.Errorf("%d dashed recommendation lines, want 2", dashed)
	}
}
