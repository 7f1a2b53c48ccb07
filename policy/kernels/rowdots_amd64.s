//go:build amd64 && !purego

#include "textflag.h"

// Dot products with one fixed rounding, shared by the single product and
// the 4x4 tile, so that a product's bits never depend on what is computed
// beside it (the engine's batch invariance):
//
//	acc = 0 (16 lanes); for each block of 16 elements (the last one
//	zero-padded): acc = fma(x block, y block, acc)
//	d[i] = acc[i] + acc[i+8]; e[i] = d[i] + d[i+4]; f[i] = e[i] + e[i+2];
//	result = f[0] + f[1]

// TAILK1 sets K1 to the low CX bits (1 <= CX <= 15), using AX.
#define TAILK1 \
	MOVL  $1, AX \
	SHLL  CX, AX \
	DECL  AX \
	KMOVW AX, K1

// func dotChainAVX512(n int, x, y *float32) float32
TEXT ·dotChainAVX512(SB), NOSPLIT, $0-28
	MOVQ   n+0(FP), CX
	MOVQ   x+8(FP), SI
	MOVQ   y+16(FP), DI
	VPXORD Z0, Z0, Z0

dcLoop:
	CMPQ        CX, $16
	JLT         dcTail
	VMOVUPS     (SI), Z1
	VFMADD231PS (DI), Z1, Z0
	ADDQ        $64, SI
	ADDQ        $64, DI
	SUBQ        $16, CX
	JMP         dcLoop

dcTail:
	TESTQ       CX, CX
	JZ          dcReduce
	TAILK1
	VMOVUPS.Z   (SI), K1, Z1
	VMOVUPS.Z   (DI), K1, Z2
	VFMADD231PS Z2, Z1, Z0

dcReduce:
	VEXTRACTF64X4 $1, Z0, Y1
	VADDPS        Y1, Y0, Y0
	VEXTRACTF128  $1, Y0, X1
	VADDPS        X1, X0, X0
	VMOVHLPS      X0, X0, X1
	VADDPS        X1, X0, X0
	VMOVSHDUP     X0, X1
	VADDSS        X1, X0, X0
	VMOVSS        X0, ret+24(FP)
	VZEROUPPER
	RET

// Tile registers: accumulator of x row r and w row c is Z(c*4+r); x rows
// load into Z16..Z19, w rows into Z20.

// WCOL multiplies the current block of w row c (at wp) by the four x rows.
#define WCOL(wp, a0, a1, a2, a3) \
	VMOVUPS     (wp), Z20 \
	VFMADD231PS Z20, Z16, a0 \
	VFMADD231PS Z20, Z17, a1 \
	VFMADD231PS Z20, Z18, a2 \
	VFMADD231PS Z20, Z19, a3

#define WCOLZ(wp, a0, a1, a2, a3) \
	VMOVUPS.Z   (wp), K1, Z20 \
	VFMADD231PS Z20, Z16, a0 \
	VFMADD231PS Z20, Z17, a1 \
	VFMADD231PS Z20, Z18, a2 \
	VFMADD231PS Z20, Z19, a3

// HALF256 is the first reduction step for the pair of accumulators (p, q)
// into p: lanes 0..7 d of p, lanes 8..15 d of q. Uses Z21.
#define HALF256(p, q) \
	VSHUFF32X4 $0x44, q, p, Z21 \
	VSHUFF32X4 $0xee, q, p, p \
	VADDPS     Z21, p, p

// HALF128 is the second step for (p, q) into p: 128-bit block b of p holds
// e of accumulator 2b', see the comment of dotTile4x4AVX512. Uses Z21.
#define HALF128(p, q) \
	VSHUFF32X4 $0x88, q, p, Z21 \
	VSHUFF32X4 $0xdd, q, p, p \
	VADDPS     Z21, p, p

// HALF64 and HALF32 are the third and fourth steps, within 128-bit blocks.
#define HALF64(p, q) \
	VSHUFPS $0x44, q, p, Z21 \
	VSHUFPS $0xee, q, p, p \
	VADDPS  Z21, p, p

#define HALF32(p, q) \
	VSHUFPS $0x88, q, p, Z21 \
	VSHUFPS $0xdd, q, p, p \
	VADDPS  Z21, p, p

// func dotTile4x4AVX512(n int, x *float32, ldx int, w *float32, ldw int, out *float32)
// out[r*4+c] = the dot product of x row r and w row c (rows ldx and ldw
// floats apart), r, c < 4, n >= 1, rounded as dotChainAVX512 rounds it.
// The sixteen reductions run together: each step halves the registers,
// pairing them by shuffles, so that lane r*4+c of the last one is (r, c).
TEXT ·dotTile4x4AVX512(SB), NOSPLIT, $0-48
	MOVQ   n+0(FP), CX
	MOVQ   x+8(FP), SI
	MOVQ   ldx+16(FP), R8
	SHLQ   $2, R8
	LEAQ   (SI)(R8*2), R9         // x row 2
	MOVQ   w+24(FP), DI
	MOVQ   ldw+32(FP), R10
	SHLQ   $2, R10
	LEAQ   (DI)(R10*2), R11       // w row 2
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

tLoop:
	CMPQ    CX, $16
	JLT     tTail
	VMOVUPS (SI), Z16
	VMOVUPS (SI)(R8*1), Z17
	VMOVUPS (R9), Z18
	VMOVUPS (R9)(R8*1), Z19
	WCOL(DI, Z0, Z1, Z2, Z3)
	LEAQ    (DI)(R10*1), AX
	WCOL(AX, Z4, Z5, Z6, Z7)
	WCOL(R11, Z8, Z9, Z10, Z11)
	LEAQ    (R11)(R10*1), AX
	WCOL(AX, Z12, Z13, Z14, Z15)
	ADDQ    $64, SI
	ADDQ    $64, R9
	ADDQ    $64, DI
	ADDQ    $64, R11
	SUBQ    $16, CX
	JMP     tLoop

tTail:
	TESTQ     CX, CX
	JZ        tReduce
	TAILK1
	VMOVUPS.Z (SI), K1, Z16
	LEAQ      (SI)(R8*1), AX
	VMOVUPS.Z (AX), K1, Z17
	VMOVUPS.Z (R9), K1, Z18
	LEAQ      (R9)(R8*1), AX
	VMOVUPS.Z (AX), K1, Z19
	WCOLZ(DI, Z0, Z1, Z2, Z3)
	LEAQ      (DI)(R10*1), AX
	WCOLZ(AX, Z4, Z5, Z6, Z7)
	WCOLZ(R11, Z8, Z9, Z10, Z11)
	LEAQ      (R11)(R10*1), AX
	WCOLZ(AX, Z12, Z13, Z14, Z15)

tReduce:
	// Accumulator k = c*4+r is Zk. Step 1 pairs (2m, 2m+1) into Z(2m).
	HALF256(Z0, Z1)
	HALF256(Z2, Z3)
	HALF256(Z4, Z5)
	HALF256(Z6, Z7)
	HALF256(Z8, Z9)
	HALF256(Z10, Z11)
	HALF256(Z12, Z13)
	HALF256(Z14, Z15)
	// Step 2: (Z0, Z2) holds accumulators 0..3 by blocks, (Z4, Z6) 4..7,
	// (Z8, Z10) 8..11, (Z12, Z14) 12..15.
	HALF128(Z0, Z2)
	HALF128(Z4, Z6)
	HALF128(Z8, Z10)
	HALF128(Z12, Z14)
	// Step 3: block j of Z0 is [f0 f1 of acc j, f0 f1 of acc 4+j]; of Z8,
	// the same for accs 8+j and 12+j.
	HALF64(Z0, Z4)
	HALF64(Z8, Z12)
	// Step 4: lane 4j+t of Z0 is accumulator 4t+j = (x row j, w row t).
	HALF32(Z0, Z8)
	VMOVUPS Z0, (BX)
	VZEROUPPER
	RET

// W1 multiplies the current block of w row c (at wp) by the x row.
#define W1(wp, acc) \
	VMOVUPS     (wp), Z20 \
	VFMADD231PS Z20, Z16, acc

#define W1Z(wp, acc) \
	VMOVUPS.Z   (wp), K1, Z20 \
	VFMADD231PS Z20, Z16, acc

// func dotTile1x8AVX512(n int, x *float32, w *float32, ldw int, out *float32)
// The dot products of one x row with eight w rows (ldw floats apart), n >=
// 1, rounded as dotChainAVX512 rounds them: out[4j] is w row j and
// out[4j+1] w row 4+j, j < 4 (the other lanes are repeats). Eight
// independent chains: the decode path of one sequence.
TEXT ·dotTile1x8AVX512(SB), NOSPLIT, $0-40
	MOVQ   n+0(FP), CX
	MOVQ   x+8(FP), SI
	MOVQ   w+16(FP), DI
	MOVQ   ldw+24(FP), R10
	SHLQ   $2, R10
	LEAQ   (R10)(R10*2), R12      // 3 rows
	LEAQ   (DI)(R10*4), R11       // w row 4
	MOVQ   out+32(FP), BX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7

oLoop:
	CMPQ    CX, $16
	JLT     oTail
	VMOVUPS (SI), Z16
	W1(DI, Z0)
	LEAQ    (DI)(R10*1), AX
	W1(AX, Z1)
	LEAQ    (DI)(R10*2), AX
	W1(AX, Z2)
	LEAQ    (DI)(R12*1), AX
	W1(AX, Z3)
	W1(R11, Z4)
	LEAQ    (R11)(R10*1), AX
	W1(AX, Z5)
	LEAQ    (R11)(R10*2), AX
	W1(AX, Z6)
	LEAQ    (R11)(R12*1), AX
	W1(AX, Z7)
	ADDQ    $64, SI
	ADDQ    $64, DI
	ADDQ    $64, R11
	SUBQ    $16, CX
	JMP     oLoop

oTail:
	TESTQ     CX, CX
	JZ        oReduce
	TAILK1
	VMOVUPS.Z (SI), K1, Z16
	W1Z(DI, Z0)
	LEAQ      (DI)(R10*1), AX
	W1Z(AX, Z1)
	LEAQ      (DI)(R10*2), AX
	W1Z(AX, Z2)
	LEAQ      (DI)(R12*1), AX
	W1Z(AX, Z3)
	W1Z(R11, Z4)
	LEAQ      (R11)(R10*1), AX
	W1Z(AX, Z5)
	LEAQ      (R11)(R10*2), AX
	W1Z(AX, Z6)
	LEAQ      (R11)(R12*1), AX
	W1Z(AX, Z7)

oReduce:
	HALF256(Z0, Z1)
	HALF256(Z2, Z3)
	HALF256(Z4, Z5)
	HALF256(Z6, Z7)
	HALF128(Z0, Z2)      // blocks: accumulators 0..3
	HALF128(Z4, Z6)      // blocks: accumulators 4..7
	HALF64(Z0, Z4)       // block j: f of acc j, f of acc 4+j
	HALF32(Z0, Z0)       // block j: acc j, acc 4+j, repeated
	VMOVUPS Z0, (BX)
	VZEROUPPER
	RET
