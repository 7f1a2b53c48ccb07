package kernels

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"

	"github.com/legorl/legorl/policy/internal/cputime"
)

// benchShapes are the products measured: square sizes, and the tiny
// reference model's matmuls (batch 8 x seq 512 = 4096 rows, d=256, SwiGLU
// 768, vocab 4096) in the transposes the forward and backward passes use.
var benchShapes = []struct {
	name           string
	transA, transB bool
	m, n, k        int
}{
	{"sq256", false, false, 256, 256, 256},
	{"sq512", false, false, 512, 512, 512},
	{"sq1024", false, false, 1024, 1024, 1024},
	{"4096x256x768", false, false, 4096, 768, 256},
	{"4096x256x768T", false, true, 4096, 768, 256},  // x @ W^T, W [768 x 256]
	{"768x4096x256TA", true, false, 768, 256, 4096}, // dW = dY^T @ x
	{"4096x256x4096T", false, true, 4096, 4096, 256},
	{"1x256x4096T", false, true, 1, 4096, 256}, // LM head, one generated token
	{"4x256x768T", false, true, 4, 768, 256},   // MLP up, four tokens
}

// benchThreads are the worker counts measured: one core, and all of them.
func benchThreads() []int {
	if n := runtime.NumCPU(); n > 1 {
		return []int{1, n}
	}
	return []int{1}
}

// BenchmarkSgemm reports GFLOP/s of Sgemm (the best kernel of this CPU),
// each portable or narrower kernel of the same driver, and gonum's Sgemm as
// an anchor, on 1 and all cores (GOMAXPROCS is set for the sub-benchmark).
func BenchmarkSgemm(b *testing.B) {
	impls := []struct {
		name string
		fn   func(tA, tB bool, m, n, k int, a []float32, lda int, bb []float32, ldb int, c []float32, ldc int)
	}{
		{"legorl", func(tA, tB bool, m, n, k int, a []float32, lda int, bb []float32, ldb int, c []float32, ldc int) {
			Sgemm(tA, tB, m, n, k, 1, a, lda, bb, ldb, 0, c, ldc)
		}},
		{"gonum", func(tA, tB bool, m, n, k int, a []float32, lda int, bb []float32, ldb int, c []float32, ldc int) {
			gonum.Implementation{}.Sgemm(trans(tA), trans(tB), m, n, k, 1, a, lda, bb, ldb, 0, c, ldc)
		}},
	}
	for _, kern := range availableKernels()[1:] {
		impls = append(impls, struct {
			name string
			fn   func(tA, tB bool, m, n, k int, a []float32, lda int, bb []float32, ldb int, c []float32, ldc int)
		}{"kernel=" + kern.name, func(tA, tB bool, m, n, k int, a []float32, lda int, bb []float32, ldb int, c []float32, ldc int) {
			sgemm(kern, runtime.GOMAXPROCS(0), tA, tB, m, n, k, 1, a, lda, bb, ldb, 0, c, ldc)
		}})
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, sh := range benchShapes {
		rowsA, colsA := sh.m, sh.k
		if sh.transA {
			rowsA, colsA = sh.k, sh.m
		}
		rowsB, colsB := sh.k, sh.n
		if sh.transB {
			rowsB, colsB = sh.n, sh.k
		}
		a := randSlice(rng, rowsA*colsA)
		bm := randSlice(rng, rowsB*colsB)
		c := make([]float32, sh.m*sh.n)
		flops := 2 * float64(sh.m) * float64(sh.n) * float64(sh.k)
		for _, impl := range impls {
			for _, threads := range benchThreads() {
				b.Run(fmt.Sprintf("%s/%s/threads=%d", sh.name, impl.name, threads), func(b *testing.B) {
					defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(threads))
					cpu0 := cputime.Process()
					for b.Loop() {
						impl.fn(sh.transA, sh.transB, sh.m, sh.n, sh.k, a, colsA, bm, colsB, c, sh.n)
					}
					reportFlops(b, flops*float64(b.N), cputime.Process()-cpu0)
				})
			}
		}
	}
}

// reportFlops reports GFLOP/s over wall-clock time and GFLOP/cpu-s over
// the process's CPU time: on a machine busy with other work the second is
// the one that compares implementations (on all cores it is per core).
func reportFlops(b *testing.B, flops float64, cpu time.Duration) {
	b.ReportMetric(flops/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	if cpu > 0 {
		b.ReportMetric(flops/cpu.Seconds()/1e9, "GFLOP/cpu-s")
	}
}

func trans(t bool) blas.Transpose {
	if t {
		return blas.Trans
	}
	return blas.NoTrans
}

func randSlice(rng *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = rng.Float32()*2 - 1
	}
	return s
}
