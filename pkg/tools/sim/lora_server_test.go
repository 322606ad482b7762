// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package sim_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/parse"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/sim/simtest"
)

// openStream starts a streaming completion of model and returns once its
// response headers arrived (with the first token); cancel ctx to end it.
func openStream(ctx context.Context, base, model string) (*http.Response, error) {
	body := `{"model":"` + model + `","prompt":"abc abc","max_tokens":4000,"stream":true}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/completions", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	return http.DefaultClient.Do(req)
}

// adaptersOnPage scrapes base's /metrics and returns the LoRA adapters
// pkg/adapter/parse reads from it, and whether the page had a lora line.
func adaptersOnPage(t *testing.T, base string) ([]parse.Adapter, bool) {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	page, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading /metrics: %v", err)
	}
	pg, err := parse.NewParser().Parse(page)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	for _, m := range pg.Models {
		if m.Has.Has(catalog.LoRAAdaptersRunning) {
			return append([]parse.Adapter{}, m.Adapters...), true
		}
	}
	return nil, false
}

// TestLoRAServer: adapters are listed with their parent, answer under
// their own name, and with --max-loras 1 a request of b waits while a
// runs, which /metrics says in vLLM's vllm:lora_requests_info.
func TestLoRAServer(t *testing.T) {
	cfg := fastConfig()
	cfg.Model = "base-model"
	cfg.LoRAAdapters = "a,b"
	cfg.MaxLoRAs = 1
	cfg.TimeScale = 1 // 4,000 tokens take 40 s: a runs until cancelled
	base := simtest.Start(t, cfg)

	checkModels(t, base, "base-model", "a", "b")
	r, err := http.Get(base + "/v1/models")
	if err != nil {
		t.Fatalf("GET /v1/models: %v", err)
	}
	var models struct {
		Data []struct {
			ID     string  `json:"id"`
			Parent *string `json:"parent"`
		} `json:"data"`
	}
	err = json.NewDecoder(r.Body).Decode(&models)
	_ = r.Body.Close()
	if err != nil {
		t.Fatalf("decode /v1/models: %v", err)
	}
	for _, m := range models.Data {
		want := "base-model"
		if m.ID == "base-model" {
			want = "<nil>"
		}
		got := "<nil>"
		if m.Parent != nil {
			got = *m.Parent
		}
		if got != want {
			t.Errorf("model %s: parent %s, want %s", m.ID, got, want)
		}
	}

	if _, ok := adaptersOnPage(t, base); ok {
		t.Errorf("a lora line before any request, want none (as vLLM)")
	}
	resp, body := postJSON(t, base+"/v1/completions", `{"model":"b","prompt":"abc","max_tokens":2}`)
	var done struct {
		Model string `json:"model"`
	}
	if err := json.Unmarshal(body, &done); resp.StatusCode != http.StatusOK || err != nil || done.Model != "b" {
		t.Fatalf("completion of b: status %d, model %q, %v: %s", resp.StatusCode, done.Model, err, body)
	}
	if resp, body := postJSON(t, base+"/v1/completions", `{"model":"c","prompt":"abc","max_tokens":2}`); resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown adapter: status %d, want 404: %s", resp.StatusCode, body)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, err := openStream(ctx, base, "a")
	if err != nil {
		t.Fatalf("stream of a: %v", err)
	}
	defer func() { _ = a.Body.Close() }()
	if line, err := bufio.NewReader(a.Body).ReadString('\n'); err != nil || !strings.Contains(line, `"model":"a"`) {
		t.Fatalf("first event of a: %q, %v", line, err)
	}
	var wg sync.WaitGroup
	defer wg.Wait() // after cancel (deferred later, runs first)
	defer cancel()
	wg.Go(func() {
		if b, err := openStream(ctx, base, "b"); err == nil {
			_ = b.Body.Close()
		}
	})

	want := []parse.Adapter{{Name: "a", Running: true}, {Name: "b", Waiting: true}}
	var got []parse.Adapter
	if err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		got, _ = adaptersOnPage(t, base)
		return cmp.Equal(got, want), nil
	}); err != nil {
		t.Errorf("adapters on the page after 10s %+v, want %+v", got, want)
	}
}
