//go:build amd64 && !purego

package kernels

import "golang.org/x/sys/cpu"

//go:noescape
func expShiftAVX512(n int, dst, src *float32, scale, shift float32) float64

//go:noescape
func swigluAVX512(n int, act, gate, up *float32)

//go:noescape
func swigluBackAVX512(n int, dg, du, dact, gate, up *float32)

//go:noescape
func maxAVX512(n int, x *float32) float32

//go:noescape
func scaleAVX512(n int, x *float32, a float32)

//go:noescape
func axpyAVX512(n int, a float32, x, y *float32)

//go:noescape
func dotTile4x4AVX512(n int, x *float32, ldx int, w *float32, ldw int, out *float32)

//go:noescape
func dotPanel4x4AVX512(n int, x *float32, ldx, rows4 int, w *float32, ldw, cols4 int, y *float32, ldy int)

//go:noescape
func dotChainAVX512(n int, x, y *float32) float32

//go:noescape
func wsum4x64AVX512(nk int, p *float32, ldp int, v *float32, ldv int, out *float32, ldo int)

//go:noescape
func dotTile1x16AVX512(n int, x *float32, w *float32, ldw int, out *float32)

var avx512Vec = vecKernels{
	exp: expShiftAVX512, swiglu: swigluAVX512, swigluBack: swigluBackAVX512,
	max: maxAVX512, scale: scaleAVX512, axpy: axpyAVX512,
	dotTile: dotTile4x4AVX512, dotPanel: dotPanel4x4AVX512, dotRow: dotTile1x16AVX512, dot: dotChainAVX512,
	wsum4x64: wsum4x64AVX512,
}

func availableVec() vecKernels {
	if cpu.X86.HasAVX512F {
		return avx512Vec
	}
	return vecKernels{}
}
