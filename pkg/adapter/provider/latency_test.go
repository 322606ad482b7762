// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package provider

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	testclock "k8s.io/utils/clock/testing"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/parse"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/store"
)

// vllmPage is a vLLM V1 page of one model with a generated-tokens counter
// and a TTFT histogram (bounds 0.1, 0.5, 1, +Inf; cumulative counts ttft).
func vllmPage(tokens float64, ttft [4]float64) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "vllm:num_requests_waiting{model_name=\"llama\"} 1\n")
	fmt.Fprintf(&b, "vllm:kv_cache_usage_perc{model_name=\"llama\"} 0.5\n")
	fmt.Fprintf(&b, "vllm:generation_tokens_total{model_name=\"llama\"} %g\n", tokens)
	for i, le := range []string{"0.1", "0.5", "1.0", "+Inf"} {
		fmt.Fprintf(&b, "vllm:time_to_first_token_seconds_bucket{le=%q,model_name=\"llama\"} %g\n", le, ttft[i])
	}
	return []byte(b.String())
}

// TestLatencyDemandAPI runs the path from a question to the parse: a
// Parser whose histograms follow a LatencyDemand, the store, and the
// provider's custom and external metrics handlers, on one fake clock. With
// no question about a percentile the pages are parsed without their
// histograms; a question turns them on, is answered missing until two
// pages with them exist, and then from the deltas after the gap only; a
// rate is served throughout and asks nothing; past the TTL they are off
// again.
func TestLatencyDemandAPI(t *testing.T) {
	const ttl = 10 * time.Minute
	clk := testclock.NewFakeClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	demand := NewLatencyDemand(ttl, clk)
	podName := types.NamespacedName{Namespace: "ns", Name: "a"}
	var builtin *parse.Servers // nil: the built-in servers
	parser := parse.NewParserFor(builtin.WithHistograms(func() bool { return demand.WantedFor(podName) }))
	st := store.New()

	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	if err := idx.Add(pod("a", map[string]string{"app": "llm"}, true, true, nil)); err != nil {
		t.Fatal(err)
	}
	empty := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	prov := New(Config{MaxAge: 15 * time.Second, Window: 5 * time.Second, Latency: demand},
		Listers{Pods: corelisters.NewPodLister(idx), Deployments: appslisters.NewDeploymentLister(empty), StatefulSets: appslisters.NewStatefulSetLister(empty)},
		st, nil, clk)
	custom := httptest.NewServer(handler(t, prov))
	t.Cleanup(custom.Close)
	external := httptest.NewServer(externalHandler(t, prov.External()))
	t.Cleanup(external.Close)

	const (
		p90    = "/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/pods/a/inference_time_to_first_token_p90_seconds"
		tokens = "/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/pods/a/inference_generation_tokens_per_second"
		extP90 = "/apis/external.metrics.k8s.io/v1beta1/namespaces/ns/inference_time_to_first_token_p90_seconds?labelSelector=app%3Dllm"
	)
	type scrape struct {
		tokens float64
		ttft   [4]float64
	}
	for _, step := range []struct {
		name    string
		advance time.Duration
		scrape  *scrape // nil: none
		skipped bool    // the scrape's page is parsed without histograms
		path    string  // "": no question
		code    int
		want    string // the value on a 200, a piece of the message on a 404
		wanted  bool   // demand.WantedFor(the pod) after the step
	}{
		{name: "no ask: parsed without histograms", scrape: &scrape{0, [4]float64{100, 100, 100, 100}}, skipped: true},
		{name: "a rate is served and asks nothing", advance: 5 * time.Second, scrape: &scrape{500, [4]float64{200, 200, 200, 200}}, skipped: true,
			path: tokens, code: 200, want: "100"},
		{name: "the first ask: missing, and says why", path: p90, code: 404, want: "parsed only while", wanted: true},
		{name: "one page with histograms: missing", advance: 5 * time.Second, scrape: &scrape{1000, [4]float64{300, 300, 300, 300}},
			path: p90, code: 404, want: "window yet", wanted: true},
		// After the gap 10 requests: 5 in (0.1, 0.5], 5 in (0.5, 1]; the 9th is at 0.9.
		// A delta over the gap would hold the 200 fast requests before it.
		{name: "two pages: the p90 of the deltas after the gap", advance: 5 * time.Second, scrape: &scrape{1500, [4]float64{300, 305, 310, 310}},
			path: p90, code: 200, want: "900m", wanted: true},
		{name: "the rate goes on", path: tokens, code: 200, want: "100", wanted: true},
		{name: "past the TTL: off", advance: ttl, wanted: false},
		{name: "off: parsed without histograms", scrape: &scrape{2000, [4]float64{400, 405, 410, 410}}, skipped: true},
		{name: "an external question asks too", path: extP90, code: 404, want: "parsed only while", wanted: true},
	} {
		clk.Step(step.advance)
		if s := step.scrape; s != nil {
			page, err := parser.Parse(vllmPage(s.tokens, s.ttft))
			if err != nil {
				t.Fatalf("%s: %v", step.name, err)
			}
			if page.HistogramsSkipped != step.skipped || (page.Models[0].Hists[catalog.TimeToFirstToken] == nil) != step.skipped {
				t.Errorf("%s: HistogramsSkipped %v with a TTFT histogram %v, want skipped %v", step.name, page.HistogramsSkipped, page.Models[0].Hists[catalog.TimeToFirstToken] != nil, step.skipped)
			}
			if page.Models[0].HasCounter&(1<<catalog.GenerationTokens) == 0 {
				t.Errorf("%s: the counter was not parsed", step.name)
			}
			st.Record(podName, clk.Now(), page, nil)
		}
		if step.path != "" {
			srv := custom
			if strings.HasPrefix(step.path, "/apis/external") {
				srv = external
			}
			code, body := get(t, srv, step.path)
			switch {
			case code != step.code:
				t.Errorf("%s: code %d, want %d: %s", step.name, code, step.code, body)
			case code == 200 && !strings.Contains(body, fmt.Sprintf("%q:%q", "value", step.want)):
				t.Errorf("%s: body %s, want the value %s", step.name, body, step.want)
			case code != 200 && !strings.Contains(body, step.want):
				t.Errorf("%s: body %s lacks %q", step.name, body, step.want)
			}
		}
		if got := demand.WantedFor(podName); got != step.wanted {
			t.Errorf("%s: WantedFor(%s) = %v, want %v", step.name, podName, got, step.wanted)
		}
	}
}

// TestLatencyDemand checks the switch alone: only percentiles ask, an ask
// lasts the TTL for the pods it covers and no other, and a TTL of zero
// wants the histograms always.
func TestLatencyDemand(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	a := pod("a", nil, true, true, nil)
	b := pod("b", nil, true, true, nil)
	elsewhere := pod("a", nil, true, true, nil)
	elsewhere.Namespace = "other"
	type ask struct {
		sig  catalog.Signal
		pods []*corev1.Pod
	}
	for _, tc := range []struct {
		name  string
		ttl   time.Duration
		asks  []ask
		after time.Duration
		want  map[*corev1.Pod]bool // absent: false
	}{
		{"never asked", time.Minute, nil, 0, nil},
		{"a percentile asks for its pods", time.Minute, []ask{{catalog.E2ELatencyP99, []*corev1.Pod{a}}}, 0, map[*corev1.Pod]bool{a: true}},
		{"within the TTL", time.Minute, []ask{{catalog.TimeToFirstTokenP90, []*corev1.Pod{a, b}}}, 59 * time.Second, map[*corev1.Pod]bool{a: true, b: true}},
		{"past the TTL", time.Minute, []ask{{catalog.TimeToFirstTokenP90, []*corev1.Pod{a}}}, time.Minute, nil},
		{"a pod of the same name in another namespace is another pod", time.Minute, []ask{{catalog.TimeToFirstTokenP90, []*corev1.Pod{elsewhere}}}, 0, map[*corev1.Pod]bool{elsewhere: true}},
		{"a rate or a gauge does not ask", time.Minute, []ask{{catalog.GenerationTokensPerSecond, []*corev1.Pod{a}}, {catalog.QueueSize, []*corev1.Pod{a}}}, 0, nil},
		{"TTL 0: always, for every pod", 0, nil, 0, map[*corev1.Pod]bool{a: true, b: true, elsewhere: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := testclock.NewFakeClock(t0)
			d := NewLatencyDemand(tc.ttl, clk)
			for _, q := range tc.asks {
				d.Ask(q.sig, q.pods)
			}
			clk.Step(tc.after)
			for _, p := range []*corev1.Pod{a, b, elsewhere} {
				key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
				if got := d.WantedFor(key); got != tc.want[p] {
					t.Errorf("WantedFor(%s) = %v, want %v", key, got, tc.want[p])
				}
			}
		})
	}
}

// TestLatencyDemandForgetsPods: a pod's entry outlives its last question
// by the TTL at most (the next question's sweep drops it), so the entries
// follow the pods asked about lately, not every pod ever asked about; and
// a question repeated within the refresh interval keeps the entry.
func TestLatencyDemandForgetsPods(t *testing.T) {
	const ttl = time.Minute
	clk := testclock.NewFakeClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	d := NewLatencyDemand(ttl, clk)
	var old []*corev1.Pod
	for i := range 100 {
		old = append(old, pod(fmt.Sprint("old-", i), nil, true, true, nil))
	}
	d.Ask(catalog.TimeToFirstTokenP90, old)
	kept := pod("kept", nil, true, true, nil)
	for range 4 {
		clk.Step(ttl / 2)
		d.Ask(catalog.TimeToFirstTokenP90, []*corev1.Pod{kept})
	}
	d.mu.RLock()
	n := len(d.pods)
	d.mu.RUnlock()
	if n != 1 {
		t.Errorf("%d entries two TTLs after the old pods' question, want 1 (the pod still asked about)", n)
	}
	if !d.WantedFor(types.NamespacedName{Namespace: "ns", Name: "kept"}) {
		t.Error("the pod asked about every half TTL is not wanted")
	}
}
