// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package gpuload

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/cmd/gpu-agent/app"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/agentpage"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/nodeagent/nvml"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/nodeagent/podresources/podresourcestest"
)

// These tests need a real NVIDIA GPU, its driver (libnvidia-ml.so.1 and
// libcuda.so.1) and nothing else running on the GPU. They run only with
// IMA_REAL_GPU=1; IMA_NVML_LIBRARY and IMA_CUDA_LIBRARY name the libraries
// when the loader's path does not hold them, and IMA_REAL_GPU_OUT names a
// folder for the record (a table of readings and the agent's page).

func needGPU(t *testing.T) *GPU {
	t.Helper()
	if os.Getenv("IMA_REAL_GPU") != "1" {
		t.Skip("a hardware check: set IMA_REAL_GPU=1 on a machine with an idle NVIDIA GPU (docs/gpu-agent.md)")
	}
	// NVML numbers GPUs in PCI bus order; make CUDA's ordinal 0 the same GPU.
	t.Setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
	g, err := Open(os.Getenv("IMA_CUDA_LIBRARY"), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.Close(); err != nil {
			t.Error(err)
		}
	})
	return g
}

// record appends text to the file name in IMA_REAL_GPU_OUT, if set.
func record(t *testing.T, name, text string) {
	t.Helper()
	dir := os.Getenv("IMA_REAL_GPU_OUT")
	if dir == "" {
		return
	}
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Error(err)
		return
	}
	defer f.Close()
	if _, err := io.WriteString(f, text); err != nil {
		t.Error(err)
	}
}

// spinning runs the kernel on blocks blocks for d in the background; the
// returned function waits for it and reports its error.
func spinning(t *testing.T, g *GPU, blocks int, d time.Duration) (join func()) {
	t.Helper()
	if blocks == 0 {
		return func() {}
	}
	done := make(chan error, 1)
	go func() { done <- g.Spin(blocks, d) }()
	return func() {
		t.Helper()
		select {
		case err := <-done:
			if err != nil {
				t.Error(err)
			}
		case <-time.After(d + 30*time.Second):
			t.Fatalf("the kernel did not end within %v", d+30*time.Second)
		}
	}
}

// The reader on real NVML: an idle GPU, one busy SM, and every SM busy.
// NVML's utilization says whether any kernel ran, so one busy SM reads as a
// fully used GPU; GPM SM activity tells the two apart.
func TestRealNVMLReader(t *testing.T) {
	g := needGPU(t)
	r := nvml.NewReader(os.Getenv("IMA_NVML_LIBRARY"))
	defer r.Close()

	gpus, err := r.Read(nil)
	if err != nil {
		t.Fatal(err)
	}
	first := gpus[0]
	if !strings.HasPrefix(first.UUID, "GPU-") || first.Model == "" || !first.HasMemory || first.MemoryTotal == 0 || !first.HasUtilization {
		t.Fatalf("first GPU %+v: want a GPU- UUID, a model name, memory and utilization", first)
	}
	record(t, "nvml-reader.md", fmt.Sprintf("GPU 0: %s, %s, %d SMs, %.1f GiB, MIG %v; GPUs on the node: %d\n\n| phase | blocks | utilization | SM activity | memory used |\n|---|---|---|---|---|\n",
		first.Model, first.UUID, g.SMs(), float64(first.MemoryTotal)/(1<<30), first.MIG, len(gpus)))

	phases := []struct {
		name           string
		blocks         int
		utilMin        float64
		utilMax        float64
		smMin, smMax   float64
		needSMActivity bool
	}{
		{name: "idle", blocks: 0, utilMin: 0, utilMax: 0.1, smMin: 0, smMax: 0.02},
		{name: "one SM busy", blocks: 1, utilMin: 0.9, utilMax: 1, smMin: 0, smMax: 0.05},
		{name: "every SM busy", blocks: 4 * g.SMs(), utilMin: 0.9, utilMax: 1, smMin: 0.8, smMax: 1},
	}
	for _, p := range phases {
		t.Run(p.name, func(t *testing.T) {
			join := spinning(t, g, p.blocks, 5*time.Second)
			defer join()
			// Let NVML's utilization window fill, then take two GPM
			// samples a second apart inside the kernel's run.
			time.Sleep(1500 * time.Millisecond)
			if _, err := r.Read(gpus); err != nil {
				t.Fatal(err)
			}
			time.Sleep(1500 * time.Millisecond)
			got, err := r.Read(gpus)
			if err != nil {
				t.Fatal(err)
			}
			gpus = got
			d := got[0]
			t.Logf("%s: utilization %.2f (%v), SM activity %.4f (%v), memory used %d MiB, err %q",
				p.name, d.Utilization, d.HasUtilization, d.SMActive, d.HasSMActive, d.MemoryUsed>>20, d.Err)
			sm := "absent"
			if d.HasSMActive {
				sm = fmt.Sprintf("%.4f", d.SMActive)
			}
			record(t, "nvml-reader.md", fmt.Sprintf("| %s | %d | %.2f | %s | %d MiB |\n", p.name, p.blocks, d.Utilization, sm, d.MemoryUsed>>20))
			if !d.HasUtilization || d.Utilization < p.utilMin || d.Utilization > p.utilMax {
				t.Errorf("utilization %.2f (present %v), want %.2f..%.2f", d.Utilization, d.HasUtilization, p.utilMin, p.utilMax)
			}
			if !d.HasSMActive {
				t.Errorf("SM activity absent (GPM unsupported or failed: %q); this check expects a Hopper or newer GPU", d.Err)
			} else if d.SMActive < p.smMin || d.SMActive > p.smMax {
				t.Errorf("SM activity %.4f, want %.2f..%.2f", d.SMActive, p.smMin, p.smMax)
			}
		})
	}
}

// The gpu-agent on real NVML, with a real pod-resources server that gives
// GPU 0 to one pod: while one SM is busy, the pod's row reads a fully used
// GPU and an SM activity near zero, from the real driver.
func TestRealGPUAgent(t *testing.T) {
	g := needGPU(t)
	r := nvml.NewReader(os.Getenv("IMA_NVML_LIBRARY"))
	gpus, err := r.Read(nil)
	_ = r.Close()
	if err != nil {
		t.Fatal(err)
	}

	sock := filepath.Join(t.TempDir(), "kubelet.sock")
	srv, err := podresourcestest.Start(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	srv.SetPods(podresourcestest.Pod("inference", "vllm-0", "server", "nvidia.com/gpu", gpus[0].UUID))

	o := app.NewOptions()
	o.ListenAddress = "127.0.0.1:0"
	o.Interval = time.Second
	o.PodResourcesSocket = sock
	o.NVMLLibraryPath = os.Getenv("IMA_NVML_LIBRARY")
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg, err := o.Config()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, cfg) }()
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

	join := spinning(t, g, 1, 12*time.Second)
	defer join()
	time.Sleep(2 * time.Second)

	client := &http.Client{Timeout: 5 * time.Second}
	url := "http://" + cfg.Listener.Addr().String() + "/metrics"
	var p agentpage.Parser
	var page []byte
	var pods []agentpage.PodGPU
	if err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 8*time.Second, true, func(context.Context) (bool, error) {
		resp, err := client.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		page, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if pods, err = p.Parse(page); err != nil {
			t.Fatalf("%v\n%s", err, page)
		}
		return len(pods) == 1 && pods[0].Has.Has(catalog.GPUSMActive), nil
	}); err != nil {
		t.Fatalf("no SM activity for the pod within 8s; last page:\n%s", page)
	}
	got := pods[0]
	util, _ := got.Value(catalog.GPUUtilization)
	sm, _ := got.Value(catalog.GPUSMActive)
	mem, hasMem := got.Value(catalog.GPUMemoryUsedBytes)
	t.Logf("pod %s/%s: %d GPU, utilization %.2f, SM activity %.4f, memory used %.0f MiB", got.Namespace, got.Pod, got.GPUs, util, sm, mem/(1<<20))
	if got.Namespace != "inference" || got.Pod != "vllm-0" || got.GPUs != 1 {
		t.Errorf("pod %+v, want inference/vllm-0 with 1 GPU", got)
	}
	if util < 0.9 {
		t.Errorf("utilization %.2f while a kernel runs, want >= 0.9", util)
	}
	if sm > 0.05 {
		t.Errorf("SM activity %.4f with one SM of %d busy, want <= 0.05", sm, g.SMs())
	}
	if !hasMem || mem <= 0 {
		t.Errorf("memory used %v (present %v), want > 0 with a CUDA context open", mem, hasMem)
	}
	if st := p.Status(); !st.Up || st.Backend != "nvml" {
		t.Errorf("status %+v, want up on the nvml backend", st)
	}
	record(t, "gpu-agent-page.txt", string(page))
}
