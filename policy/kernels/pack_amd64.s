//go:build amd64 && !purego

#include "textflag.h"

// Packing of the AVX-512 kernel's micro-panels (12 rows of A, 32 columns of
// B, k steps each). Lanes past the valid rows or columns are written as
// zeros; masked-off lanes are never read.

// TRANSPOSE16 transposes the 16x16 floats in Z0..Z15 (row i in Zi) in
// place, using Z16..Z31: four rounds of unpacks and 128-bit lane shuffles.
#define TRANSPOSE16 \
	VUNPCKLPS  Z1, Z0, Z16 \
	VUNPCKHPS  Z1, Z0, Z17 \
	VUNPCKLPS  Z3, Z2, Z18 \
	VUNPCKHPS  Z3, Z2, Z19 \
	VUNPCKLPS  Z5, Z4, Z20 \
	VUNPCKHPS  Z5, Z4, Z21 \
	VUNPCKLPS  Z7, Z6, Z22 \
	VUNPCKHPS  Z7, Z6, Z23 \
	VUNPCKLPS  Z9, Z8, Z24 \
	VUNPCKHPS  Z9, Z8, Z25 \
	VUNPCKLPS  Z11, Z10, Z26 \
	VUNPCKHPS  Z11, Z10, Z27 \
	VUNPCKLPS  Z13, Z12, Z28 \
	VUNPCKHPS  Z13, Z12, Z29 \
	VUNPCKLPS  Z15, Z14, Z30 \
	VUNPCKHPS  Z15, Z14, Z31 \
	VUNPCKLPD  Z18, Z16, Z0 \
	VUNPCKHPD  Z18, Z16, Z1 \
	VUNPCKLPD  Z19, Z17, Z2 \
	VUNPCKHPD  Z19, Z17, Z3 \
	VUNPCKLPD  Z22, Z20, Z4 \
	VUNPCKHPD  Z22, Z20, Z5 \
	VUNPCKLPD  Z23, Z21, Z6 \
	VUNPCKHPD  Z23, Z21, Z7 \
	VUNPCKLPD  Z26, Z24, Z8 \
	VUNPCKHPD  Z26, Z24, Z9 \
	VUNPCKLPD  Z27, Z25, Z10 \
	VUNPCKHPD  Z27, Z25, Z11 \
	VUNPCKLPD  Z30, Z28, Z12 \
	VUNPCKHPD  Z30, Z28, Z13 \
	VUNPCKLPD  Z31, Z29, Z14 \
	VUNPCKHPD  Z31, Z29, Z15 \
	VSHUFF32X4 $0x88, Z4, Z0, Z16 \
	VSHUFF32X4 $0x88, Z5, Z1, Z17 \
	VSHUFF32X4 $0x88, Z6, Z2, Z18 \
	VSHUFF32X4 $0x88, Z7, Z3, Z19 \
	VSHUFF32X4 $0xdd, Z4, Z0, Z20 \
	VSHUFF32X4 $0xdd, Z5, Z1, Z21 \
	VSHUFF32X4 $0xdd, Z6, Z2, Z22 \
	VSHUFF32X4 $0xdd, Z7, Z3, Z23 \
	VSHUFF32X4 $0x88, Z12, Z8, Z24 \
	VSHUFF32X4 $0x88, Z13, Z9, Z25 \
	VSHUFF32X4 $0x88, Z14, Z10, Z26 \
	VSHUFF32X4 $0x88, Z15, Z11, Z27 \
	VSHUFF32X4 $0xdd, Z12, Z8, Z28 \
	VSHUFF32X4 $0xdd, Z13, Z9, Z29 \
	VSHUFF32X4 $0xdd, Z14, Z10, Z30 \
	VSHUFF32X4 $0xdd, Z15, Z11, Z31 \
	VSHUFF32X4 $0x88, Z24, Z16, Z0 \
	VSHUFF32X4 $0x88, Z25, Z17, Z1 \
	VSHUFF32X4 $0x88, Z26, Z18, Z2 \
	VSHUFF32X4 $0x88, Z27, Z19, Z3 \
	VSHUFF32X4 $0x88, Z28, Z20, Z4 \
	VSHUFF32X4 $0x88, Z29, Z21, Z5 \
	VSHUFF32X4 $0x88, Z30, Z22, Z6 \
	VSHUFF32X4 $0x88, Z31, Z23, Z7 \
	VSHUFF32X4 $0xdd, Z24, Z16, Z8 \
	VSHUFF32X4 $0xdd, Z25, Z17, Z9 \
	VSHUFF32X4 $0xdd, Z26, Z18, Z10 \
	VSHUFF32X4 $0xdd, Z27, Z19, Z11 \
	VSHUFF32X4 $0xdd, Z28, Z20, Z12 \
	VSHUFF32X4 $0xdd, Z29, Z21, Z13 \
	VSHUFF32X4 $0xdd, Z30, Z22, Z14 \
	VSHUFF32X4 $0xdd, Z31, Z23, Z15

// LOAD3 loads 16 floats from each of three rows, R10, R10+R8 and R10+2*R8,
// into r0, r1, r2, and moves R10 three rows on (R9 = 3*R8).
#define LOAD3(r0, r1, r2) \
	VMOVUPS (R10), r0 \
	VMOVUPS (R10)(R8*1), r1 \
	VMOVUPS (R10)(R8*2), r2 \
	ADDQ    R9, R10

// STORE12 writes the first 12 floats of Zt at off(DI).
#define STORE12(t, off) VMOVUPS t, K2, off(DI)

// func packA12Rows(kb int, dst, src *float32, lda int)
// A stored with its k steps along rows (op(A) = A), a full panel of 12 rows
// and kb a multiple of 16: dst[p*12+i] = src[i*lda+p]. Blocks of 16 k
// steps are loaded as 12 rows (and 4 zero rows) and transposed.
TEXT ·packA12Rows(SB), NOSPLIT, $0-32
	MOVQ  kb+0(FP), CX
	MOVQ  dst+8(FP), DI
	MOVQ  src+16(FP), SI
	MOVQ  lda+24(FP), R8
	SHLQ  $2, R8
	LEAQ  (R8)(R8*2), R9
	MOVL  $0x0fff, BX
	KMOVW BX, K2

parLoop:
	CMPQ   CX, $16
	JLT    parDone
	MOVQ   SI, R10
	LOAD3(Z0, Z1, Z2)
	LOAD3(Z3, Z4, Z5)
	LOAD3(Z6, Z7, Z8)
	LOAD3(Z9, Z10, Z11)
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15
	TRANSPOSE16
	STORE12(Z0, 0)
	STORE12(Z1, 48)
	STORE12(Z2, 96)
	STORE12(Z3, 144)
	STORE12(Z4, 192)
	STORE12(Z5, 240)
	STORE12(Z6, 288)
	STORE12(Z7, 336)
	STORE12(Z8, 384)
	STORE12(Z9, 432)
	STORE12(Z10, 480)
	STORE12(Z11, 528)
	STORE12(Z12, 576)
	STORE12(Z13, 624)
	STORE12(Z14, 672)
	STORE12(Z15, 720)
	ADDQ   $64, SI
	ADDQ   $768, DI
	SUBQ   $16, CX
	JMP    parLoop

parDone:
	VZEROUPPER
	RET

// STORE16 writes Zt at off(DI).
#define STORE16(t, off) VMOVUPS t, off(DI)

// B16 packs columns R10.. (16 stored rows) of one block of 16 k steps into
// the 32-wide panel at DI (stores 128 bytes apart).
#define B16 \
	LOAD3(Z0, Z1, Z2) \
	LOAD3(Z3, Z4, Z5) \
	LOAD3(Z6, Z7, Z8) \
	LOAD3(Z9, Z10, Z11) \
	LOAD3(Z12, Z13, Z14) \
	VMOVUPS (R10), Z15 \
	TRANSPOSE16 \
	STORE16(Z0, 0) \
	STORE16(Z1, 128) \
	STORE16(Z2, 256) \
	STORE16(Z3, 384) \
	STORE16(Z4, 512) \
	STORE16(Z5, 640) \
	STORE16(Z6, 768) \
	STORE16(Z7, 896) \
	STORE16(Z8, 1024) \
	STORE16(Z9, 1152) \
	STORE16(Z10, 1280) \
	STORE16(Z11, 1408) \
	STORE16(Z12, 1536) \
	STORE16(Z13, 1664) \
	STORE16(Z14, 1792) \
	STORE16(Z15, 1920)

// func packB32Rows(kb int, dst, src *float32, ldb int)
// B stored with its k steps along rows (op(B) = B^T, the weights of x W^T),
// a full panel of 32 columns and kb a multiple of 16: dst[p*32+j] =
// src[j*ldb+p], as two 16x16 transposes per block of 16 k steps.
TEXT ·packB32Rows(SB), NOSPLIT, $0-32
	MOVQ kb+0(FP), CX
	MOVQ dst+8(FP), DI
	MOVQ src+16(FP), SI
	MOVQ ldb+24(FP), R8
	SHLQ $2, R8
	LEAQ (R8)(R8*2), R9
	MOVQ R8, R11
	SHLQ $4, R11            // 16 rows

pbrLoop:
	CMPQ CX, $16
	JLT  pbrDone
	MOVQ SI, R10
	B16
	ADDQ $64, DI
	LEAQ (SI)(R11*1), R10
	B16
	SUBQ $64, DI
	ADDQ $64, SI
	ADDQ $2048, DI
	SUBQ $16, CX
	JMP  pbrLoop

pbrDone:
	VZEROUPPER
	RET

// func packA12Cols(kb int, dst, src *float32, lda int, mask uint16)
// A stored transposed (op(A) = A^T, a k step is a row of lda floats):
// dst[p*12+i] = src[p*lda+i] for the i set in mask, 0 for the others.
TEXT ·packA12Cols(SB), NOSPLIT, $0-34
	MOVQ    kb+0(FP), CX
	MOVQ    dst+8(FP), DI
	MOVQ    src+16(FP), SI
	MOVQ    lda+24(FP), AX
	SHLQ    $2, AX
	MOVWLZX mask+32(FP), BX
	KMOVW   BX, K3
	MOVL    $0x0fff, BX
	KMOVW   BX, K2

pacLoop:
	TESTQ     CX, CX
	JZ        pacDone
	VMOVUPS.Z (SI), K3, Z0
	VMOVUPS   Z0, K2, (DI)
	ADDQ      AX, SI
	ADDQ      $48, DI
	DECQ      CX
	JMP       pacLoop

pacDone:
	VZEROUPPER
	RET

// func packB32Cols(kb int, dst, src *float32, ldb int, lo, hi uint16)
// B stored untransposed (a k step is a row of ldb floats): dst[p*32+j] =
// src[p*ldb+j] for the columns set in lo and hi, 0 for the others.
TEXT ·packB32Cols(SB), NOSPLIT, $0-36
	MOVQ    kb+0(FP), CX
	MOVQ    dst+8(FP), DI
	MOVQ    src+16(FP), SI
	MOVQ    ldb+24(FP), AX
	SHLQ    $2, AX
	MOVWLZX lo+32(FP), BX
	KMOVW   BX, K3
	MOVWLZX hi+34(FP), BX
	KMOVW   BX, K4

pbcLoop:
	TESTQ     CX, CX
	JZ        pbcDone
	VMOVUPS.Z (SI), K3, Z0
	VMOVUPS.Z 64(SI), K4, Z1
	VMOVUPS   Z0, (DI)
	VMOVUPS   Z1, 64(DI)
	ADDQ      AX, SI
	ADDQ      $128, DI
	DECQ      CX
	JMP       pbcLoop

pbcDone:
	VZEROUPPER
	RET
