// Package cu is a fake of gorgonia.org/cu for running the CUDA backend's
// kernels under the host emulator (scripts/cuda/emu.sh): device memory is host
// memory, launches run the kernels compiled for the host.
package cu

/*
#cgo LDFLAGS: -lcuda
#include <stdlib.h>
#include <string.h>
int emu_launch(const char* name, unsigned gx, unsigned gy, unsigned bx, const unsigned long long* a);
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"
)

type cuResult int

func (r cuResult) Error() string { return fmt.Sprintf("fake cu error %d", int(r)) }

const OutOfMemory cuResult = 2

type DevicePtr uintptr
type Device int
type CUContext struct{ c int }
type Module struct{ m int }
type Function struct{ name string }
type Stream struct{}

var NoStream = Stream{}

var (
	mu    sync.Mutex
	live  = map[DevicePtr]int64{}
	inCtx int
)

func NumDevices() (int, error)         { return 1, nil }
func GetDevice(i int) (Device, error)  { return Device(i), nil }
func (d Device) Name() (string, error) { return "host emulator", nil }
func (d Device) RetainPrimaryCtx() (CUContext, error) {
	mu.Lock()
	inCtx++
	mu.Unlock()
	return CUContext{1}, nil
}
func (d Device) ReleasePrimaryCtx() error               { mu.Lock(); inCtx--; mu.Unlock(); return nil }
func SetCurrentContext(c CUContext) error               { return nil }
func LoadData(image string) (Module, error)             { return Module{1}, nil }
func (m Module) Function(name string) (Function, error) { return Function{name}, nil }
func (m Module) Unload() error                          { return nil }

func MemAlloc(n int64) (DevicePtr, error) {
	p := C.malloc(C.size_t(n))
	// Poison: a kernel that reads memory it did not write sees NaNs.
	C.memset(p, 0xff, C.size_t(n))
	d := DevicePtr(uintptr(p))
	mu.Lock()
	live[d] = n
	mu.Unlock()
	return d, nil
}

func MemFree(d DevicePtr) error {
	mu.Lock()
	_, ok := live[d]
	delete(live, d)
	mu.Unlock()
	if !ok {
		return fmt.Errorf("fake cu: free of unknown pointer %x", d)
	}
	C.free(unsafe.Pointer(uintptr(d)))
	return nil
}

// Live returns the bytes allocated and not freed.
func Live() int64 {
	mu.Lock()
	defer mu.Unlock()
	var n int64
	for _, s := range live {
		n += s
	}
	return n
}

func check(d DevicePtr, n int64) error {
	mu.Lock()
	defer mu.Unlock()
	for p, s := range live {
		if d >= p && uintptr(d)+uintptr(n) <= uintptr(p)+uintptr(s) {
			return nil
		}
	}
	return fmt.Errorf("fake cu: copy of %d bytes at %x outside any allocation", n, d)
}

func MemcpyHtoD(d DevicePtr, src unsafe.Pointer, n int64) error {
	if err := check(d, n); err != nil {
		return err
	}
	C.memcpy(unsafe.Pointer(uintptr(d)), src, C.size_t(n))
	return nil
}

func MemcpyDtoH(dst unsafe.Pointer, d DevicePtr, n int64) error {
	if err := check(d, n); err != nil {
		return err
	}
	C.memcpy(dst, unsafe.Pointer(uintptr(d)), C.size_t(n))
	return nil
}

func (fn Function) Launch(gx, gy, gz, bx, by, bz, shared int, s Stream, params []unsafe.Pointer) error {
	if gz != 1 || by != 1 || bz != 1 || shared != 0 || bx > 1024 || gy > 65535 {
		return fmt.Errorf("fake cu: launch %s bad geometry %d,%d,%d x %d,%d,%d", fn.name, gx, gy, gz, bx, by, bz)
	}
	args := (*[64]C.ulonglong)(C.malloc(C.size_t(8 * 64)))
	defer C.free(unsafe.Pointer(args))
	for i, p := range params {
		args[i] = C.ulonglong(*(*uint64)(p))
	}
	name := C.CString(fn.name)
	defer C.free(unsafe.Pointer(name))
	n := C.emu_launch(name, C.uint(gx), C.uint(gy), C.uint(bx), &args[0])
	if int(n) != len(params) {
		return fmt.Errorf("fake cu: kernel %s takes %d parameters, launched with %d", fn.name, int(n), len(params))
	}
	return nil
}
