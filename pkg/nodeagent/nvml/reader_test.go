// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package nvml

import (
	"errors"
	"os"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time       { return c.t }
func (c *fakeClock) step(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *fakeClock                { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }
func readerOver(l gonvml.Interface) (*Reader, *fakeClock) {
	c := newClock()
	return newReader(l, "test", c.now), c
}

// mockDevice builds a whole GPU with every call the Reader makes answered:
// 50% utilization, 1 GiB of 2 GiB used, MIG not supported, no GPM.
func mockDevice(uuid string) *mock.Device {
	return &mock.Device{
		GetUUIDFunc: func() (string, gonvml.Return) { return uuid, gonvml.SUCCESS },
		GetNameFunc: func() (string, gonvml.Return) { return "Mock GPU", gonvml.SUCCESS },
		GetUtilizationRatesFunc: func() (gonvml.Utilization, gonvml.Return) {
			return gonvml.Utilization{Gpu: 50}, gonvml.SUCCESS
		},
		GetMemoryInfo_v2Func: func() (gonvml.Memory_v2, gonvml.Return) {
			return gonvml.Memory_v2{Total: 2 << 30, Used: 1 << 30}, gonvml.SUCCESS
		},
		GetMemoryInfoFunc: func() (gonvml.Memory, gonvml.Return) {
			return gonvml.Memory{Total: 2 << 30, Used: 1<<30 + 1}, gonvml.SUCCESS
		},
		GetMigModeFunc: func() (int, int, gonvml.Return) { return 0, 0, gonvml.ERROR_NOT_SUPPORTED },
		GpmQueryDeviceSupportFunc: func() (gonvml.GpmSupport, gonvml.Return) {
			return gonvml.GpmSupport{IsSupportedDevice: 0}, gonvml.SUCCESS
		},
	}
}

// gpmDevice is a GPM device whose SM activity between two samples is sm
// percent.
type gpmDevice struct {
	*mock.Device
	sm float64
}

// withGPM makes d a GPM device; samplesTaken counts GpmSampleGet calls.
func withGPM(d *mock.Device, smPercent float64, samplesTaken *int) *gpmDevice {
	gd := &gpmDevice{Device: d, sm: smPercent}
	d.GpmQueryDeviceSupportFunc = func() (gonvml.GpmSupport, gonvml.Return) {
		return gonvml.GpmSupport{IsSupportedDevice: 1}, gonvml.SUCCESS
	}
	d.GpmSampleGetFunc = func(s gonvml.GpmSample) gonvml.Return {
		*samplesTaken++
		return s.Get(gd)
	}
	d.GetUtilizationRatesFunc = func() (gonvml.Utilization, gonvml.Return) {
		return gonvml.Utilization{Gpu: 97}, gonvml.SUCCESS
	}
	return gd
}

// mockLibrary builds an NVML library holding devs, with every symbol present.
func mockLibrary(devs ...gonvml.Device) *mock.Interface {
	return &mock.Interface{
		InitFunc:       func() gonvml.Return { return gonvml.SUCCESS },
		ShutdownFunc:   func() gonvml.Return { return gonvml.SUCCESS },
		ExtensionsFunc: func() gonvml.ExtendedInterface { return allSymbols{} },
		DeviceGetCountFunc: func() (int, gonvml.Return) {
			return len(devs), gonvml.SUCCESS
		},
		DeviceGetHandleByIndexFunc: func(i int) (gonvml.Device, gonvml.Return) {
			if i < 0 || i >= len(devs) {
				return nil, gonvml.ERROR_INVALID_ARGUMENT
			}
			return devs[i], gonvml.SUCCESS
		},
		GpmSampleAllocFunc: func() (gonvml.GpmSample, gonvml.Return) { return &fakeSample{}, gonvml.SUCCESS },
		GpmMetricsGetFunc: func(mg *gonvml.GpmMetricsGetType) gonvml.Return {
			s1, s2 := mg.Sample1.(*fakeSample), mg.Sample2.(*fakeSample)
			if s1 == s2 || s1.device != s2.device || mg.NumMetrics != 1 ||
				gonvml.GpmMetricId(mg.Metrics[0].MetricId) != gonvml.GPM_METRIC_SM_UTIL {
				return gonvml.ERROR_INVALID_ARGUMENT
			}
			gd, ok := s1.device.(*gpmDevice)
			if !ok {
				return gonvml.ERROR_NOT_SUPPORTED
			}
			mg.Metrics[0].Value = gd.sm
			return gonvml.SUCCESS
		},
	}
}

type allSymbols struct{}

func (allSymbols) LookupSymbol(string) error { return nil }

type missingSymbols struct{}

func (missingSymbols) LookupSymbol(name string) error { return errors.New("missing " + name) }

func TestReaderDGXA100(t *testing.T) {
	r, err := NewFakeReader("dgxa100", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var gpus []GPU
	for range 3 { // a second and third read must not invent GPM values
		gpus, err = r.Read(gpus)
		if err != nil {
			t.Fatal(err)
		}
		if len(gpus) != 8 {
			t.Fatalf("got %d GPUs, want 8", len(gpus))
		}
		for i, g := range gpus {
			if g.UUID != FakeUUID("dgxa100", i) || g.Index != i || g.Model != "Mock NVIDIA A100-SXM4-40GB" {
				t.Errorf("GPU %d: %+v", i, g)
			}
			if !g.HasUtilization || g.Utilization != 0.35 {
				t.Errorf("GPU %d utilization %v (has %v), want 0.35", i, g.Utilization, g.HasUtilization)
			}
			if !g.HasMemory || g.MemoryUsed != 12*gib || g.MemoryTotal != 40960<<20 {
				t.Errorf("GPU %d memory %d/%d (has %v)", i, g.MemoryUsed, g.MemoryTotal, g.HasMemory)
			}
			if g.HasSMActive {
				t.Errorf("GPU %d: A100 has no GPM, got SM activity %v", i, g.SMActive)
			}
			if g.Err != "" {
				t.Errorf("GPU %d: unexpected error %q", i, g.Err)
			}
		}
	}
	if r.Backend() != "testing-fake-nvml/dgxa100" {
		t.Errorf("backend %q", r.Backend())
	}
}

// The dgxa100 mock server as it comes from go-nvml, with only the calls it
// lacks added, read through the Reader.
func TestReaderDGXA100ServerAsIs(t *testing.T) {
	s := dgxa100.New()
	for _, d := range s.Devices {
		dev := d.(*server.Device)
		dev.GetUtilizationRatesFunc = func() (gonvml.Utilization, gonvml.Return) {
			return gonvml.Utilization{}, gonvml.ERROR_NOT_SUPPORTED
		}
		dev.GetMemoryInfo_v2Func = func() (gonvml.Memory_v2, gonvml.Return) {
			return gonvml.Memory_v2{}, gonvml.ERROR_NOT_SUPPORTED
		}
		dev.GpmQueryDeviceSupportFunc = func() (gonvml.GpmSupport, gonvml.Return) {
			return gonvml.GpmSupport{}, gonvml.ERROR_NOT_SUPPORTED
		}
	}
	r, _ := readerOver(s)
	gpus, err := r.Read(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(gpus) != 8 {
		t.Fatalf("got %d GPUs", len(gpus))
	}
	for i, g := range gpus {
		want := s.Devices[i].(*server.Device).UUID
		if g.UUID != want || g.HasUtilization || g.HasSMActive || g.Err != "" {
			t.Errorf("GPU %d: %+v", i, g)
		}
		// v2 not supported: falls back to v1, which the server answers.
		if !g.HasMemory || g.MemoryTotal != 40960<<20 {
			t.Errorf("GPU %d: memory fallback %+v", i, g)
		}
	}
}

func TestReaderGPM(t *testing.T) {
	var taken int
	lib := mockLibrary(withGPM(mockDevice("GPU-h100"), 62.5, &taken))
	r, clock := readerOver(lib)
	defer r.Close()

	steps := []struct {
		name   string
		after  time.Duration
		wantSM float64 // < 0: absent
		taken  int
	}{
		{"first sample: nothing to compare with", 0, -1, 1},
		{"one second later", time.Second, 0.625, 2},
		{"too soon: sample kept for later", 50 * time.Millisecond, -1, 2},
		{"100 ms after the kept sample", 50 * time.Millisecond, 0.625, 3},
	}
	var gpus []GPU
	for _, s := range steps {
		clock.step(s.after)
		var err error
		gpus, err = r.Read(gpus)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		g := gpus[0]
		if s.wantSM < 0 && g.HasSMActive {
			t.Errorf("%s: SM activity %v, want absent", s.name, g.SMActive)
		}
		if s.wantSM >= 0 && (!g.HasSMActive || g.SMActive != s.wantSM) {
			t.Errorf("%s: SM activity %v (has %v), want %v", s.name, g.SMActive, g.HasSMActive, s.wantSM)
		}
		if taken != s.taken {
			t.Errorf("%s: %d samples taken, want %d", s.name, taken, s.taken)
		}
		if !g.HasUtilization || g.Utilization != 0.97 {
			t.Errorf("%s: utilization %v", s.name, g.Utilization)
		}
	}
}

func TestReaderDevices(t *testing.T) {
	lost := mockDevice("GPU-lost")
	lost.GetUtilizationRatesFunc = func() (gonvml.Utilization, gonvml.Return) {
		return gonvml.Utilization{}, gonvml.ERROR_GPU_IS_LOST
	}
	lost.GetMemoryInfo_v2Func = func() (gonvml.Memory_v2, gonvml.Return) {
		return gonvml.Memory_v2{}, gonvml.ERROR_GPU_IS_LOST
	}
	noUtil := mockDevice("GPU-noutil")
	noUtil.GetUtilizationRatesFunc = func() (gonvml.Utilization, gonvml.Return) {
		return gonvml.Utilization{}, gonvml.ERROR_NOT_SUPPORTED
	}
	gpmUnsupported := mockDevice("GPU-a100")
	gpmUnsupported.GpmQueryDeviceSupportFunc = func() (gonvml.GpmSupport, gonvml.Return) {
		return gonvml.GpmSupport{}, gonvml.ERROR_NOT_SUPPORTED
	}
	gpmUnsupported.GpmSampleGetFunc = func(gonvml.GpmSample) gonvml.Return {
		t.Error("GpmSampleGet called on a device without GPM")
		return gonvml.ERROR_NOT_SUPPORTED
	}

	// A GPU in MIG mode: the whole GPU reports no utilization, its two MIG
	// devices report memory only; slot 1 is empty.
	migParent := mockDevice("GPU-mig-parent")
	migParent.GetUtilizationRatesFunc = func() (gonvml.Utilization, gonvml.Return) {
		return gonvml.Utilization{}, gonvml.ERROR_NOT_SUPPORTED
	}
	migParent.GetMigModeFunc = func() (int, int, gonvml.Return) {
		return gonvml.DEVICE_MIG_ENABLE, gonvml.DEVICE_MIG_ENABLE, gonvml.SUCCESS
	}
	migParent.GetMaxMigDeviceCountFunc = func() (int, gonvml.Return) { return 3, gonvml.SUCCESS }
	migs := []*mock.Device{mockDevice("MIG-aaaa"), nil, mockDevice("MIG-bbbb")}
	for _, m := range migs {
		if m != nil {
			m.GetNameFunc = func() (string, gonvml.Return) { return "Mock GPU MIG 1g.10gb", gonvml.SUCCESS }
			m.GetUtilizationRatesFunc = func() (gonvml.Utilization, gonvml.Return) {
				t.Error("utilization read on a MIG device")
				return gonvml.Utilization{}, gonvml.ERROR_NOT_SUPPORTED
			}
		}
	}
	migParent.GetMigDeviceHandleByIndexFunc = func(i int) (gonvml.Device, gonvml.Return) {
		if migs[i] == nil {
			return nil, gonvml.ERROR_NOT_FOUND
		}
		return migs[i], gonvml.SUCCESS
	}

	r, _ := readerOver(mockLibrary(mockDevice("GPU-ok"), lost, noUtil, gpmUnsupported, migParent))
	defer r.Close()
	gpus, err := r.Read(nil)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		uuid, parent, err string
		util, mem         bool
		mig               bool
	}
	want := []row{
		{uuid: "GPU-ok", util: true, mem: true},
		{uuid: "GPU-lost", err: "ERROR_GPU_IS_LOST"},
		{uuid: "GPU-noutil", mem: true},
		{uuid: "GPU-a100", util: true, mem: true},
		{uuid: "GPU-mig-parent", mem: true},
		{uuid: "MIG-aaaa", parent: "GPU-mig-parent", mig: true, mem: true},
		{uuid: "MIG-bbbb", parent: "GPU-mig-parent", mig: true, mem: true},
	}
	if len(gpus) != len(want) {
		t.Fatalf("got %d devices, want %d: %+v", len(gpus), len(want), gpus)
	}
	for i, w := range want {
		g := gpus[i]
		got := row{uuid: g.UUID, parent: g.ParentUUID, err: g.Err, util: g.HasUtilization, mem: g.HasMemory, mig: g.MIG}
		if got != w {
			t.Errorf("device %d: got %+v, want %+v", i, got, w)
		}
		if g.HasSMActive {
			t.Errorf("device %d: SM activity without GPM", i)
		}
		if !g.HasUtilization && g.Utilization != 0 || !g.HasMemory && g.MemoryUsed != 0 {
			t.Errorf("device %d: absent value not zeroed: %+v", i, g)
		}
	}
	if gpus[5].Index != 4 || gpus[5].Model != "Mock GPU MIG 1g.10gb" {
		t.Errorf("MIG device: %+v", gpus[5])
	}
}

// Without the GPM or memory-v2 symbols (old drivers) the Reader must not call
// them: calling a missing symbol would crash the process.
func TestReaderMissingSymbols(t *testing.T) {
	d := mockDevice("GPU-old")
	d.GpmQueryDeviceSupportFunc = nil // a call would panic
	d.GetMemoryInfo_v2Func = nil
	lib := mockLibrary(d)
	lib.ExtensionsFunc = func() gonvml.ExtendedInterface { return missingSymbols{} }
	r, _ := readerOver(lib)
	gpus, err := r.Read(nil)
	if err != nil {
		t.Fatal(err)
	}
	if g := gpus[0]; !g.HasMemory || g.MemoryUsed != 1<<30+1 || g.HasSMActive {
		t.Errorf("got %+v", g)
	}
}

func TestReaderErrors(t *testing.T) {
	tests := []struct {
		name       string
		initRet    gonvml.Return
		count      int
		countRet   gonvml.Return
		wantReason string
	}{
		{"library missing", gonvml.ERROR_LIBRARY_NOT_FOUND, 1, gonvml.SUCCESS, ReasonLibraryNotFound},
		{"driver not loaded", gonvml.ERROR_DRIVER_NOT_LOADED, 1, gonvml.SUCCESS, ReasonDriverNotLoaded},
		{"no permission", gonvml.ERROR_NO_PERMISSION, 1, gonvml.SUCCESS, ReasonNoPermission},
		{"other init error", gonvml.ERROR_UNKNOWN, 1, gonvml.SUCCESS, ReasonInitFailed},
		{"no GPUs", gonvml.SUCCESS, 0, gonvml.SUCCESS, ReasonNoGPUs},
		{"count fails", gonvml.SUCCESS, 1, gonvml.ERROR_UNINITIALIZED, ReasonReadFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inits, shutdowns := 0, 0
			lib := mockLibrary(mockDevice("GPU-0"))
			lib.InitFunc = func() gonvml.Return { inits++; return tt.initRet }
			lib.ShutdownFunc = func() gonvml.Return { shutdowns++; return gonvml.SUCCESS }
			lib.DeviceGetCountFunc = func() (int, gonvml.Return) { return tt.count, tt.countRet }
			r, _ := readerOver(lib)
			for range 2 {
				gpus, err := r.Read(make([]GPU, 3))
				if len(gpus) != 0 {
					t.Errorf("got %d GPUs with an error", len(gpus))
				}
				if ReasonOf(err) != tt.wantReason {
					t.Errorf("reason %q (%v), want %q", ReasonOf(err), err, tt.wantReason)
				}
			}
			// Init is retried after init errors and after a failed count.
			wantInits := 2
			if tt.initRet == gonvml.SUCCESS && tt.countRet == gonvml.SUCCESS {
				wantInits = 1
			}
			if inits != wantInits {
				t.Errorf("Init called %d times, want %d", inits, wantInits)
			}
			r.Close()
			if tt.initRet != gonvml.SUCCESS && shutdowns != 0 {
				t.Errorf("Shutdown called %d times without a successful Init", shutdowns)
			}
		})
	}
}

func TestFakeProfiles(t *testing.T) {
	tests := []struct {
		profile    string
		wantReason string // "" for success
		wantUtil   float64
		wantSM     float64 // < 0: absent
	}{
		{"dgxa100", "", 0.35, -1},
		{"dgxh100", "", 0.40, 0.25},
		{"h100-busy", "", 1, 0.38},
		{"no-gpus", ReasonNoGPUs, 0, 0},
		{"no-library", ReasonLibraryNotFound, 0, 0},
	}
	if got := len(FakeProfiles()); got != len(tests)+1 { // +1: sim, in TestFakeSim
		t.Errorf("%d profiles, %d tested", got, len(tests)+1)
	}
	for _, tt := range tests {
		t.Run(tt.profile, func(t *testing.T) {
			clock := newClock()
			r, err := NewFakeReader(tt.profile, clock.now)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			var gpus []GPU
			for range 2 {
				gpus, err = r.Read(gpus)
				clock.step(time.Second)
			}
			if tt.wantReason != "" {
				if ReasonOf(err) != tt.wantReason {
					t.Fatalf("err %v, want reason %s", err, tt.wantReason)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, g := range gpus {
				if g.Utilization != tt.wantUtil || g.HasSMActive != (tt.wantSM >= 0) || tt.wantSM >= 0 && g.SMActive != tt.wantSM {
					t.Errorf("%s: %+v", g.UUID, g)
				}
			}
		})
	}
	if _, err := NewFakeReader("dgx-nonesuch", nil); err == nil {
		t.Error("unknown profile accepted")
	}
}

// The real library, loaded from a path that does not exist: what the agent
// sees on a node without the NVIDIA driver.
func TestReaderLibraryMissing(t *testing.T) {
	r := NewReader(t.TempDir() + "/libnvidia-ml.so.1")
	defer r.Close()
	_, err := r.Read(nil)
	if ReasonOf(err) != ReasonLibraryNotFound {
		t.Fatalf("err %v, want reason %s", err, ReasonLibraryNotFound)
	}
}

// TestReaderRealGPUs runs only where libnvidia-ml and a GPU exist
// (GPU_AGENT_REAL_NVML=1): it reads the real devices twice, 200 ms apart,
// and logs what each reported.
func TestReaderRealGPUs(t *testing.T) {
	if os.Getenv("GPU_AGENT_REAL_NVML") != "1" {
		t.Skip("set GPU_AGENT_REAL_NVML=1 on a GPU machine")
	}
	r := NewReader("")
	defer r.Close()
	var gpus []GPU
	var err error
	for i := range 2 {
		if i > 0 {
			time.Sleep(200 * time.Millisecond)
		}
		if gpus, err = r.Read(gpus); err != nil {
			t.Fatal(err)
		}
	}
	for _, g := range gpus {
		t.Logf("%+v", g)
		if g.UUID == "" || !g.HasMemory || g.MemoryTotal == 0 {
			t.Errorf("incomplete: %+v", g)
		}
		if !g.MIG && !g.HasUtilization {
			t.Errorf("no utilization on a whole GPU: %+v", g)
		}
	}
}
