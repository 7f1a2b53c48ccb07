//go:build cuda

// Package cuda is the CUDA backend of policy/backend: the model's
// operations on an NVIDIA GPU, registered as "cuda" by a blank import in a
// binary built with -tags cuda:
//
//	import _ "github.com/legorl/legorl/policy/backend/cuda"
//	b, err := backend.Open("cuda", backend.Options{Precision: "bf16"})
//
// The driver API comes through gorgonia.org/cu: the device's primary
// context (the one the CUDA runtime, and so cuBLAS, also uses), device
// memory from a size-bucketed pool, and one module loaded from the PTX of
// package kernels (CUDA C compiled by clang-14 at `make ptx`, JIT-compiled
// by the driver). Every operation copies its inputs from host memory,
// launches its kernels and copies the outputs back (the backend contract:
// the model keeps weights and activations on the host).
//
// Precision "fp32" (the default) computes every product with the package's
// own tiled SGEMM kernel. "bf16" sends Gemm to cuBLAS (cublasGemmEx with
// bfloat16 inputs, rounded on the device, and float32 accumulation and
// output: tensor cores); cuBLAS is loaded at run time by soname
// (libcublas.so.13, .so.12, then libcublas.so) so the binary runs against
// whichever CUDA major version the machine has, and Open fails with a clear
// error when none is found. RowLinear stays on the SGEMM kernel in both
// precisions: cuBLAS chooses its algorithm by shape, which would make a
// row's result depend on the batch, and RowLinear promises it does not.
//
// Operations may be called from many goroutines: they are serialised by a
// mutex and run on a locked OS thread with the context made current, so a
// Backend uses the GPU one operation at a time. The first CUDA error is
// sticky: Err returns it and every later operation does nothing, as the
// backend contract asks; invalid arguments (short slices, bad shapes) are
// reported the same way instead of panicking.
//
// gorgonia.org/cu initialises the driver from its package init and exits
// the process when that fails, so a cuda binary needs a working driver
// (libcuda.so.1 and a GPU) even when it never opens this backend.
package cuda

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/legorl/legorl/policy/backend"
	"github.com/legorl/legorl/policy/backend/cuda/kernels"
)

// Sentinel errors of this package.
var (
	// ErrClosed is the sticky error of an operation on a closed Backend.
	ErrClosed = errors.New("cuda: backend is closed")
	// ErrArgument reports an operation called with arguments that do not
	// fit its shapes.
	ErrArgument = errors.New("cuda: bad argument")
	// ErrNoCUBLAS reports that precision bf16 was asked for and no cuBLAS
	// library could be loaded.
	ErrNoCUBLAS = errors.New("cuda: cuBLAS not found")
)

func init() { backend.Register("cuda", Open) }

// Backend runs the model's operations on one GPU. Its methods may be
// called concurrently.
type Backend struct {
	mu     sync.Mutex
	dev    cu.Device
	ctx    cu.CUContext
	mod    cu.Module
	hasMod bool
	fns    map[string]cu.Function
	pool   pool
	blas   *cublas // precision bf16 only
	prec   string
	name   string // the GPU's name
	// attnScratch is the most bytes of scores an Attention call without
	// probs keeps on the device at once (tests lower it to exercise the
	// chunking).
	attnScratch int
	err         error
	closed      bool
}

var _ backend.Backend = (*Backend)(nil)

// Open opens device opt.Device at opt.Precision ("" means fp32): it
// retains the device's primary context, loads the kernels and, for bf16,
// loads cuBLAS.
func Open(opt backend.Options) (backend.Backend, error) {
	return open(opt)
}

func open(opt backend.Options) (*Backend, error) {
	prec := opt.Precision
	switch prec {
	case "", "fp32":
		prec = "fp32"
	case "bf16":
	default:
		return nil, fmt.Errorf("%w: precision %q (want fp32 or bf16)", ErrArgument, opt.Precision)
	}
	n, err := cu.NumDevices()
	if err != nil {
		return nil, fmt.Errorf("cuda: counting devices: %w", err)
	}
	if opt.Device < 0 || opt.Device >= n {
		return nil, fmt.Errorf("%w: device %d (the machine has %d)", ErrArgument, opt.Device, n)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	dev, err := cu.GetDevice(opt.Device)
	if err != nil {
		return nil, fmt.Errorf("cuda: device %d: %w", opt.Device, err)
	}
	name, err := dev.Name()
	if err != nil {
		return nil, fmt.Errorf("cuda: device %d name: %w", opt.Device, err)
	}
	ctx, err := dev.RetainPrimaryCtx()
	if err != nil {
		return nil, fmt.Errorf("cuda: device %d (%s): primary context: %w", opt.Device, name, err)
	}
	b := &Backend{dev: dev, ctx: ctx, prec: prec, name: name, fns: map[string]cu.Function{}, attnScratch: defaultAttnScratch}
	fail := func(err error) (*Backend, error) {
		b.release()
		return nil, fmt.Errorf("cuda: device %d (%s): %w", opt.Device, name, err)
	}
	if err := cu.SetCurrentContext(ctx); err != nil {
		return fail(fmt.Errorf("make context current: %w", err))
	}
	mod, err := cu.LoadData(kernels.PTX)
	if err != nil {
		return fail(fmt.Errorf("loading the kernels' PTX: %w%s", err, jitLog(kernels.PTX)))
	}
	b.mod, b.hasMod = mod, true
	for _, k := range kernels.Names() {
		fn, err := mod.Function(k)
		if err != nil {
			return fail(fmt.Errorf("kernel %s: %w", k, err))
		}
		b.fns[k] = fn
	}
	if prec == "bf16" {
		b.blas, err = openCublas()
		if err != nil {
			return fail(err)
		}
	}
	return b, nil
}

// release frees everything Open acquired; the context must be current on
// the calling (locked) thread. It returns the first error.
func (b *Backend) release() error {
	var first error
	keep := func(what string, err error) {
		if err != nil && first == nil {
			first = fmt.Errorf("cuda: close: %s: %w", what, err)
		}
	}
	if b.blas != nil {
		keep("cuBLAS", b.blas.close())
		b.blas = nil
	}
	keep("device memory", b.pool.close())
	if b.hasMod {
		keep("module", b.mod.Unload())
		b.hasMod, b.fns = false, nil
	}
	keep("primary context", b.dev.ReleasePrimaryCtx())
	return first
}

// Name implements backend.Backend.
func (*Backend) Name() string { return "cuda" }

// Precision returns "fp32" or "bf16", the precision of Gemm.
func (b *Backend) Precision() string { return b.prec }

// Device returns the name of the GPU.
func (b *Backend) Device() string { return b.name }

// Err implements backend.Backend: the first error an operation hit.
func (b *Backend) Err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// Close implements backend.Backend: it frees the device memory, the module,
// cuBLAS and the context. It is safe to call twice.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cu.SetCurrentContext(b.ctx); err != nil {
		return fmt.Errorf("cuda: close: make context current: %w", err)
	}
	return b.release()
}

// fail makes err sticky unless an error already is.
func (b *Backend) fail(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err == nil {
		b.err = err
	}
}

// argErr makes a bad-argument error of op sticky.
func (b *Backend) argErr(op, format string, a ...any) {
	b.fail(fmt.Errorf("%w: %s: %s", ErrArgument, op, fmt.Sprintf(format, a...)))
}

// do runs f as operation op: under the mutex, on a locked OS thread with
// the context current, with a call that collects device buffers and the
// first error. It does nothing once an error is sticky.
func (b *Backend) do(op string, f func(c *call)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil {
		return
	}
	if b.closed {
		b.err = fmt.Errorf("%w (%s called after Close)", ErrClosed, op)
		return
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cu.SetCurrentContext(b.ctx); err != nil {
		b.err = fmt.Errorf("cuda: %s: make context current: %w", op, err)
		return
	}
	c := &call{b: b}
	f(c)
	c.release()
	if c.err != nil {
		b.err = fmt.Errorf("cuda: %s: %w", op, c.err)
	}
}

// call is the state of one operation: the device buffers to give back to
// the pool and the first error, after which its methods do nothing.
type call struct {
	b    *Backend
	bufs []cu.DevicePtr
	err  error
}

func (c *call) release() {
	for _, p := range c.bufs {
		c.b.pool.put(p)
	}
	c.bufs = nil
}

// alloc returns a device buffer of n bytes (0 for n = 0).
func (c *call) alloc(n int) cu.DevicePtr {
	if c.err != nil || n == 0 {
		return 0
	}
	p, err := c.b.pool.get(int64(n))
	if err != nil {
		c.err = fmt.Errorf("allocating %d bytes: %w", n, err)
		return 0
	}
	c.bufs = append(c.bufs, p)
	return p
}

// allocF returns a device buffer of n float32s.
func (c *call) allocF(n int) cu.DevicePtr { return c.alloc(4 * n) }

// up copies s to a new device buffer.
func (c *call) up(s []float32) cu.DevicePtr {
	p := c.allocF(len(s))
	if c.err == nil && len(s) > 0 {
		if err := cu.MemcpyHtoD(p, unsafe.Pointer(&s[0]), int64(4*len(s))); err != nil {
			c.err = fmt.Errorf("copying %d floats to the device: %w", len(s), err)
		}
	}
	return p
}

// upInt copies s to a new device buffer.
func (c *call) upInt(s []int32) cu.DevicePtr {
	p := c.alloc(4 * len(s))
	if c.err == nil && len(s) > 0 {
		if err := cu.MemcpyHtoD(p, unsafe.Pointer(&s[0]), int64(4*len(s))); err != nil {
			c.err = fmt.Errorf("copying %d ints to the device: %w", len(s), err)
		}
	}
	return p
}

// down copies len(s) floats from p to s. It synchronises with the kernels
// before it, so it is also where their faults surface.
func (c *call) down(s []float32, p cu.DevicePtr) {
	if c.err != nil || len(s) == 0 {
		return
	}
	if err := cu.MemcpyDtoH(unsafe.Pointer(&s[0]), p, int64(4*len(s))); err != nil {
		c.err = fmt.Errorf("copying %d floats from the device: %w", len(s), err)
	}
}

// downRows copies the rows x cols matrix with leading dimension ld at p to
// the same place in s, leaving the elements between rows untouched (other
// goroutines may own them).
func (c *call) downRows(s []float32, p cu.DevicePtr, rows, cols, ld int) {
	if ld == cols {
		c.down(s[:rows*cols], p)
		return
	}
	tmp := make([]float32, extent(rows, cols, ld))
	c.down(tmp, p)
	if c.err != nil {
		return
	}
	for i := 0; i < rows; i++ {
		copy(s[i*ld:i*ld+cols], tmp[i*ld:i*ld+cols])
	}
}

// Kernel arguments: every parameter of kernels.cu is 8 bytes.
func ptr(p cu.DevicePtr) uint64 { return uint64(p) }
func i64(n int) uint64          { return uint64(int64(n)) }
func f64(x float64) uint64      { return math.Float64bits(x) }

// launch runs kernel name on a grid of (gx, gy) blocks of block threads.
func (c *call) launch(name string, gx, gy, block int, args ...uint64) {
	if c.err != nil || gx == 0 || gy == 0 {
		return
	}
	if want := kernels.Params[name]; len(args) != want {
		c.err = fmt.Errorf("kernel %s launched with %d arguments, it takes %d", name, len(args), want)
		return
	}
	if gy > 65535 || gx > math.MaxInt32 {
		c.err = fmt.Errorf("kernel %s: grid %dx%d is too large", name, gx, gy)
		return
	}
	fn, ok := c.b.fns[name]
	if !ok {
		c.err = fmt.Errorf("kernel %s is not loaded", name)
		return
	}
	params := make([]unsafe.Pointer, len(args))
	for i := range args {
		params[i] = unsafe.Pointer(&args[i])
	}
	if err := fn.Launch(gx, gy, 1, block, 1, 1, 0, cu.NoStream, params); err != nil {
		c.err = fmt.Errorf("launching %s on %dx%d blocks of %d: %w", name, gx, gy, block, err)
	}
}

// extent is the number of elements a rows x cols row-major matrix with
// leading dimension ld spans.
func extent(rows, cols, ld int) int {
	if rows == 0 || cols == 0 {
		return 0
	}
	return (rows-1)*ld + cols
}

// ceilDiv returns ceil(a/b) for a >= 0, b > 0.
func ceilDiv(a, b int) int { return (a + b - 1) / b }
