// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Package nvml owns every call into NVIDIA's management library: it is the only
// package of the project that imports github.com/NVIDIA/go-nvml (and so the
// only one that uses cgo). A Reader initializes NVML, enumerates the GPUs and
// MIG devices of the node, and reads per device the utilization, the memory
// used and, on devices with GPU Performance Monitoring (Hopper and newer), the
// SM activity between two GPM samples. What a device does not support is
// reported as absent, never as 0.
//
// go-nvml loads libnvidia-ml.so.1 with dlopen when NVML is initialized, so a
// binary built with this package starts on machines without the library; Read
// then fails with an *Error whose Reason is ReasonLibraryNotFound.
package nvml

import (
	"errors"
	"fmt"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Reasons a whole read failed. They are stable label values of the agent's
// gpu_agent_up metric.
const (
	ReasonLibraryNotFound = "library_not_found"
	ReasonDriverNotLoaded = "driver_not_loaded"
	ReasonNoPermission    = "no_permission"
	ReasonInitFailed      = "init_failed"
	ReasonNoGPUs          = "no_gpus"
	ReasonReadFailed      = "read_failed"
)

// MinGPMInterval is the shortest time between the two GPM samples that one
// SM-activity value is computed from; NVML requires at least 100 ms.
const MinGPMInterval = 100 * time.Millisecond

// Error is a failure of a whole read: NVML could not be initialized, there
// are no GPUs, or the device list could not be read. Reason is one of the
// Reason constants; Return is the NVML return code where there is one.
type Error struct {
	Reason string
	Op     string
	Return gonvml.Return
}

func (e *Error) Error() string {
	if e.Return == gonvml.SUCCESS {
		return fmt.Sprintf("nvml %s: %s", e.Op, e.Reason)
	}
	return fmt.Sprintf("nvml %s: %s (%s)", e.Op, e.Reason, e.Return.Error())
}

// ReasonOf returns the Reason of err if it is (or wraps) an *Error, else
// ReasonReadFailed.
func ReasonOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ReasonReadFailed
}

// GPU is what one read said about one device: a whole GPU, or a MIG device
// (MIG is true, ParentUUID names its GPU). A Has field false means the device
// does not support the value or reading it failed; the value is then 0 and
// must not be used. Err holds the last NVML error seen for the device, if any.
type GPU struct {
	UUID       string
	Model      string
	Index      int // NVML index of the GPU; for a MIG device, the index of its parent
	MIG        bool
	ParentUUID string

	Utilization    float64 // utilization.gpu as 0..1
	HasUtilization bool
	SMActive       float64 // GPM SM activity as 0..1
	HasSMActive    bool
	MemoryUsed     uint64 // bytes
	MemoryTotal    uint64 // bytes
	HasMemory      bool

	Err string
}

// Reader reads GPUs through one NVML library instance. It initializes NVML on
// the first Read and again after a read that lost the library. A Reader is
// not safe for concurrent use.
type Reader struct {
	lib     gonvml.Interface
	backend string
	now     func() time.Time

	initialized bool
	hasMemV2    bool
	hasGPM      bool
	devices     map[string]*deviceState // by UUID
	metricsGet  gonvml.GpmMetricsGetType
}

// deviceState is what a Reader keeps about a device between reads.
type deviceState struct {
	model      string
	gpmChecked bool
	gpm        bool
	samples    [2]gonvml.GpmSample
	cur        int // index in samples of the sample to take next
	prevAt     time.Time
	hasPrev    bool
	seen       bool
}

// NewReader returns a Reader over the node's libnvidia-ml. libraryPath is
// the library to dlopen; "" means libnvidia-ml.so.1 from the loader's path.
func NewReader(libraryPath string) *Reader {
	var opts []gonvml.LibraryOption
	if libraryPath != "" {
		opts = append(opts, gonvml.WithLibraryPath(libraryPath))
	}
	return newReader(gonvml.New(opts...), "nvml", time.Now)
}

func newReader(lib gonvml.Interface, backend string, now func() time.Time) *Reader {
	return &Reader{lib: lib, backend: backend, now: now, devices: map[string]*deviceState{}}
}

// Backend names what the Reader reads: "nvml" for the real library, or
// "testing-fake-nvml/<profile>" for a fake.
func (r *Reader) Backend() string { return r.backend }

// Read appends to dst[:0] one GPU per whole GPU and per MIG device of the
// node, in NVML index order, and returns it. It fails with an *Error when
// NVML cannot be initialized, has no GPUs, or cannot list them; a failure of
// one device only marks that device's values absent.
func (r *Reader) Read(dst []GPU) ([]GPU, error) {
	dst = dst[:0]
	if err := r.init(); err != nil {
		return dst, err
	}
	count, ret := r.lib.DeviceGetCount()
	if ret != gonvml.SUCCESS {
		r.shutdown()
		return dst, &Error{Reason: reasonFor(ret, ReasonReadFailed), Op: "DeviceGetCount", Return: ret}
	}
	if count == 0 {
		return dst, &Error{Reason: ReasonNoGPUs, Op: "DeviceGetCount"}
	}
	for _, st := range r.devices {
		st.seen = false
	}
	now := r.now()
	for i := 0; i < count; i++ {
		dev, ret := r.lib.DeviceGetHandleByIndex(i)
		if ret != gonvml.SUCCESS {
			dst = append(dst, GPU{Index: i, Err: ret.Error()})
			continue
		}
		uuid, ret := dev.GetUUID()
		if ret != gonvml.SUCCESS {
			dst = append(dst, GPU{Index: i, Err: ret.Error()})
			continue
		}
		st := r.state(uuid, dev)
		g := GPU{UUID: uuid, Model: st.model, Index: i}
		r.readUtilization(dev, &g)
		r.readMemory(dev, &g)
		r.readGPM(dev, st, now, &g)
		dst = append(dst, g)
		dst = r.readMIG(dev, &g, dst)
	}
	for uuid, st := range r.devices {
		if !st.seen {
			st.free()
			delete(r.devices, uuid)
		}
	}
	return dst, nil
}

// Close frees the GPM samples and shuts NVML down.
func (r *Reader) Close() error {
	if !r.initialized {
		return nil
	}
	r.shutdown()
	return nil
}

func (r *Reader) init() error {
	if r.initialized {
		return nil
	}
	if ret := r.lib.Init(); ret != gonvml.SUCCESS {
		return &Error{Reason: reasonFor(ret, ReasonInitFailed), Op: "Init", Return: ret}
	}
	r.initialized = true
	ext := r.lib.Extensions()
	r.hasMemV2 = ext.LookupSymbol("nvmlDeviceGetMemoryInfo_v2") == nil
	r.hasGPM = ext.LookupSymbol("nvmlGpmQueryDeviceSupport") == nil &&
		ext.LookupSymbol("nvmlGpmSampleGet") == nil &&
		ext.LookupSymbol("nvmlGpmMetricsGet") == nil
	return nil
}

func (r *Reader) shutdown() {
	for uuid, st := range r.devices {
		st.free()
		delete(r.devices, uuid)
	}
	_ = r.lib.Shutdown() // a failed shutdown changes nothing: the next read initializes again
	r.initialized = false
}

func reasonFor(ret gonvml.Return, otherwise string) string {
	switch ret {
	case gonvml.ERROR_LIBRARY_NOT_FOUND:
		return ReasonLibraryNotFound
	case gonvml.ERROR_DRIVER_NOT_LOADED:
		return ReasonDriverNotLoaded
	case gonvml.ERROR_NO_PERMISSION:
		return ReasonNoPermission
	}
	return otherwise
}

func (r *Reader) state(uuid string, dev gonvml.Device) *deviceState {
	st, ok := r.devices[uuid]
	if !ok {
		st = &deviceState{}
		if name, ret := dev.GetName(); ret == gonvml.SUCCESS {
			st.model = name
		}
		r.devices[uuid] = st
	}
	st.seen = true
	return st
}

func (r *Reader) readUtilization(dev gonvml.Device, g *GPU) {
	u, ret := dev.GetUtilizationRates()
	if ret != gonvml.SUCCESS {
		noteErr(g, ret)
		return
	}
	g.Utilization = clamp01(float64(u.Gpu) / 100)
	g.HasUtilization = true
}

func (r *Reader) readMemory(dev gonvml.Device, g *GPU) {
	if r.hasMemV2 {
		m, ret := dev.GetMemoryInfo_v2()
		if ret == gonvml.SUCCESS {
			g.MemoryUsed, g.MemoryTotal, g.HasMemory = m.Used, m.Total, true
			return
		}
		if ret != gonvml.ERROR_NOT_SUPPORTED && ret != gonvml.ERROR_FUNCTION_NOT_FOUND {
			noteErr(g, ret)
			return
		}
	}
	// Drivers before R510 lack the v2 call; v1's Used includes the
	// driver's reserved memory.
	m, ret := dev.GetMemoryInfo()
	if ret != gonvml.SUCCESS {
		noteErr(g, ret)
		return
	}
	g.MemoryUsed, g.MemoryTotal, g.HasMemory = m.Used, m.Total, true
}

// readGPM takes a GPM sample and, when a previous one is at least
// MinGPMInterval old, sets the SM activity between the two.
func (r *Reader) readGPM(dev gonvml.Device, st *deviceState, now time.Time, g *GPU) {
	if !r.hasGPM {
		return
	}
	if !st.gpmChecked {
		st.gpmChecked = true
		sup, ret := dev.GpmQueryDeviceSupport()
		st.gpm = ret == gonvml.SUCCESS && sup.IsSupportedDevice != 0
	}
	if !st.gpm {
		return
	}
	for i := range st.samples {
		if st.samples[i] == nil {
			s, ret := r.lib.GpmSampleAlloc()
			if ret != gonvml.SUCCESS {
				noteErr(g, ret)
				return
			}
			st.samples[i] = s
		}
	}
	if st.hasPrev && now.Sub(st.prevAt) < MinGPMInterval {
		return // too soon: keep the previous sample for the next read
	}
	cur := st.samples[st.cur]
	if ret := dev.GpmSampleGet(cur); ret != gonvml.SUCCESS {
		noteErr(g, ret)
		st.hasPrev = false
		return
	}
	if st.hasPrev {
		mg := &r.metricsGet
		*mg = gonvml.GpmMetricsGetType{NumMetrics: 1, Sample1: st.samples[1-st.cur], Sample2: cur}
		mg.Metrics[0].MetricId = uint32(gonvml.GPM_METRIC_SM_UTIL)
		ret := r.lib.GpmMetricsGet(mg)
		switch {
		case ret != gonvml.SUCCESS:
			noteErr(g, ret)
		case gonvml.Return(mg.Metrics[0].NvmlReturn) != gonvml.SUCCESS:
			noteErr(g, gonvml.Return(mg.Metrics[0].NvmlReturn))
		default:
			g.SMActive = clamp01(mg.Metrics[0].Value / 100)
			g.HasSMActive = true
		}
		// Drop the references to the samples, which the next read reuses.
		mg.Sample1, mg.Sample2 = nil, nil
	}
	st.prevAt, st.hasPrev = now, true
	st.cur = 1 - st.cur
}

// readMIG appends the MIG devices of dev when MIG mode is enabled. NVML does
// not report utilization or GPM SM activity per MIG device through these
// calls, so only memory is read; the rest stays absent.
func (r *Reader) readMIG(dev gonvml.Device, parent *GPU, dst []GPU) []GPU {
	mode, _, ret := dev.GetMigMode()
	if ret != gonvml.SUCCESS || mode != gonvml.DEVICE_MIG_ENABLE {
		return dst
	}
	n, ret := dev.GetMaxMigDeviceCount()
	if ret != gonvml.SUCCESS {
		return dst
	}
	for j := 0; j < n; j++ {
		mig, ret := dev.GetMigDeviceHandleByIndex(j)
		if ret != gonvml.SUCCESS {
			continue // ERROR_NOT_FOUND: no MIG device in this slot
		}
		uuid, ret := mig.GetUUID()
		if ret != gonvml.SUCCESS {
			continue
		}
		st := r.state(uuid, mig)
		g := GPU{UUID: uuid, Model: st.model, Index: parent.Index, MIG: true, ParentUUID: parent.UUID}
		r.readMemory(mig, &g)
		dst = append(dst, g)
	}
	return dst
}

func (st *deviceState) free() {
	for i, s := range st.samples {
		if s != nil {
			_ = s.Free() // the sample is dropped either way
			st.samples[i] = nil
		}
	}
	st.hasPrev = false
}

// noteErr records ret on g unless it only says "not supported", which is
// the normal way a device says a value does not exist.
func noteErr(g *GPU, ret gonvml.Return) {
	if ret == gonvml.ERROR_NOT_SUPPORTED {
		return
	}
	g.Err = ret.Error()
}

func clamp01(v float64) float64 {
	switch {
	case v < 0:
		return 0
	case v > 1:
		return 1
	}
	return v
}
