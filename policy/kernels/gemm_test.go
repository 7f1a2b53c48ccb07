package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// gemmCase is one product to check: shapes, transposes, scalars and extra
// padding of each stride beyond the minimum.
type gemmCase struct {
	transA, transB bool
	m, n, k        int
	alpha, beta    float32
	padA, padB     int
	padC           int
}

func (tc gemmCase) String() string {
	return fmt.Sprintf("tA=%v,tB=%v,%dx%dx%d,alpha=%g,beta=%g,pad=%d/%d/%d",
		tc.transA, tc.transB, tc.m, tc.n, tc.k, tc.alpha, tc.beta, tc.padA, tc.padB, tc.padC)
}

// operands builds A, B and C for the case from rng. When beta is zero, C is
// filled with NaN, which a correct kernel must overwrite without reading.
func (tc gemmCase) operands(rng *rand.Rand) (a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	rowsA, colsA := tc.m, tc.k
	if tc.transA {
		rowsA, colsA = tc.k, tc.m
	}
	rowsB, colsB := tc.k, tc.n
	if tc.transB {
		rowsB, colsB = tc.n, tc.k
	}
	lda, ldb, ldc = colsA+tc.padA, colsB+tc.padB, tc.n+tc.padC
	fill := func(rows, ld int) []float32 {
		s := make([]float32, max(rows*ld, 1))
		for i := range s {
			s[i] = rng.Float32()*2 - 1
		}
		return s
	}
	a, b, c = fill(rowsA, lda), fill(rowsB, ldb), fill(tc.m, ldc)
	if tc.beta == 0 {
		for i := range c {
			c[i] = float32(math.NaN())
		}
	}
	return a, lda, b, ldb, c, ldc
}

// check runs the case with kernel kern on workers goroutines and compares
// every element of C, padding included, with the reference.
func (tc gemmCase) check(t *testing.T, kern *microKernel, workers int, seed uint64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	a, lda, b, ldb, c, ldc := tc.operands(rng)
	want := append([]float32(nil), c...)
	sgemmRef(tc.transA, tc.transB, tc.m, tc.n, tc.k, tc.alpha, a, lda, b, ldb, tc.beta, want, ldc)
	got := append([]float32(nil), c...)
	sgemm(kern, workers, tc.transA, tc.transB, tc.m, tc.n, tc.k, tc.alpha, a, lda, b, ldb, tc.beta, got, ldc)
	tc.compare(t, "sgemm", kern, workers, want, got, ldc)
	if tc.k > 0 && tc.alpha != 0 {
		// The blocked path on its own, also for shapes sgemm sends elsewhere.
		got = append(got[:0], c...)
		sgemmBlocked(kern, workers, tc.transA, tc.transB, tc.m, tc.n, tc.k, tc.alpha, a, lda, b, ldb, tc.beta, got, ldc)
		tc.compare(t, "sgemmBlocked", kern, workers, want, got, ldc)
	}
}

func (tc gemmCase) compare(t *testing.T, path string, kern *microKernel, workers int, want, got []float32, ldc int) {
	t.Helper()
	// Each element is a k-term sum of products of values in [-1, 1]; the
	// kernels sum in a different order, so allow float32 rounding on k terms.
	tol := 1e-5 * float64(tc.k+4) * float64(max(abs32(tc.alpha), 1)+abs32(tc.beta))
	for i := range want {
		w, g := want[i], got[i]
		if math.IsNaN(float64(w)) != math.IsNaN(float64(g)) || math.Abs(float64(w-g)) > tol {
			t.Fatalf("%s %v kernel=%s workers=%d: C[%d,%d] = %v, want %v", path, tc, kern.name, workers, i/ldc, i%ldc, g, w)
		}
	}
}

func abs32(x float32) float32 { return float32(math.Abs(float64(x))) }

func TestSgemmMatchesReference(t *testing.T) {
	sizes := [][3]int{
		{1, 1, 1}, {3, 5, 7}, {1, 300, 17}, {300, 1, 17}, {17, 17, 17},
		{63, 65, 64}, {65, 63, 257}, {12, 32, 1}, {13, 33, 300}, {100, 70, 600},
		{257, 129, 31}, {200, 513, 64},
		// Few rows: the dot-product path when B is transposed.
		{2, 100, 70}, {4, 33, 257}, {3, 2000, 1}, {1, 700, 16},
	}
	scalars := [][2]float32{{1, 0}, {1, 1}, {-0.5, 2}, {2, -1}}
	for _, kern := range availableKernels() {
		t.Run(kern.name, func(t *testing.T) {
			seed := uint64(0)
			for _, sz := range sizes {
				for _, tA := range []bool{false, true} {
					for _, tB := range []bool{false, true} {
						for si, s := range scalars {
							seed++
							tc := gemmCase{transA: tA, transB: tB, m: sz[0], n: sz[1], k: sz[2],
								alpha: s[0], beta: s[1], padA: si, padB: 2 * si, padC: 3 * si}
							for _, workers := range []int{1, 3} {
								tc.check(t, kern, workers, seed)
							}
						}
					}
				}
			}
		})
	}
}

// TestSgemmLarge covers several kc and nc blocks and a parallel split on
// the default kernel, with beta = 0 over NaN garbage.
func TestSgemmLarge(t *testing.T) {
	cases := []gemmCase{
		{m: 250, n: 4200, k: 530, alpha: 1, beta: 0, padA: 3, padC: 1},
		{transA: true, transB: true, m: 300, n: 97, k: 1000, alpha: 0.5, beta: 0.25},
	}
	for i, tc := range cases {
		t.Run(tc.String(), func(t *testing.T) {
			for _, kern := range availableKernels()[:1] {
				tc.check(t, kern, 2, uint64(i))
			}
		})
	}
}

func TestSgemmSpecialScalars(t *testing.T) {
	nan := float32(math.NaN())
	tests := []struct {
		name        string
		k           int
		alpha, beta float32
		cIn, cOut   float32
	}{
		{"k=0 beta=0 clears NaN", 0, 1, 0, nan, 0},
		{"k=0 beta=2 scales", 0, 1, 2, 3, 6},
		{"alpha=0 beta=0 clears NaN", 40, 0, 0, nan, 0},
		{"alpha=0 beta=1 keeps", 40, 0, 1, 5, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const m, n = 40, 50
			a := make([]float32, m*max(tt.k, 1))
			b := make([]float32, max(tt.k, 1)*n)
			c := make([]float32, m*n)
			for i := range c {
				c[i] = tt.cIn
			}
			Sgemm(false, false, m, n, tt.k, tt.alpha, a, max(tt.k, 1), b, n, tt.beta, c, n)
			for i, v := range c {
				if v != tt.cOut {
					t.Fatalf("C[%d] = %v, want %v", i, v, tt.cOut)
				}
			}
		})
	}
}

func TestSgemmPanicsOnShortSlices(t *testing.T) {
	tests := []struct {
		name string
		call func()
	}{
		{"short a", func() {
			Sgemm(false, false, 4, 4, 4, 1, make([]float32, 15), 4, make([]float32, 16), 4, 0, make([]float32, 16), 4)
		}},
		{"short b transposed", func() {
			Sgemm(false, true, 4, 4, 4, 1, make([]float32, 16), 4, make([]float32, 12), 4, 0, make([]float32, 16), 4)
		}},
		{"short c", func() {
			Sgemm(false, false, 4, 4, 4, 1, make([]float32, 16), 4, make([]float32, 16), 4, 0, make([]float32, 15), 4)
		}},
		{"ldc too small", func() {
			Sgemm(false, false, 4, 4, 4, 1, make([]float32, 16), 4, make([]float32, 16), 4, 0, make([]float32, 64), 3)
		}},
		{"negative m", func() { Sgemm(false, false, -1, 4, 4, 1, nil, 4, nil, 4, 0, nil, 4) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			tt.call()
		})
	}
}

func FuzzSgemm(f *testing.F) {
	f.Add(uint8(13), uint8(33), uint16(300), uint8(0), uint8(1), int8(2), int8(0), uint64(1))
	f.Add(uint8(1), uint8(1), uint16(1), uint8(3), uint8(0), int8(-1), int8(1), uint64(2))
	f.Add(uint8(64), uint8(200), uint16(600), uint8(2), uint8(7), int8(1), int8(3), uint64(3))
	f.Fuzz(func(t *testing.T, m, n uint8, k uint16, trans, pad uint8, alpha, beta int8, seed uint64) {
		tc := gemmCase{
			transA: trans&1 != 0, transB: trans&2 != 0,
			m: int(m%80) + 1, n: int(n) + 1, k: int(k % 700),
			alpha: float32(alpha) / 4, beta: float32(beta) / 4,
			padA: int(pad % 5), padB: int(pad / 5 % 5), padC: int(pad / 25 % 5),
		}
		for _, kern := range availableKernels() {
			tc.check(t, kern, int(seed%3)+1, seed)
		}
	})
}
