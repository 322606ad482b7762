// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package parse

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
)

// withAdapters is m with the adapters of a vllm:lora_requests_info line.
func withAdapters(mod Model, cut bool, adapters ...Adapter) Model {
	mod.Adapters, mod.AdaptersCut = adapters, cut
	return mod
}

// loraInfo is one vllm:lora_requests_info line.
func loraInfo(running, waiting string, at float64) string {
	return fmt.Sprintf("vllm:lora_requests_info{max_lora=\"4\",running_lora_adapters=%q,waiting_lora_adapters=%q} %g\n", running, waiting, at)
}

// running returns adapters as running, not waiting.
func running(adapters []Adapter) []Adapter {
	out := make([]Adapter, len(adapters))
	for i, a := range adapters {
		out[i] = Adapter{Name: a.Name, Running: true}
	}
	return out
}

// names returns n adapter names "a0,a1,...".
func names(n int) string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("a%d", i)
	}
	return strings.Join(out, ",")
}

func TestParseLoRAAdapters(t *testing.T) {
	const queue = "vllm:num_requests_waiting{model_name=\"base\"} 3\n"
	long := strings.Repeat("x", MaxAdapterNameBytes+1)
	kept := make([]Adapter, MaxAdapters)
	for i := range kept {
		kept[i] = Adapter{Name: fmt.Sprintf("a%d", i), Waiting: true}
	}
	count := func(run, wait float64) Model {
		return m("", catalog.LoRAAdaptersRunning, run, catalog.LoRAAdaptersWaiting, wait)
	}
	// Every page also has a queue line (a page of lora lines alone is not
	// told to be vLLM's): its model comes first.
	tests := []struct {
		name string
		page string
		want []Model
	}{
		{"no lora line: no adapter counts or names", "", nil},
		{"running and waiting", loraInfo("a,b", "b", 1), []Model{
			withAdapters(count(2, 1), false, Adapter{Name: "a", Running: true}, Adapter{Name: "b", Running: true, Waiting: true})}},
		{"nothing listed: adapters known to be idle", loraInfo("", "", 5), []Model{withAdapters(count(0, 0), false)}},
		{"the line with the latest value wins, wherever it is", loraInfo("old", "old", 1) + loraInfo("new", "", 3) + loraInfo("older", "", 2),
			[]Model{withAdapters(count(1, 0), false, Adapter{Name: "new", Running: true})}},
		{"equal values: the later line", loraInfo("a", "", 2) + loraInfo("b", "", 2),
			[]Model{withAdapters(count(1, 0), false, Adapter{Name: "b", Running: true})}},
		{"a NaN line is no state", loraInfo("a", "", 2) + "vllm:lora_requests_info{running_lora_adapters=\"b\"} NaN\n",
			[]Model{withAdapters(count(1, 0), false, Adapter{Name: "a", Running: true})}},
		{"blanks and empty items", loraInfo(" a , ,b,", "", 1),
			[]Model{withAdapters(count(2, 0), false, Adapter{Name: "a", Running: true}, Adapter{Name: "b", Running: true})}},
		{"a name twice is one adapter", loraInfo("a,a", "a,a", 1),
			[]Model{withAdapters(count(2, 2), false, Adapter{Name: "a", Running: true, Waiting: true})}},
		{"escaped label value", "vllm:lora_requests_info{running_lora_adapters=\"q\\\"x\",waiting_lora_adapters=\"\"} 1\n",
			[]Model{withAdapters(count(1, 0), false, Adapter{Name: "q\"x", Running: true})}},
		{"a name over the bound is left out, and says so", loraInfo("a,"+long, long, 1),
			[]Model{withAdapters(count(2, 1), true, Adapter{Name: "a", Running: true})}},
		{"more names than kept: the first ones, cut", loraInfo("", names(MaxAdapters+6), 1),
			[]Model{withAdapters(count(0, MaxAdapters+6), true, kept...)}},
		{"exactly the bound: not cut", loraInfo("", names(MaxAdapters), 1),
			[]Model{withAdapters(count(0, MaxAdapters), false, kept...)}},
		{"the bound is per page, all models together", "vllm:lora_requests_info{model_name=\"m1\",running_lora_adapters=\"" + names(MaxAdapters) + "\"} 1\n" +
			"vllm:lora_requests_info{model_name=\"m2\",waiting_lora_adapters=\"b\"} 1\n",
			[]Model{
				withAdapters(m("m1", catalog.LoRAAdaptersRunning, float64(MaxAdapters), catalog.LoRAAdaptersWaiting, 0.0), false, running(kept)...),
				withAdapters(m("m2", catalog.LoRAAdaptersRunning, 0.0, catalog.LoRAAdaptersWaiting, 1.0), true),
			}},
		{"lines with a model label: per model", "vllm:lora_requests_info{model_name=\"m1\",running_lora_adapters=\"a\"} 1\n" +
			"vllm:lora_requests_info{model_name=\"m2\",waiting_lora_adapters=\"b\"} 1\n",
			[]Model{
				withAdapters(m("m1", catalog.LoRAAdaptersRunning, 1.0, catalog.LoRAAdaptersWaiting, 0.0), false, Adapter{Name: "a", Running: true}),
				withAdapters(m("m2", catalog.LoRAAdaptersRunning, 0.0, catalog.LoRAAdaptersWaiting, 1.0), false, Adapter{Name: "b", Waiting: true}),
			}},
	}
	p := NewParser()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, parser := range []*Parser{NewParser(), p} { // fresh, and reused after the other cases
				got, err := parser.Parse([]byte(queue + tt.page))
				if err != nil {
					t.Fatal(err)
				}
				want := append([]Model{m("base", sQ, 3.0)}, tt.want...)
				if diff := cmp.Diff(want, got.Models, cmpopts.EquateEmpty(), cmpopts.IgnoreFields(Model{}, "Counters", "HasCounter", "Hists")); diff != "" {
					t.Errorf("models (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// A page with a LoRA line, parsed again and again, allocates nothing, also
// when the adapter lists change from page to page.
func TestParseLoRAZeroAllocs(t *testing.T) {
	pages := [][]byte{
		[]byte("vllm:num_requests_waiting 1\n" + loraInfo("a,b", "c", 1) + loraInfo("b", "a,c", 2)),
		[]byte("vllm:num_requests_waiting 2\n" + loraInfo("c", "", 1) + loraInfo(names(MaxAdapters+1), "a", 3)),
	}
	p := NewParser()
	for _, pg := range pages {
		if _, err := p.Parse(pg); err != nil {
			t.Fatal(err)
		}
	}
	for _, pg := range pages {
		if got, err := p.Parse(pg); err != nil || len(got.Models) != 1 || len(got.Models[0].Adapters) == 0 {
			t.Fatalf("page %q: %v, %+v; want one model with adapters", pg, err, got)
		}
	}
	i := 0
	if n := testing.AllocsPerRun(20, func() { _, _ = p.Parse(pages[i%2]); i++ }); n != 0 {
		t.Errorf("%v allocs per page, want 0", n)
	}
}

// BenchmarkParseLoRAWorstCase parses a page of 1,000 vllm:lora_requests_info
// lines, each newer than the last and naming 100 adapters in each list
// (so every line is copied and the 64-name bound is hit), beside the
// vllm-v1 fixture: compare their MB/s in one run.
func BenchmarkParseLoRAWorstCase(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("vllm:num_requests_waiting 1\n")
	for i := range 1000 { // distinct label sets: a repeated one is a duplicate series
		sb.WriteString(loraInfo(names(100)+fmt.Sprintf(",r%d", i), names(100), float64(i)))
	}
	pages := map[string][]byte{"lora-worst-case": []byte(sb.String()), "vllm-v1.prom": readFixture(b, "vllm-v1.prom")}
	for _, name := range []string{"lora-worst-case", "vllm-v1.prom"} {
		page := pages[name]
		b.Run(name, func(b *testing.B) {
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
	}
}
