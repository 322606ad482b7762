// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package parse

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
)

// fixtures are the pages in testdata; testdata/README.md says where each
// comes from.
var fixtures = []string{
	"vllm-v0.prom", "vllm-v1.prom", "vllm-v1-scaled.prom", "tgi-v3.prom", "sglang-v0.4.prom",
	"trtllm-serve.prom", "triton-trtllm.prom", "jetstream.prom",
}

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// m builds a Model from (signal, value) pairs.
func m(name string, pairs ...any) Model {
	out := Model{Name: name}
	for i := 0; i < len(pairs); i += 2 {
		s := pairs[i].(catalog.Signal)
		out.Values[s] = pairs[i+1].(float64)
		out.Has = out.Has.Add(s)
	}
	return out
}

// Short names for the signals in the tables below.
const (
	sQ    = catalog.QueueSize
	sB    = catalog.BatchSize
	sKV   = catalog.KVCacheUsage
	sFill = catalog.BatchFill
)

func TestParseFixtures(t *testing.T) {
	const llama = "meta-llama/Llama-3.1-8B-Instruct"
	tests := []struct {
		file string
		want Page
	}{
		{"vllm-v1.prom", Page{Server: VLLMV1, Models: []Model{
			m(llama, sQ, 3.0, sB, 24.0, sKV, 0.4212881455399061),
		}}},
		{"vllm-v0.prom", Page{Server: VLLMV0, Models: []Model{ // no trailing newline
			m("facebook/opt-125m", sQ, 0.0, sB, 0.0, sKV, 0.0),
		}}},
		{"vllm-v1-scaled.prom", Page{Server: VLLMV1, Models: []Model{
			m(llama, sQ, 18.0, sB, 53.0, sKV, 0.7929870892018779),
			m("Qwen/Qwen2.5-7B-Instruct", sQ, 13.0, sB, 98.0, sKV, 0.9308612089201878),
			m("mistralai/Mistral-7B-Instruct-v0.3", sQ, 7.0, sB, 60.0, sKV, 0.617737676056338),
			m("google/gemma-2-9b-it", sQ, 18.0, sB, 92.0, sKV, 0.8888277582159625),
			withAdapters(m("", catalog.LoRAAdaptersRunning, 1.0, catalog.LoRAAdaptersWaiting, 2.0), false, // vllm:lora_requests_info, no model label
				Adapter{Name: "code-review-lora", Running: true, Waiting: true}, Adapter{Name: "chat-support-lora", Waiting: true}),
		}}},
		{"tgi-v3.prom", Page{Server: TGI, Models: []Model{m("", sQ, 0.0, sB, 0.0)}}},
		{"sglang-v0.4.prom", Page{Server: SGLang, Models: []Model{
			m(llama, sQ, 2826.0, sB, 162.0, sKV, 0.28),
		}}},
		{"trtllm-serve.prom", Page{Server: TRTLLMServe, Models: []Model{
			m("Qwen/Qwen3-8B", sQ, 4.0, sB, 17.0, sKV, 0.6171875),
		}}},
		{"triton-trtllm.prom", Page{Server: TritonTRTLLM, Models: []Model{
			m("tensorrt_llm", sQ, 3.0, sB, 7.0, sKV, 0.4875, sFill, 7.0/512),
		}}},
		{"jetstream.prom", Page{Server: JetStream, Models: []Model{
			m("gemma_7b", sQ, 5.0, sFill, 0.75),
		}}},
	}
	p := NewParser()
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			page := readFixture(t, tt.file)
			got, err := p.Parse(page)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := diffPage(tt.want, *got); diff != "" {
				t.Errorf("Parse (-want +got):\n%s", diff)
			}
			got, err = p.ParseAs(page, tt.want.Server)
			if err != nil {
				t.Fatalf("ParseAs(%s): %v", tt.want.Server, err)
			}
			if diff := diffPage(tt.want, *got); diff != "" {
				t.Errorf("ParseAs(%s) (-want +got):\n%s", tt.want.Server, diff)
			}
		})
	}
}

// The scaled page's per-model values must add up to the README's totals.
func TestParseScaledTotals(t *testing.T) {
	got, err := NewParser().Parse(readFixture(t, "vllm-v1-scaled.prom"))
	if err != nil {
		t.Fatal(err)
	}
	var queue, batch float64
	served := 0
	for _, mod := range got.Models {
		queue += mod.Values[sQ]
		batch += mod.Values[sB]
		if mod.Has.Has(sQ) {
			served++
		}
	}
	if served != 4 || queue != 56 || batch != 303 {
		t.Errorf("got %d models, queue %v, batch %v; want 4, 56, 303", served, queue, batch)
	}
	// vllm:lora_requests_info has no model label: its latest line (the
	// largest value) names 1 running and 2 waiting adapters.
	lora := got.Models[len(got.Models)-1]
	run, ok1 := lora.Value(catalog.LoRAAdaptersRunning)
	wait, ok2 := lora.Value(catalog.LoRAAdaptersWaiting)
	if lora.Name != "" || !ok1 || !ok2 || run != 1 || wait != 2 {
		t.Errorf("LoRA: model %q running %v %v waiting %v %v; want model \"\", 1 and 2", lora.Name, run, ok1, wait, ok2)
	}
}

func TestParseAsOtherServer(t *testing.T) {
	v1 := readFixture(t, "vllm-v1.prom")
	tests := []struct {
		name   string
		page   []byte
		server Server
		want   Page
	}{
		{"V1 page read as TGI has nothing", v1, TGI, Page{Server: Unknown}},
		{"V1 page read as V0 uses gpu_cache_usage_perc", v1, VLLMV0, Page{Server: VLLMV0, Models: []Model{
			m("meta-llama/Llama-3.1-8B-Instruct", sQ, 3.0, sB, 24.0, sKV, 0.4212881455399061),
		}}},
		{"V0 page read as V1 falls back to gpu_cache_usage_perc", readFixture(t, "vllm-v0.prom"), VLLMV1, Page{Server: VLLMV1, Models: []Model{
			m("facebook/opt-125m", sQ, 0.0, sB, 0.0, sKV, 0.0),
		}}},
		{"only the asked server's names count", []byte("tgi_queue_size 4\nvllm:num_requests_waiting 1\nvllm:num_requests_running 2\n"), TGI,
			Page{Server: TGI, Models: []Model{m("", sQ, 4.0)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := NewParser().ParseAs(tt.page, tt.server)
			if err != nil {
				t.Fatal(err)
			}
			if diff := diffPage(tt.want, *got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	if _, err := NewParser().ParseAs(v1, Server(200)); err == nil {
		t.Error("ParseAs(Server(200)): no error")
	}
}

func TestParseSmallPages(t *testing.T) {
	tests := []struct {
		name string
		page string
		want Page
	}{
		{"empty page", "", Page{}},
		{"only comments", "# HELP x y\n# TYPE x gauge\n", Page{}},
		{"escaped quote in model name",
			`vllm:num_requests_waiting{model_name="a\"b"} 1` + "\n",
			Page{Server: VLLMV0, Models: []Model{m(`a"b`, sQ, 1.0)}}},
		{"escaped backslash and newline",
			`sglang:num_queue_reqs{model_name="a\\b\nc"} 2`,
			Page{Server: SGLang, Models: []Model{m("a\\b\nc", sQ, 2.0)}}},
		{"brace and comma inside quoted values",
			`vllm:num_requests_running{engine="0}",model_name="x,}y",other="\"}"} 5`,
			Page{Server: VLLMV1, Models: []Model{m("x,}y", sB, 5.0)}}},
		{"NaN KV is absent and blocks the fallback",
			"vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m\"} NaN\nvllm:gpu_cache_usage_perc{engine=\"0\",model_name=\"m\"} 0.5\nvllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} 1\n",
			Page{Server: VLLMV1, Models: []Model{m("m", sQ, 1.0)}, Rejected: rej(RejectNonFinite, 1)}},
		{"NaN on one engine, value on another",
			"vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m\"} NaN\nvllm:kv_cache_usage_perc{engine=\"1\",model_name=\"m\"} 0.25\n",
			Page{Server: VLLMV1, Models: []Model{m("m", sKV, 0.25)}, Rejected: rej(RejectNonFinite, 1)}},
		{"Inf values are absent",
			"tgi_queue_size +Inf\ntgi_batch_current_size -Inf\n",
			Page{Server: TGI, Rejected: rej(RejectNonFinite, 2)}},
		{"out-of-range number is Inf, absent",
			"tgi_queue_size 1e999\ntgi_batch_current_size 2\n",
			Page{Server: TGI, Models: []Model{m("", sB, 2.0)}, Rejected: rej(RejectNonFinite, 1)}},
		{"timestamps",
			"tgi_queue_size 3 1700000000000\ntgi_batch_current_size 4\t1700000000000\n",
			Page{Server: TGI, Models: []Model{m("", sQ, 3.0, sB, 4.0)}}},
		{"OpenMetrics exemplars, with and without timestamp",
			"tgi_queue_size 3 # {trace_id=\"a\"} 1\ntgi_batch_current_size 4 1700000000.5 # {trace_id=\"b\"} 1\n",
			Page{Server: TGI, Models: []Model{m("", sQ, 3.0, sB, 4.0)}}},
		{"missing final newline", "tgi_queue_size 3", Page{Server: TGI, Models: []Model{m("", sQ, 3.0)}}},
		{"nothing after # EOF counts",
			"tgi_queue_size 3\n# EOF\ntgi_batch_current_size 4\n<html>\n",
			Page{Server: TGI, Models: []Model{m("", sQ, 3.0)}}},
		{"names in comments and HELP text do not match",
			"# HELP vllm:num_requests_waiting vllm:num_requests_waiting 5\n# vllm:num_requests_running 9\n#vllm:num_requests_running 9\n",
			Page{}},
		{"CRLF line endings",
			"# TYPE tgi_queue_size gauge\r\ntgi_queue_size 3\r\ntgi_batch_current_size 4 1700000000000\r\n",
			Page{Server: TGI, Models: []Model{m("", sQ, 3.0, sB, 4.0)}}},
		{"blank lines and leading whitespace",
			"\n\n   \n  tgi_queue_size 3\n\t tgi_batch_current_size 4\n\n",
			Page{Server: TGI, Models: []Model{m("", sQ, 3.0, sB, 4.0)}}},
		{"names that are prefixes of others do not match",
			"vllm:num_requests_waiting_by_reason{model_name=\"m\",reason=\"capacity\"} 9\nvllm:num_requests_waiting{model_name=\"m\"} 1\nvllm:num_requests_running_total 7\ntgi_queue_size_x 5\n",
			Page{Server: VLLMV0, Models: []Model{m("m", sQ, 1.0)}}},
		{"queue and batch summed over engines, KV maxed over pids",
			`vllm:num_requests_waiting{engine="0",model_name="m"} 1
vllm:num_requests_waiting{engine="1",model_name="m"} 2
vllm:num_requests_running{engine="0",model_name="m"} 10
vllm:num_requests_running{engine="1",model_name="m"} 20
vllm:kv_cache_usage_perc{engine="0",model_name="m",pid="11"} 0.5
vllm:kv_cache_usage_perc{engine="0",model_name="m",pid="12"} 0.75
vllm:kv_cache_usage_perc{engine="1",model_name="m",pid="11"} 0.25
`,
			Page{Server: VLLMV1, Models: []Model{m("m", sQ, 3.0, sB, 30.0, sKV, 0.75)}}},
		{"models kept apart, first-seen order",
			`sglang:num_queue_reqs{model_name="b"} 1
sglang:num_queue_reqs{model_name="a"} 2
sglang:token_usage{model_name="a"} 0.5
sglang:num_running_reqs{model_name="b"} 3
`,
			Page{Server: SGLang, Models: []Model{m("b", sQ, 1.0, sB, 3.0), m("a", sQ, 2.0, sKV, 0.5)}}},
		{"V0: no engine label, no kv_cache_usage_perc",
			"vllm:num_requests_running{model_name=\"m\"} 1\nvllm:gpu_cache_usage_perc{model_name=\"m\"} 0.5\n",
			Page{Server: VLLMV0, Models: []Model{m("m", sB, 1.0, sKV, 0.5)}}},
		{"V1 by engine label, KV falls back to gpu_cache_usage_perc",
			"vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 1\nvllm:gpu_cache_usage_perc{engine=\"0\",model_name=\"m\"} 0.5\n",
			Page{Server: VLLMV1, Models: []Model{m("m", sB, 1.0, sKV, 0.5)}}},
		{"fallback is per model",
			"vllm:kv_cache_usage_perc{model_name=\"a\"} 0.1\nvllm:gpu_cache_usage_perc{model_name=\"a\"} 0.9\nvllm:gpu_cache_usage_perc{model_name=\"b\"} 0.8\n",
			Page{Server: VLLMV1, Models: []Model{m("a", sKV, 0.1), m("b", sKV, 0.8)}}},
		{"no model label is the empty name",
			"vllm:num_requests_running 4\n",
			Page{Server: VLLMV0, Models: []Model{m("", sB, 4.0)}}},
		{"blanks around label tokens, trailing comma, no blank before value",
			"vllm:num_requests_running { engine = \"0\" , model_name = \"m\" , }4\n",
			Page{Server: VLLMV1, Models: []Model{m("m", sB, 4.0)}}},
		{"quoted label name",
			`vllm:num_requests_running{"model_name"="m","engine"="0"} 4`,
			Page{Server: VLLMV1, Models: []Model{m("m", sB, 4.0)}}},
		{"exponent and integer forms",
			"tgi_queue_size 1e+06\ntgi_batch_current_size 12\n",
			Page{Server: TGI, Models: []Model{m("", sQ, 1e6, sB, 12.0)}}},
		{"malformed lines that are not needed are skipped",
			"foo{bar=\"unterminated 1\nfoo abc\nhttp_x{a=\"\\q\"} 1\ntgi_queue_size 3\n",
			Page{Server: TGI, Models: []Model{m("", sQ, 3.0)}}},
		{"mixed page: the server with more series wins",
			"tgi_queue_size 1\nsglang:num_queue_reqs{model_name=\"m\"} 2\nsglang:num_running_reqs{model_name=\"m\"} 3\n",
			Page{Server: SGLang, Models: []Model{m("m", sQ, 2.0, sB, 3.0)}}},
		{"Triton: other request types ignored, fill summed over versions",
			`nv_trt_llm_request_metrics{model="t",request_type="context",version="1"} 9
nv_trt_llm_request_metrics{model="t",request_type="active",version="1"} 4
nv_trt_llm_request_metrics{model="t",request_type="active",version="2"} 2
nv_trt_llm_request_metrics{model="t",request_type="max",version="1"} 8
nv_trt_llm_request_metrics{model="t",request_type="max",version="2"} 4
nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="used",model="t",version="1"} 100
`,
			Page{Server: TritonTRTLLM, Models: []Model{m("t", sB, 6.0, sFill, 0.5)}}},
		{"Triton: no fill when max is 0",
			`nv_trt_llm_request_metrics{model="t",request_type="active",version="1"} 4
nv_trt_llm_request_metrics{model="t",request_type="max",version="1"} 0
`,
			Page{Server: TritonTRTLLM, Models: []Model{m("t", sB, 4.0)}}},
		{"JetStream without model label",
			"jetstream_slots_used_percentage{id=\"h\",idx=\"0\"} 0.5\njetstream_prefill_backlog_size{id=\"h\"} 2\n",
			Page{Server: JetStream, Models: []Model{m("", sQ, 2.0, sFill, 0.5)}}},
	}
	p := NewParser()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := p.Parse([]byte(tt.page))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := diffPage(tt.want, *got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name    string
		page    string
		line    int
		notText bool
		msg     string // part of the message
	}{
		{"bad float", "# HELP\ntgi_queue_size abc\n", 2, false, `invalid value "abc"`},
		{"missing value", "tgi_queue_size\n", 1, false, "missing value"},
		{"missing value after labels", "x 1\n\nvllm:num_requests_running{model_name=\"m\"}\n", 3, false, "missing value"},
		{"unterminated label set", "vllm:num_requests_running{model_name=\"m\" 1\n", 1, false, "label"},
		{"unterminated quote", "vllm:num_requests_running{model_name=\"m} 1\n", 1, false, "unterminated quoted string"},
		{"unterminated quote, escaped quote at end", "vllm:num_requests_running{model_name=\"m\\\"} 1", 1, false, "unterminated quoted string"},
		{"invalid escape", `vllm:num_requests_running{model_name="a\qb"} 1`, 1, false, "invalid escape"},
		{"label without value", "vllm:num_requests_running{model_name} 1\n", 1, false, "expected '='"},
		{"bad label name", "vllm:num_requests_running{-x=\"1\"} 1\n", 1, false, "expected label name"},
		{"model label twice", "vllm:num_requests_waiting{model_name=\"a\",model_name=\"b\"} 5\nvllm:num_requests_waiting{model_name=\"b\"} 3\n", 1, false, `label "model_name" given twice`},
		{"bad timestamp", "tgi_queue_size 1 soon\n", 1, false, "invalid timestamp"},
		{"text after timestamp", "tgi_queue_size 1 2 3\n", 1, false, "after timestamp"},
		{"HTML", "<!DOCTYPE html>\n<html><body>502 Bad Gateway</body></html>\n", 1, true, "not a metric name"},
		{"HTML after a good line", "tgi_queue_size 1\n<html>\n", 2, true, "not a metric name"},
		{"JSON", `{"error":"not found"}`, 1, true, "not a metric name"},
		{"binary with NUL", "tgi_queue_size 1\nab\x00\x01\x02", 2, true, "NUL"},
	}
	p := NewParser()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := p.Parse([]byte(tt.page))
			if err == nil {
				t.Fatalf("Parse: no error, page %+v", *got)
			}
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("error %v (%T) is not a *SyntaxError", err, err)
			}
			if se.Line != tt.line {
				t.Errorf("line %d, want %d (%v)", se.Line, tt.line, err)
			}
			if errors.Is(err, ErrNotText) != tt.notText {
				t.Errorf("errors.Is(ErrNotText) = %v, want %v (%v)", !tt.notText, tt.notText, err)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not contain %q", err, tt.msg)
			}
		})
	}
}

// A Parser reused across different pages gives each page's own answer.
func TestParserReuse(t *testing.T) {
	p := NewParser()
	fresh := func(page []byte) Page {
		got, err := NewParser().Parse(page)
		if err != nil {
			t.Fatal(err)
		}
		return clonePage(got)
	}
	for round := range 2 {
		for _, f := range fixtures {
			page := readFixture(t, f)
			got, err := p.Parse(page)
			if err != nil {
				t.Fatal(err)
			}
			if diff := diffPage(fresh(page), clonePage(got)); diff != "" {
				t.Errorf("round %d %s: reused parser differs (-fresh +reused):\n%s", round, f, diff)
			}
		}
	}
	if _, err := p.Parse([]byte("tgi_queue_size x\n")); err == nil {
		t.Fatal("no error for a bad page")
	}
	got, err := p.Parse([]byte("tgi_batch_current_size 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := diffPage(Page{Server: TGI, Models: []Model{m("", sB, 1.0)}}, *got); diff != "" {
		t.Errorf("after an error (-want +got):\n%s", diff)
	}
}

// rej is a Page.Rejected with n refusals for reason r.
func rej(r Reject, n uint32) (out [NumRejects]uint32) {
	out[r] = n
	return out
}

// diffPage compares pages, with no Models equal to empty Models.
// diffPage compares the gauges of two pages; counters and histograms are
// compared in slo_test.go.
func diffPage(want, got Page) string {
	return cmp.Diff(want, got, cmpopts.EquateEmpty(), cmpopts.IgnoreFields(Model{}, "Counters", "HasCounter", "Hists"))
}

func clonePage(p *Page) Page {
	return Page{Server: p.Server, Models: append([]Model{}, p.Models...), Rejected: p.Rejected}
}

// Steady state is allocation-free on every fixture (the goal is the V1 page).
func TestParseZeroAllocs(t *testing.T) {
	for _, f := range fixtures {
		page := readFixture(t, f)
		p := NewParser()
		if _, err := p.Parse(page); err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(20, func() { _, _ = p.Parse(page) }); n != 0 {
			t.Errorf("%s: %v allocs per page, want 0", f, n)
		}
	}
}

// The wanted-series table must suit the matcher.
func TestDialectTable(t *testing.T) {
	for s, d := range dialects {
		seen := map[string]bool{}
		for i, se := range d.series {
			if len(se.name) < 8 {
				t.Errorf("%s: name %q shorter than 8 bytes (slower to match)", Server(s), se.name)
			}
			if seen[se.name] && d.series[i-1].name != se.name {
				t.Errorf("%s: series named %q are not adjacent", Server(s), se.name)
			}
			seen[se.name] = true
			if se.role >= numRoles {
				t.Errorf("%s: bad role %d", Server(s), se.role)
			}
			for _, f := range se.filters {
				if !IsLabelName(f.key) {
					t.Errorf("%s: filter label %q", Server(s), f.key)
				}
			}
		}
	}
}
