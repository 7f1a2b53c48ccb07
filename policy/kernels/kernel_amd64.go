//go:build amd64 && !purego

package kernels

import "golang.org/x/sys/cpu"

//go:noescape
func kernel12x32AVX512(k int, a, b, c *float32, ldc int, alpha, beta float32)

//go:noescape
func kernel6x16AVX2(k int, a, b, c *float32, ldc int, alpha, beta float32)

//go:noescape
func dotAVX512(n int, x, y *float32) float32

var (
	avx512Kernel = &microKernel{name: "avx512", mr: 12, nr: 32, fn: kernel12x32AVX512, dot: dotAVX512}
	avx2Kernel   = &microKernel{name: "avx2", mr: 6, nr: 16, fn: kernel6x16AVX2}
)

// availableKernels lists the micro-kernels this CPU can run, fastest first;
// the last is always the portable one.
func availableKernels() []*microKernel {
	var ks []*microKernel
	if cpu.X86.HasAVX512F {
		ks = append(ks, avx512Kernel)
	}
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		ks = append(ks, avx2Kernel)
	}
	return append(ks, genericKernel)
}

// fmaLoopAVX512 runs iters x 384 flops of register-only FMAs; the
// benchmarks use it to measure one core's compute peak in the same run.
//
//go:noescape
func fmaLoopAVX512(iters int)
