// Package kernels holds the CPU compute kernels of the policy model: pure
// Go, parallel across cores, with SIMD micro-kernels in Go assembly behind
// build tags (amd64: AVX-512 and AVX2+FMA, chosen at run time) and a
// portable pure-Go fallback (other architectures, or the purego build tag).
package kernels

import (
	"fmt"
	"runtime"
)

// Sgemm computes C = alpha*op(A)*op(B) + beta*C on row-major float32
// matrices, where op(X) is X or its transpose. op(A) is m x k, op(B) is
// k x n, C is m x n; lda, ldb and ldc are the row strides of A, B and C as
// stored. As in BLAS, C is not read when beta is zero (so NaNs there are
// overwritten), and A and B are not read when alpha is zero or k is zero.
//
// Large products are cache-blocked, packed and spread over
// runtime.GOMAXPROCS(0) goroutines; small ones run on the calling
// goroutine. Slices shorter than the shapes and strides require are a
// programmer error and panic before anything is written.
func Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	sgemm(bestKernel, runtime.GOMAXPROCS(0), transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// checkArgs panics with a one-line message when the slices cannot hold the
// matrices their shapes and strides describe; the assembly kernels write
// through raw pointers, so this check is what keeps them in bounds.
func checkArgs(transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	if m < 0 || n < 0 || k < 0 {
		panic(fmt.Sprintf("kernels: Sgemm: negative shape m=%d n=%d k=%d", m, n, k))
	}
	need := func(name string, s []float32, rows, cols, ld int) {
		if rows == 0 || cols == 0 {
			return
		}
		if ld < cols {
			panic(fmt.Sprintf("kernels: Sgemm: ld%s=%d is less than the %d columns of %s", name, ld, cols, name))
		}
		if want := (rows-1)*ld + cols; len(s) < want {
			panic(fmt.Sprintf("kernels: Sgemm: %s has %d elements, its %dx%d shape with stride %d needs %d", name, len(s), rows, cols, ld, want))
		}
	}
	if transA {
		need("a", a, k, m, lda)
	} else {
		need("a", a, m, k, lda)
	}
	if transB {
		need("b", b, n, k, ldb)
	} else {
		need("b", b, k, n, ldb)
	}
	need("c", c, m, n, ldc)
}

// Ref is the naive reference GEMM in either precision: one dot product per
// element of C, in the order of the definition, with Sgemm's arguments and
// semantics. Sgemm is tested against Ref[float32]; the model's float64
// gradient checks use Ref[float64].
func Ref[T float32 | float64](transA, transB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) {
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var sum T
			for p := 0; p < k; p++ {
				var av, bv T
				if transA {
					av = a[p*lda+i]
				} else {
					av = a[i*lda+p]
				}
				if transB {
					bv = b[j*ldb+p]
				} else {
					bv = b[p*ldb+j]
				}
				sum += av * bv
			}
			if beta == 0 {
				c[i*ldc+j] = alpha * sum
			} else {
				c[i*ldc+j] = alpha*sum + beta*c[i*ldc+j]
			}
		}
	}
}

// sgemmRef is Ref in float32.
func sgemmRef(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	Ref(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}
