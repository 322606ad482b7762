// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/parse"
)

// loraConfig is testConfig serving adapters a, b and c.
func loraConfig(maxLoRAs int) Config {
	c := testConfig()
	c.LoRAAdapters = "a,b,c"
	c.MaxLoRAs = maxLoRAs
	return c
}

// stepAll enqueues one 3-token request per adapter name ("" for the base
// model) at time 0 and steps the engine until every request finished. It
// returns the adapter lists reported, "running|waiting" each, and the
// running batch's adapters after the first step.
func stepAll(t *testing.T, cfg Config, adapters []string) (reports []string, firstBatch []string) {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("config: %v", err)
	}
	rec := &testRecorder{}
	e := NewEngine(cfg, nil, rec)
	number := map[string]int{"": 0}
	for i, n := range cfg.AdapterNames() {
		number[n] = i + 1
	}
	for _, a := range adapters {
		e.enqueue(&seq{prompt: 16, maxTokens: 3, adapter: number[a], notify: make(chan struct{}, 1)}, 0)
	}
	var now time.Duration
	for steps := 0; len(e.running) > 0 || len(e.waiting) > 0; steps++ {
		if steps > 1000 {
			t.Fatalf("requests did not finish")
		}
		now += e.schedule(now)
		e.commit(now)
		if steps == 0 {
			for _, s := range e.running {
				name := "base"
				if s.adapter > 0 {
					name = cfg.AdapterNames()[s.adapter-1]
				}
				firstBatch = append(firstBatch, name)
			}
		}
	}
	if len(rec.done) != len(adapters) {
		t.Fatalf("finished %d of %d requests", len(rec.done), len(adapters))
	}
	for _, r := range rec.loraReports {
		reports = append(reports, r[0]+"|"+r[1])
	}
	return reports, firstBatch
}

func TestLoRAAdmission(t *testing.T) {
	tests := []struct {
		name      string
		maxLoRAs  int
		adapters  string // "": none configured
		requests  []string
		wantBatch []string // adapters of the running batch after the first step
		want      []string // reports, running|waiting
	}{
		{
			name:     "max-loras 1: b waits behind a, the base model and a's second request do not",
			maxLoRAs: 1, adapters: "a,b,c", requests: []string{"a", "b", "", "a"},
			wantBatch: []string{"a", "base", "a"},
			want:      []string{"a|b", "|b", "b|", "|"},
		},
		{
			name:     "max-loras 2: two adapters run, the third waits",
			maxLoRAs: 2, adapters: "a,b,c", requests: []string{"a", "b", "c", "a"},
			wantBatch: []string{"a", "b", "a"},
			want:      []string{"a,b|c", "|c", "c|", "|"},
		},
		{
			name:     "max-loras 2: lists in the order of each adapter's first request, not sorted",
			maxLoRAs: 2, adapters: "a,b,c", requests: []string{"c", "a"},
			wantBatch: []string{"c", "a"},
			want:      []string{"c,a|", "|"},
		},
		{
			name:     "max-loras 1: a waiting adapter does not block the adapter in the batch",
			maxLoRAs: 1, adapters: "a,b,c", requests: []string{"b", "a", "b", "c"},
			wantBatch: []string{"b", "b"},
			want:      []string{"b|a,c", "|a,c", "a|c", "|c", "c|", "|"},
		},
		{
			name:     "no adapters configured: nothing reported",
			maxLoRAs: 1, adapters: "", requests: []string{"", ""},
			wantBatch: []string{"base", "base"},
			want:      nil,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := loraConfig(tc.maxLoRAs)
			cfg.LoRAAdapters = tc.adapters
			reports, batch := stepAll(t, cfg, tc.requests)
			if diff := cmp.Diff(tc.wantBatch, batch); diff != "" {
				t.Errorf("first batch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, reports); diff != "" {
				t.Errorf("reports (-want +got):\n%s", diff)
			}
		})
	}
}

// loraPage renders the vllm-v1 page of cfg after the given reports.
func loraPage(t *testing.T, cfg Config, reports [][2][]string) []byte {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(cfg, reg, time.Unix(1_700_000_000, 0))
	if err != nil {
		t.Fatalf("NewMetrics: %v", err)
	}
	m.now = func() time.Time { return time.Unix(1_700_000_100, 0) } // a clock that does not move
	m.state(1, 1, 1, cfg.NumGPUBlocks)
	for _, r := range reports {
		m.adapters(r[0], r[1])
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	var buf bytes.Buffer
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&buf, mf); err != nil {
			t.Fatalf("writing the page: %v", err)
		}
	}
	return buf.Bytes()
}

// TestLoRAPageParses: the vllm:lora_requests_info lines the simulator
// writes are read by pkg/adapter/parse into the current adapter names, however
// many earlier states the page still carries.
func TestLoRAPageParses(t *testing.T) {
	l := func(names ...string) []string { return names }
	tests := []struct {
		name    string
		reports [][2][]string
		want    []parse.Adapter // nil: no line
		lines   int
	}{
		{name: "no report yet: no line", reports: nil, want: nil},
		{name: "a runs, b waits", reports: [][2][]string{{l("a"), l("b")}},
			want: []parse.Adapter{{Name: "a", Running: true}, {Name: "b", Waiting: true}}, lines: 1},
		{name: "the latest state wins over older lines, the clock standing still",
			reports: [][2][]string{{l("a"), l("b")}, {nil, l("b")}, {l("b"), nil}},
			want:    []parse.Adapter{{Name: "b", Running: true}}, lines: 3},
		{name: "a state seen again is the current one",
			reports: [][2][]string{{l("a"), l("b")}, {l("b"), nil}, {l("a"), l("b")}},
			want:    []parse.Adapter{{Name: "a", Running: true}, {Name: "b", Waiting: true}}, lines: 2},
		{name: "all idle: a line with empty lists",
			reports: [][2][]string{{l("a", "c"), l("b")}, {nil, nil}},
			want:    []parse.Adapter{}, lines: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := loraConfig(2)
			page := loraPage(t, cfg, tc.reports)
			if got := strings.Count(string(page), "\nvllm:lora_requests_info{"); got != tc.lines {
				t.Errorf("%d vllm:lora_requests_info lines, want %d:\n%s", got, tc.lines, page)
			}
			if tc.lines > 0 {
				for _, want := range []string{
					"# HELP vllm:lora_requests_info Running stats on lora requests.\n",
					"# TYPE vllm:lora_requests_info gauge\n",
					`vllm:lora_requests_info{max_lora="2",running_lora_adapters=`,
				} {
					if !strings.Contains(string(page), want) {
						t.Errorf("page lacks %q:\n%s", want, page)
					}
				}
			}
			pg, err := parse.NewParser().Parse(page)
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			var got []parse.Adapter
			var found bool
			for _, m := range pg.Models {
				if m.Has.Has(catalog.LoRAAdaptersRunning) {
					found = true
					got = append([]parse.Adapter{}, m.Adapters...)
				}
			}
			if found != (tc.want != nil) {
				t.Fatalf("adapter state on the parsed page: %v, want %v", found, tc.want != nil)
			}
			if diff := cmp.Diff(tc.want, got); found && diff != "" {
				t.Errorf("parsed adapters (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLoRAOnlyInVLLMV1: the line is on vllm-v1 pages with adapters only.
func TestLoRAOnlyInVLLMV1(t *testing.T) {
	tests := []struct {
		format, adapters string
		want             bool
	}{
		{FormatVLLMV1, "a", true},
		{FormatVLLMV1, "", false},
		{FormatVLLMV0, "a", false},
		{FormatSGLang, "a", false},
		{FormatTGI, "a", false},
	}
	for _, tc := range tests {
		t.Run(tc.format+"/"+tc.adapters, func(t *testing.T) {
			cfg := loraConfig(1)
			cfg.MetricsFormat, cfg.LoRAAdapters = tc.format, tc.adapters
			page := loraPage(t, cfg, [][2][]string{{[]string{"a"}, nil}})
			if got := strings.Contains(string(page), "lora_requests_info"); got != tc.want {
				t.Errorf("page has vllm:lora_requests_info: %v, want %v", got, tc.want)
			}
		})
	}
}

func TestLoRAConfigValidate(t *testing.T) {
	tests := []struct {
		name, model, adapters string
		maxLoRAs              int
		wantErr               string
	}{
		{"none", "m", "", 1, ""},
		{"two adapters", "m", "a,b", 2, ""},
		{"max-loras 0", "m", "", 0, "max-loras must be at least 1"},
		{"empty name", "m", "a,", 1, "must be non-empty"},
		{"twice", "m", "a,a", 1, `names "a" twice`},
		{"the base model's name", "m", "m", 1, "has the name of the base model"},
		{"several base models", "m,n", "a", 1, "need a single base model"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.Model, cfg.LoRAAdapters, cfg.MaxLoRAs = tc.model, tc.adapters, tc.maxLoRAs
			err := cfg.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Errorf("Validate = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Validate = %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
	if !slices.Equal(loraConfig(1).AdapterNames(), []string{"a", "b", "c"}) || testConfig().AdapterNames() != nil {
		t.Errorf("AdapterNames: %q and %q", loraConfig(1).AdapterNames(), testConfig().AdapterNames())
	}
}
