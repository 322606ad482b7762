// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package gpuagent_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/nodeagent/gpuagent"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/nodeagent/nvml"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/nodeagent/podresources"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/nodeagent/podresources/podresourcestest"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time       { return c.t }
func (c *clock) step(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *clock                { return &clock{t: time.Unix(1_700_000_000, 0)} }

// countingReader counts reads of the GPUReader it wraps.
type countingReader struct {
	gpuagent.GPUReader
	reads int
}

func (r *countingReader) Read(dst []nvml.GPU) ([]nvml.GPU, error) {
	r.reads++
	return r.GPUReader.Read(dst)
}

// rig is an Agent over a fake NVML profile and a real pod-resources server
// on a unix socket, serving its page over real HTTP.
type rig struct {
	agent  *gpuagent.Agent
	reader *countingReader
	pods   *podresourcestest.Server
	clock  *clock
	http   *httptest.Server
}

func newRig(t *testing.T, profile string) *rig {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "kubelet.sock")
	pods, err := podresourcestest.Start(sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pods.Close)
	client, err := podresources.NewClient(sock, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	c := newClock()
	fake, err := nvml.NewFakeReader(profile, c.now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Close() })
	r := &rig{reader: &countingReader{GPUReader: fake}, pods: pods, clock: c}
	r.agent = gpuagent.New(gpuagent.Config{
		GPUs:             r.reader,
		Backend:          fake.Backend(),
		Pods:             client,
		ResourceNames:    []string{"nvidia.com/gpu", "nvidia.com/mig-*"},
		Interval:         time.Second,
		MaxRetryInterval: 5 * time.Second,
		Now:              r.clock.now,
	})
	reg := prometheus.NewRegistry()
	reg.MustRegister(r.agent)
	r.http = httptest.NewServer(r.agent.Handler(reg))
	t.Cleanup(r.http.Close)
	return r
}

// sample is one series of a page, its labels flattened as "k=v,k=v".
type sample struct {
	labels string
	value  float64
}

// page fetches /metrics and returns its series by metric name.
func (r *rig) page(t *testing.T) map[string][]sample {
	t.Helper()
	resp, err := http.Get(r.http.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("page does not parse: %v\n%s", err, body)
	}
	out := map[string][]sample{}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			var kv []string
			for _, l := range m.GetLabel() {
				kv = append(kv, l.GetName()+"="+l.GetValue())
			}
			out[name] = append(out[name], sample{strings.Join(kv, ","), m.GetGauge().GetValue()})
		}
		sort.Slice(out[name], func(i, j int) bool { return out[name][i].labels < out[name][j].labels })
	}
	return out
}

func gpuLabels(ns, pod, ctr string, i int) string {
	return "container=" + ctr + ",gpu_model=NVIDIA H100 80GB HBM3,gpu_uuid=" + nvml.FakeUUID("h100-busy", i) + ",namespace=" + ns + ",pod=" + pod
}

func TestAgentPage(t *testing.T) {
	r := newRig(t, "h100-busy")
	uuid := func(i int) string { return nvml.FakeUUID("h100-busy", i) }
	shared := &podresourcesv1.PodResources{
		Namespace: "team-b", Name: "two-containers",
		Containers: []*podresourcesv1.ContainerResources{
			{Name: "a", Devices: []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/gpu", DeviceIds: []string{uuid(3) + "::0"}}}},
			{Name: "b", Devices: []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/gpu", DeviceIds: []string{uuid(3) + "::1"}}}},
		},
	}
	r.pods.SetPods(
		podresourcestest.Pod("default", "vllm-0", "server", "nvidia.com/gpu", uuid(0), uuid(1)),
		podresourcestest.Pod("default", "vllm-1", "server", "nvidia.com/gpu", uuid(2)+"::0"),
		podresourcestest.Pod("team-b", "sharer", "main", "nvidia.com/gpu", uuid(2)+"::1"),
		shared,
		podresourcestest.Pod("team-c", "mig-user", "main", "nvidia.com/mig-1g.10gb", "MIG-not-on-this-node"),
		podresourcestest.Pod("team-c", "nic-user", "main", "example.com/nic", uuid(4)),
	)

	r.agent.CollectOnce(context.Background())
	p := r.page(t)
	if got := p[gpuagent.MetricGPUSMActive]; len(got) != 0 {
		t.Errorf("SM activity after one GPM sample: %v", got)
	}
	r.clock.step(time.Second)
	r.agent.CollectOnce(context.Background())
	p = r.page(t)

	want := map[string][]sample{
		gpuagent.MetricUp:             {{"backend=testing-fake-nvml/h100-busy,reason=ok", 1}},
		gpuagent.MetricPodResourcesUp: {{"", 1}},
		gpuagent.MetricGPUs:           {{"", 8}},
		gpuagent.MetricPodGPUs: {
			{"namespace=default,pod=vllm-0", 2},
			{"namespace=default,pod=vllm-1", 1},
			{"namespace=team-b,pod=sharer", 1},
			{"namespace=team-b,pod=two-containers", 1},
			{"namespace=team-c,pod=mig-user", 1},
		},
		gpuagent.MetricCollectDuration:   p[gpuagent.MetricCollectDuration], // any value
		gpuagent.MetricLastCollectUnixTS: {{"", 1_700_000_001}},
	}
	var util, sm []sample
	held := map[int][][3]string{
		0: {{"default", "vllm-0", "server"}},
		1: {{"default", "vllm-0", "server"}},
		2: {{"default", "vllm-1", "server"}, {"team-b", "sharer", "main"}},
		3: {{"team-b", "two-containers", "a"}, {"team-b", "two-containers", "b"}},
		4: {{}}, 5: {{}}, 6: {{}}, 7: {{}},
	}
	for i := range 8 {
		for _, h := range held[i] {
			util = append(util, sample{gpuLabels(h[0], h[1], h[2], i), 1})
			sm = append(sm, sample{gpuLabels(h[0], h[1], h[2], i), 0.38})
		}
	}
	sort.Slice(util, func(i, j int) bool { return util[i].labels < util[j].labels })
	sort.Slice(sm, func(i, j int) bool { return sm[i].labels < sm[j].labels })
	want[gpuagent.MetricGPUUtilization] = util
	want[gpuagent.MetricGPUSMActive] = sm
	got := map[string][]sample{}
	for name := range want {
		got[name] = p[name]
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(sample{})); diff != "" {
		t.Errorf("page (-want +got):\n%s", diff)
	}
	if n := len(p[gpuagent.MetricGPUMemoryUsed]); n != len(util) {
		t.Errorf("%d memory series, want %d", n, len(util))
	}
	for _, s := range p[gpuagent.MetricGPUMemoryUsed] {
		if s.value != 72<<30 {
			t.Errorf("memory used %v: %v", s.labels, s.value)
		}
	}
}

// Without libnvidia-ml the agent serves up 0 with the reason, keeps serving,
// and retries NVML with a doubling delay up to the maximum.
func TestAgentNoLibrary(t *testing.T) {
	r := newRig(t, "no-library")
	r.pods.SetPods(podresourcestest.Pod("default", "vllm-0", "server", "nvidia.com/gpu", "GPU-x"))
	var readAt []time.Duration
	for tick := range 40 {
		before := r.reader.reads
		r.agent.CollectOnce(context.Background())
		if r.reader.reads != before {
			readAt = append(readAt, time.Duration(tick)*time.Second)
		}
		r.clock.step(time.Second)
	}
	// Delays 1, 2, 4, then 5 (the maximum) seconds.
	want := []time.Duration{0, 1, 3, 7, 12, 17, 22, 27, 32, 37}
	for i := range want {
		want[i] *= time.Second
	}
	if diff := cmp.Diff(want, readAt); diff != "" {
		t.Errorf("NVML read times (-want +got):\n%s", diff)
	}
	p := r.page(t)
	if diff := cmp.Diff([]sample{{"backend=testing-fake-nvml/no-library,reason=library_not_found", 0}}, p[gpuagent.MetricUp], cmp.AllowUnexported(sample{})); diff != "" {
		t.Errorf("up (-want +got):\n%s", diff)
	}
	if len(p[gpuagent.MetricGPUUtilization]) != 0 || len(p[gpuagent.MetricGPUMemoryUsed]) != 0 {
		t.Errorf("GPU series without NVML: %v", p)
	}
	// The allocation is still known from the kubelet.
	if diff := cmp.Diff([]sample{{"namespace=default,pod=vllm-0", 1}}, p[gpuagent.MetricPodGPUs], cmp.AllowUnexported(sample{})); diff != "" {
		t.Errorf("pod GPUs (-want +got):\n%s", diff)
	}
}

func TestAgentPodResourcesDown(t *testing.T) {
	r := newRig(t, "dgxa100")
	r.pods.SetPods(podresourcestest.Pod("default", "vllm-0", "server", "nvidia.com/gpu", nvml.FakeUUID("dgxa100", 0)))
	r.pods.Close() // the kubelet is gone
	r.agent.CollectOnce(context.Background())
	p := r.page(t)
	if diff := cmp.Diff([]sample{{"", 0}}, p[gpuagent.MetricPodResourcesUp], cmp.AllowUnexported(sample{})); diff != "" {
		t.Errorf("pod resources up (-want +got):\n%s", diff)
	}
	if n := len(p[gpuagent.MetricGPUUtilization]); n != 8 {
		t.Errorf("%d utilization series, want 8", n)
	}
	for _, s := range p[gpuagent.MetricGPUUtilization] {
		if strings.Contains(s.labels, "pod=vllm") || s.value != 0.35 {
			t.Errorf("series %v", s)
		}
	}
	if len(p[gpuagent.MetricPodGPUs]) != 0 || len(p[gpuagent.MetricGPUSMActive]) != 0 {
		t.Errorf("pods or SM activity without a kubelet / GPM: %v", p)
	}
}

func TestAgentHealthz(t *testing.T) {
	r := newRig(t, "dgxa100")
	get := func() int {
		resp, err := http.Get(r.http.URL + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	steps := []struct {
		name    string
		collect bool
		step    time.Duration
		want    int
	}{
		{"before the first collection", false, 0, 200},
		{"just collected", true, 0, 200},
		{"10s later", false, 10 * time.Second, 200},
		{"11s later: loop stuck", false, time.Second, 503},
		{"collected again", true, 0, 200},
	}
	for _, s := range steps {
		r.clock.step(s.step)
		if s.collect {
			r.agent.CollectOnce(context.Background())
		}
		if got := get(); got != s.want {
			t.Errorf("%s: /healthz %d, want %d", s.name, got, s.want)
		}
	}
}

func TestGPUUUID(t *testing.T) {
	for in, want := range map[string]string{
		"GPU-8a1c2d3e-0000-1111-2222-333344445555":    "GPU-8a1c2d3e-0000-1111-2222-333344445555",
		"GPU-8a1c2d3e-0000-1111-2222-333344445555::3": "GPU-8a1c2d3e-0000-1111-2222-333344445555",
		"MIG-0a1b2c3d-0000-1111-2222-333344445555":    "MIG-0a1b2c3d-0000-1111-2222-333344445555",
		"": "",
	} {
		if got := gpuagent.GPUUUID(in); got != want {
			t.Errorf("GPUUUID(%q) = %q, want %q", in, got, want)
		}
	}
}
