// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/kubectlplugin"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/test/e2e/framework"
)

// The kubectl plugin's part of the GPU contrast scenario: `kubectl
// inference top` over the two Deployments, idle and then under a light
// load on one of them, with an SLO of 1 s on TTFT and a GPU-hour price.
const (
	pluginSLOTTFT    = time.Second
	pluginGPUPrice   = 2.0
	pluginLoadRate   = 4 // arrivals/s: far below the two pods' batch slots, no queue
	pluginLoadFor    = 40 * time.Second
	pluginLoadCap    = 4
	pluginWaitAtMost = 30 * time.Second
)

// checkPlugin builds cmd/kubectl-inference and runs it as kubectl would
// (the admin kubeconfig) against the scenario of TestGPUContrast: the
// Deployments and their pods carry the label selector; Deployment name
// has want[name] pods, each holding one fake GPU that reads 100% busy.
// The load goes to the pods of Deployment loadOn (labelled app=loadOn).
func checkPlugin(t *testing.T, e *framework.Environment, ns, selector string, want map[string]int, loadOn string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	bin, err := framework.BuildCommand(ctx, root, filepath.Join(e.Dir, "bin"), "kubectl-inference")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("go build ./cmd/kubectl-inference: %s", time.Since(start).Round(100*time.Millisecond))
	topArgs := []string{"top", "-n", ns, "-l", selector, "-o", "json", "--kubeconfig", e.ControlPlane.AdminKubeconfig,
		"--slo-ttft=" + pluginSLOTTFT.String(), fmt.Sprintf("--gpu-hour-price=%g", pluginGPUPrice)}

	// Idle: allocated and busy are there; no request finished, so the
	// latency percentiles and everything the SLO needs are null, while the
	// measured rates are 0.
	_, out, err := pollTop(ctx, bin, topArgs, func(r kubectlplugin.TopReport) error {
		return checkIdle(r, want)
	})
	t.Logf("kubectl inference %v (idle):\n%s", topArgs, out)
	if err != nil {
		t.Fatalf("idle: %v", err)
	}

	// Every pod, through the contrast command's JSON.
	cmd := exec.CommandContext(ctx, bin, "contrast", "-n", ns, "-l", selector, "-o", "json", "--kubeconfig", e.ControlPlane.AdminKubeconfig)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl inference contrast -o json: %v: %s", err, &stderr)
	}
	var pods kubectlplugin.PodsReport
	if err := json.Unmarshal(stdout.Bytes(), &pods); err != nil {
		t.Fatalf("contrast -o json: %v\n%s", err, &stdout)
	}
	total := 0
	for _, n := range want {
		total += n
	}
	if len(pods.Pods) != total {
		t.Errorf("contrast -o json: %d pods, want %d", len(pods.Pods), total)
	}
	for _, p := range pods.Pods {
		u, q := p.Values[metricGPUUtil], p.Values[metricQueue]
		ttft, present := p.Values[metricTTFTP90]
		if u == nil || *u < 0.99 || q == nil || *q != 0 || !present || ttft != nil || p.GPUs != 1 {
			t.Errorf("contrast -o json, pod %s: want 1 GPU, gpu_utilization 1, queue 0 and a null TTFT p90: %+v", p.Pod, p)
		}
	}

	// Under load on the queue Deployment: the useful output appears, and
	// the share of requests meeting the SLO bounds what the load saw.
	sel := labels.SelectorFromSet(labels.Set{"app": loadOn})
	svc, err := framework.StartServiceProxy(func() []string { return e.Kubelet.Endpoints(ns, sel) })
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	l := startLoad(t, svc.URL, pluginLoadRate, pluginLoadFor, pluginLoadCap)
	loaded, out, err := pollTop(ctx, bin, topArgs, func(r kubectlplugin.TopReport) error {
		return checkLoaded(r, loadOn, want[loadOn])
	})
	t.Logf("kubectl inference %v (under load):\n%s", topArgs, out)
	l.stop()
	if err != nil {
		t.Fatalf("under load: %v", err)
	}
	rep := l.finished()
	if rep == nil {
		t.Fatal("the load did not end when stopped")
	}
	t.Logf("load: %s", summary(rep))
	met, n := 0, 0
	for _, res := range rep.Results {
		if res.Err == nil {
			n++
			if res.TTFT <= pluginSLOTTFT {
				met++
			}
		}
	}
	d := deployment(loaded, loadOn)
	share := float64(met) / float64(max(n, 1))
	// The bound comes from the adapter's histogram window (60 s), the load
	// is what the client saw: the same requests, as all finished in it.
	if n == 0 || share < *d.SLOMetShare.Min-0.01 || share > *d.SLOMetShare.Max+0.01 {
		t.Errorf("the client saw %d of %d requests (%.3f) within %s; kubectl inference top bounds the share to [%.2f, %.2f]",
			met, n, share, pluginSLOTTFT, *d.SLOMetShare.Min, *d.SLOMetShare.Max)
	}
}

// pollTop runs the plugin until check passes (at most pluginWaitAtMost)
// and returns its last report and output.
func pollTop(ctx context.Context, bin string, args []string, check func(kubectlplugin.TopReport) error) (kubectlplugin.TopReport, string, error) {
	ctx, cancel := context.WithTimeout(ctx, pluginWaitAtMost)
	defer cancel()
	var rep kubectlplugin.TopReport
	var out string
	var problem error
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
		defer rcancel()
		cmd := exec.CommandContext(rctx, bin, args...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			out, problem = stdout.String()+stderr.String(), fmt.Errorf("kubectl-inference: %w", err)
			return false, nil
		}
		out = stdout.String()
		rep = kubectlplugin.TopReport{}
		if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
			problem = fmt.Errorf("decoding the JSON: %w", err)
			return false, nil
		}
		problem = check(rep)
		return problem == nil, nil
	})
	if err != nil {
		return rep, out, fmt.Errorf("%w (%w)", problem, err)
	}
	return rep, out, nil
}

func deployment(r kubectlplugin.TopReport, name string) *kubectlplugin.Summary {
	for i := range r.Deployments {
		if r.Deployments[i].Deployment == name {
			return &r.Deployments[i]
		}
	}
	return nil
}

// checkIdle: want[name] pods and GPUs per Deployment, all busy, SM activity
// reported, 0 tokens/s measured (so 0 per GPU-second), no percentiles and
// so no SLO share and no cost — null, not 0.
func checkIdle(r kubectlplugin.TopReport, want map[string]int) error {
	if len(r.Deployments) != len(want) {
		return fmt.Errorf("%d Deployments, want %d", len(r.Deployments), len(want))
	}
	if r.SLO.TimeToFirstTokenSeconds == nil || *r.SLO.TimeToFirstTokenSeconds != pluginSLOTTFT.Seconds() || r.GPUHourPrice == nil {
		return fmt.Errorf("the report does not state the SLO and price it used")
	}
	for name, n := range want {
		d := deployment(r, name)
		switch {
		case d == nil:
			return fmt.Errorf("no row for %s", name)
		case d.Pods != n || d.GPUsAllocated != int64(n):
			return fmt.Errorf("%s: %d pods, %d GPUs allocated, want %d of each", name, d.Pods, d.GPUsAllocated, n)
		case d.GPUBusyShare == nil || *d.GPUBusyShare < 0.99:
			return fmt.Errorf("%s: GPU busy share %v, want about 1", name, d.GPUBusyShare)
		case d.GPUSMActiveShare == nil:
			return fmt.Errorf("%s: no SM active share (the fake H100s report it)", name)
		case d.GenerationTokensPerSecond == nil || *d.GenerationTokensPerSecond != 0:
			return fmt.Errorf("%s: generated tokens/s %v, want a measured 0", name, d.GenerationTokensPerSecond)
		case d.TokensPerGPUSecond == nil || *d.TokensPerGPUSecond != 0:
			return fmt.Errorf("%s: tokens per GPU-second %v, want 0", name, d.TokensPerGPUSecond)
		case d.TimeToFirstToken.P90 != nil || d.SLOMetShare != nil || d.CostPer1000SLOMetRequests != nil:
			return fmt.Errorf("%s: TTFT p90 %v, SLO share %v, cost %v: want null with no request finished", name, d.TimeToFirstToken.P90, d.SLOMetShare, d.CostPer1000SLOMetRequests)
		case d.Missing[metricTTFTP90] == "":
			return fmt.Errorf("%s: no reason given for the missing TTFT p90", name)
		}
	}
	return nil
}

// checkLoaded: the loaded Deployment shows tokens and requests per second,
// a TTFT p90, the SLO share and the cost; tokens per GPU-second is tokens
// per second over its GPUs.
func checkLoaded(r kubectlplugin.TopReport, name string, gpus int) error {
	d := deployment(r, name)
	switch {
	case d == nil:
		return fmt.Errorf("no row for %s", name)
	case d.GenerationTokensPerSecond == nil || *d.GenerationTokensPerSecond <= 0 || d.RequestsPerSecond == nil || *d.RequestsPerSecond <= 0:
		return fmt.Errorf("%s: tokens/s %v, requests/s %v: want both above 0", name, d.GenerationTokensPerSecond, d.RequestsPerSecond)
	case d.TimeToFirstToken.P90 == nil || d.SLOMetShare == nil || d.SLOMetRequestsPerSecond == nil || d.CostPer1000SLOMetRequests == nil:
		return fmt.Errorf("%s: TTFT p90 %v, SLO share %v, SLO-meeting requests/s %v, cost %v: want all", name, d.TimeToFirstToken.P90, d.SLOMetShare, d.SLOMetRequestsPerSecond, d.CostPer1000SLOMetRequests)
	case d.TokensPerGPUSecond == nil || *d.TokensPerGPUSecond != *d.GenerationTokensPerSecond/float64(gpus):
		return fmt.Errorf("%s: tokens per GPU-second %v, want %v / %d", name, d.TokensPerGPUSecond, *d.GenerationTokensPerSecond, gpus)
	}
	return nil
}
