// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package sim_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/sim"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/sim/simtest"
)

// parsePage parses a /metrics page strictly.
func parsePage(t testing.TB, page []byte) map[string]*dto.MetricFamily {
	t.Helper()
	if len(page) > 0 && page[len(page)-1] != '\n' {
		page = append(page, '\n')
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(page))
	if err != nil {
		t.Fatalf("parsing page: %v", err)
	}
	return mfs
}

func scrape(t testing.TB, base string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("Content-Type = %q, want the text format 0.0.4", ct)
	}
	page, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading /metrics: %v", err)
	}
	return parsePage(t, page)
}

func fixture(t testing.TB, name string) map[string]*dto.MetricFamily {
	t.Helper()
	page, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatalf("reading fixture: %v", err)
	}
	return parsePage(t, page)
}

func labelNames(mf *dto.MetricFamily) string {
	set := map[string]bool{}
	for _, m := range mf.GetMetric() {
		for _, l := range m.GetLabel() {
			set[l.GetName()] = true
		}
	}
	var names []string
	for n := range set {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ",")
}

func bucketBounds(mf *dto.MetricFamily) []float64 {
	if mf.GetType() != dto.MetricType_HISTOGRAM || len(mf.GetMetric()) == 0 {
		return nil
	}
	var out []float64
	for _, b := range mf.GetMetric()[0].GetHistogram().GetBucket() {
		out = append(out, b.GetUpperBound())
	}
	return out
}

// compareFamily reports differences in type, HELP, label names and buckets.
func compareFamily(t *testing.T, name string, got, want *dto.MetricFamily) {
	t.Helper()
	if got.GetType() != want.GetType() {
		t.Errorf("%s: type %v, want %v", name, got.GetType(), want.GetType())
	}
	if got.GetHelp() != want.GetHelp() {
		t.Errorf("%s: HELP %q, want %q", name, got.GetHelp(), want.GetHelp())
	}
	if g, w := labelNames(got), labelNames(want); g != w {
		t.Errorf("%s: labels %s, want %s", name, g, w)
	}
	g, w := bucketBounds(got), bucketBounds(want)
	if len(g) != len(w) {
		t.Errorf("%s: buckets %v, want %v", name, g, w)
		return
	}
	for i := range g {
		if g[i] != w[i] {
			t.Errorf("%s: buckets %v, want %v", name, g, w)
			return
		}
	}
}

// TestMetricsMatchVLLMV1Fixture: every vllm: family of the V1 fixture is on
// the simulator's page with the same type, HELP, label names and buckets.
func TestMetricsMatchVLLMV1Fixture(t *testing.T) {
	cfg := sim.DefaultConfig()
	base := simtest.Start(t, cfg)
	got := scrape(t, base)
	want := fixture(t, "vllm-v1.prom")
	n := 0
	for name, wmf := range want {
		if !strings.HasPrefix(name, "vllm:") {
			continue
		}
		n++
		gmf, ok := got[name]
		if !ok {
			t.Errorf("family %s missing", name)
			continue
		}
		compareFamily(t, name, gmf, wmf)
	}
	if n != 49 { // 27 families + 22 _created gauges
		t.Errorf("compared %d vllm: families, the fixture has 49", n)
	}
	for name := range got {
		if strings.HasPrefix(name, "vllm:") && want[name] == nil {
			t.Errorf("family %s is not in the fixture", name)
		}
	}
	if v := got["vllm:num_requests_running"].GetMetric()[0]; labelValue(v, "model_name") != cfg.Model || labelValue(v, "engine") != "0" {
		t.Errorf("labels = %v, want engine 0 and model_name %s", v.GetLabel(), cfg.Model)
	}
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// TestOtherFormatsMatchFixtures: every family the simulator emits in the
// V0, TGI and SGLang shapes exists in that server's fixture with the same
// type, HELP, labels and buckets, and the adapter's queue/batch/KV source
// series (docs/metrics.md, "Source series by server") are there.
func TestOtherFormatsMatchFixtures(t *testing.T) {
	tests := []struct {
		format, fixture string
		signals         []string
	}{
		{sim.FormatVLLMV0, "vllm-v0.prom", []string{"vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:gpu_cache_usage_perc"}},
		{sim.FormatTGI, "tgi-v3.prom", []string{"tgi_queue_size", "tgi_batch_current_size"}},
		{sim.FormatSGLang, "sglang-v0.4.prom", []string{"sglang:num_queue_reqs", "sglang:num_running_reqs", "sglang:token_usage"}},
	}
	for _, tc := range tests {
		t.Run(tc.format, func(t *testing.T) {
			cfg := sim.DefaultConfig()
			cfg.MetricsFormat = tc.format
			got := scrape(t, simtest.Start(t, cfg))
			want := fixture(t, tc.fixture)
			for name, gmf := range got {
				if strings.HasPrefix(name, "process_") {
					continue
				}
				wmf, ok := want[name]
				if !ok {
					t.Errorf("family %s is not in %s", name, tc.fixture)
					continue
				}
				compareFamily(t, name, gmf, wmf)
			}
			for _, name := range tc.signals {
				if got[name] == nil {
					t.Errorf("signal family %s missing", name)
				}
			}
		})
	}
}

func postJSON(t *testing.T, url, body string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading body: %v", err)
	}
	return resp, b
}

// checkModels fails the test unless GET /v1/models lists exactly the model
// ids want, in that order.
func checkModels(t *testing.T, base string, want ...string) {
	t.Helper()
	r, err := http.Get(base + "/v1/models")
	if err != nil {
		t.Fatalf("GET /v1/models: %v", err)
	}
	defer func() { _ = r.Body.Close() }()
	if r.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/models: status %d", r.StatusCode)
	}
	var models struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(r.Body).Decode(&models); err != nil {
		t.Fatalf("decode /v1/models: %v", err)
	}
	var ids []string
	for _, m := range models.Data {
		ids = append(ids, m.ID)
	}
	if !slices.Equal(ids, want) {
		t.Errorf("/v1/models lists %q, want %q", ids, want)
	}
}

func fastConfig() sim.Config {
	cfg := sim.DefaultConfig()
	cfg.MaxModelLen = 4096
	cfg.TimeScale = 20
	return cfg
}

func TestBadRequests(t *testing.T) {
	cfg := fastConfig()
	base := simtest.Start(t, cfg)
	tests := []struct {
		name, path, body string
		code             int
		message          string
	}{
		{"invalid JSON", "/v1/completions", `{"prompt": `, 400, "invalid JSON body"},
		{"no prompt", "/v1/completions", `{"model":"` + cfg.Model + `"}`, 400, "prompt is required"},
		{"unknown model", "/v1/completions", `{"model":"nope","prompt":"hi"}`, 404, "The model `nope` does not exist."},
		{"max_tokens 0", "/v1/completions", `{"prompt":"hi","max_tokens":0}`, 400, "max_tokens must be at least 1, got 0."},
		{"too long", "/v1/completions", `{"prompt":"hi","max_tokens":5000}`, 400, "This model's maximum context length is 4096 tokens. However, you requested 5001 tokens (1 in the messages, 5000 in the completion)."},
		{"n=2", "/v1/completions", `{"prompt":"hi","n":2}`, 400, "n must be 1"},
		{"no messages", "/v1/chat/completions", `{"messages":[]}`, 400, "messages must not be empty"},
		{"bad content", "/v1/chat/completions", `{"messages":[{"role":"user","content":5}]}`, 400, "messages[0].content must be"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := postJSON(t, base+tc.path, tc.body)
			if resp.StatusCode != tc.code {
				t.Errorf("status %d, want %d (%s)", resp.StatusCode, tc.code, body)
			}
			var e struct {
				Error struct {
					Message string `json:"message"`
					Type    string `json:"type"`
					Code    int    `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal(body, &e); err != nil {
				t.Fatalf("error body %q is not JSON: %v", body, err)
			}
			if !strings.Contains(e.Error.Message, tc.message) || e.Error.Code != tc.code || e.Error.Type == "" {
				t.Errorf("error = %+v, want code %d and a message containing %q", e.Error, tc.code, tc.message)
			}
		})
	}
}

func TestNonStreamingAndModels(t *testing.T) {
	cfg := fastConfig()
	base := simtest.Start(t, cfg)
	resp, body := postJSON(t, base+"/v1/completions", `{"prompt":"hello world!","max_tokens":7}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	var c struct {
		Choices []struct {
			Text         string `json:"text"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &c); err != nil {
		t.Fatalf("decoding %s: %v", body, err)
	}
	if len(c.Choices) != 1 || c.Choices[0].Text == "" || c.Choices[0].FinishReason != "length" || c.Usage.CompletionTokens != 7 || c.Usage.PromptTokens != 3 {
		t.Errorf("completion = %s", body)
	}

	checkModels(t, base, cfg.Model)
}

// TestStreamingPlainHTTP reads a streamed completion with net/http: one
// event per token, the last one with finish_reason, then [DONE].
func TestStreamingPlainHTTP(t *testing.T) {
	cfg := fastConfig()
	base := simtest.Start(t, cfg)
	for _, path := range []string{"/v1/completions", "/v1/chat/completions"} {
		t.Run(path, func(t *testing.T) {
			body := `{"prompt":"hi","max_tokens":5,"stream":true}`
			if strings.Contains(path, "chat") {
				body = `{"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"stream":true}`
			}
			resp, err := http.Post(base+path, "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatalf("POST: %v", err)
			}
			defer func() { _ = resp.Body.Close() }()
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
				t.Errorf("Content-Type %q", ct)
			}
			var events []string
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				if line, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
					events = append(events, line)
				}
			}
			if err := sc.Err(); err != nil {
				t.Fatalf("reading stream: %v", err)
			}
			want := 6 // 5 tokens + [DONE]
			if strings.Contains(path, "chat") {
				want = 7 // + the role event
			}
			if len(events) != want || events[len(events)-1] != "[DONE]" {
				t.Fatalf("events = %q", events)
			}
			if !strings.Contains(events[len(events)-2], `"finish_reason":"length"`) {
				t.Errorf("last token event %q has no finish_reason", events[len(events)-2])
			}
			for _, e := range events[:len(events)-1] {
				if !json.Valid([]byte(e)) {
					t.Errorf("event %q is not JSON", e)
				}
			}
		})
	}
}

// TestStreamingOpenAIClient drives both endpoints with openai-go.
func TestStreamingOpenAIClient(t *testing.T) {
	cfg := fastConfig()
	base := simtest.Start(t, cfg)
	client := openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	cs := client.Completions.NewStreaming(ctx, openai.CompletionNewParams{
		Model:         openai.CompletionNewParamsModel(cfg.Model),
		Prompt:        openai.CompletionNewParamsPromptUnion{OfString: openai.String("Say something")},
		MaxTokens:     openai.Int(8),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	var text strings.Builder
	tokens, finish, completionTokens := 0, "", int64(0)
	for cs.Next() {
		ch := cs.Current()
		for _, c := range ch.Choices {
			if c.Text != "" {
				tokens++
			}
			text.WriteString(c.Text)
			if c.FinishReason != "" {
				finish = string(c.FinishReason)
			}
		}
		if ch.Usage.CompletionTokens > 0 {
			completionTokens = ch.Usage.CompletionTokens
		}
	}
	if err := cs.Err(); err != nil {
		t.Fatalf("completion stream: %v", err)
	}
	if tokens != 8 || finish != "length" || completionTokens != 8 || text.Len() == 0 {
		t.Errorf("completion: %d tokens, finish %q, usage %d, text %q", tokens, finish, completionTokens, text.String())
	}

	chat := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model:     cfg.Model,
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello")},
		MaxTokens: openai.Int(6),
	})
	acc := openai.ChatCompletionAccumulator{}
	for chat.Next() {
		acc.AddChunk(chat.Current())
	}
	if err := chat.Err(); err != nil {
		t.Fatalf("chat stream: %v", err)
	}
	if len(acc.Choices) != 1 || acc.Choices[0].Message.Content == "" || acc.Choices[0].FinishReason != "length" {
		t.Errorf("chat result = %+v", acc.ChatCompletion)
	}
}
