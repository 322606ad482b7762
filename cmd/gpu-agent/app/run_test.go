// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/agentpage"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/cli/clitest"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/nodeagent/nvml"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/nodeagent/podresources/podresourcestest"
)

func get(t *testing.T, url string) (int, []byte) {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

// The agent run in-process on the fake H100 backend, with a real
// pod-resources server: its page, parsed by pkg/adapter/agentpage, shows the pod's
// GPUs fully busy.
func TestRunFakeBackend(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "kubelet.sock")
	srv, err := podresourcestest.Start(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	srv.SetPods(podresourcestest.Pod("default", "vllm-0", "server", "nvidia.com/gpu",
		nvml.FakeUUID("h100-busy", 0), nvml.FakeUUID("h100-busy", 1)))

	o := NewOptions()
	o.ListenAddress = "127.0.0.1:0"
	o.Interval = time.Second
	o.PodResourcesSocket = sock
	o.TestingFakeNVML = "h100-busy"
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg, err := o.Config()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Run did not return within 10s of cancel")
		}
	}()

	base := "http://" + cfg.Listener.Addr().String()
	var p agentpage.Parser
	var page []byte
	var pods []agentpage.PodGPU
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 15*time.Second, true, func(context.Context) (bool, error) {
		// SM activity needs two collections, an interval apart.
		_, page = get(t, base+"/metrics")
		var err error
		if pods, err = p.Parse(page); err != nil {
			t.Fatalf("%v\n%s", err, page)
		}
		return len(pods) == 1 && pods[0].Has.Has(catalog.GPUSMActive), nil
	}); err != nil {
		t.Fatalf("no SM activity for the pod within 15s; last page:\n%s", page)
	}
	got := pods[0]
	if got.Namespace != "default" || got.Pod != "vllm-0" || got.GPUs != 2 {
		t.Errorf("pod %+v", got)
	}
	for s, want := range map[catalog.Signal]float64{catalog.GPUUtilization: 1, catalog.GPUSMActive: 0.38, catalog.GPUMemoryUsedBytes: 2 * 72 << 30} {
		if v, ok := got.Value(s); !ok || v != want {
			t.Errorf("%s = %v (%v), want %v", s, v, ok, want)
		}
	}
	if st := p.Status(); st != (agentpage.Status{Up: true, Reason: "ok", Backend: "testing-fake-nvml/h100-busy"}) {
		t.Errorf("status %+v", st)
	}
	if code, body := get(t, base+"/healthz"); code != 200 {
		t.Errorf("/healthz %d %s", code, body)
	}
}

// TestMain runs the command itself (Main, as cmd/gpu-agent does) when the
// test binary is started with GPU_AGENT_RUN_MAIN=1, so a test can run the
// agent as a separate process without building it.
func TestMain(m *testing.M) {
	if os.Getenv("GPU_AGENT_RUN_MAIN") == "1" {
		os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// The agent as a process on a machine without libnvidia-ml, logging JSON:
// it says so in its log (the NVML error with reason library_not_found) and
// on its page (gpu_agent_up 0, reason library_not_found), keeps serving,
// stays healthy, and exits 0 on SIGTERM (clitest.CheckJSONLogs, which also
// fails on a stderr line that is not JSON).
func TestProcessWithoutNVML(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0],
		"--logging-format=json",
		"--listen-address=127.0.0.1:0",
		"--interval=1s",
		"--nvml-library-path="+filepath.Join(dir, "libnvidia-ml.so.1"),
		"--pod-resources-socket="+filepath.Join(dir, "no-kubelet.sock"),
	)
	cmd.Env = append(os.Environ(), "GPU_AGENT_RUN_MAIN=1")
	var addr string
	sawNVMLError := false
	clitest.CheckJSONLogs(t, cmd, func(m map[string]any) bool {
		msg, _ := m["msg"].(string)
		switch {
		case msg == "Serving":
			addr, _ = m["address"].(string)
		case strings.HasPrefix(msg, "Cannot read GPUs"):
			if m["reason"] != "library_not_found" {
				t.Errorf("NVML error's reason %v, want library_not_found: %v", m["reason"], m)
			}
			sawNVMLError = true
		}
		return addr != "" && sawNVMLError
	}, func() {
		// Still serving after several retries.
		time.Sleep(1500 * time.Millisecond)
		code, page := get(t, "http://"+addr+"/metrics")
		if code != 200 {
			t.Fatalf("/metrics %d", code)
		}
		var p agentpage.Parser
		if _, err := p.Parse(page); err != nil {
			t.Fatalf("%v\n%s", err, page)
		}
		if diff := cmp.Diff(agentpage.Status{Up: false, Reason: "library_not_found", Backend: "nvml"}, p.Status()); diff != "" {
			t.Errorf("status (-want +got):\n%s", diff)
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(strings.NewReader(string(page)))
		if err != nil {
			t.Fatal(err)
		}
		if v := fams["gpu_agent_pod_resources_up"].GetMetric()[0].GetGauge().GetValue(); v != 0 {
			t.Errorf("pod_resources_up %v without a kubelet", v)
		}
		if code, _ := get(t, "http://"+addr+"/healthz"); code != 200 {
			t.Errorf("/healthz %d", code)
		}
	})
}
