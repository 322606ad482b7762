// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/kubectlplugin/kubectlplugintest"
)

func TestUsage(t *testing.T) {
	cases := []struct {
		name       string
		args       []string
		code       int
		wantStdout []string
		wantStderr []string
	}{
		{name: "no command", code: 2, wantStderr: []string{"Usage: kubectl inference COMMAND"}},
		{name: "help", args: []string{"--help"}, wantStdout: []string{"contrast", "top"}},
		{name: "unknown command", args: []string{"bottom"}, code: 2, wantStderr: []string{`unknown command "bottom"`}},
		{name: "contrast help", args: []string{"contrast", "--help"}, wantStdout: []string{"-l, --selector", "-n, --namespace", "--kubeconfig", "--context", "-o, --output"}},
		{name: "top help", args: []string{"top", "-h"}, wantStdout: []string{"--slo-ttft", "--gpu-hour-price", "--request-timeout string", `(default "10s")`}},
		{name: "unknown flag", args: []string{"top", "--nope"}, code: 2, wantStderr: []string{"unknown flag: --nope"}},
		{name: "every problem at once", args: []string{"contrast", "-o", "yaml", "--watch=-1s", "--request-timeout=soon", "extra"}, code: 2,
			wantStderr: []string{`--output "yaml"`, "--watch -1s", `--request-timeout "soon"`, "--selector (-l) is required", "unexpected arguments: [extra]"}},
		{name: "top problems", args: []string{"top", "--slo-ttft=-1s", "--gpu-hour-price=-3"}, code: 2,
			wantStderr: []string{"must not be negative", "--gpu-hour-price -3 must be a finite number"}},
		{name: "a price without an SLO", args: []string{"top", "--gpu-hour-price=2", "-o", "wide"}, code: 2,
			wantStderr: []string{"--gpu-hour-price needs an SLO", `--output "wide"`}},
		{name: "OpenCost problems", args: []string{"top", "--opencost-url=opencost:9003", "--gpu-hour-price=2", "--opencost-window=1h&x=y"}, code: 2,
			wantStderr: []string{`--opencost-url "opencost:9003"`, "--opencost-url needs an SLO", "--opencost-url and --gpu-hour-price both", `--opencost-window "1h&x=y"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := Main(tc.args, &stdout, &stderr); code != tc.code {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, &stdout, &stderr)
			}
			for _, w := range tc.wantStdout {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, &stdout)
				}
			}
			for _, w := range tc.wantStderr {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, &stderr)
				}
			}
		})
	}
}

// TestCommandsJSON runs both commands against the stand-in API through a
// kubeconfig, as kubectl would run the plugin, and reads their JSON.
func TestCommandsJSON(t *testing.T) {
	s := kubectlplugintest.New(t)
	lbls := map[string]string{"app": "llm"}
	s.Deployments = append(s.Deployments, kubectlplugintest.Deployment("llm", lbls, lbls))
	s.Pods = append(s.Pods, kubectlplugintest.Pod("llm-a", lbls, 1), kubectlplugintest.Pod("llm-b", lbls, 1))
	s.PodValues["gpu_utilization"] = map[string]float64{"llm-a": 1, "llm-b": 0.5}
	s.PodValues["inference_queue_size"] = map[string]float64{"llm-a": 2, "llm-b": 0}
	s.DeploymentValues["inference_generation_tokens_per_second"] = map[string]float64{"llm": 50}
	kubeconfig := s.Kubeconfig(t, t.TempDir())

	var stdout, stderr bytes.Buffer
	if code := Main([]string{"top", "-o", "json", "--kubeconfig", kubeconfig}, &stdout, &stderr); code != 0 {
		t.Fatalf("top: exit %d: %s", code, &stderr)
	}
	var top struct {
		Namespace   string
		Deployments []struct {
			Deployment                string
			GPUsAllocated             int64
			GPUBusyShare              *float64
			GPUSMActiveShare          *float64
			GenerationTokensPerSecond *float64
			RequestsPerSecond         *float64
			TokensPerGPUSecond        *float64
		}
	}
	if err := json.Unmarshal(stdout.Bytes(), &top); err != nil {
		t.Fatalf("top -o json: %v\n%s", err, &stdout)
	}
	if top.Namespace != kubectlplugintest.Namespace || len(top.Deployments) != 1 {
		t.Fatalf("top -o json: want the kubeconfig context's namespace and one Deployment:\n%s", &stdout)
	}
	d := top.Deployments[0]
	if d.GPUsAllocated != 2 || d.GPUBusyShare == nil || *d.GPUBusyShare != 0.75 || d.GPUSMActiveShare != nil ||
		d.GenerationTokensPerSecond == nil || *d.GenerationTokensPerSecond != 50 || d.RequestsPerSecond != nil ||
		d.TokensPerGPUSecond == nil || *d.TokensPerGPUSecond != 25 {
		t.Errorf("top -o json: want 2 GPUs, busy 0.75, SM null, 50 tokens/s, requests null, 25 tokens per GPU-second:\n%s", &stdout)
	}

	stdout.Reset()
	if code := Main([]string{"contrast", "-l", "app=llm", "-o", "json", "--kubeconfig", kubeconfig, "-n", kubectlplugintest.Namespace}, &stdout, &stderr); code != 0 {
		t.Fatalf("contrast: exit %d: %s", code, &stderr)
	}
	var pods struct {
		Pods []struct {
			Pod     string
			Values  map[string]*float64
			Reading string
		}
	}
	if err := json.Unmarshal(stdout.Bytes(), &pods); err != nil {
		t.Fatalf("contrast -o json: %v\n%s", err, &stdout)
	}
	if len(pods.Pods) != 2 || pods.Pods[0].Pod != "llm-a" || *pods.Pods[0].Values["inference_queue_size"] != 2 ||
		pods.Pods[1].Values["inference_batch_size"] != nil || !strings.Contains(pods.Pods[0].Reading, "queue 2 waiting") {
		t.Errorf("contrast -o json:\n%s", &stdout)
	}

	// The table marks what is missing with "-".
	stdout.Reset()
	if code := Main([]string{"top", "--kubeconfig", kubeconfig}, &stdout, &stderr); code != 0 {
		t.Fatalf("top: exit %d: %s", code, &stderr)
	}
	if f := strings.Fields(strings.Split(stdout.String(), "\n")[1]); len(f) != 10 || f[0] != "llm" || f[3] != "75%" || f[4] != "-" || f[6] != "-" {
		t.Errorf("top table:\n%s", &stdout)
	}
}

// TestUnreachable: a dead API server is exit 1 with the error.
func TestUnreachable(t *testing.T) {
	s := kubectlplugintest.New(t)
	kubeconfig := s.Kubeconfig(t, t.TempDir())
	s.Fail = 503
	var stdout, stderr bytes.Buffer
	if code := Main([]string{"top", "--kubeconfig", kubeconfig, "--request-timeout=5s"}, &stdout, &stderr); code != 0 {
		// No Deployments: nothing to ask the metrics API about.
		t.Fatalf("top on an empty namespace: exit %d: %s", code, &stderr)
	}
	if !strings.Contains(stderr.String(), "No Deployments") {
		t.Errorf("stderr: %s", &stderr)
	}
	lbls := map[string]string{"app": "llm"}
	s.Pods = append(s.Pods, kubectlplugintest.Pod("llm-a", lbls, 1))
	stderr.Reset()
	if code := Main([]string{"contrast", "-l", "app=llm", "--kubeconfig", kubeconfig}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "failing as told") {
		t.Errorf("contrast with the metrics API failing: exit %d, stderr %s; want 1 and the API's error", code, &stderr)
	}
}

// TestTopWithOpenCost: with --opencost-url, the cost per 1,000 SLO-meeting
// requests comes from the Deployment's allocation in OpenCost (a recorded
// answer served on 127.0.0.1), and a Deployment OpenCost does not know has
// no cost, saying why, rather than 0.
func TestTopWithOpenCost(t *testing.T) {
	s := kubectlplugintest.New(t)
	lbls := map[string]string{"app": "llm"}
	other := map[string]string{"app": "other"}
	s.Deployments = append(s.Deployments, kubectlplugintest.Deployment("llm", lbls, lbls), kubectlplugintest.Deployment("other", other, other))
	s.Pods = append(s.Pods, kubectlplugintest.Pod("llm-a", lbls, 1), kubectlplugintest.Pod("other-a", other, 1))
	for _, d := range []string{"llm", "other"} {
		for metric, v := range map[string]float64{
			"inference_requests_per_second":             10,
			"inference_time_to_first_token_p50_seconds": 0.2,
			"inference_time_to_first_token_p90_seconds": 0.5,
			"inference_time_to_first_token_p99_seconds": 2,
		} {
			if s.DeploymentValues[metric] == nil {
				s.DeploymentValues[metric] = map[string]float64{}
			}
			s.DeploymentValues[metric][d] = v
		}
	}
	kubeconfig := s.Kubeconfig(t, t.TempDir())
	opencost := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"code":200,"data":[{"%[1]s/deployment/llm":{"name":"%[1]s/deployment/llm","properties":{"namespace":%[1]q,"controllerKind":"deployment","controller":"llm"},"minutes":60,"totalCost":36}}]}`, kubectlplugintest.Namespace)
	}))
	t.Cleanup(opencost.Close)

	var stdout, stderr bytes.Buffer
	if code := Main([]string{"top", "-o", "json", "--kubeconfig", kubeconfig, "--slo-ttft=1s", "--opencost-url", opencost.URL}, &stdout, &stderr); code != 0 {
		t.Fatalf("top: exit %d: %s", code, &stderr)
	}
	var top struct {
		OpenCost    *struct{ URL, Window string }
		Deployments []struct {
			Deployment                string
			CostPer1000SLOMetRequests *struct{ Min, Max *float64 }
			Missing                   map[string]string
		}
	}
	if err := json.Unmarshal(stdout.Bytes(), &top); err != nil {
		t.Fatalf("%v\n%s", err, &stdout)
	}
	if top.OpenCost == nil || top.OpenCost.URL != opencost.URL || top.OpenCost.Window != "1h" || len(top.Deployments) != 2 {
		t.Fatalf("want the OpenCost source and two Deployments:\n%s", &stdout)
	}
	for _, d := range top.Deployments {
		switch d.Deployment {
		case "llm":
			// 36 per hour = 0.01/s; TTFT p90 0.5s <= 1s < p99 2s: 90-99% of 10 req/s meet it.
			c := d.CostPer1000SLOMetRequests
			if c == nil || c.Min == nil || c.Max == nil || math.Abs(*c.Min-0.01/9.9*1000) > 1e-9 || math.Abs(*c.Max-0.01/9*1000) > 1e-9 {
				t.Errorf("llm: cost %+v, want %.4f to %.4f per 1,000:\n%s", c, 0.01/9.9*1000, 0.01/9*1000, &stdout)
			}
		case "other":
			if d.CostPer1000SLOMetRequests != nil || !strings.Contains(d.Missing["costPer1000SLOMetRequests"], "OpenCost has no allocation") {
				t.Errorf("other: want no cost and the reason, got %+v, %v", d.CostPer1000SLOMetRequests, d.Missing)
			}
		}
	}
}
