// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package nvml

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// FOR TESTING ONLY: the "sim" fake backend. Its eight GPUs read what the
// inference-sim process holding each of them did: the simulator's
// GET /sim/busy gives its cumulative busy time, and NVML's utilization is
// the busy fraction between two reads (the share of the period in which a
// kernel ran), GPM SM activity the busy time weighted by each step's
// fullness over the same period.

// FakeSimProfile is the fake profile whose GPUs follow simulators.
const FakeSimProfile = "sim"

// FakeSimGPUsEnv names the environment variable that holds the path of the
// sim backend's device map: a JSON object from GPU UUID
// (FakeUUID(FakeSimProfile, i)) to the base URL of the simulator holding
// it. The file is read at every sample, so whoever allocates GPUs rewrites
// it; a GPU absent from it is idle (0).
const FakeSimGPUsEnv = "IMA_TESTING_FAKE_NVML_SIM_GPUS"

// simBusy is the body of a simulator's GET /sim/busy, in simulated seconds.
type simBusy struct {
	Now    float64 `json:"now_seconds"`
	Busy   float64 `json:"busy_seconds"`
	SMBusy float64 `json:"sm_busy_seconds"`
}

// simDevices reads the device map and the simulators' counters.
type simDevices struct {
	mapPath string
	client  *http.Client

	mu   sync.Mutex
	last map[string]simMark // the previous utilization reading, by UUID
}

// simMark is one reading of a GPU: the simulator it came from and its
// counters (zero for an unheld GPU).
type simMark struct {
	url string
	b   simBusy
}

// read returns the current counters of the GPU uuid: its simulator's, or
// zeros and an empty URL when no simulator holds it.
func (d *simDevices) read(uuid string) (simMark, error) {
	raw, err := os.ReadFile(d.mapPath)
	if err != nil && !os.IsNotExist(err) {
		return simMark{}, fmt.Errorf("read device map: %w", err)
	}
	m := map[string]string{}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &m); err != nil {
			return simMark{}, fmt.Errorf("parse device map %s: %w", d.mapPath, err)
		}
	}
	url, ok := m[uuid]
	if !ok {
		return simMark{}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/sim/busy", nil)
	if err != nil {
		return simMark{}, err
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return simMark{}, fmt.Errorf("read %s/sim/busy: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return simMark{}, fmt.Errorf("read %s/sim/busy: status %d", url, resp.StatusCode)
	}
	var b simBusy
	if err := json.NewDecoder(resp.Body).Decode(&b); err != nil {
		return simMark{}, fmt.Errorf("decode %s/sim/busy: %w", url, err)
	}
	return simMark{url: url, b: b}, nil
}

// fraction is the share of the time from prev to cur that value (busy or
// SM-busy) grew by, in 0..1: 0 for an unheld GPU, and since the start when
// prev came from another simulator (or none) or the simulator restarted.
func fraction(prev, cur simMark, value func(simBusy) float64) float64 {
	if cur.url == "" || cur.b.Now <= 0 {
		return 0
	}
	if prev.url != cur.url || prev.b.Now >= cur.b.Now || value(prev.b) > value(cur.b) {
		prev = simMark{}
	}
	f := (value(cur.b) - value(prev.b)) / (cur.b.Now - prev.b.Now)
	return min(max(f, 0), 1)
}

func busyOf(b simBusy) float64   { return b.Busy }
func smBusyOf(b simBusy) float64 { return b.SMBusy }

// utilization reads the GPU's busy fraction since its previous reading.
func (d *simDevices) utilization(uuid string) (float64, error) {
	cur, err := d.read(uuid)
	if err != nil {
		return 0, err
	}
	d.mu.Lock()
	prev := d.last[uuid]
	d.last[uuid] = cur
	d.mu.Unlock()
	return fraction(prev, cur, busyOf), nil
}

// simSample is a GPM sample of the sim backend: the device's reading when
// it was taken.
type simSample struct {
	device gonvml.Device
	mark   simMark
}

var _ gonvml.GpmSample = (*simSample)(nil)

// Free implements gonvml.GpmSample.
func (s *simSample) Free() gonvml.Return { return gonvml.SUCCESS }

// Get implements gonvml.GpmSample; samples are taken through the device's
// GpmSampleGet, which knows the device's simulator.
func (s *simSample) Get(gonvml.Device) gonvml.Return { return gonvml.ERROR_NOT_SUPPORTED }

// MigGet implements gonvml.GpmSample; the sim backend has no MIG devices.
func (s *simSample) MigGet(gonvml.Device, int) gonvml.Return { return gonvml.ERROR_NOT_SUPPORTED }

// newSimFake builds the sim backend: eight A100s (go-nvml's DGX A100 mock)
// whose utilization and SM activity follow the simulators in the map at
// mapPath, with GPM supported so that SM activity is read (a real A100
// reports it through DCGM's profiling metrics rather than GPM).
func newSimFake(mapPath string) gonvml.Interface {
	d := &simDevices{mapPath: mapPath, client: &http.Client{Timeout: 2 * time.Second}, last: map[string]simMark{}}
	s := dgxa100.New()
	for i, dv := range s.Devices {
		dev := dv.(*server.Device)
		uuid := FakeUUID(FakeSimProfile, i)
		dev.UUID = uuid
		dev.MemoryInfo.Used = 0
		dev.MemoryInfo.Free = dev.MemoryInfo.Total
		dev.GetUtilizationRatesFunc = func() (gonvml.Utilization, gonvml.Return) {
			u, err := d.utilization(uuid)
			if err != nil {
				return gonvml.Utilization{}, gonvml.ERROR_UNKNOWN
			}
			pct := uint32(u*100 + 0.5)
			return gonvml.Utilization{Gpu: pct, Memory: pct / 2}, gonvml.SUCCESS
		}
		dev.GetMemoryInfo_v2Func = func() (gonvml.Memory_v2, gonvml.Return) {
			m := dev.MemoryInfo
			return gonvml.Memory_v2{Version: 2, Total: m.Total, Free: m.Free, Used: m.Used}, gonvml.SUCCESS
		}
		dev.GetMaxMigDeviceCountFunc = func() (int, gonvml.Return) { return 0, gonvml.SUCCESS }
		dev.GpmQueryDeviceSupportFunc = func() (gonvml.GpmSupport, gonvml.Return) {
			return gonvml.GpmSupport{Version: 1, IsSupportedDevice: 1}, gonvml.SUCCESS
		}
		dev.GpmSampleGetFunc = func(sample gonvml.GpmSample) gonvml.Return {
			ss, ok := sample.(*simSample)
			if !ok {
				return gonvml.ERROR_INVALID_ARGUMENT
			}
			m, err := d.read(uuid)
			if err != nil {
				return gonvml.ERROR_UNKNOWN
			}
			ss.device, ss.mark = dev, m
			return gonvml.SUCCESS
		}
	}
	s.GpmSampleAllocFunc = func() (gonvml.GpmSample, gonvml.Return) { return &simSample{}, gonvml.SUCCESS }
	s.GpmMetricsGetFunc = func(mg *gonvml.GpmMetricsGetType) gonvml.Return {
		s1, ok1 := mg.Sample1.(*simSample)
		s2, ok2 := mg.Sample2.(*simSample)
		if !ok1 || !ok2 || s1.device == nil || s1.device != s2.device {
			return gonvml.ERROR_INVALID_ARGUMENT
		}
		for i := range mg.NumMetrics {
			m := &mg.Metrics[i]
			if gonvml.GpmMetricId(m.MetricId) == gonvml.GPM_METRIC_SM_UTIL {
				m.Value, m.NvmlReturn = 100*fraction(s1.mark, s2.mark, smBusyOf), uint32(gonvml.SUCCESS)
			} else {
				m.NvmlReturn = uint32(gonvml.ERROR_NOT_SUPPORTED)
			}
		}
		return gonvml.SUCCESS
	}
	return s
}
