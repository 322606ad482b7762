// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package parse

import (
	"bytes"
	"testing"
)

// TestHistogramSwitch parses every fixture with the histograms wanted, not
// wanted, and wanted again, through one Parser: without them no model has
// a histogram and the page says it skipped them, while the server, gauges
// and counters are those of the full parse.
func TestHistogramSwitch(t *testing.T) {
	for _, name := range fixtures {
		t.Run(name, func(t *testing.T) {
			page := readFixture(t, name)
			if !bytes.HasSuffix(page, []byte{'\n'}) {
				page = append(page, '\n')
			}
			ref, err := NewParser().Parse(page)
			if err != nil {
				t.Fatal(err)
			}
			refHists := 0
			for _, m := range ref.Models {
				for _, h := range m.Hists {
					if h != nil {
						refHists++
					}
				}
			}
			want := true
			var builtin *Servers // nil: the built-in servers
			p := NewParserFor(builtin.WithHistograms(func() bool { return want }))
			for _, tc := range []struct {
				want bool
			}{{true}, {false}, {true}, {false}} {
				want = tc.want
				got, err := p.Parse(page)
				if err != nil {
					t.Fatalf("want %v: %v", tc.want, err)
				}
				if got.HistogramsSkipped == tc.want {
					t.Errorf("want %v: HistogramsSkipped = %v", tc.want, got.HistogramsSkipped)
				}
				if got.Server != ref.Server || len(got.Models) != len(ref.Models) {
					t.Fatalf("want %v: server %v with %d models, the full parse %v with %d", tc.want, got.Server, len(got.Models), ref.Server, len(ref.Models))
				}
				hists := 0
				for i, m := range got.Models {
					r := ref.Models[i]
					if m.Name != r.Name || m.Values != r.Values || m.Has != r.Has || m.Counters != r.Counters || m.HasCounter != r.HasCounter {
						t.Errorf("want %v: model %q differs from the full parse's gauges or counters", tc.want, m.Name)
					}
					for l, h := range m.Hists {
						if h == nil {
							continue
						}
						hists++
						if err := sameCounts(h, r.Hists[l]); err != "" {
							t.Errorf("want %v: model %q latency %d: %s", tc.want, m.Name, l, err)
						}
					}
				}
				switch {
				case tc.want && hists != refHists:
					t.Errorf("histograms wanted: %d histograms, the full parse has %d", hists, refHists)
				case !tc.want && hists != 0:
					t.Errorf("histograms not wanted: %d histograms on the page", hists)
				}
			}
		})
	}
}

func sameCounts(h, r *Histogram) string {
	switch {
	case r == nil:
		return "not in the full parse"
	case h.N != r.N || h.Le != r.Le || h.Count != r.Count:
		return "buckets differ from the full parse's"
	}
	return ""
}
