//go:build amd64 && !purego

package kernels

import "golang.org/x/sys/cpu"

//go:noescape
func kernel12x32AVX512(k int, a, b, c *float32, ldc int, alpha, beta float32)

//go:noescape
func kernel6x16AVX2(k int, a, b, c *float32, ldc int, alpha, beta float32)

//go:noescape
func dotAVX512(n int, x, y *float32) float32

//go:noescape
func packA12Rows(kb int, dst, src *float32, lda int)

//go:noescape
func packA12Cols(kb int, dst, src *float32, lda int, mask uint16)

//go:noescape
func packB32Rows(kb int, dst, src *float32, ldb int)

//go:noescape
func packB32Cols(kb int, dst, src *float32, ldb int, lo, hi uint16)

// packA12 packs a 12-row panel of op(A) for the AVX-512 kernel: masked
// copies when A is stored transposed; 16x16 transposes when it is not and
// the panel is full (the last kb%16 steps in Go). It declines partial
// untransposed panels, which the portable loop packs.
func packA12(trans bool, kb int, dst, src []float32, ld, rows int) bool {
	if trans {
		packA12Cols(kb, &dst[0], &src[0], ld, uint16(1)<<rows-1)
		return true
	}
	if rows < 12 {
		return false
	}
	k16 := kb &^ 15
	if k16 > 0 {
		_ = src[11*ld+k16-1] // bounds, before the raw-pointer reads
		packA12Rows(k16, &dst[0], &src[0], ld)
	}
	for p := k16; p < kb; p++ {
		d := dst[p*12 : p*12+12]
		for i := range d {
			d[i] = src[i*ld+p]
		}
	}
	return true
}

// packB32 packs a 32-column panel of op(B) for the AVX-512 kernel, as
// packA12 does.
func packB32(trans bool, kb int, dst, src []float32, ld, cols int) bool {
	if !trans {
		lo, hi := uint16(0xffff), uint16(0)
		if cols < 16 {
			lo = uint16(1)<<cols - 1
		} else {
			hi = uint16(uint32(1)<<(cols-16) - 1)
		}
		packB32Cols(kb, &dst[0], &src[0], ld, lo, hi)
		return true
	}
	if cols < 32 {
		return false
	}
	k16 := kb &^ 15
	if k16 > 0 {
		_ = src[31*ld+k16-1]
		packB32Rows(k16, &dst[0], &src[0], ld)
	}
	for p := k16; p < kb; p++ {
		d := dst[p*32 : p*32+32]
		for j := range d {
			d[j] = src[j*ld+p]
		}
	}
	return true
}

var (
	avx512Kernel = &microKernel{name: "avx512", mr: 12, nr: 32, fn: kernel12x32AVX512, dot: dotAVX512, packA: packA12, packB: packB32}
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
