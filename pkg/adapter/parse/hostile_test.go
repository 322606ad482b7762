// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package parse

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// manyModels is a vLLM page with n models, one queue line each; model i
// has queue i.
func manyModels(n int) []byte {
	var b bytes.Buffer
	for i := range n {
		fmt.Fprintf(&b, "vllm:num_requests_waiting{model_name=\"model-%d\"} %d\n", i, i)
	}
	return b.Bytes()
}

// checkBounded fails when p's scratch buffers or name cache hold more than
// its bounds allow.
func checkBounded(t *testing.T, p *Parser) {
	t.Helper()
	limit := p.limits.MaxLabelValueBytes
	bufs := map[string][]byte{"modelBuf": p.modelBuf, "keyBuf": p.keyBuf, "discardBuf": p.discardBuf}
	for i, b := range p.fltBufs {
		bufs[fmt.Sprintf("fltBufs[%d]", i)] = b
	}
	for name, b := range bufs {
		if cap(b) > limit {
			t.Errorf("%s has capacity %d, over the %d-byte label bound", name, cap(b), limit)
		}
	}
	size := 0
	for n := range p.names {
		size += len(n)
	}
	if size != p.nameSize || size > maxCachedNameBytes || len(p.names) > maxCachedNames {
		t.Errorf("name cache holds %d names of %d bytes (counted %d), want at most %d of %d bytes",
			len(p.names), size, p.nameSize, maxCachedNames, maxCachedNameBytes)
	}
}

// Pages each with a fresh ~1 MiB model name are refused, and the parser
// keeps none of them.
// Was wrong: the intern cache bounded names, not bytes: 100 such pages grew the heap 101 MiB.
func TestLabelSizeBoundsMemory(t *testing.T) {
	p := NewParser()
	for i := range 100 {
		name := strings.Repeat(string(rune('a'+i%26)), 1<<20) + fmt.Sprint(i)
		if i%2 == 1 {
			name = `esc\"` + name // the unescaping path
		}
		page := []byte("vllm:num_requests_waiting{model_name=\"" + name + "\"} 1\n")
		got, err := p.Parse(page)
		if !errors.Is(err, ErrLimit) {
			t.Fatalf("page %d: got %v, %v; want an error wrapping ErrLimit", i, got, err)
		}
		if !strings.Contains(err.Error(), "label value longer than 1024 bytes") {
			t.Errorf("page %d: error %q does not say which bound", i, err)
		}
		if len(err.Error()) > 200 {
			t.Errorf("page %d: error of %d bytes", i, len(err.Error()))
		}
	}
	checkBounded(t, p)

	// Names under the bound, a fresh set each page: the cache stays bounded in bytes.
	for i := range 100 {
		var b bytes.Buffer
		for k := range 4 {
			fmt.Fprintf(&b, "vllm:num_requests_waiting{model_name=\"%s-%d-%d\"} 1\n", strings.Repeat("n", 1000), i, k)
		}
		got, err := p.Parse(b.Bytes())
		if err != nil || len(got.Models) != 4 {
			t.Fatalf("page %d: %v, %v", i, got, err)
		}
	}
	checkBounded(t, p)
	if _, err := p.Parse(readFixture(t, "vllm-v1.prom")); err != nil {
		t.Fatalf("fixture after refused pages: %v", err)
	}
}

// Every label name and value of a wanted line is bounded, however written;
// lines the parser does not need are not looked at.
// Was wrong: label names and values had no size bound.
func TestLabelBoundCases(t *testing.T) {
	long := strings.Repeat("x", 1025)
	tests := []struct {
		name, page string
		what       string // "": no error
	}{
		{"value at the bound", `vllm:num_requests_waiting{model_name="` + long[1:] + `"} 1`, ""},
		{"model value", `vllm:num_requests_waiting{model_name="` + long + `"} 1`, "label value longer than 1024 bytes"},
		{"other value", `vllm:num_requests_waiting{model_name="m",x="` + long + `"} 1`, "label value longer than 1024 bytes"},
		{"escaped value", `vllm:num_requests_waiting{x="\\` + long + `"} 1`, "label value longer than 1024 bytes"},
		{"filter value", `nv_trt_llm_request_metrics{request_type="` + long + `\n"} 1`, "label value longer than 1024 bytes"},
		{"label name", `vllm:num_requests_waiting{` + long + `="1"} 1`, "label name longer than 1024 bytes"},
		{"quoted label name", `vllm:num_requests_waiting{"` + long + `"="1"} 1`, "label name longer than 1024 bytes"},
		{"unwanted line", `http_requests_total{path="` + long + `"} 1` + "\ntgi_queue_size 1", ""},
	}
	p := NewParser()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := p.Parse([]byte(tt.page))
			switch {
			case tt.what == "" && err != nil:
				t.Fatalf("Parse: %v", err)
			case tt.what != "" && (!errors.Is(err, ErrLimit) || !strings.Contains(fmt.Sprint(err), tt.what)):
				t.Fatalf("Parse: %v, want ErrLimit saying %q", err, tt.what)
			}
			checkBounded(t, p)
		})
	}
}

// More models than the bound: the page is refused whole.
// Was wrong: a page could name any number of models, each kept in memory.
func TestModelsBoundRefusesPage(t *testing.T) {
	p := NewParser()
	got, err := p.Parse(manyModels(DefaultMaxModels))
	if err != nil || len(got.Models) != DefaultMaxModels {
		t.Fatalf("%d models: %v models, %v", DefaultMaxModels, got, err)
	}
	got, err = p.Parse(manyModels(DefaultMaxModels + 1))
	if !errors.Is(err, ErrLimit) || got != nil || !strings.Contains(err.Error(), fmt.Sprintf("more than %d models", DefaultMaxModels)) {
		t.Fatalf("%d models: %v, %v; want nothing and ErrLimit naming the models bound", DefaultMaxModels+1, got, err)
	}
	p.SetLimits(Limits{MaxModels: 10})
	if _, err := p.Parse(manyModels(11)); !errors.Is(err, ErrLimit) {
		t.Fatalf("11 models over a bound of 10: %v", err)
	}
	if l := p.Limits(); l.MaxModels != 10 || l.MaxLabelValueBytes != DefaultMaxLabelValueBytes {
		t.Errorf("Limits() = %+v, want 10 models and the default label bound", l)
	}
}

// A page with 40k models is refused by default; with the bound lifted it
// parses (per-line work is constant: see BenchmarkManyModels for the cost
// per model at 1k and 10k models).
// Was wrong: each line scanned the models linearly, so 40k models took 2.7 s.
func TestManyModelsLinearTime(t *testing.T) {
	const n = 40000
	page := manyModels(n)
	p := NewParser()
	if _, err := p.Parse(page); !errors.Is(err, ErrLimit) {
		t.Fatalf("default bound: %v, want ErrLimit", err)
	}
	p.SetLimits(Limits{MaxModels: n})
	got, err := p.Parse(page)
	if err != nil {
		t.Fatal(err)
	}
	if got.Server != VLLMV0 || len(got.Models) != n {
		t.Fatalf("got %s with %d models, want vllm-v0 with %d", got.Server, len(got.Models), n)
	}
	for i, mod := range got.Models {
		if want := fmt.Sprintf("model-%d", i); mod.Name != want || mod.Values[sQ] != float64(i) {
			t.Fatalf("model %d = %q queue %v, want %q queue %d", i, mod.Name, mod.Values[sQ], want, i)
		}
	}
	// The large per-page maps are not kept for the next page.
	if _, err := p.Parse(readFixture(t, "vllm-v1.prom")); err != nil {
		t.Fatal(err)
	}
	for s, m := range p.index {
		if len(m) > DefaultMaxModels {
			t.Errorf("server %d: model index keeps %d entries", s, len(m))
		}
	}
}

// A parse past its deadline stops with ErrDeadline; nothing is returned.
// Was wrong: parsing had no deadline, so one page could pin a core for minutes.
func TestDeadlineStopsParse(t *testing.T) {
	page := manyModels(DefaultMaxModels)
	p := NewParser()
	got, err := p.ParseBy(page, Unknown, time.Now().Add(-time.Second))
	if !errors.Is(err, ErrDeadline) || got != nil {
		t.Fatalf("past deadline: %v, %v; want nothing and ErrDeadline", got, err)
	}
	var se *SyntaxError
	if errors.As(err, &se) || errors.Is(err, ErrLimit) {
		t.Errorf("deadline error %v is also a syntax or limit error", err)
	}
	got, err = p.ParseBy(page, Unknown, time.Now().Add(time.Hour))
	if err != nil || len(got.Models) != DefaultMaxModels {
		t.Fatalf("future deadline: %v, %v", got, err)
	}
}

// Values no signal can take are refused at the source: absent for their
// series (never zero) and counted by reason.
// Was wrong: negative queues, fractions over 1 and non-finite values passed through.
func TestRefusedValuesAreAbsent(t *testing.T) {
	servers := testServers(t)
	my, _ := servers.ByName("my-server")
	const nf, neg, above = RejectNonFinite, RejectNegative, RejectAboveOne
	counts := func(pairs ...any) (out [NumRejects]uint32) {
		for i := 0; i < len(pairs); i += 2 {
			out[pairs[i].(Reject)] = uint32(pairs[i+1].(int))
		}
		return out
	}
	tests := []struct {
		name string
		page string
		want Page
	}{
		{"negative queue", "tgi_queue_size -1\ntgi_batch_current_size 2\n",
			Page{Server: TGI, Models: []Model{m("", sB, 2.0)}, Rejected: counts(neg, 1)}},
		{"negative batch on one engine, the other counts",
			"vllm:num_requests_running{engine=\"0\",model_name=\"m\"} -5\nvllm:num_requests_running{engine=\"1\",model_name=\"m\"} 3\n",
			Page{Server: VLLMV1, Models: []Model{m("m", sB, 3.0)}, Rejected: counts(neg, 1)}},
		{"NaN and Inf", "tgi_queue_size NaN\ntgi_batch_current_size +Inf\n",
			Page{Server: TGI, Rejected: counts(nf, 2)}},
		{"KV above one", "vllm:kv_cache_usage_perc{model_name=\"m\"} 7.5\nvllm:num_requests_waiting{model_name=\"m\"} 1\n",
			Page{Server: VLLMV1, Models: []Model{m("m", sQ, 1.0)}, Rejected: counts(above, 1)}},
		{"refused KV still blocks the fallback",
			"vllm:kv_cache_usage_perc{model_name=\"m\"} 1.5\nvllm:gpu_cache_usage_perc{model_name=\"m\"} 0.5\nvllm:num_requests_waiting{model_name=\"m\"} 1\n",
			Page{Server: VLLMV1, Models: []Model{m("m", sQ, 1.0)}, Rejected: counts(above, 1)}},
		{"negative KV", "sglang:token_usage{model_name=\"m\"} -0.25\nsglang:num_queue_reqs{model_name=\"m\"} 1\n",
			Page{Server: SGLang, Models: []Model{m("m", sQ, 1.0)}, Rejected: counts(neg, 1)}},
		{"bounds themselves are fine", "sglang:token_usage{model_name=\"m\"} 1\nsglang:num_queue_reqs{model_name=\"m\"} 0\n",
			Page{Server: SGLang, Models: []Model{m("m", sQ, 0.0, sKV, 1.0)}}},
		{"JetStream slots used above one", "jetstream_slots_used_percentage{idx=\"0\"} 1.25\njetstream_slots_used_percentage{idx=\"1\"} 0.5\njetstream_prefill_backlog_size 2\n",
			Page{Server: JetStream, Models: []Model{m("", sQ, 2.0, sFill, 0.5)}, Rejected: counts(above, 1)}},
		{"sum over engines overflows", "vllm:num_requests_waiting{engine=\"0\"} 1e308\nvllm:num_requests_waiting{engine=\"1\"} 1e308\nvllm:num_requests_waiting{engine=\"2\"} 1\nvllm:num_requests_running 4\n",
			Page{Server: VLLMV1, Models: []Model{m("", sB, 4.0)}, Rejected: counts(nf, 1)}},
		{"Triton derived fill above one",
			"nv_trt_llm_request_metrics{model=\"t\",request_type=\"active\"} 9\nnv_trt_llm_request_metrics{model=\"t\",request_type=\"max\"} 8\n",
			Page{Server: TritonTRTLLM, Models: []Model{m("t", sB, 9.0)}, Rejected: counts(above, 1)}},
		{"Triton derived fill non-finite",
			"nv_trt_llm_request_metrics{model=\"t\",request_type=\"active\"} 1e308\nnv_trt_llm_request_metrics{model=\"t\",request_type=\"max\"} 1e-308\n",
			Page{Server: TritonTRTLLM, Models: []Model{m("t", sB, 1e308)}, Rejected: counts(nf, 1)}},
		{"Triton negative max",
			"nv_trt_llm_request_metrics{model=\"t\",request_type=\"active\"} 4\nnv_trt_llm_request_metrics{model=\"t\",request_type=\"max\"} -8\n",
			Page{Server: TritonTRTLLM, Models: []Model{m("t", sB, 4.0)}, Rejected: counts(neg, 1)}},
		{"custom KV above one after scale", "my_server_kv_percent{model=\"a\"} 150\nmy_server_kv_percent{model=\"b\"} 50\n",
			Page{Server: my, Models: []Model{m("b", sKV, 0.5)}, Rejected: counts(above, 1)}},
		{"custom batch fill negative", "slots{kind=\"decode\",state=\"used\"} -0.5\nmy_server_queue_depth 1\n",
			Page{Server: my, Models: []Model{m("", sQ, 1.0)}, Rejected: counts(neg, 1)}},
	}
	p := NewParserFor(servers)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := p.Parse([]byte(tt.page))
			if err != nil {
				t.Fatal(err)
			}
			if diff := diffPage(tt.want, *got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	if got := [NumRejects]string{nf.String(), neg.String(), above.String()}; got != [...]string{"non_finite", "negative", "above_one"} {
		t.Errorf("reason names %v", got)
	}
}

// Error messages quote at most a little of the page, however long the text.
// Was wrong: a 1 MiB malformed value became a 4 MiB error message.
func TestErrorTextBounded(t *testing.T) {
	junk := bytes.Repeat([]byte{1, 2, 0x7f, 0xff}, 1<<18) // 1 MiB of control and invalid bytes
	tests := []struct{ name, page, msg string }{
		{"value", "tgi_queue_size " + string(junk), "invalid value"},
		{"timestamp", "tgi_queue_size 1 " + string(junk), "invalid timestamp"},
		{"text after timestamp", "tgi_queue_size 1 2 " + string(junk), "after timestamp"},
		{"label name without '='", "tgi_queue_size{" + strings.Repeat("k", 1000) + "}", "expected '='"},
		{"label name without value", "tgi_queue_size{" + strings.Repeat("k", 1000) + "=1}", "expected quoted value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewParser().Parse([]byte(tt.page))
			if err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("Parse: %v, want an error with %q", err, tt.msg)
			}
			if n := len(err.Error()); n > 300 {
				t.Errorf("error of %d bytes, want at most 300: %.400q", n, err)
			}
		})
	}
}

// A wanted series written twice (label order aside) is refused as
// Prometheus does, instead of being summed.
// Was wrong: exact duplicate lines were summed (3 + 3 = 6).
func TestDuplicateSeriesRefused(t *testing.T) {
	tests := []struct {
		name string
		page string
		line int // 0: no error
	}{
		{"exact duplicate", "tgi_queue_size 3\ntgi_queue_size 3\n", 2},
		{"duplicate with other values", "# c\ntgi_queue_size 3\n\ntgi_queue_size 1 1700000000\n", 4},
		{"labels in another order",
			"vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} 1\nvllm:num_requests_waiting{ model_name=\"m\" , engine=\"0\" } 1\n", 2},
		{"quoted label name, escaped value",
			"vllm:num_requests_waiting{model_name=\"a\\\\b\"} 1\nvllm:num_requests_waiting{\"model_name\"=\"a\\\\b\"} 1\n", 2},
		{"an empty label value is no label", "tgi_queue_size 3\ntgi_queue_size{x=\"\"} 3\n", 2},
		{"Triton filter label", "nv_trt_llm_request_metrics{model=\"t\",request_type=\"active\"} 1\nnv_trt_llm_request_metrics{request_type=\"active\",model=\"t\"} 1\n", 2},
		{"engines differ", "vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} 1\nvllm:num_requests_waiting{engine=\"1\",model_name=\"m\"} 1\n", 0},
		{"values swapped between labels differ", "tgi_queue_size{a=\"1\",b=\"2\"} 1\ntgi_queue_size{a=\"2\",b=\"1\"} 1\n", 0},
		{"a label more differs", "tgi_queue_size{a=\"1\"} 1\ntgi_queue_size{a=\"1\",b=\"1\"} 1\n", 0},
		{"other names differ", "vllm:num_requests_waiting 1\nvllm:num_requests_running 1\n", 0},
		{"unwanted lines are not looked at", "foo 1\nfoo 1\nnv_trt_llm_request_metrics{request_type=\"context\"} 1\nnv_trt_llm_request_metrics{request_type=\"context\"} 1\n", 0},
	}
	p := NewParser()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := p.Parse([]byte(tt.page))
			if tt.line == 0 {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				return
			}
			var se *SyntaxError
			if !errors.As(err, &se) || se.Line != tt.line || !strings.Contains(se.Msg, "duplicate series") {
				t.Fatalf("Parse: %v, %v; want a duplicate series error on line %d", got, err, tt.line)
			}
		})
	}
	// Every fixture, data-parallel vLLM included, has no duplicate.
	for _, f := range fixtures {
		if _, err := p.Parse(readFixture(t, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// TestAccumulatorsBoundedBetweenPages: the per-model accumulators (3.5 KB
// each, histograms included) a page made the Parser grow are not all kept
// for the pages after it. 256 models (the most a page might have then) are
// 880 KB; with the models bound once per server, one 192 KB page of 256
// models for each built-in server made 2,300 of them, 8 MB kept by every
// worker's Parser that ever read such a page.
// Was wrong: the Parser kept every accumulator a page made it grow.
func TestAccumulatorsBoundedBetweenPages(t *testing.T) {
	perServer := func(names []string, n int) []byte {
		var b bytes.Buffer
		for _, name := range names {
			for i := range n {
				fmt.Fprintf(&b, "%s{model_name=\"m%d\",model=\"m%d\",kv_cache_block_type=\"fraction\"} 1\n", name, i, i)
			}
		}
		return b.Bytes()
	}
	every := []string{"vllm:num_requests_waiting", "tgi_queue_size", "sglang:num_queue_reqs", "trtllm_num_requests_waiting",
		"nv_trt_llm_kv_cache_block_metrics", "jetstream_prefill_backlog_size",
		"inference_extension_flow_control_queue_size", "inference_front_door_pending_requests"}
	const maxKeptBytes = 256 << 10 // "a few hundred KiB at most"
	for _, tc := range []struct {
		name   string
		page   []byte
		server Server
	}{
		{"the bound's models of one server", manyModels(DefaultMaxModels), Unknown},
		{"the bound's models of every server", perServer(every, DefaultMaxModels), Unknown},
		{"the bound's models of every server, parsed as vLLM", perServer(every, DefaultMaxModels), VLLMV1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewParser()
			if _, err := p.ParseAs(tc.page, tc.server); err != nil && !errors.Is(err, ErrLimit) {
				t.Fatalf("hostile page: %v", err) // refused at the models bound or not, it grew the accumulators
			}
			if _, err := p.Parse([]byte("tgi_queue_size 1\n")); err != nil {
				t.Fatal(err)
			}
			if kept := cap(p.accs) * int(unsafe.Sizeof(accum{})); kept > maxKeptBytes {
				t.Fatalf("the Parser keeps %d accumulators (%d KiB) after a small page, want at most %d KiB",
					cap(p.accs), kept>>10, maxKeptBytes>>10)
			}
		})
	}
}

// TestModelsBoundPageWide: the models bound holds for the whole page, not
// for each server's series apart. Per server, one page could name 256 models
// under each server's names (each model a 3.5 KB accumulator): 8 MB for a
// 192 KB page with the built-in servers, 87 MB live (440 MB allocated) for a
// 661 KB page with 100 custom servers, in every worker.
// Was wrong: the bound was per server, so one page could hold 256 models per server.
func TestModelsBoundPageWide(t *testing.T) {
	// page names n models under each of names (distinct per name).
	page := func(n int, names ...string) []byte {
		var b bytes.Buffer
		for s, name := range names {
			for i := range n {
				fmt.Fprintf(&b, "%s{model_name=\"s%d-m%d\",model=\"s%d-m%d\",kv_cache_block_type=\"fraction\"} 1\n", name, s, i, s, i)
			}
		}
		return b.Bytes()
	}
	every := []string{"vllm:num_requests_waiting", "tgi_queue_size", "sglang:num_queue_reqs", "trtllm_num_requests_waiting",
		"nv_trt_llm_kv_cache_block_metrics", "jetstream_prefill_backlog_size",
		"inference_extension_flow_control_queue_size", "inference_front_door_pending_requests"}
	var cs []CustomServer
	var custom []string
	for i := range 4 {
		cs = append(cs, CustomServer{Name: fmt.Sprintf("c%d", i), ModelLabel: "model", Queue: Series{Name: fmt.Sprintf("c%d_queue", i)}})
		custom = append(custom, fmt.Sprintf("c%d_queue", i))
	}
	servers, err := NewServers(cs)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		page      []byte
		servers   *Servers
		wantLimit bool
	}{
		{"the bound's models of every built-in server", page(DefaultMaxModels, every...), nil, true},
		{"100 models of each of three servers", page(100, every[0], every[2], every[3]), nil, true},
		{"one fewer vLLM models than the bound and TGI's one", page(DefaultMaxModels-1, every[0], every[1]), nil, false},
		{"half the bound's models of each of two servers", page(DefaultMaxModels/2, every[0], every[2]), nil, false},
		{"100 models of each of four custom servers", page(100, custom...), servers, true},
		{"a quarter of the bound's models of each of four custom servers", page(DefaultMaxModels/4, custom...), servers, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewParserFor(tc.servers)
			_, err := p.Parse(tc.page)
			if got := errors.Is(err, ErrLimit); got != tc.wantLimit {
				t.Fatalf("Parse: %v; want ErrLimit: %v", err, tc.wantLimit)
			}
			if len(p.accs) > DefaultMaxModels {
				t.Errorf("%d accumulators, want at most %d", len(p.accs), DefaultMaxModels)
			}
		})
	}
}
