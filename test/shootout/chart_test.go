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
