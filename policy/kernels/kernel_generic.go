package kernels

import "unsafe"

// genericKernel is the portable micro-kernel: a 4 x 4 tile in sixteen
// scalar accumulators, used where no assembly kernel applies.
var genericKernel = &microKernel{name: "generic", mr: 4, nr: 4, fn: kernel4x4Generic}

// bestKernel is the fastest micro-kernel this CPU runs; Sgemm uses it.
var bestKernel = availableKernels()[0]

// kernel4x4Generic computes a 4 x 4 tile of C from packed panels; see
// microKernel for the contract.
func kernel4x4Generic(k int, ap, bp, cp *float32, ldc int, alpha, beta float32) {
	a := unsafe.Slice(ap, 4*k)
	b := unsafe.Slice(bp, 4*k)
	var c00, c01, c02, c03, c10, c11, c12, c13, c20, c21, c22, c23, c30, c31, c32, c33 float32
	for p := 0; p < k; p++ {
		av := a[p*4 : p*4+4 : p*4+4]
		bv := b[p*4 : p*4+4 : p*4+4]
		a0, a1, a2, a3 := av[0], av[1], av[2], av[3]
		b0, b1, b2, b3 := bv[0], bv[1], bv[2], bv[3]
		c00 += a0 * b0
		c01 += a0 * b1
		c02 += a0 * b2
		c03 += a0 * b3
		c10 += a1 * b0
		c11 += a1 * b1
		c12 += a1 * b2
		c13 += a1 * b3
		c20 += a2 * b0
		c21 += a2 * b1
		c22 += a2 * b2
		c23 += a2 * b3
		c30 += a3 * b0
		c31 += a3 * b1
		c32 += a3 * b2
		c33 += a3 * b3
	}
	c := unsafe.Slice(cp, 3*ldc+4)
	acc := [16]float32{c00, c01, c02, c03, c10, c11, c12, c13, c20, c21, c22, c23, c30, c31, c32, c33}
	for i := 0; i < 4; i++ {
		row := c[i*ldc : i*ldc+4]
		t := acc[i*4 : i*4+4]
		if beta == 0 {
			for j := range row {
				row[j] = alpha * t[j]
			}
			continue
		}
		for j := range row {
			row[j] = alpha*t[j] + beta*row[j]
		}
	}
}
