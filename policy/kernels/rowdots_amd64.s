//go:build amd64 && !purego

#include "textflag.h"

// dot2x3AVX512 computes the six dot products of two rows of x with three
// rows of w, each rounded exactly as dotAVX512 rounds it: four 16-lane
// accumulators over blocks of 64, the remaining blocks of 16 into the
// first, then the same reduction tree. Accumulator (a, j, q) of row a,
// weight row j, quarter q is Z((a*3+j)*4+q).

// QUARTER multiplies one 16-float quarter (at byte offset off) of both x
// rows by the three w rows into the accumulators of that quarter.
#define QUARTER(off, a00, a01, a02, a10, a11, a12) \
	VMOVUPS     off(SI), Z24 \
	VMOVUPS     off(DX), Z25 \
	VMOVUPS     off(DI), Z26 \
	VFMADD231PS Z26, Z24, a00 \
	VFMADD231PS Z26, Z25, a10 \
	VMOVUPS     off(R8), Z27 \
	VFMADD231PS Z27, Z24, a01 \
	VFMADD231PS Z27, Z25, a11 \
	VMOVUPS     off(R9), Z28 \
	VFMADD231PS Z28, Z24, a02 \
	VFMADD231PS Z28, Z25, a12

// HRED finishes dotAVX512's reduction of Z, whose four accumulators are
// already summed into it, and stores the float at off(BX); Z's Y and X
// views are y0, x0, and y1, x1 are scratch.
#define HRED(z, y0, x0, y1, x1, off) \
	VEXTRACTF64X4 $1, z, y1 \
	VADDPS        y1, y0, y0 \
	VEXTRACTF128  $1, y0, x1 \
	VADDPS        x1, x0, x0 \
	VHADDPS       x0, x0, x0 \
	VHADDPS       x0, x0, x0 \
	VMOVSS        x0, off(BX)

// VRED sums four accumulators as dotAVX512 does: (a0+a1) + (a2+a3) into a0.
#define VRED(a0, a1, a2, a3) \
	VADDPS a1, a0, a0 \
	VADDPS a3, a2, a2 \
	VADDPS a2, a0, a0

// func dot2x3AVX512(n int, x *float32, ldx int, w *float32, ldw int, out *float32)
// out[a*3+j] = sum over i < n of x[a*ldx+i]*w[j*ldw+i], a < 2, j < 3; n is a
// positive multiple of 16.
TEXT ·dot2x3AVX512(SB), NOSPLIT, $0-48
	MOVQ   n+0(FP), CX
	MOVQ   x+8(FP), SI
	MOVQ   ldx+16(FP), DX
	LEAQ   (SI)(DX*4), DX
	MOVQ   w+24(FP), DI
	MOVQ   ldw+32(FP), R8
	LEAQ   (DI)(R8*4), R9
	LEAQ   (R9)(R8*4), R10
	MOVQ   R9, R8
	MOVQ   R10, R9
	MOVQ   out+40(FP), BX
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
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	VPXORD Z18, Z18, Z18
	VPXORD Z19, Z19, Z19
	VPXORD Z20, Z20, Z20
	VPXORD Z21, Z21, Z21
	VPXORD Z22, Z22, Z22
	VPXORD Z23, Z23, Z23

t64:
	CMPQ CX, $64
	JLT  t16
	QUARTER(0, Z0, Z4, Z8, Z12, Z16, Z20)
	QUARTER(64, Z1, Z5, Z9, Z13, Z17, Z21)
	QUARTER(128, Z2, Z6, Z10, Z14, Z18, Z22)
	QUARTER(192, Z3, Z7, Z11, Z15, Z19, Z23)
	ADDQ $256, SI
	ADDQ $256, DX
	ADDQ $256, DI
	ADDQ $256, R8
	ADDQ $256, R9
	SUBQ $64, CX
	JMP  t64

t16:
	CMPQ CX, $16
	JLT  tred
	QUARTER(0, Z0, Z4, Z8, Z12, Z16, Z20)
	ADDQ $64, SI
	ADDQ $64, DX
	ADDQ $64, DI
	ADDQ $64, R8
	ADDQ $64, R9
	SUBQ $16, CX
	JMP  t16

tred:
	VRED(Z0, Z1, Z2, Z3)
	HRED(Z0, Y0, X0, Y1, X1, 0)
	VRED(Z4, Z5, Z6, Z7)
	HRED(Z4, Y4, X4, Y5, X5, 4)
	VRED(Z8, Z9, Z10, Z11)
	HRED(Z8, Y8, X8, Y9, X9, 8)
	VRED(Z12, Z13, Z14, Z15)
	HRED(Z12, Y12, X12, Y13, X13, 12)
	VRED(Z16, Z17, Z18, Z19)
	VMOVAPS Z16, Z0
	HRED(Z0, Y0, X0, Y1, X1, 16)
	VRED(Z20, Z21, Z22, Z23)
	VMOVAPS Z20, Z4
	HRED(Z4, Y4, X4, Y5, X5, 20)
	VZEROUPPER
	RET
