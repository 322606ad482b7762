// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package parse

import (
	"bytes"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
)

func FuzzParse(f *testing.F) {
	// Large seeds slow the fuzzer to a crawl (expfmt takes milliseconds on
	// them), so fixtures over 16 KB seed with their first 16 KB of lines.
	for _, name := range fixtures {
		page := readFixture(f, name)
		if len(page) > 16<<10 {
			page = page[:bytes.LastIndexByte(page[:16<<10], '\n')+1]
		}
		f.Add(page)
	}
	for _, s := range []string{
		"",
		"tgi_queue_size 3",
		"tgi_queue_size 3 1700000000000\r\ntgi_batch_current_size NaN\r\n# EOF\n",
		`vllm:num_requests_running{engine="0}",model_name="x,}y",other="\"}"} 5`,
		`sglang:num_queue_reqs{model_name="a\\b\nc"} 2` + "\nsglang:token_usage{model_name=\"a\\\\b\\nc\"} +Inf\n",
		"vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m\"} NaN\nvllm:gpu_cache_usage_perc{model_name=\"m\"} 0.5\n",
		"vllm:num_requests_waiting_by_reason{reason=\"x\"} 9\n  vllm:num_requests_waiting{model_name=\"m\"} 1\n",
		"nv_trt_llm_request_metrics{model=\"t\",request_type=\"active\"} 4\nnv_trt_llm_request_metrics{model=\"t\",request_type=\"max\"} 8\n",
		"jetstream_slots_used_percentage{idx=\"0\"} 0.5\njetstream_prefill_backlog_size 2\n",
		"trtllm_num_requests_waiting{model_name=\"q\"} 1\ntrtllm_kv_cache_utilization{model_name=\"q\"} 0.3\n",
		"<html>502</html>",
		"tgi_queue_size 1\nab\x00",
		"vllm:num_requests_running{model_name=\"m} 1\n",
		// For the custom table of fuzzServers.
		"q{model=\"a\"} 3\nq{model=\"b\",w=\"0\"} 1e308\nq{model=\"b\",w=\"1\"} 1e308\nq{model=\"b\",w=\"2\"} -1\nmy_server_slots_fill{model=\"a\"} 1.5\n",
		"tgi_queue_size 1\ntgi_queue_size{a=\"\"} 2\n",
		"vllm:num_requests_running{a=\"1\",b=\"2\"} 1\nvllm:num_requests_running{b=\"2\",a=\"1\"} 1\n",
		"nv_trt_llm_request_metrics{model=\"t\",request_type=\"active\"} 9\nnv_trt_llm_request_metrics{model=\"t\",request_type=\"max\"} 8\nnv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=\"fraction\",model=\"t\"} -0.5\n",
		"reqs{state=\"running\",kind=\"x\",model=\"a\"} 4\nreqs{state=\"running\",model=\"a\"} 9\nreqs{state=\"kv\",model=\"a\"} 0.25\nreqs{state=\"kv\",kind=\"x\"} 0.75\n",
		"my_kv_perc{model_name=\"m\"} 42\nvllm:num_requests_waiting{model_name=\"m\"} 1\n",
		"my_kv_perc{model_name=\"m\"} 42\nreqs{model=\"m\",state=\"kv\"} 0.5\nq 1\n",
	} {
		f.Add([]byte(s))
	}
	other := readFixture(f, "vllm-v1.prom")
	custom := fuzzServers(f)

	f.Fuzz(func(t *testing.T, data []byte) {
		builtin := fuzzOne(t, data, nil, other)
		withCustom := fuzzOne(t, data, custom, other)

		// Each server's answer agrees with expfmt, where expfmt reads the page.
		checkAgainstExpfmt(t, data, custom)

		// A custom table never changes what a page with built-in series says.
		if builtin != nil && withCustom != nil && int(withCustom.Server) < numBuiltin {
			if d := diffPage(*builtin, *withCustom); d != "" {
				t.Fatalf("the custom table changed a built-in answer (-built-in +custom):\n%s", d)
			}
		}
	})
}

// fuzzServers is the custom table of the fuzz target: a name shorter than 8
// bytes with a scale, one name carrying two signals told apart by label
// filters (two keys), and a server that shares a name with vLLM.
func fuzzServers(tb testing.TB) *Servers {
	tb.Helper()
	s, err := NewServers([]CustomServer{
		{Name: "short", ModelLabel: "model",
			Queue:     Series{Name: "q", Scale: 0.5},
			Batch:     Series{Name: "reqs", Labels: map[string]string{"state": "running", "kind": "x"}},
			KVCache:   Series{Name: "reqs", Labels: map[string]string{"state": "kv"}},
			BatchFill: Series{Name: "my_server_slots_fill"}},
		{Name: "vllm-like", ModelLabel: "model_name",
			Queue:   Series{Name: "vllm:num_requests_waiting"},
			KVCache: Series{Name: "my_kv_perc", Scale: 0.01}},
	})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// fuzzOne checks one parser (built-in servers when servers is nil) on data
// and returns its page, or nil when the page is an error.
func fuzzOne(t *testing.T, data []byte, servers *Servers, other []byte) *Page {
	t.Helper()
	p := NewParserFor(servers)
	got, err := p.Parse(data)
	var first Page
	if err == nil {
		first = clonePage(got)
		checkPage(t, data, first)
	}

	// Deterministic, and independent of what the parser parsed before.
	if _, err := p.Parse(other); err != nil {
		t.Fatalf("fixture: %v", err)
	}
	again, err2 := p.Parse(data)
	if (err == nil) != (err2 == nil) || err != nil && err.Error() != err2.Error() {
		t.Fatalf("errors differ between runs: %v / %v", err, err2)
	}
	if err != nil {
		return nil
	}
	if d := diffPage(first, *again); d != "" {
		t.Fatalf("second run differs (-first +second):\n%s", d)
	}

	// Parsing as the detected server gives the same answer.
	if first.Server != Unknown {
		as, err := NewParserFor(servers).ParseAs(data, first.Server)
		if err != nil {
			t.Fatalf("ParseAs(%s): %v, but Parse succeeded", servers.Name(first.Server), err)
		}
		if d := diffPage(first, *as); d != "" {
			t.Fatalf("ParseAs(%s) differs from Parse (-Parse +ParseAs):\n%s", servers.Name(first.Server), d)
		}
	}
	return &first
}

// checkPage asserts what holds for any successfully parsed page.
func checkPage(t *testing.T, data []byte, pg Page) {
	t.Helper()
	if pg.Server == Unknown && len(pg.Models) > 0 {
		t.Fatalf("Unknown server with %d models", len(pg.Models))
	}
	numbers := pageNumbers(data)
	names := map[string]bool{}
	for _, mod := range pg.Models {
		if names[mod.Name] {
			t.Fatalf("model %q twice", mod.Name)
		}
		names[mod.Name] = true
		if mod.Has == 0 {
			t.Fatalf("model %q without signals", mod.Name)
		}
		for _, s := range []catalog.Signal{sQ, sB, sKV, sFill} {
			v, ok := mod.Value(s)
			if !ok && mod.Values[s] != 0 {
				t.Fatalf("model %q: absent %s holds %v", mod.Name, s, mod.Values[s])
			}
			// Nothing is NaN, infinite or negative; fractions are at most 1.
			if ok && (math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v > 1 && (s == sKV || s == sFill)) {
				t.Fatalf("model %q: %s = %v", mod.Name, s, v)
			}
		}
		if int(pg.Server) >= numBuiltin {
			continue // custom tables scale values; checkAgainstExpfmt covers them
		}
		// KV is a max, so it is one of the numbers the page said.
		if v, ok := mod.Value(sKV); ok && !numbers[v] {
			t.Fatalf("model %q KV %v is not a number on the page", mod.Name, v)
		}
		if v, ok := mod.Value(sFill); ok && pg.Server != TritonTRTLLM && !numbers[v] {
			t.Fatalf("model %q batch fill %v is not a number on the page", mod.Name, v)
		}
		if pg.Server == TGI && (mod.Has.Has(sKV) || mod.Has.Has(sFill) || mod.Name != "") {
			t.Fatalf("TGI model %+v has KV, fill or a name", mod)
		}
	}
}

// pageNumbers returns every number written on the page as a token.
func pageNumbers(data []byte) map[float64]bool {
	out := map[float64]bool{}
	for _, tok := range bytes.FieldsFunc(data, func(r rune) bool {
		return r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '}'
	}) {
		if v, err := strconv.ParseFloat(string(tok), 64); err == nil {
			out[v] = true
		}
	}
	return out
}

// checkAgainstExpfmt compares ParseAs for every server with the same
// aggregation done over expfmt's reading of the page, when expfmt reads it
// and the page is in the common subset of both (no "# EOF", no NUL bytes,
// wanted families typed gauge, counter or untyped).
func checkAgainstExpfmt(t *testing.T, data []byte, servers *Servers) {
	t.Helper()
	if bytes.IndexByte(data, 0) >= 0 || bytes.Contains(data, []byte("# EOF")) {
		return
	}
	ds := servers.all()
	if nameRunsIntoValue(data, ds) {
		return
	}
	tp := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := tp.TextToMetricFamilies(bytes.NewReader(data))
	if err != nil {
		return
	}
	for s := VLLMV1; int(s) < len(ds); s++ {
		want, ok := referencePage(fams, ds[s], s)
		if !ok {
			continue
		}
		got, err := NewParserFor(servers).ParseAs(data, s)
		if errors.Is(err, ErrLimit) {
			continue // a long label or many models: expfmt has no bounds
		}
		if want.Server == dupServer {
			if err == nil || !strings.Contains(err.Error(), "duplicate series") {
				t.Fatalf("ParseAs(%s) = %v, want a duplicate series error", s, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("ParseAs(%s): %v, but expfmt read the page", s, err)
		}
		byName := cmpopts.SortSlices(func(a, b Model) bool { return a.Name < b.Name })
		if d := cmp.Diff(want, *got, cmpopts.EquateEmpty(), byName, cmpopts.EquateNaNs(), cmpopts.IgnoreFields(Model{}, "Counters", "HasCounter", "Hists")); d != "" {
			t.Fatalf("ParseAs(%s) differs from expfmt (-expfmt +ours):\n%s", s, d)
		}
	}
}

// nameRunsIntoValue reports whether a line starts with a wanted name followed
// directly by a character that can start a value ("name+0"). expfmt reads
// that as a sample; this parser, as documented, wants a blank or '{' after
// the name and skips the line.
func nameRunsIntoValue(data []byte, ds []dialect) bool {
	for _, line := range bytes.Split(data, []byte{'\n'}) {
		line = bytes.TrimLeft(line, " \t")
		for _, d := range ds {
			for _, se := range d.series {
				n := len(se.name)
				if len(line) > n && string(line[:n]) == se.name && !isNameEnd(line[n]) && !isLabelChar(line[n]) && line[n] != ':' && line[n] != '\r' {
					return true
				}
			}
		}
	}
	return false
}

// dupServer is the Server of a referencePage for a page that repeats one of
// the server's wanted series, which the parser must refuse.
const dupServer Server = 255

// referencePage aggregates server s's wanted series (dialect d) from
// expfmt's families as docs/parser.md says; ok is false outside the common
// subset.
func referencePage(fams map[string]*dto.MetricFamily, d dialect, s Server) (Page, bool) {
	var accs []*accum
	var pg Page
	count := 0
	if dup, ok := repeatsSeries(fams, d); !ok {
		return Page{}, false
	} else if dup {
		return Page{Server: dupServer}, true
	}
	for _, se := range d.series {
		fam := fams[se.name]
		if fam == nil || se.role >= numGaugeRoles {
			continue // counters and histograms are compared in slo_test.go
		}
		switch fam.GetType() {
		case dto.MetricType_GAUGE, dto.MetricType_COUNTER, dto.MetricType_UNTYPED:
		default:
			return Page{}, false
		}
		for _, met := range fam.GetMetric() {
			labels := map[string]string{}
			for _, lp := range met.GetLabel() {
				if _, dup := labels[lp.GetName()]; dup {
					return Page{}, false // which one wins is not specified
				}
				labels[lp.GetName()] = lp.GetValue()
			}
			if slices.ContainsFunc(se.filters, func(f labelMatch) bool { return labels[f.key] != f.value }) {
				continue
			}
			var v float64
			switch {
			case met.Gauge != nil:
				v = met.GetGauge().GetValue()
			case met.Counter != nil:
				v = met.GetCounter().GetValue()
			default:
				v = met.GetUntyped().GetValue()
			}
			if se.scale != 0 {
				v *= se.scale
			}
			count++
			var a *accum
			name := ""
			if d.modelLabel != "" {
				name = labels[d.modelLabel]
			}
			for _, x := range accs {
				if x.name == name {
					a = x
				}
			}
			if a == nil {
				a = &accum{server: s, name: name}
				accs = append(accs, a)
			}
			bit := uint32(1) << se.role
			a.seen |= bit
			fraction := se.role == roleKV || se.role == roleKVFallback || se.role == roleFill
			switch {
			case math.IsNaN(v) || math.IsInf(v, 0):
				pg.Rejected[RejectNonFinite]++
				continue
			case v < 0:
				pg.Rejected[RejectNegative]++
				continue
			case fraction && v > 1:
				pg.Rejected[RejectAboveOne]++
				continue
			case a.bad&bit != 0:
				continue
			}
			if a.has&bit == 0 {
				a.vals[se.role] = v
			} else if roleAgg[se.role] == catalog.Sum {
				a.vals[se.role] += v
			} else {
				a.vals[se.role] = math.Max(a.vals[se.role], v)
			}
			a.has |= bit
			if math.IsInf(a.vals[se.role], 0) {
				a.has &^= bit
				a.bad |= bit
				pg.Rejected[RejectNonFinite]++
			}
		}
	}
	if count == 0 {
		return pg, true
	}
	pg.Server = s
	for _, a := range accs {
		if mod := a.model(&pg.Rejected); mod.Has != 0 {
			pg.Models = append(pg.Models, mod)
		}
	}
	return pg, true
}

// repeatsSeries reports whether a series (name and non-empty labels, in any
// order) that one of d's series wants is on the page twice; ok is false when
// a sample repeats a label name.
func repeatsSeries(fams map[string]*dto.MetricFamily, d dialect) (dup, ok bool) {
	seen := map[string]bool{}
	for i, se := range d.series {
		if i > 0 && d.series[i-1].name == se.name {
			continue // the run was looked at with its first series
		}
		switch fams[se.name].GetType() {
		case dto.MetricType_GAUGE, dto.MetricType_COUNTER, dto.MetricType_UNTYPED:
		default:
			return false, false
		}
		for _, met := range fams[se.name].GetMetric() {
			labels := map[string]string{}
			for _, lp := range met.GetLabel() {
				if _, twice := labels[lp.GetName()]; twice {
					return false, false
				}
				labels[lp.GetName()] = lp.GetValue()
			}
			if !wantedBy(d.series, se.name, labels) {
				continue
			}
			key := seriesKey(se.name, labels)
			if seen[key] {
				dup = true
			}
			seen[key] = true
		}
	}
	return dup, true
}

// seriesKey names a series: its metric name and its non-empty labels, sorted.
func seriesKey(name string, labels map[string]string) string {
	var pairs []string
	for k, v := range labels {
		if v != "" {
			pairs = append(pairs, strconv.Quote(k)+"="+strconv.Quote(v))
		}
	}
	slices.Sort(pairs)
	return name + "{" + strings.Join(pairs, ",") + "}"
}

// wantedBy reports whether one of ss named name takes a sample with labels.
func wantedBy(ss []series, name string, labels map[string]string) bool {
	return slices.ContainsFunc(ss, func(se series) bool {
		return se.name == name && !slices.ContainsFunc(se.filters, func(f labelMatch) bool { return labels[f.key] != f.value })
	})
}
