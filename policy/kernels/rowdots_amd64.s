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

// W1 multiplies the current block of the w row at memory operand m by the
// x row (Z16) into acc; W1Z is the masked last block.
#define W1(m, acc) \
	VMOVUPS     m, Z20 \
	VFMADD231PS Z20, Z16, acc

#define W1Z(m, acc) \
	VMOVUPS.Z   m, K1, Z20 \
	VFMADD231PS Z20, Z16, acc

// W16 runs W (W1 or W1Z) over the sixteen w rows: four groups of four
// rows, from the bases DI, R11, R13 and DX (R10 = one row, R12 = three).
#define W16(W) \
	W((DI), Z0) \
	W((DI)(R10*1), Z1) \
	W((DI)(R10*2), Z2) \
	W((DI)(R12*1), Z3) \
	W((R11), Z4) \
	W((R11)(R10*1), Z5) \
	W((R11)(R10*2), Z6) \
	W((R11)(R12*1), Z7) \
	W((R13), Z8) \
	W((R13)(R10*1), Z9) \
	W((R13)(R10*2), Z10) \
	W((R13)(R12*1), Z11) \
	W((DX), Z12) \
	W((DX)(R10*1), Z13) \
	W((DX)(R10*2), Z14) \
	W((DX)(R12*1), Z15)

// func dotTile1x16AVX512(n int, x *float32, w *float32, ldw int, out *float32)
// The dot products of one x row with sixteen w rows (ldw floats apart),
// n >= 1, rounded as dotChainAVX512 rounds them: sixteen independent
// chains (the decode path of one sequence), reduced together as in
// dotTile4x4AVX512, so that out[4j+t] is w row 4t+j.
TEXT ·dotTile1x16AVX512(SB), NOSPLIT, $0-40
	MOVQ   n+0(FP), CX
	MOVQ   x+8(FP), SI
	MOVQ   w+16(FP), DI
	MOVQ   ldw+24(FP), R10
	SHLQ   $2, R10
	LEAQ   (R10)(R10*2), R12      // 3 rows
	LEAQ   (DI)(R10*4), R11       // w row 4
	LEAQ   (R11)(R10*4), R13      // w row 8
	LEAQ   (R13)(R10*4), DX       // w row 12
	MOVQ   out+32(FP), BX
	LEAQ   (DX)(R10*4), R8        // the next tile's rows, prefetched
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

oLoop:
	CMPQ    CX, $16
	JLT     oTail
	// Sixteen rows are sixteen short streams, which the hardware
	// prefetchers follow poorly: fetch the next tile's memory, 1 KiB per
	// block, in address order (all of it when rows are contiguous).
	PREFETCHT0 (R8)
	PREFETCHT0 64(R8)
	PREFETCHT0 128(R8)
	PREFETCHT0 192(R8)
	PREFETCHT0 256(R8)
	PREFETCHT0 320(R8)
	PREFETCHT0 384(R8)
	PREFETCHT0 448(R8)
	PREFETCHT0 512(R8)
	PREFETCHT0 576(R8)
	PREFETCHT0 640(R8)
	PREFETCHT0 704(R8)
	PREFETCHT0 768(R8)
	PREFETCHT0 832(R8)
	PREFETCHT0 896(R8)
	PREFETCHT0 960(R8)
	ADDQ    $1024, R8
	VMOVUPS (SI), Z16
	W16(W1)
	ADDQ    $64, SI
	ADDQ    $64, DI
	ADDQ    $64, R11
	ADDQ    $64, R13
	ADDQ    $64, DX
	SUBQ    $16, CX
	JMP     oLoop

oTail:
	TESTQ     CX, CX
	JZ        oReduce
	TAILK1
	VMOVUPS.Z (SI), K1, Z16
	W16(W1Z)

oReduce:
	HALF256(Z0, Z1)
	HALF256(Z2, Z3)
	HALF256(Z4, Z5)
	HALF256(Z6, Z7)
	HALF256(Z8, Z9)
	HALF256(Z10, Z11)
	HALF256(Z12, Z13)
	HALF256(Z14, Z15)
	HALF128(Z0, Z2)
	HALF128(Z4, Z6)
	HALF128(Z8, Z10)
	HALF128(Z12, Z14)
	HALF64(Z0, Z4)
	HALF64(Z8, Z12)
	HALF32(Z0, Z8)
	VMOVUPS Z0, (BX)
	VZEROUPPER
	RET

// func dotPanel4x4AVX512(n int, x *float32, ldx, rows4 int, w *float32, ldw, cols4 int, y *float32, ldy int)
// The 4x4 tiles of dotTile4x4AVX512 over 4*rows4 x rows by 4*cols4 w rows,
// each stored straight into y (rows ldy floats apart): y[i*ldy+j] is the
// dot product of x row i and w row j, rounded as dotChainAVX512 rounds it.
// Tiles run column group by column group, the row groups inside, so that
// four w rows stay in L1 while the x rows pass. n >= 1, rows4, cols4 >= 1.
TEXT ·dotPanel4x4AVX512(SB), NOSPLIT, $0-72
	MOVQ  n+0(FP), CX
	ANDQ  $15, CX
	JZ    pNoTail
	TAILK1

pNoTail:
	MOVQ ldx+16(FP), R8
	SHLQ $2, R8
	MOVQ ldw+40(FP), R10
	SHLQ $2, R10
	MOVQ ldy+64(FP), R12
	SHLQ $2, R12
	MOVQ w+32(FP), DX         // w rows of the column group

pCols:
	MOVQ x+8(FP), R14         // x rows of the row group
	MOVQ y+56(FP), BX         // the tile's first output
	MOVQ rows4+24(FP), R13

pRows:
	MOVQ   R14, SI
	LEAQ   (R14)(R8*2), R9
	MOVQ   DX, DI
	LEAQ   (DX)(R10*2), R11
	MOVQ   n+0(FP), CX
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

pLoop:
	CMPQ    CX, $16
	JLT     pTail
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
	JMP     pLoop

pTail:
	TESTQ     CX, CX
	JZ        pReduce
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

pReduce:
	// As in dotTile4x4AVX512: lane 4j+t of Z0 is (x row j, w row t), so
	// 128-bit block j is the four outputs of x row j.
	HALF256(Z0, Z1)
	HALF256(Z2, Z3)
	HALF256(Z4, Z5)
	HALF256(Z6, Z7)
	HALF256(Z8, Z9)
	HALF256(Z10, Z11)
	HALF256(Z12, Z13)
	HALF256(Z14, Z15)
	HALF128(Z0, Z2)
	HALF128(Z4, Z6)
	HALF128(Z8, Z10)
	HALF128(Z12, Z14)
	HALF64(Z0, Z4)
	HALF64(Z8, Z12)
	HALF32(Z0, Z8)
	VMOVUPS       X0, (BX)
	VEXTRACTF32X4 $1, Z0, (BX)(R12*1)
	LEAQ          (BX)(R12*2), AX
	VEXTRACTF32X4 $2, Z0, (AX)
	VEXTRACTF32X4 $3, Z0, (AX)(R12*1)
	LEAQ          (AX)(R12*2), BX  // the next row group's outputs
	LEAQ          (R14)(R8*4), R14
	DECQ          R13
	JNZ           pRows

	LEAQ (DX)(R10*4), DX
	ADDQ $16, y+56(FP)
	DECQ cols4+48(FP)
	JNZ  pCols
	VZEROUPPER
	RET
