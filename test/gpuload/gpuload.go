// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Package gpuload keeps a real NVIDIA GPU busy for the hardware checks of the
// NVML reader and the gpu-agent (see realgpu_test.go and docs/gpu-agent.md).
//
// It loads the CUDA driver (libcuda.so.1) with dlopen, so it builds and links
// on machines without CUDA, and runs one kernel written in PTX that spins for
// a given time. The number of blocks decides how many of the GPU's SMs are
// busy: one block keeps one SM busy, which NVML's utilization reports as a
// fully busy GPU while its SM activity stays near 1/SMs. That contrast is the
// reason this project exists, and these checks show it on real hardware.
package gpuload

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>

typedef int gl_result;

typedef struct {
	void *lib;
	gl_result (*init)(unsigned int);
	gl_result (*deviceGet)(int*, int);
	gl_result (*deviceGetAttribute)(int*, int, int);
	gl_result (*ctxCreate)(void**, unsigned int, int);
	gl_result (*ctxDestroy)(void*);
	gl_result (*ctxSetCurrent)(void*);
	gl_result (*moduleLoadData)(void**, const void*);
	gl_result (*moduleGetFunction)(void**, void*, const char*);
	gl_result (*launchKernel)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*, void**, void**);
	gl_result (*ctxSynchronize)(void);
	gl_result (*getErrorString)(gl_result, const char**);
	void *ctx;
	void *fn;
	int sms;
} gl_gpu;

// gl_open loads the driver and resolves the calls; it returns a negative
// number naming the step that failed.
static int gl_open(gl_gpu *g, const char *path) {
	g->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!g->lib) return -1;
#define GL_SYM(f, name) if (!(*(void**)(&g->f) = dlsym(g->lib, name))) return -2;
	GL_SYM(init, "cuInit")
	GL_SYM(deviceGet, "cuDeviceGet")
	GL_SYM(deviceGetAttribute, "cuDeviceGetAttribute")
	GL_SYM(ctxCreate, "cuCtxCreate_v2")
	GL_SYM(ctxDestroy, "cuCtxDestroy_v2")
	GL_SYM(ctxSetCurrent, "cuCtxSetCurrent")
	GL_SYM(moduleLoadData, "cuModuleLoadData")
	GL_SYM(moduleGetFunction, "cuModuleGetFunction")
	GL_SYM(launchKernel, "cuLaunchKernel")
	GL_SYM(ctxSynchronize, "cuCtxSynchronize")
	GL_SYM(getErrorString, "cuGetErrorString")
#undef GL_SYM
	return 0;
}

// gl_setup creates a context on device ordinal and loads the kernel. It
// returns the CUDA error, and in *step the call that failed.
static gl_result gl_setup(gl_gpu *g, int ordinal, const char *ptx, int *step) {
	int dev = 0;
	gl_result r;
	*step = 1; if ((r = g->init(0)) != 0) return r;
	*step = 2; if ((r = g->deviceGet(&dev, ordinal)) != 0) return r;
	// 16 is CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT.
	*step = 3; if ((r = g->deviceGetAttribute(&g->sms, 16, dev)) != 0) return r;
	*step = 4; if ((r = g->ctxCreate(&g->ctx, 0, dev)) != 0) return r;
	void *mod = NULL;
	*step = 5; if ((r = g->moduleLoadData(&mod, ptx)) != 0) return r;
	*step = 6; if ((r = g->moduleGetFunction(&g->fn, mod, "spin")) != 0) return r;
	return 0;
}

// gl_spin runs the kernel on blocks blocks of 32 threads for ns nanoseconds
// and waits for it, all on the calling thread (a CUDA context is current
// per thread).
static gl_result gl_spin(gl_gpu *g, unsigned blocks, uint64_t ns) {
	gl_result r;
	if ((r = g->ctxSetCurrent(g->ctx)) != 0) return r;
	void *args[1] = { &ns };
	if ((r = g->launchKernel(g->fn, blocks, 1, 1, 32, 1, 1, 0, NULL, args, NULL)) != 0) return r;
	return g->ctxSynchronize();
}

static gl_result gl_close(gl_gpu *g) {
	gl_result r = 0;
	if (g->ctx) r = g->ctxDestroy(g->ctx);
	g->ctx = NULL;
	return r;
}

static const char *gl_error(gl_gpu *g, gl_result r) {
	const char *s = NULL;
	if (g->getErrorString == NULL || g->getErrorString(r, &s) != 0 || s == NULL) return "unknown CUDA error";
	return s;
}
*/
import "C"

import (
	"fmt"
	"sync"
	"time"
	"unsafe"
)

// spinPTX is the kernel: every thread reads the GPU's nanosecond timer until
// ns have passed since it started. PTX is compiled by the driver for whatever
// GPU it runs on.
const spinPTX = `.version 6.0
.target sm_50
.address_size 64

.visible .entry spin(.param .u64 ns)
{
	.reg .pred %p<2>;
	.reg .b64 %rd<5>;
	ld.param.u64 %rd1, [ns];
	mov.u64 %rd2, %globaltimer;
$Lspin:
	mov.u64 %rd3, %globaltimer;
	sub.s64 %rd4, %rd3, %rd2;
	setp.lt.u64 %p1, %rd4, %rd1;
	@%p1 bra $Lspin;
	ret;
}
`

// setupSteps names the calls of gl_setup, by step number.
var setupSteps = [...]string{1: "cuInit", 2: "cuDeviceGet", 3: "cuDeviceGetAttribute", 4: "cuCtxCreate", 5: "cuModuleLoadData", 6: "cuModuleGetFunction"}

// GPU is one CUDA device with the spin kernel loaded. Its methods may be
// called from any goroutine, one at a time.
type GPU struct {
	mu sync.Mutex
	g  *C.gl_gpu
}

// Open loads libraryPath ("" means libcuda.so.1), creates a context on the
// device with the given CUDA ordinal and loads the kernel.
func Open(libraryPath string, ordinal int) (*GPU, error) {
	if libraryPath == "" {
		libraryPath = "libcuda.so.1"
	}
	g := (*C.gl_gpu)(C.calloc(1, C.sizeof_gl_gpu))
	path := C.CString(libraryPath)
	defer C.free(unsafe.Pointer(path))
	switch C.gl_open(g, path) {
	case -1:
		C.free(unsafe.Pointer(g))
		return nil, fmt.Errorf("loading %s: %s", libraryPath, C.GoString(C.dlerror()))
	case -2:
		C.free(unsafe.Pointer(g))
		return nil, fmt.Errorf("%s lacks a CUDA driver call: %s", libraryPath, C.GoString(C.dlerror()))
	}
	ptx := C.CString(spinPTX)
	defer C.free(unsafe.Pointer(ptx))
	var step C.int
	if r := C.gl_setup(g, C.int(ordinal), ptx, &step); r != 0 {
		err := fmt.Errorf("%s: %s (CUDA error %d)", setupSteps[step], C.GoString(C.gl_error(g, r)), int(r))
		C.gl_close(g)
		C.free(unsafe.Pointer(g))
		return nil, err
	}
	return &GPU{g: g}, nil
}

// SMs is the device's number of streaming multiprocessors.
func (g *GPU) SMs() int { return int(g.g.sms) }

// Spin keeps blocks blocks of one warp each busy for d and returns when the
// kernel has ended. One block occupies one SM.
func (g *GPU) Spin(blocks int, d time.Duration) error {
	if blocks < 1 || d <= 0 {
		return fmt.Errorf("spin: want blocks >= 1 and a positive duration, got %d and %v", blocks, d)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.g == nil {
		return fmt.Errorf("spin: GPU closed")
	}
	if r := C.gl_spin(g.g, C.uint(blocks), C.uint64_t(d.Nanoseconds())); r != 0 {
		return fmt.Errorf("spin: %s (CUDA error %d)", C.GoString(C.gl_error(g.g, r)), int(r))
	}
	return nil
}

// Close destroys the context. The driver library stays loaded.
func (g *GPU) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.g == nil {
		return nil
	}
	r := C.gl_close(g.g)
	C.free(unsafe.Pointer(g.g))
	g.g = nil
	if r != 0 {
		return fmt.Errorf("cuCtxDestroy: CUDA error %d", int(r))
	}
	return nil
}
