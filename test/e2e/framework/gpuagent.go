// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/nodeagent/nvml"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/nodeagent/podresources/podresourcestest"
)

// The stand-in node's GPUs. The kubelet stand-in plays the NVIDIA device
// plugin and the kubelet's pod-resources API for them; a gpu-agent pod run
// with --testing-fake-nvml=FakeGPUProfile reads the same eight devices.
const (
	// GPUAgentImage is the image the kubelet stand-in runs as the gpu-agent.
	GPUAgentImage = "gpu-agent"
	// GPUAgentLabel is the label (key=value) the adapter finds gpu-agent
	// pods by: its default --gpu-agent-selector.
	GPUAgentLabel = "app.kubernetes.io/name=inference-metrics-adapter-gpu-agent"
	// FakeGPUProfile is the fake NVML profile of the node: eight H100s
	// that NVML reads as 100% busy with SM activity 0.38.
	FakeGPUProfile = "h100-busy"
	// FakeGPUs is how many GPUs the node has.
	FakeGPUs = 8
	// GPUResource is the extended resource pods request GPUs by.
	GPUResource = corev1.ResourceName("nvidia.com/gpu")
	// NodeName is the stand-in node's name. The adapter believes a gpu-agent
	// only about pods on the agent's own node, so the GPU scenario binds its
	// pods (spec.nodeName) to this node; the kubelet stand-in then finishes
	// their deletion as a kubelet would.
	NodeName = "e2e-node"
)

// defaultGPUAgentPort is the gpu-agent's port when its container declares none.
const defaultGPUAgentPort = 9410

// gpuDevices hands out the node's fake GPUs to the containers that request
// GPUResource, and serves the allocations on a real pod-resources gRPC
// server, as the device plugin and the kubelet do together.
type gpuDevices struct {
	node string // the node's name, for messages
	srv  *podresourcestest.Server
	// profile is the fake NVML profile the node's agent runs, which names
	// the GPUs' UUIDs; mapFile, for the "sim" profile, is where the
	// UUID -> simulator URL map is written (see UseSimGPUs).
	profile string
	mapFile string

	mu   sync.Mutex
	free []int                                   // device indexes not allocated
	held map[string]*podresourcesv1.PodResources // by namespace/name
	idx  map[string][]int                        // device indexes by namespace/name
	urls map[string]string                       // the pod's server URL by namespace/name
}

// startGPUDevices serves node's pod-resources API on dir/kubelet.sock.
func startGPUDevices(node, dir string) (*gpuDevices, error) {
	srv, err := podresourcestest.Start(filepath.Join(dir, "kubelet.sock"))
	if err != nil {
		return nil, fmt.Errorf("kubelet stand-in: node %s: pod-resources server: %w", node, err)
	}
	g := &gpuDevices{node: node, srv: srv, profile: FakeGPUProfile, held: map[string]*podresourcesv1.PodResources{}, idx: map[string][]int{}, urls: map[string]string{}}
	for i := range FakeGPUs {
		g.free = append(g.free, i)
	}
	return g, nil
}

// socket is the pod-resources socket a gpu-agent connects to.
func (g *gpuDevices) socket() string { return g.srv.Socket() }

// podGPURequests returns, per container, the GPUs it requests (limits).
func podGPURequests(pod *corev1.Pod) (map[string]int, int) {
	out := map[string]int{}
	total := 0
	for _, c := range pod.Spec.Containers {
		if q, ok := c.Resources.Limits[GPUResource]; ok && q.Value() > 0 {
			out[c.Name] = int(q.Value())
			total += int(q.Value())
		}
	}
	return out, total
}

// allocate gives pod's containers the GPUs they request, lowest free index
// first, and publishes them. It returns the UUIDs, none when the pod
// requests no GPUs, and an error when too few are free (the pod then
// stays Pending, as a kubelet would refuse to admit it). url is the pod's
// server, which the "sim" profile's GPUs follow.
func (g *gpuDevices) allocate(key string, pod *corev1.Pod, url string) ([]string, error) {
	req, total := podGPURequests(pod)
	if total == 0 {
		return nil, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.held[key]; ok {
		return nil, fmt.Errorf("kubelet stand-in: pod %s already holds GPUs", key)
	}
	if total > len(g.free) {
		return nil, fmt.Errorf("kubelet stand-in: pod %s requests %d %s, %d of node %s's %d free", key, total, GPUResource, len(g.free), g.node, FakeGPUs)
	}
	pr := &podresourcesv1.PodResources{Namespace: pod.Namespace, Name: pod.Name}
	var uuids []string
	var taken []int
	for _, c := range pod.Spec.Containers {
		n := req[c.Name]
		if n == 0 {
			continue
		}
		ids := make([]string, 0, n)
		for _, i := range g.free[:n] {
			ids = append(ids, nvml.FakeUUID(g.profile, i))
		}
		taken = append(taken, g.free[:n]...)
		g.free = g.free[n:]
		uuids = append(uuids, ids...)
		pr.Containers = append(pr.Containers, &podresourcesv1.ContainerResources{
			Name:    c.Name,
			Devices: []*podresourcesv1.ContainerDevices{{ResourceName: string(GPUResource), DeviceIds: ids}},
		})
	}
	g.held[key] = pr
	g.idx[key] = taken
	g.urls[key] = url
	if err := g.publishLocked(); err != nil {
		return nil, err
	}
	return uuids, nil
}

// release returns key's GPUs to the free pool; a pod holding none is a no-op.
func (g *gpuDevices) release(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.held[key]; !ok {
		return
	}
	g.free = append(g.free, g.idx[key]...)
	sort.Ints(g.free)
	delete(g.held, key)
	delete(g.idx, key)
	delete(g.urls, key)
	if err := g.publishLocked(); err != nil {
		klog.ErrorS(err, "kubelet stand-in: publish GPU allocations", "pod", key, "node", g.node)
	}
}

func (g *gpuDevices) publishLocked() error {
	keys := make([]string, 0, len(g.held))
	for k := range g.held {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	pods := make([]*podresourcesv1.PodResources, 0, len(keys))
	for _, k := range keys {
		pods = append(pods, g.held[k])
	}
	g.srv.SetPods(pods...)
	if g.mapFile == "" {
		return nil
	}
	m := map[string]string{}
	for key, idx := range g.idx {
		for _, i := range idx {
			m[nvml.FakeUUID(g.profile, i)] = g.urls[key]
		}
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode the sim GPU map: %w", err)
	}
	tmp := g.mapFile + ".tmp"
	if err := os.WriteFile(tmp, raw, 0o644); err != nil {
		return fmt.Errorf("write the sim GPU map: %w", err)
	}
	if err := os.Rename(tmp, g.mapFile); err != nil {
		return fmt.Errorf("write the sim GPU map: %w", err)
	}
	return nil
}

func (g *gpuDevices) close() { g.srv.Close() }
