// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package nvml

import (
	"fmt"
	"os"
	"slices"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// FOR TESTING ONLY. The fake backends below stand in for a node's GPUs so that
// the agent binary can run where there are none (the e2e suite, a demo).
// They are built on go-nvml's mock package and report fixed values, except
// the "sim" backend (fakesim.go), whose GPUs follow inference-sim processes.

// fakeProfile describes one fake node: its GPUs and what they report.
type fakeProfile struct {
	server      func() *server.Server // nil: NVML init fails (no library)
	utilization uint32                // percent
	smActive    float64               // percent; < 0: the GPUs do not support GPM
	memoryUsed  uint64                // bytes per GPU
}

const gib = 1 << 30

var fakeProfiles = map[string]fakeProfile{
	// Eight A100 40GB (Ampere): utilization and memory, no GPM.
	"dgxa100": {server: dgxa100.New, utilization: 35, smActive: -1, memoryUsed: 12 * gib},
	// Eight H100 80GB (Hopper): utilization, memory and GPM SM activity.
	"dgxh100": {server: dgxh100.New, utilization: 40, smActive: 25, memoryUsed: 30 * gib},
	// Eight H100 80GB that NVML calls 100% busy while their SMs are far from
	// full: the "GPU busy is not server saturated" contrast.
	"h100-busy": {server: dgxh100.New, utilization: 100, smActive: 38, memoryUsed: 72 * gib},
	// NVML initializes but the node has no GPUs.
	"no-gpus": {server: func() *server.Server { return dgxa100.NewWithGPUs() }},
	// libnvidia-ml.so.1 cannot be loaded.
	"no-library": {},
}

// FakeProfiles returns the names NewFakeReader accepts, sorted.
func FakeProfiles() []string {
	names := make([]string, 0, len(fakeProfiles))
	for name := range fakeProfiles {
		names = append(names, name)
	}
	names = append(names, FakeSimProfile)
	slices.Sort(names)
	return names
}

// FakeUUID returns the UUID the fake profile gives its GPU at index i:
// "GPU-fake-<profile>-<i>".
func FakeUUID(profile string, i int) string {
	return fmt.Sprintf("GPU-fake-%s-%d", profile, i)
}

// NewFakeReader returns a Reader over a fake NVML backend, FOR TESTING ONLY.
// Its Backend is "testing-fake-nvml/<profile>". now is the clock that spaces
// GPM samples; nil means time.Now. The "sim" profile reads its device map
// from the file named by the environment variable FakeSimGPUsEnv.
func NewFakeReader(profile string, now func() time.Time) (*Reader, error) {
	if now == nil {
		now = time.Now
	}
	if profile == FakeSimProfile {
		path := os.Getenv(FakeSimGPUsEnv)
		if path == "" {
			return nil, fmt.Errorf("fake NVML profile %q needs %s, the path of its device map", profile, FakeSimGPUsEnv)
		}
		return newReader(newSimFake(path), "testing-fake-nvml/"+profile, now), nil
	}
	p, ok := fakeProfiles[profile]
	if !ok {
		return nil, fmt.Errorf("unknown fake NVML profile %q (known: %v)", profile, FakeProfiles())
	}
	return newReader(newFake(profile, p), "testing-fake-nvml/"+profile, now), nil
}

func newFake(profile string, p fakeProfile) gonvml.Interface {
	if p.server == nil {
		return &mock.Interface{
			InitFunc:     func() gonvml.Return { return gonvml.ERROR_LIBRARY_NOT_FOUND },
			ShutdownFunc: func() gonvml.Return { return gonvml.ERROR_UNINITIALIZED },
		}
	}
	s := p.server()
	for i, d := range s.Devices {
		dev := d.(*server.Device)
		dev.UUID = FakeUUID(profile, i)
		dev.MemoryInfo.Used = min(p.memoryUsed, dev.MemoryInfo.Total)
		dev.MemoryInfo.Free = dev.MemoryInfo.Total - dev.MemoryInfo.Used
		dev.GetUtilizationRatesFunc = func() (gonvml.Utilization, gonvml.Return) {
			return gonvml.Utilization{Gpu: p.utilization, Memory: p.utilization / 2}, gonvml.SUCCESS
		}
		dev.GetMemoryInfo_v2Func = func() (gonvml.Memory_v2, gonvml.Return) {
			m := dev.MemoryInfo
			return gonvml.Memory_v2{Version: 2, Total: m.Total, Free: m.Free, Used: m.Used}, gonvml.SUCCESS
		}
		dev.GetMaxMigDeviceCountFunc = func() (int, gonvml.Return) { return 0, gonvml.SUCCESS }
		dev.GpmQueryDeviceSupportFunc = func() (gonvml.GpmSupport, gonvml.Return) {
			var supported uint32
			if p.smActive >= 0 {
				supported = 1
			}
			return gonvml.GpmSupport{Version: 1, IsSupportedDevice: supported}, gonvml.SUCCESS
		}
		dev.GpmSampleGetFunc = func(sample gonvml.GpmSample) gonvml.Return { return sample.Get(dev) }
	}
	s.GpmSampleAllocFunc = func() (gonvml.GpmSample, gonvml.Return) { return &fakeSample{}, gonvml.SUCCESS }
	s.GpmMetricsGetFunc = func(mg *gonvml.GpmMetricsGetType) gonvml.Return {
		s1, ok1 := mg.Sample1.(*fakeSample)
		s2, ok2 := mg.Sample2.(*fakeSample)
		if !ok1 || !ok2 || s1.device == nil || s1.device != s2.device {
			return gonvml.ERROR_INVALID_ARGUMENT
		}
		for i := range mg.NumMetrics {
			m := &mg.Metrics[i]
			if gonvml.GpmMetricId(m.MetricId) == gonvml.GPM_METRIC_SM_UTIL {
				m.Value, m.NvmlReturn = p.smActive, uint32(gonvml.SUCCESS)
			} else {
				m.NvmlReturn = uint32(gonvml.ERROR_NOT_SUPPORTED)
			}
		}
		return gonvml.SUCCESS
	}
	return s
}

// fakeSample is a GPM sample of the fake backend: it remembers its device.
type fakeSample struct{ device gonvml.Device }

var _ gonvml.GpmSample = (*fakeSample)(nil)

func (s *fakeSample) Free() gonvml.Return { return gonvml.SUCCESS }

func (s *fakeSample) Get(d gonvml.Device) gonvml.Return {
	s.device = d
	return gonvml.SUCCESS
}

func (s *fakeSample) MigGet(d gonvml.Device, _ int) gonvml.Return {
	s.device = d
	return gonvml.SUCCESS
}
