// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package parse

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// BenchmarkParse compares, per fixture and in one run, this Parser (also
// without the latency histograms' bucket lines, to show what they cost, and
// with the custom table of testServers, to show what custom names cost a
// built-in page) with expfmt's TextParser (what most exporters and adapters use) and with
// bytes.Count of newlines over the page (a floor: one pass, no work).
// Pages lacking a final newline get one, as a live server would send.
func BenchmarkParse(b *testing.B) {
	for _, name := range fixtures {
		page := readFixture(b, name)
		if !bytes.HasSuffix(page, []byte{'\n'}) {
			page = append(page, '\n')
		}
		b.Run(name+"/parser", func(b *testing.B) {
			p := NewParser()
			if _, err := p.Parse(page); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(page)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.Parse(page); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/parser-without-histograms", func(b *testing.B) {
			p := newParser(nil, false) // gauges and counters only: what the bucket lines cost
			if _, err := p.Parse(page); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(page)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.Parse(page); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/parser-custom-table", func(b *testing.B) {
			p := NewParserFor(testServers(b))
			if _, err := p.Parse(page); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(page)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.Parse(page); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/expfmt", func(b *testing.B) {
			tp := expfmt.NewTextParser(model.UTF8Validation)
			r := bytes.NewReader(page)
			if _, err := tp.TextToMetricFamilies(r); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(page)))
			b.ReportAllocs()
			for b.Loop() {
				r.Reset(page)
				if _, err := tp.TextToMetricFamilies(r); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/floor", func(b *testing.B) {
			b.SetBytes(int64(len(page)))
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				n += bytes.Count(page, []byte{'\n'})
			}
			if n == 0 {
				b.Fatal("no lines")
			}
		})
	}
}

// BenchmarkManyModels parses pages of 1k and 10k models (one line each,
// the models bound lifted) and reports the cost per model, which stays the
// same when the work per line is constant (it grew with the number of models
// when finding a model's accumulator was a scan).
func BenchmarkManyModels(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		page := manyModels(n)
		b.Run(fmt.Sprintf("models=%d", n), func(b *testing.B) {
			p := NewParser()
			p.SetLimits(Limits{MaxModels: n})
			b.SetBytes(int64(len(page)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.Parse(page); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/model")
		})
	}
}
