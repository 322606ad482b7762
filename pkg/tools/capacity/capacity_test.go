// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package capacity

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/parse"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/loadgen"
)

func TestParseSLOs(t *testing.T) {
	tests := []struct {
		in      string
		want    []SLO
		wantErr string
	}{
		{"ttft:p90<=500ms, itl:p99<=50ms,e2e:p50<=20s,errors<=0.1%", []SLO{
			{Kind: KindTTFT, Quantile: 0.9, Max: 500 * time.Millisecond},
			{Kind: KindITL, Quantile: 0.99, Max: 50 * time.Millisecond},
			{Kind: KindE2E, Quantile: 0.5, Max: 20 * time.Second},
			{Kind: KindErrors, MaxErrorRate: 0.001},
		}, ""},
		{"", nil, "at least one SLO"},
		{"ttft:p90<500ms", nil, "want KIND"},
		{"ttft:p100<=1s", nil, "percentile"},
		{"tpot:p90<=100ms,ttft:p90<=2s,good>=97%", []SLO{
			{Kind: KindTPOT, Quantile: 0.9, Max: 100 * time.Millisecond},
			{Kind: KindTTFT, Quantile: 0.9, Max: 2 * time.Second},
			{Kind: KindGood, MinAttainment: 0.97},
		}, ""},
		{"tbt:p90<=1s", nil, "kind must be"},
		{"good>=97%", nil, "needs a latency objective"},
		{"errors<=1%,good>=97%", nil, "needs a latency objective"},
		{"ttft:p90<=1s,good>=0%", nil, "above 0"},
		{"ttft:p90<=1s,good>=101%", nil, "at most 100"},
		{"ttft:p90<=1s,good>=97", nil, "percentage"},
		{"ttft:p90<=1s,errors>=1%", nil, "only good takes >="},
		{"ttft:p90<=1s,good>=90%,good>=95%", nil, "given twice"},
		{"ttft:p90<=-1s", nil, "positive duration"},
		{"errors<=1", nil, "percentage"},
		{"ttft:p90<=1s,ttft:p99<=2s", nil, "given twice"},
	}
	for _, tc := range tests {
		got, err := ParseSLOs(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseSLOs(%q) error %v, want %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || len(got) != len(tc.want) {
			t.Fatalf("ParseSLOs(%q) = %v, %v", tc.in, got, err)
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("ParseSLOs(%q)[%d] = %+v, want %+v", tc.in, i, got[i], tc.want[i])
			}
			if back, err := parseSLO(got[i].String()); err != nil || back != got[i] {
				t.Errorf("String %q does not parse back: %v %v", got[i].String(), back, err)
			}
		}
	}
}

func TestParseRates(t *testing.T) {
	if got, err := ParseRates("", "1:2:0.25"); err != nil || len(got) != 5 || got[4] != 2 || got[1] != 1.25 {
		t.Errorf("ramp = %v, %v", got, err)
	}
	if got, err := ParseRates("0.1:0.3:0.1", ""); err == nil {
		t.Errorf("a ramp given as --rates parsed: %v", got)
	}
	if got, err := ParseRates("0.1,0.2, 3", ""); err != nil || len(got) != 3 || got[2] != 3 {
		t.Errorf("list = %v, %v", got, err)
	}
	for _, bad := range [][2]string{{"", ""}, {"1", "1:2:1"}, {"1,x", ""}, {"", "3:1:1"}, {"", "1:2"}, {"0", ""}} {
		if _, err := ParseRates(bad[0], bad[1]); err == nil {
			t.Errorf("ParseRates(%q, %q) accepted", bad[0], bad[1])
		}
	}
}

func TestReadPrompts(t *testing.T) {
	got, err := ReadPrompts(strings.NewReader("{\"prompt\": \"hello\", \"max_tokens\": 4}\n\n{\"prompt\": \"bye\", \"max_tokens\": 1}\n"))
	if err != nil || len(got) != 2 || got[0] != (loadgen.Prompt{Text: "hello", MaxTokens: 4}) {
		t.Errorf("ReadPrompts = %v, %v", got, err)
	}
	_, err = ReadPrompts(strings.NewReader("{\"prompt\": \"a\"}\nnot json\n{\"prompt\": \"\", \"max_tokens\": 3}\n"))
	for _, want := range []string{"line 1: want \"max_tokens\"", "line 2:", "line 3: want a non-empty"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want it to contain %q", err, want)
		}
	}
	if _, err := ReadPrompts(strings.NewReader("\n")); err == nil {
		t.Errorf("an empty mix was accepted")
	}
}

// res is a recorded request: sent at sent seconds, TTFT and E2E in ms.
func res(sent float64, ttft, e2e int, tokens int) loadgen.Result {
	r := loadgen.Result{Sent: time.Duration(sent * float64(time.Second)), TTFT: time.Duration(ttft) * time.Millisecond,
		E2E: time.Duration(e2e) * time.Millisecond, Tokens: tokens}
	for range tokens - 1 {
		r.ITL = append(r.ITL, 10*time.Millisecond)
	}
	return r
}

// recorded builds a step: n requests evenly over [0, 12) s with warm-up 2 s
// and a 10 s window, each with the given TTFT; fail of them failed.
func recorded(index int, offered float64, n, ttft, fail int) StepInput {
	in := StepInput{Index: index, Offered: offered, Warmup: 2 * time.Second, Window: 10 * time.Second,
		Server: Signals{Samples: 10, Queue: new(float64(index)), Batch: new(float64(2 + index))}}
	for i := range n {
		r := res(12*float64(i)/float64(n), ttft, ttft+100, 11)
		if i < fail {
			r.Err = errors.New("status 500")
		}
		in.Results = append(in.Results, r)
	}
	return in
}

func TestMeasure(t *testing.T) {
	slos, _ := ParseSLOs("ttft:p90<=500ms,itl:p90<=20ms,errors<=1%")
	// 120 requests over 12 s, 100 sent in the window [2 s, 12 s).
	in := recorded(0, 10, 120, 100, 0)
	// One slow request in the window: TTFT 900 ms (bad for goodput, not for p90).
	in.Results[50].TTFT = 900 * time.Millisecond
	// A request sent during warm-up but finishing in the window counts as completed.
	st := Measure(in, slos, 50)
	if st.Sent != 100 {
		t.Errorf("sent in window %d, want 100", st.Sent)
	}
	// Completion = sent + 200 ms: those sent in [1.8 s, 11.8 s) finish in the window.
	if st.Completed != 100 || st.Throughput != 10 || st.OutputTokens != 110 {
		t.Errorf("completed %d, throughput %v, tokens/s %v; want 100, 10, 110", st.Completed, st.Throughput, st.OutputTokens)
	}
	if st.Good != 99 || st.Goodput != 9.9 {
		t.Errorf("good %d goodput %v, want 99 and 9.9 (one request over the TTFT bound)", st.Good, st.Goodput)
	}
	if !st.Pass || !st.Stable || !st.KeepsUp || len(st.Checks) != 3 || st.TTFT.P90 != 100 || st.ITL.P90 != 10 {
		t.Errorf("step %+v, want pass, stable, TTFT p90 100 ms, ITL p90 10 ms", st)
	}
	// Errors: 5 of 120 failed, 4 of them in the window... make them in the window.
	in = recorded(1, 10, 120, 100, 0)
	for i := 30; i < 33; i++ {
		in.Results[i].Err = errors.New("status 503")
	}
	st = Measure(in, slos, 50)
	if st.Failed != 3 || st.ErrorRate != 0.03 || st.Pass || st.Checks[2].Met {
		t.Errorf("failed %d error rate %v pass %v, want 3, 0.03, fail on errors", st.Failed, st.ErrorRate, st.Pass)
	}
	// Too few requests: not stable.
	st = Measure(recorded(2, 1, 12, 100, 0), slos, 50)
	if st.Stable || !strings.Contains(st.StableNote, "fewer than 50") {
		t.Errorf("stable %v note %q, want unstable for too few requests", st.Stable, st.StableNote)
	}
	// Halves disagree: the second half of the window is slow.
	in = recorded(3, 10, 120, 100, 0)
	for i := range in.Results {
		if in.Results[i].Sent >= 7*time.Second {
			in.Results[i].TTFT = 2 * time.Second
		}
	}
	st = Measure(in, slos, 50)
	if st.Stable || st.Pass || !strings.Contains(st.StableNote, "halves disagree") {
		t.Errorf("pass %v stable %v note %q, want a failing unstable step", st.Pass, st.Stable, st.StableNote)
	}
	// Nothing succeeded: the latency checks fail with a note.
	st = Measure(recorded(4, 10, 120, 100, 120), slos, 50)
	if st.Pass || st.Checks[0].Met || st.Checks[0].Note != "no successful requests" || st.Throughput != 0 {
		t.Errorf("step %+v, want failed latency checks", st.Checks)
	}
}

func TestMeasureAttainment(t *testing.T) {
	slos, err := ParseSLOs("ttft:p90<=500ms,tpot:p90<=20ms,errors<=5%,good>=97%")
	if err != nil {
		t.Fatal(err)
	}
	// slowTPOT gives the request a time per output token of 50 ms (its 10
	// gaps after the first token over 500 ms).
	slowTPOT := func(r *loadgen.Result) { r.E2E = r.TTFT + 500*time.Millisecond }
	tests := []struct {
		name           string
		slow, failed   int // of the window's 100 requests
		dropped        int
		oneToken       int // requests of one token, slow: no TPOT to judge
		wantAttainment float64
		wantPass       bool
	}{
		{name: "all good", wantAttainment: 1, wantPass: true},
		{name: "3 of 100 over the TPOT bound: at the bound", slow: 3, wantAttainment: 0.97, wantPass: true},
		{name: "4 of 100 over it: the percentiles hold, the attainment does not", slow: 4, wantAttainment: 0.96},
		{name: "failed requests are not good", slow: 2, failed: 2, wantAttainment: 0.96},
		{name: "dropped arrivals are not good", dropped: 5, wantAttainment: 100.0 / 105},
		{name: "one-token requests have no TPOT", oneToken: 10, wantAttainment: 1, wantPass: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := recorded(0, 10, 120, 100, 0)
			in.Dropped = tc.dropped
			var inWindow []*loadgen.Result
			for i := range in.Results {
				if r := &in.Results[i]; r.Sent >= in.Warmup {
					inWindow = append(inWindow, r)
				}
			}
			for i, r := range inWindow {
				switch {
				case i < tc.slow:
					slowTPOT(r)
				case i < tc.slow+tc.failed:
					r.Err = errors.New("status 503")
				case i < tc.slow+tc.failed+tc.oneToken:
					r.Tokens, r.ITL = 1, nil
					slowTPOT(r)
				}
			}
			st := Measure(in, slos, 50)
			if st.Attainment == nil {
				t.Fatalf("no attainment, want %v", tc.wantAttainment)
			}
			if math.Abs(*st.Attainment-tc.wantAttainment) > 1e-9 || st.Pass != tc.wantPass {
				t.Errorf("attainment %v pass %v, want %v and %v; checks %+v", *st.Attainment, st.Pass, tc.wantAttainment, tc.wantPass, st.Checks)
			}
			good := st.Checks[3]
			if good.SLO != "good>=97%" || good.Value != *st.Attainment || good.Met != (*st.Attainment >= 0.97) {
				t.Errorf("good check %+v, want good>=97%% with the attainment %v", good, *st.Attainment)
			}
			if !st.Checks[0].Met || !st.Checks[1].Met {
				t.Errorf("latency checks %+v, want both met: at most 4 of 100 requests are slow", st.Checks[:2])
			}
			if st.TPOT.N == 0 || st.TPOT.P90 != 10 {
				t.Errorf("tpot %+v, want p90 10 ms over the requests of two tokens or more", st.TPOT)
			}
		})
	}
}

// steps are recorded steps at 2..12 req/s: TTFT rises with the rate, the
// step at 8 req/s misses the SLO and the one at 10 meets it again (noise),
// 12 misses it; they are given out of order.
func steps(t *testing.T) []Step {
	slos, _ := ParseSLOs("ttft:p90<=500ms,errors<=1%")
	ttft := map[float64]int{2: 50, 4: 80, 6: 300, 8: 700, 10: 400, 12: 1500}
	var out []Step
	for i, rate := range []float64{6, 2, 10, 4, 12, 8} {
		out = append(out, Measure(recorded(i, rate, int(rate*12), ttft[rate], 0), slos, 10))
	}
	return out
}

func TestAnalyzeNonMonotonic(t *testing.T) {
	st := steps(t)
	a := Analyze(st, Cost{PricePerGPUHour: 3.6, GPUsPerReplica: 2})
	if !a.Found || a.Capacity != 6 || st[a.CapacityStep].Offered != 6 || a.Goodput != st[a.CapacityStep].Goodput {
		t.Fatalf("analysis %+v, want capacity 6 req/s (the step at 10 passes only above a failing one)", a)
	}
	if len(a.Notes) != 1 || !strings.Contains(a.Notes[0], "(10 req/s) met the SLOs although step 5 (8 req/s)") {
		t.Errorf("notes %q, want the non-monotonic step named", a.Notes)
	}
	// Cost: 2 GPUs at 3.6/h = 0.002 per second; at 6 req/s all good: 0.002/6*1000.
	if c := st[a.CapacityStep].CostPer1kGood; c == nil || *c < 0.3333 || *c > 0.3334 {
		t.Errorf("cost per 1k good at capacity %v, want 0.3333", c)
	}
	// At 8 req/s nothing is good (TTFT 700 > 500): no cost per good request.
	for _, s := range st {
		if s.Offered == 8 && s.CostPer1kGood != nil {
			t.Errorf("cost per good request at 8 req/s %v, want none", *s.CostPer1kGood)
		}
	}
	// The cheapest per good request is the step at 10 (all good, highest rate).
	if st[a.CheapestPerGood].Offered != 10 {
		t.Errorf("cheapest per good request at %v req/s, want 10", st[a.CheapestPerGood].Offered)
	}
	if a := Analyze(st, Cost{GPUsPerReplica: 1}); a.CheapestPerGood != -1 || st[0].CostPer1kGood != nil {
		t.Errorf("without a price, cost figures %+v", a)
	}
}

func TestAnalyzeNoStepMeetsSLOs(t *testing.T) {
	slos, _ := ParseSLOs("ttft:p90<=10ms,errors<=1%")
	var st []Step
	for i, rate := range []float64{2, 4} {
		st = append(st, Measure(recorded(i, rate, int(rate*12), 50*(i+1), 0), slos, 10))
	}
	a := Analyze(st, Cost{GPUsPerReplica: 1})
	if a.Found || a.BestStep != 0 || len(a.Notes) != 2 ||
		!strings.Contains(a.Notes[0], "best was step 0 at 2 req/s: ttft:p90<=10ms: measured 50ms") ||
		!strings.Contains(a.Notes[1], "lowest rate already misses") {
		t.Errorf("analysis %+v", a)
	}
	if _, err := Recommend(st, a, HPAOptions{}); err == nil {
		t.Errorf("a recommendation without capacity")
	}
}

func TestRecommend(t *testing.T) {
	st := steps(t)
	a := Analyze(st, Cost{GPUsPerReplica: 1})
	tests := []struct {
		name       string
		queue      float64
		opts       HPAOptions
		wantMetric string
		wantQty    string
		wantMax    int32
	}{
		{"no queue: batch", 0.4, HPAOptions{Metric: MetricAuto, Margin: 0.2, MaxReplicas: 10}, MetricBatch, "1600m", 10},
		{"a queue: queue", 5, HPAOptions{Metric: MetricAuto, Margin: 0.25, MaxReplicas: 10}, MetricQueue, "3750m", 10},
		{"forced batch, peak rate", 5, HPAOptions{Metric: MetricBatch, Margin: 0.5, MaxReplicas: 10, PeakRate: 30}, MetricBatch, "1", 10},
		{"peak rate", 0, HPAOptions{Metric: MetricAuto, Margin: 0.2, MaxReplicas: 3, PeakRate: 24}, MetricBatch, "1600m", 5},
		// ceil(peak ÷ planning rate) past an int wrapped to minReplicas.
		{"peak rate past int32", 0, HPAOptions{Metric: MetricAuto, Margin: 0.2, MaxReplicas: 3, PeakRate: 1e20}, MetricBatch, "1600m", math.MaxInt32},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st[a.CapacityStep].Server.Queue = new(tc.queue)
			tc.opts.Name, tc.opts.Namespace, tc.opts.MinReplicas = "llama", "serving", 1
			r, err := Recommend(st, a, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			var hpa autoscalingv2.HorizontalPodAutoscaler
			if err := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(r.Manifest), 4096).Decode(&hpa); err != nil {
				t.Fatalf("manifest does not decode: %v\n%s", err, r.Manifest)
			}
			m := hpa.Spec.Metrics[0]
			if hpa.APIVersion != "autoscaling/v2" || hpa.Kind != "HorizontalPodAutoscaler" || hpa.Name != "llama" || hpa.Namespace != "serving" ||
				hpa.Spec.ScaleTargetRef.Name != "llama" || hpa.Spec.ScaleTargetRef.Kind != "Deployment" ||
				m.Type != autoscalingv2.PodsMetricSourceType || m.Pods.Metric.Name != tc.wantMetric ||
				m.Pods.Target.AverageValue.String() != tc.wantQty || hpa.Spec.MaxReplicas != tc.wantMax ||
				hpa.Spec.Behavior == nil || hpa.Spec.Behavior.ScaleDown == nil || *hpa.Spec.Behavior.ScaleDown.StabilizationWindowSeconds != 300 {
				t.Errorf("HPA %+v\n%s", hpa.Spec, r.Manifest)
			}
			if len(r.Explanation) < 5 || !strings.Contains(r.Manifest, "# - target: "+tc.wantQty) {
				t.Errorf("explanation %q", r.Explanation)
			}
		})
	}
	st[a.CapacityStep].Server.Queue = nil
	if _, err := Recommend(st, a, HPAOptions{Metric: MetricAuto}); err == nil || !strings.Contains(err.Error(), "not measured") {
		t.Errorf("a recommendation without signals: %v", err)
	}
}

// TestReportOutputs: the JSON parses back, the SVG is well-formed XML with
// the capacity marked and the SLO line drawn, and the table names the capacity.
func TestReportOutputs(t *testing.T) {
	st := steps(t)
	st = append(st, Step{Index: 6, Offered: 14, Interrupted: true})
	rep := NewReport(Setup{URL: "http://x", Model: "m", SLOs: []string{"ttft:p90<=500ms", "errors<=1%"}}, st,
		Cost{PricePerGPUHour: 2, GPUsPerReplica: 1}, HPAOptions{Metric: MetricAuto, Margin: 0.2, Name: "m", MinReplicas: 1, MaxReplicas: 4}, true)
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatalf("JSON does not parse: %v", err)
	}
	if back.Analysis.Capacity != 6 || len(back.Steps) != 7 || back.Recommendation == nil || back.Recipe == nil || back.Recipe.HPA != rep.Recipe.HPA ||
		!back.Interrupted || back.Steps[0].Server.Queue == nil {
		t.Errorf("JSON round trip: %+v", back.Analysis)
	}
	var svg bytes.Buffer
	if err := rep.WriteSVG(&svg); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(svg.Bytes()))
	var texts []string
	for {
		tok, err := dec.Token()
		if err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("SVG is not well-formed: %v", err)
			}
			break
		}
		if cd, ok := tok.(xml.CharData); ok {
			texts = append(texts, string(cd))
		}
	}
	all := strings.Join(texts, "|")
	for _, want := range []string{"capacity 6/s", "SLO ttft:p90&lt;=500ms", "goodput", "ttft p90"} {
		want = strings.ReplaceAll(want, "&lt;", "<")
		if !strings.Contains(all, want) {
			t.Errorf("SVG text lacks %q: %s", want, all)
		}
	}
	var tbl bytes.Buffer
	if err := rep.WriteTable(&tbl); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"CAPACITY", "interrupted", "capacity: 6 req/s", "recommended HPA (the recipe): " + MetricDemandForecast,
		"single-metric HPA (--output single-metric): inference_batch_size", "partial results"} {
		if !strings.Contains(tbl.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, tbl.String())
		}
	}
}

func TestReadPage(t *testing.T) {
	page, err := os.ReadFile(filepath.Join("testdata", "vllm-v1.prom"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := readPage(parse.NewParser(), page, "no-such-model")
	if err != nil {
		t.Fatal(err)
	}
	if r.queue == nil || r.batch == nil || r.kv == nil || r.preemptions == nil {
		t.Fatalf("reading %+v, want every signal", r)
	}
	t.Logf("queue %v batch %v kv %v preemptions %v", *r.queue, *r.batch, *r.kv, *r.preemptions)
	r, err = readPage(parse.NewParser(), []byte("# nothing\nfoo 1\n"), "m")
	if err != nil || r.queue != nil || r.preemptions != nil {
		t.Errorf("a page without the series gave %+v, %v; want nothing (missing is not zero)", r, err)
	}
	s := condense([]reading{{queue: new(2.0), preemptions: new(5.0)}, {queue: new(4.0), batch: new(1.0), preemptions: new(9.0)}}, 1)
	if *s.Queue != 3 || *s.QueueMax != 4 || *s.Batch != 1 || s.KV != nil || *s.Preemptions != 4 || s.Samples != 2 || s.Failures != 1 {
		t.Errorf("condense = %+v", s)
	}
	if s := condense([]reading{{preemptions: new(5.0)}, {preemptions: new(1.0)}}, 0); s.Preemptions != nil {
		t.Errorf("a counter reset gave preemptions %v, want unknown", *s.Preemptions)
	}
}

// TestParseRatesHugeRamp: a ramp whose step count overflows an int (a tiny
// STEP, a huge or infinite STOP) is a usage error, not a panic in make.
func TestParseRatesHugeRamp(t *testing.T) {
	for _, ramp := range []string{"1:2:1e-300", "1:1e20:1", "1:Inf:1", "1:+Inf:1", "Inf:Inf:1"} {
		t.Run(ramp, func(t *testing.T) {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("ParseRates(%q) panicked: %v", ramp, p)
				}
			}()
			if got, err := ParseRates("", ramp); err == nil {
				t.Errorf("ParseRates(%q) = %d rates, want an error", ramp, len(got))
			}
		})
	}
}

// TestCheckEndpointEscapesBody: the body of a failed GET /v1/models is the
// server's text: it reaches the terminal escaped and cut short.
func TestCheckEndpointEscapesBody(t *testing.T) {
	for _, tc := range []struct {
		name, body string
	}{
		{"terminal escapes", "\x1b]0;pwned\x07\x1b[2Jnot found"},
		{"long body", strings.Repeat("x", 1<<20)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, tc.body, http.StatusNotFound)
			}))
			defer srv.Close()
			err := CheckEndpoint(context.Background(), srv.Client(), srv.URL, "m")
			if err == nil {
				t.Fatal("no error from a 404")
			}
			if msg := err.Error(); strings.ContainsAny(msg, "\x1b\x07") || len(msg) > 1024 || !strings.Contains(msg, "status 404") {
				t.Errorf("error has control characters, is over 1 KiB (%d bytes) or lacks the status: %.300q", len(msg), msg)
			}
		})
	}
}

// TestAttainmentAbsent: a step with nothing sent, and every step of a run
// recorded before the attainment existed, has none, and the table says "-"
// for it rather than 0.
func TestAttainmentAbsent(t *testing.T) {
	slos, err := ParseSLOs("ttft:p90<=500ms,errors<=1%")
	if err != nil {
		t.Fatal(err)
	}
	in := recorded(0, 10, 120, 100, 0)
	in.Results = nil
	if st := Measure(in, slos, 50); st.Attainment != nil {
		t.Errorf("attainment %v with nothing sent, want none", *st.Attainment)
	}
	for _, name := range recordedRuns {
		steps, a := loadRecorded(t, name)
		var b strings.Builder
		rep := &Report{Steps: steps, Analysis: a}
		if err := rep.WriteTable(&b); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(b.String(), "\n")
		header := strings.Fields(lines[0])
		col := slices.Index(header, "good%")
		if col < 0 {
			t.Fatalf("%s: no good%% column in %q", name, lines[0])
		}
		// Four headings before it are two words each: ttft p50, itl p50,
		// tpot p90, e2e p50.
		col -= 4
		for i, s := range steps {
			if s.Attainment != nil {
				t.Errorf("%s: step %d has an attainment %v, recorded before it existed", name, i, *s.Attainment)
			}
			if f := strings.Fields(lines[i+1]); len(f) <= col || f[col] != "-" {
				t.Errorf("%s: step %d's row %q, want - in the good%% column", name, i, lines[i+1])
			}
		}
	}
}
