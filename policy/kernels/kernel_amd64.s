//go:build amd64 && !purego

#include "textflag.h"

// Micro-kernels of the blocked Sgemm. Each computes one MR x NR tile:
//
//	C = alpha*(Apanel * Bpanel) + beta*C      (C is read only when beta != 0)
//
// Apanel holds k steps of MR values (one column of the A block per step),
// Bpanel holds k steps of NR values (one row of the B block per step), both
// packed contiguously by the driver; C rows are ldc floats apart. k >= 1.

// ---------------------------------------------------------------- AVX-512
// 12 x 32 tile: 24 zmm accumulators (Z0..Z23), two B vectors (Z24, Z25),
// broadcasts rotate through Z26..Z29; Z30/Z31 hold alpha/beta at the end.

#define ROW512(off, t, acc0, acc1) \
	VBROADCASTSS off(SI), t \
	VFMADD231PS  Z24, t, acc0 \
	VFMADD231PS  Z25, t, acc1

#define STEP512 \
	VMOVUPS (DI), Z24 \
	VMOVUPS 64(DI), Z25 \
	ROW512(0, Z26, Z0, Z1) \
	ROW512(4, Z27, Z2, Z3) \
	ROW512(8, Z28, Z4, Z5) \
	ROW512(12, Z29, Z6, Z7) \
	ROW512(16, Z26, Z8, Z9) \
	ROW512(20, Z27, Z10, Z11) \
	ROW512(24, Z28, Z12, Z13) \
	ROW512(28, Z29, Z14, Z15) \
	ROW512(32, Z26, Z16, Z17) \
	ROW512(36, Z27, Z18, Z19) \
	ROW512(40, Z28, Z20, Z21) \
	ROW512(44, Z29, Z22, Z23) \
	ADDQ $48, SI \
	ADDQ $128, DI

#define STORE512_B0(acc0, acc1) \
	VMULPS  Z30, acc0, acc0 \
	VMULPS  Z30, acc1, acc1 \
	VMOVUPS acc0, (DX) \
	VMOVUPS acc1, 64(DX) \
	ADDQ    R8, DX

#define STORE512(acc0, acc1) \
	VMULPS      Z30, acc0, acc0 \
	VMULPS      Z30, acc1, acc1 \
	VFMADD231PS (DX), Z31, acc0 \
	VFMADD231PS 64(DX), Z31, acc1 \
	VMOVUPS     acc0, (DX) \
	VMOVUPS     acc1, 64(DX) \
	ADDQ        R8, DX

#define PREFETCHC \
	PREFETCHT0 (R9) \
	PREFETCHT0 64(R9) \
	ADDQ       R8, R9

// func kernel12x32AVX512(k int, a, b, c *float32, ldc int, alpha, beta float32)
TEXT ·kernel12x32AVX512(SB), NOSPLIT, $0-48
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DI
	MOVQ c+24(FP), DX
	MOVQ ldc+32(FP), R8
	SHLQ $2, R8

	// Prefetch the C tile (12 rows of two lines) while the loop runs.
	MOVQ DX, R9
	PREFETCHC
	PREFETCHC
	PREFETCHC
	PREFETCHC
	PREFETCHC
	PREFETCHC
	PREFETCHC
	PREFETCHC
	PREFETCHC
	PREFETCHC
	PREFETCHC
	PREFETCHC

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

	MOVQ CX, BX
	SHRQ $2, BX
	ANDQ $3, CX
	TESTQ BX, BX
	JZ   tail512

loop512:
	PREFETCHT0 384(SI)
	STEP512
	PREFETCHT0 384(SI)
	STEP512
	PREFETCHT0 384(SI)
	STEP512
	STEP512
	DECQ BX
	JNZ  loop512

tail512:
	TESTQ CX, CX
	JZ    done512

tailloop512:
	STEP512
	DECQ CX
	JNZ  tailloop512

done512:
	VBROADCASTSS alpha+40(FP), Z30
	MOVL         beta+44(FP), AX
	TESTL        $0x7fffffff, AX
	JZ           beta0_512
	VBROADCASTSS beta+44(FP), Z31
	STORE512(Z0, Z1)
	STORE512(Z2, Z3)
	STORE512(Z4, Z5)
	STORE512(Z6, Z7)
	STORE512(Z8, Z9)
	STORE512(Z10, Z11)
	STORE512(Z12, Z13)
	STORE512(Z14, Z15)
	STORE512(Z16, Z17)
	STORE512(Z18, Z19)
	STORE512(Z20, Z21)
	STORE512(Z22, Z23)
	VZEROUPPER
	RET

beta0_512:
	STORE512_B0(Z0, Z1)
	STORE512_B0(Z2, Z3)
	STORE512_B0(Z4, Z5)
	STORE512_B0(Z6, Z7)
	STORE512_B0(Z8, Z9)
	STORE512_B0(Z10, Z11)
	STORE512_B0(Z12, Z13)
	STORE512_B0(Z14, Z15)
	STORE512_B0(Z16, Z17)
	STORE512_B0(Z18, Z19)
	STORE512_B0(Z20, Z21)
	STORE512_B0(Z22, Z23)
	VZEROUPPER
	RET

// ---------------------------------------------------------- AVX2 + FMA
// 6 x 16 tile: 12 ymm accumulators (Y0..Y11), B in Y12/Y13, broadcasts in
// Y14/Y15; after the loop Y12..Y15 are reused for alpha, beta and C.

#define ROW256(off, t, acc0, acc1) \
	VBROADCASTSS off(SI), t \
	VFMADD231PS  Y12, t, acc0 \
	VFMADD231PS  Y13, t, acc1

#define STEP256 \
	VMOVUPS (DI), Y12 \
	VMOVUPS 32(DI), Y13 \
	ROW256(0, Y14, Y0, Y1) \
	ROW256(4, Y15, Y2, Y3) \
	ROW256(8, Y14, Y4, Y5) \
	ROW256(12, Y15, Y6, Y7) \
	ROW256(16, Y14, Y8, Y9) \
	ROW256(20, Y15, Y10, Y11) \
	ADDQ $24, SI \
	ADDQ $64, DI

#define STORE256_B0(acc0, acc1) \
	VMULPS  Y12, acc0, acc0 \
	VMULPS  Y12, acc1, acc1 \
	VMOVUPS acc0, (DX) \
	VMOVUPS acc1, 32(DX) \
	ADDQ    R8, DX

#define STORE256(acc0, acc1) \
	VMULPS      Y12, acc0, acc0 \
	VMULPS      Y12, acc1, acc1 \
	VMOVUPS     (DX), Y14 \
	VMOVUPS     32(DX), Y15 \
	VFMADD231PS Y14, Y13, acc0 \
	VFMADD231PS Y15, Y13, acc1 \
	VMOVUPS     acc0, (DX) \
	VMOVUPS     acc1, 32(DX) \
	ADDQ        R8, DX

// func kernel6x16AVX2(k int, a, b, c *float32, ldc int, alpha, beta float32)
TEXT ·kernel6x16AVX2(SB), NOSPLIT, $0-48
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DI
	MOVQ c+24(FP), DX
	MOVQ ldc+32(FP), R8
	SHLQ $2, R8

	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11

loop256:
	STEP256
	DECQ CX
	JNZ  loop256

	VBROADCASTSS alpha+40(FP), Y12
	MOVL         beta+44(FP), AX
	TESTL        $0x7fffffff, AX
	JZ           beta0_256
	VBROADCASTSS beta+44(FP), Y13
	STORE256(Y0, Y1)
	STORE256(Y2, Y3)
	STORE256(Y4, Y5)
	STORE256(Y6, Y7)
	STORE256(Y8, Y9)
	STORE256(Y10, Y11)
	VZEROUPPER
	RET

beta0_256:
	STORE256_B0(Y0, Y1)
	STORE256_B0(Y2, Y3)
	STORE256_B0(Y4, Y5)
	STORE256_B0(Y6, Y7)
	STORE256_B0(Y8, Y9)
	STORE256_B0(Y10, Y11)
	VZEROUPPER
	RET

// ---------------------------------------------------------------- peak
// func fmaLoopAVX512(iters int)
// Runs iters x 12 independent 16-wide FMAs (384 flops per iteration) on
// registers only: the benchmarks' measured compute peak of one core.
TEXT ·fmaLoopAVX512(SB), NOSPLIT, $0-8
	MOVQ   iters+0(FP), CX
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

peakloop:
	VFMADD231PS Z12, Z13, Z0
	VFMADD231PS Z12, Z13, Z1
	VFMADD231PS Z12, Z13, Z2
	VFMADD231PS Z12, Z13, Z3
	VFMADD231PS Z12, Z13, Z4
	VFMADD231PS Z12, Z13, Z5
	VFMADD231PS Z12, Z13, Z6
	VFMADD231PS Z12, Z13, Z7
	VFMADD231PS Z12, Z13, Z8
	VFMADD231PS Z12, Z13, Z9
	VFMADD231PS Z12, Z13, Z10
	VFMADD231PS Z12, Z13, Z11
	DECQ        CX
	JNZ         peakloop
	VZEROUPPER
	RET

// ----------------------------------------------------------------- dot
// func dotAVX512(n int, x, y *float32) float32
// Returns sum x[i]*y[i] over n elements: four 16-wide accumulators over
// blocks of 64, then 16 at a time, then scalars.
TEXT ·dotAVX512(SB), NOSPLIT, $0-28
	MOVQ   n+0(FP), CX
	MOVQ   x+8(FP), SI
	MOVQ   y+16(FP), DI
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3

dot64:
	CMPQ        CX, $64
	JLT         dot16
	VMOVUPS     (SI), Z4
	VMOVUPS     64(SI), Z5
	VMOVUPS     128(SI), Z6
	VMOVUPS     192(SI), Z7
	VFMADD231PS (DI), Z4, Z0
	VFMADD231PS 64(DI), Z5, Z1
	VFMADD231PS 128(DI), Z6, Z2
	VFMADD231PS 192(DI), Z7, Z3
	ADDQ        $256, SI
	ADDQ        $256, DI
	SUBQ        $64, CX
	JMP         dot64

dot16:
	CMPQ        CX, $16
	JLT         dotreduce
	VMOVUPS     (SI), Z4
	VFMADD231PS (DI), Z4, Z0
	ADDQ        $64, SI
	ADDQ        $64, DI
	SUBQ        $16, CX
	JMP         dot16

dotreduce:
	VADDPS        Z1, Z0, Z0
	VADDPS        Z3, Z2, Z2
	VADDPS        Z2, Z0, Z0
	VEXTRACTF32X8 $1, Z0, Y1
	VADDPS        Y1, Y0, Y0
	VEXTRACTF128  $1, Y0, X1
	VADDPS        X1, X0, X0
	VHADDPS       X0, X0, X0
	VHADDPS       X0, X0, X0

dottail:
	TESTQ       CX, CX
	JZ          dotdone
	VMOVSS      (SI), X4
	VFMADD231SS (DI), X4, X0
	ADDQ        $4, SI
	ADDQ        $4, DI
	DECQ        CX
	JMP         dottail

dotdone:
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET
