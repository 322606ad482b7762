// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package sim_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/sim"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/sim/simtest"
)

// twoModelConfig serves models "alpha" and "beta" with one request in each
// batch and slow steps, so that open requests stay open.
func twoModelConfig(format string) sim.Config {
	cfg := sim.DefaultConfig()
	cfg.Model = "alpha,beta"
	cfg.MetricsFormat = format
	cfg.MaxNumSeqs = 1
	cfg.MaxModelLen = 4096
	cfg.StepBase = 200 * time.Millisecond
	return cfg
}

// perModel returns the value of each series of family name by model_name.
func perModel(mfs map[string]*dto.MetricFamily, name string) map[string]float64 {
	out := map[string]float64{}
	mf := mfs[name]
	if mf == nil {
		return out
	}
	for _, m := range mf.GetMetric() {
		out[labelValue(m, "model_name")] += m.GetGauge().GetValue()
	}
	return out
}

// TestTwoModelsAPI: requests choose the model by the OpenAI model field,
// answers carry it, unknown models are a 404 in vLLM's shape and
// /v1/models lists both.
func TestTwoModelsAPI(t *testing.T) {
	cfg := twoModelConfig(sim.FormatSGLang)
	cfg.StepBase = time.Millisecond
	base := simtest.Start(t, cfg)

	tests := []struct {
		name, body, wantModel string
		code                  int
	}{
		{"first model", `{"model":"alpha","prompt":"hi","max_tokens":2}`, "alpha", 200},
		{"second model", `{"model":"beta","prompt":"hi","max_tokens":2}`, "beta", 200},
		{"no model goes to the first", `{"prompt":"hi","max_tokens":2}`, "alpha", 200},
		{"unknown model", `{"model":"alpha,beta","prompt":"hi","max_tokens":2}`, "", 404},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := postJSON(t, base+"/v1/completions", tc.body)
			if resp.StatusCode != tc.code {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.code, body)
			}
			var got struct {
				Model string `json:"model"`
				Error struct {
					Message string `json:"message"`
					Type    string `json:"type"`
				} `json:"error"`
			}
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatalf("body %q: %v", body, err)
			}
			if tc.code == 404 {
				if got.Error.Type != "NotFoundError" || got.Error.Message != "The model `alpha,beta` does not exist." {
					t.Errorf("error = %+v, want vLLM's NotFoundError", got.Error)
				}
				return
			}
			if got.Model != tc.wantModel {
				t.Errorf("answer names model %q, want %q", got.Model, tc.wantModel)
			}
		})
	}

	checkModels(t, base, "alpha", "beta")
}

// TestTwoModelsMetrics: each model has its own engine and series. Load on
// one model shows only in that model's series; the page parses strictly
// (no duplicate series) in both formats that label models.
func TestTwoModelsMetrics(t *testing.T) {
	tests := []struct {
		format, queue, running string
	}{
		{sim.FormatSGLang, "sglang:num_queue_reqs", "sglang:num_running_reqs"},
		{sim.FormatVLLMV1, "vllm:num_requests_waiting", "vllm:num_requests_running"},
	}
	for _, tc := range tests {
		t.Run(tc.format, func(t *testing.T) {
			base := simtest.Start(t, twoModelConfig(tc.format))
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			const open = 3 // one running, two waiting behind max-num-seqs=1
			for range open {
				go func() {
					defer func() { done <- struct{}{} }()
					req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/completions",
						strings.NewReader(`{"model":"beta","prompt":"hi","max_tokens":1000}`))
					if resp, err := http.DefaultClient.Do(req); err == nil {
						_ = resp.Body.Close()
					}
				}()
			}
			defer func() {
				cancel()
				for range open {
					<-done
				}
			}()

			var queue, running map[string]float64
			var mfs map[string]*dto.MetricFamily
			// Up to 10s for the page to show beta's requests; the checks
			// below report the last page's values if it never does.
			_ = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
				mfs = scrape(t, base)
				queue, running = perModel(mfs, tc.queue), perModel(mfs, tc.running)
				return queue["beta"] == 2 && running["beta"] == 1, nil
			})
			want := map[string][2]float64{"alpha": {0, 0}, "beta": {2, 1}}
			for model, w := range want {
				q, qok := queue[model]
				r, rok := running[model]
				if !qok || !rok || q != w[0] || r != w[1] {
					t.Errorf("model %s: queue %v running %v (present %v %v), want %v and %v", model, q, r, qok, rok, w[0], w[1])
				}
			}
			if len(queue) != 2 {
				t.Errorf("%s has series for %v, want exactly alpha and beta", tc.queue, queue)
			}
			if tc.format == sim.FormatVLLMV1 {
				engines := map[string]string{}
				for _, m := range mfs["vllm:num_requests_running"].GetMetric() {
					engines[labelValue(m, "model_name")] = labelValue(m, "engine")
				}
				if engines["alpha"] != "0" || engines["beta"] != "1" {
					t.Errorf("engine labels %v, want alpha=0 beta=1", engines)
				}
				if n := len(mfs["vllm:cache_config_info"].GetMetric()); n != 2 {
					t.Errorf("vllm:cache_config_info has %d series, want one per engine", n)
				}
			}
		})
	}
}

// TestOneModelFormatsRefuseTwo: TGI and V0 serve one model; asking for two
// is a clear error before anything starts.
func TestOneModelFormatsRefuseTwo(t *testing.T) {
	for _, format := range []string{sim.FormatTGI, sim.FormatVLLMV0} {
		t.Run(format, func(t *testing.T) {
			cfg := twoModelConfig(format)
			_, err := sim.NewServer(cfg, sim.NewScaledClock(1))
			if err == nil || !strings.Contains(err.Error(), "metrics-format "+format+" serves one model, got 2") {
				t.Errorf("NewServer = %v, want the one-model error", err)
			}
		})
	}
}
