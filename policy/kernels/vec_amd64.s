//go:build amd64 && !purego

#include "textflag.h"

// Vector kernels of the model's elementwise operations (AVX-512F): exp with
// a shift and a sum, the SwiGLU activation and its gradient, max, scale and
// axpy. Each processes 16 floats at a time and its last n%16 elements with a
// lane mask, through the same instructions, so an element's result never
// depends on its position or on n.

// expf constants (Cephes expf: range reduction by n*ln2 in two parts, a
// degree-7 polynomial, then a scale by 2^n with VSCALEFPS, which also gives
// 0 and +Inf at the ends of the range).
DATA expc<>+0(SB)/4, $0xc2d00000  // -104: below this e^x is 0 in float32
DATA expc<>+4(SB)/4, $0x42b20000  // 89: above this e^x is +Inf
DATA expc<>+8(SB)/4, $0x3fb8aa3b  // log2(e)
DATA expc<>+12(SB)/4, $0x3f318000 // ln2 high part 0.693359375
DATA expc<>+16(SB)/4, $0xb95e8083 // ln2 low part -2.12194440e-4
DATA expc<>+20(SB)/4, $0x39506967 // 1.9875691500e-4
DATA expc<>+24(SB)/4, $0x3ab743ce // 1.3981999507e-3
DATA expc<>+28(SB)/4, $0x3c088908 // 8.3334519073e-3
DATA expc<>+32(SB)/4, $0x3d2aa9c1 // 4.1665795894e-2
DATA expc<>+36(SB)/4, $0x3e2aaaaa // 1.6666665459e-1
DATA expc<>+40(SB)/4, $0x3f000000 // 5.0000001201e-1
DATA expc<>+44(SB)/4, $0x3f800000 // 1
DATA expc<>+48(SB)/4, $0x80000000 // sign bit
GLOBL expc<>(SB), RODATA|NOPTR, $52

// EXPCONSTS loads the constants into Z16..Z28.
#define EXPCONSTS \
	VBROADCASTSS expc<>+0(SB), Z16 \
	VBROADCASTSS expc<>+4(SB), Z17 \
	VBROADCASTSS expc<>+8(SB), Z18 \
	VBROADCASTSS expc<>+12(SB), Z19 \
	VBROADCASTSS expc<>+16(SB), Z20 \
	VBROADCASTSS expc<>+20(SB), Z21 \
	VBROADCASTSS expc<>+24(SB), Z22 \
	VBROADCASTSS expc<>+28(SB), Z23 \
	VBROADCASTSS expc<>+32(SB), Z24 \
	VBROADCASTSS expc<>+36(SB), Z25 \
	VBROADCASTSS expc<>+40(SB), Z26 \
	VBROADCASTSS expc<>+44(SB), Z27 \
	VBROADCASTSS expc<>+48(SB), Z28

// EXP sets Z0 = e^Z0, using Z1 and Z2. A NaN stays NaN (the clamps return
// their second Intel operand, Z0, when it is NaN).
#define EXP \
	VMAXPS       Z0, Z16, Z0 \
	VMINPS       Z0, Z17, Z0 \
	VMULPS       Z18, Z0, Z1 \
	VRNDSCALEPS  $0, Z1, Z1 \
	VFNMADD231PS Z19, Z1, Z0 \
	VFNMADD231PS Z20, Z1, Z0 \
	VMOVAPS      Z21, Z2 \
	VFMADD213PS  Z22, Z0, Z2 \
	VFMADD213PS  Z23, Z0, Z2 \
	VFMADD213PS  Z24, Z0, Z2 \
	VFMADD213PS  Z25, Z0, Z2 \
	VFMADD213PS  Z26, Z0, Z2 \
	VFMADD213PS  Z27, Z0, Z2 \
	VFMADD213PS  Z27, Z0, Z2 \
	VSCALEFPS    Z1, Z2, Z0

// TAILMASK sets K1 to the low CX bits (1 <= CX <= 15), using AX.
#define TAILMASK \
	MOVL  $1, AX \
	SHLL  CX, AX \
	DECL  AX \
	KMOVW AX, K1

// SUMPD adds the 16 floats of Z0 into the float64 accumulators Z12 (low
// eight) and Z13 (high eight), using Z3 and Z4.
#define SUMPD \
	VCVTPS2PD     Y0, Z3 \
	VADDPD        Z3, Z12, Z12 \
	VEXTRACTF64X4 $1, Z0, Y4 \
	VCVTPS2PD     Y4, Z4 \
	VADDPD        Z4, Z13, Z13

// func expShiftAVX512(n int, dst, src *float32, scale, shift float32) float64
// dst[i] = e^(src[i]*scale - shift) (one fused multiply-subtract), and the
// sum of the results in float64: sixteen lane sums, added pairwise.
TEXT ·expShiftAVX512(SB), NOSPLIT, $0-40
	MOVQ         n+0(FP), CX
	MOVQ         dst+8(FP), DI
	MOVQ         src+16(FP), SI
	VBROADCASTSS scale+24(FP), Z14
	VBROADCASTSS shift+28(FP), Z15
	EXPCONSTS
	VPXORQ       Z12, Z12, Z12
	VPXORQ       Z13, Z13, Z13

expLoop:
	CMPQ        CX, $16
	JLT         expTail
	VMOVUPS     (SI), Z0
	VFMSUB213PS Z15, Z14, Z0
	EXP
	VMOVUPS     Z0, (DI)
	SUMPD
	ADDQ        $64, SI
	ADDQ        $64, DI
	SUBQ        $16, CX
	JMP         expLoop

expTail:
	TESTQ       CX, CX
	JZ          expDone
	TAILMASK
	VMOVUPS.Z   (SI), K1, Z0
	VFMSUB213PS Z15, Z14, Z0
	EXP
	VMOVUPS     Z0, K1, (DI)
	VMOVAPS.Z   Z0, K1, Z0
	SUMPD

expDone:
	VADDPD        Z13, Z12, Z12
	VEXTRACTF64X4 $1, Z12, Y13
	VADDPD        Y13, Y12, Y12
	VEXTRACTF128  $1, Y12, X13
	VADDPD        X13, X12, X12
	VPERMILPD     $1, X12, X13
	VADDSD        X13, X12, X12
	VMOVSD        X12, ret+32(FP)
	VZEROUPPER
	RET

// SILU sets Z0 = 1 + e^-g for g in Z8.
#define ONEPLUSEXPNEG \
	VPXORD Z28, Z8, Z0 \
	EXP \
	VADDPS Z27, Z0, Z0

// func swigluAVX512(n int, act, gate, up *float32)
// act[i] = g[i]*u[i] / (1 + e^-g[i]), which is silu(g[i])*u[i].
TEXT ·swigluAVX512(SB), NOSPLIT, $0-32
	MOVQ n+0(FP), CX
	MOVQ act+8(FP), DI
	MOVQ gate+16(FP), SI
	MOVQ up+24(FP), DX
	EXPCONSTS

swLoop:
	CMPQ    CX, $16
	JLT     swTail
	VMOVUPS (SI), Z8
	ONEPLUSEXPNEG
	VMULPS  (DX), Z8, Z9
	VDIVPS  Z0, Z9, Z9
	VMOVUPS Z9, (DI)
	ADDQ    $64, SI
	ADDQ    $64, DX
	ADDQ    $64, DI
	SUBQ    $16, CX
	JMP     swLoop

swTail:
	TESTQ     CX, CX
	JZ        swDone
	TAILMASK
	VMOVUPS.Z (SI), K1, Z8
	VMOVUPS.Z (DX), K1, Z10
	ONEPLUSEXPNEG
	VMULPS    Z10, Z8, Z9
	VDIVPS    Z0, Z9, Z9
	VMOVUPS   Z9, K1, (DI)

swDone:
	VZEROUPPER
	RET

// func swigluBackAVX512(n int, dg, du, dact, gate, up *float32)
// With s = 1/(1 + e^-g): dg = dact*s*u*(1 + g*(1-s)), du = dact*s*g. du
// may be dact (each element is read before it is written).
TEXT ·swigluBackAVX512(SB), NOSPLIT, $0-48
	MOVQ n+0(FP), CX
	MOVQ dg+8(FP), DI
	MOVQ du+16(FP), R8
	MOVQ dact+24(FP), R9
	MOVQ gate+32(FP), SI
	MOVQ up+40(FP), DX
	EXPCONSTS

sbLoop:
	CMPQ    CX, $16
	JLT     sbTail
	VMOVUPS (SI), Z8
	VMOVUPS (DX), Z9
	VMOVUPS (R9), Z10
	ONEPLUSEXPNEG
	VDIVPS  Z0, Z27, Z0          // s
	VMULPS  Z0, Z10, Z10         // dact*s
	VSUBPS  Z0, Z27, Z11         // 1-s
	VFMADD213PS Z27, Z8, Z11     // 1 + g*(1-s)
	VMULPS  Z9, Z10, Z9          // dact*s*u
	VMULPS  Z11, Z9, Z9
	VMULPS  Z8, Z10, Z10         // dact*s*g
	VMOVUPS Z9, (DI)
	VMOVUPS Z10, (R8)
	ADDQ    $64, SI
	ADDQ    $64, DX
	ADDQ    $64, R9
	ADDQ    $64, DI
	ADDQ    $64, R8
	SUBQ    $16, CX
	JMP     sbLoop

sbTail:
	TESTQ     CX, CX
	JZ        sbDone
	TAILMASK
	VMOVUPS.Z (SI), K1, Z8
	VMOVUPS.Z (DX), K1, Z9
	VMOVUPS.Z (R9), K1, Z10
	ONEPLUSEXPNEG
	VDIVPS  Z0, Z27, Z0
	VMULPS  Z0, Z10, Z10
	VSUBPS  Z0, Z27, Z11
	VFMADD213PS Z27, Z8, Z11
	VMULPS  Z9, Z10, Z9
	VMULPS  Z11, Z9, Z9
	VMULPS  Z8, Z10, Z10
	VMOVUPS Z9, K1, (DI)
	VMOVUPS Z10, K1, (R8)

sbDone:
	VZEROUPPER
	RET

// func maxAVX512(n int, x *float32) float32
// The largest of x[0..n), n >= 1 (a NaN may or may not be returned).
TEXT ·maxAVX512(SB), NOSPLIT, $0-20
	MOVQ         n+0(FP), CX
	MOVQ         x+8(FP), SI
	VBROADCASTSS (SI), Z0
	VMOVAPS      Z0, Z1

mxLoop:
	CMPQ    CX, $32
	JLT     mx16
	VMAXPS  (SI), Z0, Z0
	VMAXPS  64(SI), Z1, Z1
	ADDQ    $128, SI
	SUBQ    $32, CX
	JMP     mxLoop

mx16:
	CMPQ    CX, $16
	JLT     mxTail
	VMAXPS  (SI), Z0, Z0
	ADDQ    $64, SI
	SUBQ    $16, CX

mxTail:
	TESTQ   CX, CX
	JZ      mxDone
	TAILMASK
	VMOVAPS Z0, Z2
	VMOVUPS (SI), K1, Z2         // masked lanes keep a value already seen
	VMAXPS  Z2, Z0, Z0

mxDone:
	VMAXPS        Z1, Z0, Z0
	VEXTRACTF64X4 $1, Z0, Y1
	VMAXPS        Y1, Y0, Y0
	VEXTRACTF128  $1, Y0, X1
	VMAXPS        X1, X0, X0
	VPERMILPS     $0x4e, X0, X1
	VMAXPS        X1, X0, X0
	VPERMILPS     $0xb1, X0, X1
	VMAXPS        X1, X0, X0
	VMOVSS        X0, ret+16(FP)
	VZEROUPPER
	RET

// func scaleAVX512(n int, x *float32, a float32)
// x[i] *= a.
TEXT ·scaleAVX512(SB), NOSPLIT, $0-20
	MOVQ         n+0(FP), CX
	MOVQ         x+8(FP), SI
	VBROADCASTSS a+16(FP), Z1

scLoop:
	CMPQ    CX, $16
	JLT     scTail
	VMULPS  (SI), Z1, Z0
	VMOVUPS Z0, (SI)
	ADDQ    $64, SI
	SUBQ    $16, CX
	JMP     scLoop

scTail:
	TESTQ     CX, CX
	JZ        scDone
	TAILMASK
	VMOVUPS.Z (SI), K1, Z0
	VMULPS    Z0, Z1, Z0
	VMOVUPS   Z0, K1, (SI)

scDone:
	VZEROUPPER
	RET

// func axpyAVX512(n int, a float32, x, y *float32)
// y[i] += a*x[i], one fused multiply-add per element.
TEXT ·axpyAVX512(SB), NOSPLIT, $0-32
	MOVQ         n+0(FP), CX
	VBROADCASTSS a+8(FP), Z1
	MOVQ         x+16(FP), SI
	MOVQ         y+24(FP), DI

axLoop:
	CMPQ        CX, $16
	JLT         axTail
	VMOVUPS     (DI), Z0
	VFMADD231PS (SI), Z1, Z0
	VMOVUPS     Z0, (DI)
	ADDQ        $64, SI
	ADDQ        $64, DI
	SUBQ        $16, CX
	JMP         axLoop

axTail:
	TESTQ       CX, CX
	JZ          axDone
	TAILMASK
	VMOVUPS.Z   (DI), K1, Z0
	VMOVUPS.Z   (SI), K1, Z2
	VFMADD231PS Z2, Z1, Z0
	VMOVUPS     Z0, K1, (DI)

axDone:
	VZEROUPPER
	RET

// func wsum4x64AVX512(nk int, p *float32, ldp int, v *float32, ldv int, out *float32, ldo int)
// For four rows r: out[r*ldo+d] = sum over j < nk of p[r*ldp+j]*v[j*ldv+d],
// d < 64, as nk fused multiply-adds in j order from 0: the bits of Axpy
// called for j = 0, 1, ... on a zeroed row. nk >= 1. Row r's accumulators
// are Z(4r)..Z(4r+3).
#define WROW(off, a0, a1, a2, a3) \
	VBROADCASTSS off, Z20 \
	VFMADD231PS  Z16, Z20, a0 \
	VFMADD231PS  Z17, Z20, a1 \
	VFMADD231PS  Z18, Z20, a2 \
	VFMADD231PS  Z19, Z20, a3

TEXT ·wsum4x64AVX512(SB), NOSPLIT, $0-56
	MOVQ   nk+0(FP), CX
	MOVQ   p+8(FP), SI
	MOVQ   ldp+16(FP), R8
	SHLQ   $2, R8
	LEAQ   (SI)(R8*2), R9         // p row 2
	MOVQ   v+24(FP), DI
	MOVQ   ldv+32(FP), R10
	SHLQ   $2, R10
	MOVQ   out+40(FP), BX
	MOVQ   ldo+48(FP), R11
	SHLQ   $2, R11
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15

wsLoop:
	VMOVUPS (DI), Z16
	VMOVUPS 64(DI), Z17
	VMOVUPS 128(DI), Z18
	VMOVUPS 192(DI), Z19
	WROW((SI), Z0, Z1, Z2, Z3)
	WROW((SI)(R8*1), Z4, Z5, Z6, Z7)
	WROW((R9), Z8, Z9, Z10, Z11)
	WROW((R9)(R8*1), Z12, Z13, Z14, Z15)
	ADDQ    $4, SI
	ADDQ    $4, R9
	ADDQ    R10, DI
	DECQ    CX
	JNZ     wsLoop

	VMOVUPS Z0, (BX)
	VMOVUPS Z1, 64(BX)
	VMOVUPS Z2, 128(BX)
	VMOVUPS Z3, 192(BX)
	ADDQ    R11, BX
	VMOVUPS Z4, (BX)
	VMOVUPS Z5, 64(BX)
	VMOVUPS Z6, 128(BX)
	VMOVUPS Z7, 192(BX)
	ADDQ    R11, BX
	VMOVUPS Z8, (BX)
	VMOVUPS Z9, 64(BX)
	VMOVUPS Z10, 128(BX)
	VMOVUPS Z11, 192(BX)
	ADDQ    R11, BX
	VMOVUPS Z12, (BX)
	VMOVUPS Z13, 64(BX)
	VMOVUPS Z14, 128(BX)
	VMOVUPS Z15, 192(BX)
	VZEROUPPER
	RET
