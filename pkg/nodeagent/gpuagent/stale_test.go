// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package gpuagent_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/nodeagent/gpuagent"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/nodeagent/nvml"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/nodeagent/podresources/podresourcestest"
)

// When the collection loop is stuck (an NVML call or the kubelet hangs),
// the page must not go on serving the last collection's GPU values as if
// they were current: the adapter stamps them with its scrape time. Past the
// limit /healthz uses, the page says up 0 (reason stale) and leaves the
// per-GPU and per-pod series out, so the pods' values age out in the
// adapter instead.
// Was wrong: a stuck loop's last values were served, and stamped, as current.
func TestStuckCollectionIsNotServedAsFresh(t *testing.T) {
	r := newRig(t, "dgxa100")
	r.pods.SetPods(podresourcestest.Pod("default", "vllm-0", "server", "nvidia.com/gpu", nvml.FakeUUID("dgxa100", 0)))
	steps := []struct {
		name    string
		collect bool
		step    time.Duration
		wantUp  []sample
		wantGPU bool // per-GPU and per-pod series served
	}{
		{"collected", true, 0, []sample{{"backend=testing-fake-nvml/dgxa100,reason=ok", 1}}, true},
		{"10s later: within the limit", false, 10 * time.Second, []sample{{"backend=testing-fake-nvml/dgxa100,reason=ok", 1}}, true},
		{"11s later: loop stuck", false, time.Second, []sample{{"backend=testing-fake-nvml/dgxa100,reason=stale", 0}}, false},
		{"collected again", true, 0, []sample{{"backend=testing-fake-nvml/dgxa100,reason=ok", 1}}, true},
	}
	for _, s := range steps {
		r.clock.step(s.step)
		if s.collect {
			r.agent.CollectOnce(context.Background())
		}
		p := r.page(t)
		if diff := cmp.Diff(s.wantUp, p[gpuagent.MetricUp], cmp.AllowUnexported(sample{})); diff != "" {
			t.Errorf("%s: %s (-want +got):\n%s", s.name, gpuagent.MetricUp, diff)
		}
		for _, m := range []string{gpuagent.MetricGPUUtilization, gpuagent.MetricGPUMemoryUsed, gpuagent.MetricGPUMemoryTotal, gpuagent.MetricPodGPUs} {
			if got := len(p[m]) > 0; got != s.wantGPU {
				t.Errorf("%s: %s served: %v, want %v (%v)", s.name, m, got, s.wantGPU, p[m])
			}
		}
		if len(p[gpuagent.MetricLastCollectUnixTS]) != 1 {
			t.Errorf("%s: %s missing", s.name, gpuagent.MetricLastCollectUnixTS)
		}
	}
}
