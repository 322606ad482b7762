// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Package gpuagent owns the node agent's collection loop and its /metrics
// page: every interval it reads the node's GPUs (through pkg/nodeagent/nvml), asks the
// kubelet which pod holds which GPU (through pkg/nodeagent/podresources), and keeps the
// joined result as the snapshot the page is rendered from. The page contract
// (metric names and labels) is documented in docs/gpu-agent.md and parsed by
// pkg/adapter/agentpage. NewServer and LimitListener bound what one HTTP client can
// hold: time limits, header size, and connections served at once.
package gpuagent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/klog/v2"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/nodeagent/nvml"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/nodeagent/podresources"
)

// GPUReader reads the node's GPUs; *nvml.Reader is one.
type GPUReader interface {
	Read(dst []nvml.GPU) ([]nvml.GPU, error)
}

var _ GPUReader = (*nvml.Reader)(nil)

// Config is what an Agent needs.
type Config struct {
	GPUs GPUReader
	// Backend names the GPUReader on the page and in the log: "nvml", or
	// "testing-fake-nvml/<profile>".
	Backend string
	Pods    podresources.Lister
	// ResourceNames are the extended resources whose device IDs are GPU or
	// MIG UUIDs; an entry ending in "*" matches by prefix.
	ResourceNames []string
	// Interval is the time between collections; also the first retry delay
	// after NVML fails.
	Interval time.Duration
	// MaxRetryInterval bounds the doubling delay between NVML retries.
	MaxRetryInterval time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Agent collects GPU activity and attribution and serves them as
// Prometheus metrics.
type Agent struct {
	cfg   Config
	descs descs

	// Owned by the collecting goroutine.
	gpuBuf     []nvml.GPU
	nextRead   time.Time
	retryDelay time.Duration
	lastGPUs   gpuState
	lastPodsOK bool
	loggedErrs map[string]string // GPU UUID -> last logged error

	mu   sync.RWMutex
	snap *snapshot

	tickMu   sync.Mutex
	lastTick time.Time
}

// gpuState is the outcome of the last GPU read.
type gpuState struct {
	up     bool
	reason string
	gpus   []nvml.GPU
}

// attachment is one container that holds a GPU.
type attachment struct{ namespace, pod, container string }

type podKey struct{ namespace, pod string }

// snapshot is what one collection saw; the page is rendered from it.
type snapshot struct {
	gpus     gpuState
	podsUp   bool
	attached map[string][]attachment // by GPU UUID
	podGPUs  map[podKey]int
	took     time.Duration
	at       time.Time
}

// New returns an Agent; call Run to start collecting.
func New(cfg Config) *Agent {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	a := &Agent{cfg: cfg, descs: newDescs(), loggedErrs: map[string]string{}, lastPodsOK: true}
	a.lastGPUs.reason = "starting"
	a.snap = &snapshot{gpus: a.lastGPUs}
	return a
}

// Run collects at once and then every Interval until ctx is done.
func (a *Agent) Run(ctx context.Context) error {
	t := time.NewTicker(a.cfg.Interval)
	defer t.Stop()
	for {
		a.CollectOnce(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// CollectOnce runs one collection: it reads the GPUs (unless NVML is in its
// retry delay), lists the pod resources, and publishes the joined snapshot.
func (a *Agent) CollectOnce(ctx context.Context) {
	start := a.cfg.Now()
	a.tickMu.Lock()
	a.lastTick = start
	a.tickMu.Unlock()

	if !start.Before(a.nextRead) {
		a.readGPUs(start)
	}
	attached, podGPUs, podsOK := a.listPods(ctx)

	s := &snapshot{
		gpus:     a.lastGPUs,
		podsUp:   podsOK,
		attached: attached,
		podGPUs:  podGPUs,
		at:       start,
	}
	s.took = a.cfg.Now().Sub(start)
	a.mu.Lock()
	a.snap = s
	a.mu.Unlock()
}

func (a *Agent) readGPUs(now time.Time) {
	gpus, err := a.cfg.GPUs.Read(a.gpuBuf)
	a.gpuBuf = gpus
	if err != nil {
		reason := nvml.ReasonOf(err)
		if a.retryDelay == 0 {
			a.retryDelay = a.cfg.Interval
		} else {
			a.retryDelay = min(2*a.retryDelay, a.cfg.MaxRetryInterval)
		}
		a.nextRead = now.Add(a.retryDelay)
		if a.lastGPUs.up || a.lastGPUs.reason != reason {
			klog.ErrorS(err, "Cannot read GPUs; serving gpu_agent_up 0 and retrying",
				"backend", a.cfg.Backend, "reason", reason, "hint", hints[reason], "retryIn", a.retryDelay)
		} else {
			klog.V(2).InfoS("GPU read failed again", "reason", reason, "retryIn", a.retryDelay)
		}
		a.lastGPUs = gpuState{reason: reason}
		return
	}
	if !a.lastGPUs.up {
		klog.InfoS("Reading GPUs", "backend", a.cfg.Backend, "devices", len(gpus))
	}
	// A copy: the buffer is reused by the next read while the page renders.
	a.lastGPUs = gpuState{up: true, reason: "ok", gpus: append([]nvml.GPU(nil), gpus...)}
	a.retryDelay, a.nextRead = 0, time.Time{}
	for _, g := range gpus {
		if a.loggedErrs[g.UUID] != g.Err {
			if g.Err != "" {
				klog.ErrorS(errors.New(g.Err), "GPU read incomplete; its missing values are left out", "gpu", g.UUID, "index", g.Index)
			}
			a.loggedErrs[g.UUID] = g.Err
		}
	}
}

// hints tell the operator what a failure reason usually means.
var hints = map[string]string{
	nvml.ReasonLibraryNotFound: "libnvidia-ml.so.1 cannot be loaded: run the agent on a GPU node with the NVIDIA driver, through the NVIDIA container runtime (or mount the library and set --nvml-library-path)",
	nvml.ReasonDriverNotLoaded: "the NVIDIA kernel driver is not loaded on this node",
	nvml.ReasonNoPermission:    "no permission to open the GPU devices: give the container access to /dev/nvidia* (NVIDIA runtime, NVIDIA_VISIBLE_DEVICES=all)",
	nvml.ReasonNoGPUs:          "NVML sees no GPUs: is NVIDIA_VISIBLE_DEVICES=all set for the agent's container?",
	nvml.ReasonInitFailed:      "NVML failed to initialize; see the error",
	nvml.ReasonReadFailed:      "NVML failed to list the GPUs; it is initialized again on the next try",
}

// listPods returns, per GPU UUID, the containers holding it, and per pod the
// number of distinct GPUs it holds.
func (a *Agent) listPods(ctx context.Context) (map[string][]attachment, map[podKey]int, bool) {
	allocs, err := a.cfg.Pods.List(ctx)
	if err != nil {
		if a.lastPodsOK {
			klog.ErrorS(err, "Cannot list pod resources; GPUs are served without pods until the kubelet answers")
		}
		a.lastPodsOK = false
		return nil, nil, false
	}
	if !a.lastPodsOK {
		klog.InfoS("Listing pod resources again")
	}
	a.lastPodsOK = true
	attached := map[string][]attachment{}
	podGPUs := map[podKey]int{}
	for _, al := range allocs {
		if !a.matchResource(al.ResourceName) {
			continue
		}
		at := attachment{al.Namespace, al.Pod, al.Container}
		for _, id := range al.DeviceIDs {
			uuid := GPUUUID(id)
			if holders := attached[uuid]; !containsPod(holders, at.namespace, at.pod) {
				podGPUs[podKey{at.namespace, at.pod}]++
			}
			if holders := attached[uuid]; !contains(holders, at) {
				attached[uuid] = append(holders, at)
			}
		}
	}
	return attached, podGPUs, true
}

func (a *Agent) matchResource(name string) bool {
	for _, r := range a.cfg.ResourceNames {
		if p, ok := strings.CutSuffix(r, "*"); ok && strings.HasPrefix(name, p) || r == name {
			return true
		}
	}
	return false
}

// GPUUUID returns the GPU or MIG UUID a device-plugin device ID names. The
// NVIDIA device plugin uses the UUID itself, or "<UUID>::<n>" for the n-th
// replica of a GPU shared by time-slicing or MPS.
func GPUUUID(deviceID string) string {
	if i := strings.Index(deviceID, "::"); i >= 0 {
		return deviceID[:i]
	}
	return deviceID
}

func contains(as []attachment, a attachment) bool {
	for _, x := range as {
		if x == a {
			return true
		}
	}
	return false
}

func containsPod(as []attachment, namespace, pod string) bool {
	for _, x := range as {
		if x.namespace == namespace && x.pod == pod {
			return true
		}
	}
	return false
}

// Healthy reports an error when the collection loop has not run for three
// intervals (and at least ten seconds).
func (a *Agent) Healthy() error {
	a.tickMu.Lock()
	last := a.lastTick
	a.tickMu.Unlock()
	if last.IsZero() {
		return nil
	}
	limit := a.staleAfter()
	if age := a.cfg.Now().Sub(last); age > limit {
		return fmt.Errorf("last collection started %s ago (limit %s)", age.Round(time.Millisecond), limit)
	}
	return nil
}

// staleAfter is how old the last collection's start may be before the
// loop counts as stuck: /healthz fails, and the page leaves the values out.
func (a *Agent) staleAfter() time.Duration { return max(3*a.cfg.Interval, 10*time.Second) }

// Handler serves /metrics from reg (which must hold the Agent) and /healthz.
func (a *Agent) Handler(reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if err := a.Healthy(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}
