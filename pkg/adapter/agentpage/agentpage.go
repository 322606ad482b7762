// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Package agentpage parses the gpu-agent's /metrics page (the contract in
// docs/gpu-agent.md) into per-pod GPU signals for the adapter: per pod, the
// number of GPUs, the mean utilization and mean SM activity over its GPUs,
// and the memory used summed over them. A value no GPU of the pod reported is
// absent, never 0. The parser is a targeted line scanner: it reads only the
// series it needs and, in steady state, allocates nothing.
package agentpage

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/parse"
)

// The series read from the page (see docs/gpu-agent.md).
const (
	metricUp      = "gpu_agent_up"
	metricUtil    = "gpu_agent_gpu_utilization_ratio"
	metricSM      = "gpu_agent_gpu_sm_active_ratio"
	metricMemUsed = "gpu_agent_gpu_memory_used_bytes"
	metricPodGPUs = "gpu_agent_pod_gpus"
)

// Bounds on one page, far above what a node's agent serves (a node holds a
// few hundred pods and at most a few hundred GPU devices, each shared by a
// few pods): they keep the cost of a page that passes the body size limit
// small, since the parser's lookups are linear so as not to allocate.
const (
	// MaxPods is the most distinct pods one page may name.
	MaxPods = 1024
	// MaxGPUSeries is the most per-pod GPU series (one per GPU, pod and
	// signal) one page may hold.
	MaxGPUSeries = 8192
)

// ErrNotAgentPage is returned for a page without a gpu_agent_up series.
var ErrNotAgentPage = errors.New("not a gpu-agent page: no gpu_agent_up series")

// PodGPU is what the agent's page says about one pod's GPUs. GPUs is the
// number of GPUs (or MIG devices) the kubelet allocated to the pod. Values
// holds the GPU signals (catalog.GPUUtilization, catalog.GPUSMActive,
// catalog.GPUMemoryUsedBytes) that Has says are present.
type PodGPU struct {
	Namespace string
	Pod       string
	GPUs      int
	Values    [catalog.Count]float64
	Has       catalog.Set
}

// Value returns the value of s and whether the page had it for the pod.
func (p *PodGPU) Value(s catalog.Signal) (float64, bool) {
	if s >= catalog.Count || !p.Has.Has(s) {
		return 0, false
	}
	return p.Values[s], true
}

// Status is what the page says about the agent itself.
type Status struct {
	// Up is gpu_agent_up: whether the agent's last GPU read succeeded.
	Up bool
	// Reason is the reason label: "ok", "library_not_found", ...
	Reason string
	// Backend is "nvml", or "testing-fake-nvml/<profile>" for a fake.
	Backend string
}

// Parse parses one page with a new Parser.
func Parse(page []byte) ([]PodGPU, error) {
	var p Parser
	return p.Parse(page)
}

// Parser parses agent pages, reusing its memory from call to call. The
// zero value is ready to use; a Parser is not safe for concurrent use.
type Parser struct {
	out    []PodGPU
	acc    []podAcc
	seen   []seenGPU
	status Status
	intern []string
	labels [5][]byte
	unesc  []byte
}

// podAcc accumulates the values of one pod.
type podAcc struct {
	sum      [catalog.Count]float64
	n        [catalog.Count]int
	gpus     int
	hasGPUs  bool
	distinct int
}

// seenGPU records that a GPU's series for a pod and signal was counted, so a
// GPU shared by two containers of the pod counts once.
type seenGPU struct {
	pod    int
	signal catalog.Signal
	uuid   []byte
}

// Status returns what the last parsed page said about the agent.
func (p *Parser) Status() Status { return p.status }

// Parse parses page and returns one PodGPU per pod the page names, sorted by
// namespace and pod. The returned slice is owned by the Parser and valid
// until its next call; copy what you keep. A malformed line of one of the
// series it reads fails the whole page with an error naming the line.
func (p *Parser) Parse(page []byte) ([]PodGPU, error) {
	p.out, p.acc, p.seen, p.unesc = p.out[:0], p.acc[:0], p.seen[:0], p.unesc[:0]
	p.status = Status{}
	sawUp := false
	for lineNo := 1; len(page) > 0; lineNo++ {
		var line []byte
		if i := bytes.IndexByte(page, '\n'); i >= 0 {
			line, page = page[:i], page[i+1:]
		} else {
			line, page = page, nil
		}
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		name := line
		if i := bytes.IndexAny(line, "{ "); i >= 0 {
			name = line[:i]
		}
		const (
			up = iota
			podGPUs
			gpuSignal
		)
		var kind int
		var sig catalog.Signal
		switch string(name) {
		case metricUp:
			kind = up
		case metricPodGPUs:
			kind = podGPUs
		case metricUtil:
			kind, sig = gpuSignal, catalog.GPUUtilization
		case metricSM:
			kind, sig = gpuSignal, catalog.GPUSMActive
		case metricMemUsed:
			kind, sig = gpuSignal, catalog.GPUMemoryUsedBytes
		default:
			continue
		}
		v, err := p.scan(line[len(name):])
		if err != nil {
			return nil, fmt.Errorf("agent page line %d (%s): %w", lineNo, name, err)
		}
		ns, pod, uuid := p.labels[0], p.labels[1], p.labels[2]
		switch kind {
		case up:
			sawUp = true
			p.status = Status{Up: v == 1, Reason: p.str(p.labels[4]), Backend: p.str(p.labels[3])}
		case podGPUs:
			if len(pod) == 0 {
				continue
			}
			if v < 0 || v != math.Trunc(v) || v > math.MaxInt32 {
				return nil, fmt.Errorf("agent page line %d (%s): GPU count %v is not a count", lineNo, name, v)
			}
			i, err := p.pod(ns, pod)
			if err != nil {
				return nil, fmt.Errorf("agent page line %d (%s): %w", lineNo, name, err)
			}
			p.acc[i].gpus, p.acc[i].hasGPUs = int(v), true
		default:
			if len(pod) == 0 || math.IsNaN(v) {
				continue // a GPU no pod holds, or no value
			}
			if v < 0 || math.IsInf(v, 0) || sig != catalog.GPUMemoryUsedBytes && v > 1 {
				return nil, fmt.Errorf("agent page line %d (%s): value %v out of range", lineNo, name, v)
			}
			i, err := p.pod(ns, pod)
			if err != nil {
				return nil, fmt.Errorf("agent page line %d (%s): %w", lineNo, name, err)
			}
			counted, err := p.counted(i, sig, uuid)
			if err != nil {
				return nil, fmt.Errorf("agent page line %d (%s): %w", lineNo, name, err)
			}
			if counted {
				continue
			}
			a := &p.acc[i]
			a.sum[sig] += v
			a.n[sig]++
			if math.IsInf(a.sum[sig], 0) {
				return nil, fmt.Errorf("agent page line %d (%s): the sum over the pod's GPUs overflows", lineNo, name)
			}
		}
	}
	if !sawUp {
		return nil, ErrNotAgentPage
	}
	for i := range p.out {
		o, a := &p.out[i], &p.acc[i]
		o.GPUs = a.gpus
		if !a.hasGPUs {
			o.GPUs = a.distinct
		}
		for _, s := range [...]catalog.Signal{catalog.GPUUtilization, catalog.GPUSMActive, catalog.GPUMemoryUsedBytes} {
			if a.n[s] == 0 {
				continue
			}
			v := a.sum[s]
			if s.Aggregation() == catalog.Mean {
				v /= float64(a.n[s])
			}
			o.Values[s] = v
			o.Has = o.Has.Add(s)
		}
	}
	slices.SortFunc(p.out, func(a, b PodGPU) int {
		if c := cmp.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return cmp.Compare(a.Pod, b.Pod)
	})
	return p.out, nil
}

// pod returns the index of the pod in p.out, adding it if new; past
// MaxPods it fails.
func (p *Parser) pod(ns, pod []byte) (int, error) {
	for i := range p.out {
		if p.out[i].Pod == string(pod) && p.out[i].Namespace == string(ns) {
			return i, nil
		}
	}
	if len(p.out) >= MaxPods {
		return 0, fmt.Errorf("the page names more than %d pods", MaxPods)
	}
	p.out = append(p.out, PodGPU{Namespace: p.str(ns), Pod: p.str(pod)})
	p.acc = append(p.acc, podAcc{})
	return len(p.out) - 1, nil
}

// counted reports whether the GPU's series for the pod and signal was
// already counted, and records it if not; past MaxGPUSeries it fails.
func (p *Parser) counted(pod int, sig catalog.Signal, uuid []byte) (bool, error) {
	newGPU := true
	for _, s := range p.seen {
		if s.pod == pod && bytes.Equal(s.uuid, uuid) {
			if s.signal == sig {
				return true, nil
			}
			newGPU = false
		}
	}
	if len(p.seen) >= MaxGPUSeries {
		return false, fmt.Errorf("the page holds more than %d per-pod GPU series", MaxGPUSeries)
	}
	if newGPU {
		p.acc[pod].distinct++
	}
	p.seen = append(p.seen, seenGPU{pod: pod, signal: sig, uuid: uuid})
	return false, nil
}

// str returns b as a string, reusing a string from earlier pages when one is
// equal, so steady-state parsing does not allocate.
func (p *Parser) str(b []byte) string {
	for _, s := range p.intern {
		if s == string(b) {
			return s
		}
	}
	if len(p.intern) >= 4096 {
		p.intern = p.intern[:0]
	}
	s := string(b)
	p.intern = append(p.intern, s)
	return s
}

// The labels scan keeps, by position in Parser.labels.
var wantedLabels = [...]string{"namespace", "pod", "gpu_uuid", "backend", "reason"}

// maxLabelBytes bounds each label value, as pkg/adapter/parse bounds a model
// server's (far above the names, UUIDs and models an agent writes).
const maxLabelBytes = parse.DefaultMaxLabelValueBytes

// scan reads `{labels} value [timestamp]` into p.labels and returns the
// value. Label values are read (unquoted, bounded) and the value is read as
// pkg/adapter/parse reads a model server's page; they stay slices of the page unless
// they hold escapes.
func (p *Parser) scan(rest []byte) (float64, error) {
	for i := range p.labels {
		p.labels[i] = nil
	}
	if len(rest) > 0 && rest[0] == '{' {
		rest = rest[1:]
		for {
			rest = bytes.TrimLeft(rest, " ")
			if len(rest) > 0 && rest[0] == '}' {
				rest = rest[1:]
				break
			}
			eq := bytes.IndexByte(rest, '=')
			if eq <= 0 || eq+1 >= len(rest) || rest[eq+1] != '"' {
				return 0, errors.New("malformed label")
			}
			lname := bytes.TrimSpace(rest[:eq])
			var val []byte
			var err error
			// p.unesc may move when it grows; earlier unescaped labels of
			// this page keep pointing into the old array, which stays
			// valid, and Unquote caps each value so that later appends do
			// not write over it.
			val, rest, p.unesc, err = parse.Unquote(rest[eq+2:], p.unesc, maxLabelBytes)
			if err != nil {
				return 0, err
			}
			for i, w := range wantedLabels {
				if string(lname) == w {
					p.labels[i] = val
				}
			}
			rest = bytes.TrimLeft(rest, " ")
			if len(rest) > 0 && rest[0] == ',' {
				rest = rest[1:]
			} else if len(rest) == 0 || rest[0] != '}' {
				return 0, errors.New("malformed label set")
			}
		}
	}
	return parse.ParseValue(rest)
}
