//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/legorl/legorl/policy/backend"
)

// Tolerances of the equivalence tests against the CPU backend, as the
// largest |cuda - cpu| over an output divided by max(1, max |cpu|):
//
//   - tolFP32 for every operation in fp32, and for every operation but
//     Gemm in bf16 (they do not depend on the precision). Both backends
//     accumulate in the same order where it matters and in float64 where
//     the CPU does, so the differences are a few float32 ulps (1.2e-7
//     each), from fused multiply-adds and the tree order of the device's
//     float64 sums; 1e-5 leaves room for sums of a few hundred terms.
//   - tolBF16 for Gemm in bf16: each input is rounded to 8 significant
//     bits (relative error up to 2^-9 = 2e-3), so a product of K random
//     terms is off by about 2e-3 * sqrt(K) of its typical term, a few 1e-3
//     of the output's range at the tested K.
const (
	tolFP32 = 1e-5
	tolBF16 = 2e-2
)

// openT opens the CUDA backend at prec through the registry and closes it
// when the test ends.
func openT(t testing.TB, prec string) *Backend {
	t.Helper()
	b, err := backend.Open("cuda", backend.Options{Precision: prec})
	if err != nil {
		t.Fatalf("open cuda %s: %v", prec, err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	cb := b.(*Backend)
	t.Logf("cuda backend on %s, precision %s", cb.Device(), cb.Precision())
	return cb
}

// checkErr fails the test when the backend has a sticky error.
func checkErr(t testing.TB, b backend.Backend) {
	t.Helper()
	if err := b.Err(); err != nil {
		t.Fatalf("backend error: %v", err)
	}
}

func randSlice(r *rand.Rand, n int, scale float32) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = (2*r.Float32() - 1) * scale
	}
	return s
}

// maxRelDiff returns max |got - want| / max(1, max |want|) and the index
// of the largest difference.
func maxRelDiff(got, want []float32) (float64, int) {
	scale := 1.0
	for _, w := range want {
		scale = max(scale, math.Abs(float64(w)))
	}
	worst, at := 0.0, -1
	for i := range want {
		d := math.Abs(float64(got[i]) - float64(want[i]))
		if math.IsNaN(d) {
			return math.Inf(1), i
		}
		if d > worst {
			worst, at = d, i
		}
	}
	return worst / scale, at
}

// near fails the test when got and want differ by more than tol (see the
// tolerances above).
func near(t testing.TB, name string, got, want []float32, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d elements, want %d", name, len(got), len(want))
	}
	d, at := maxRelDiff(got, want)
	if d > tol {
		t.Errorf("%s: max relative difference %.3g > %.3g at %d (cuda %g, cpu %g)", name, d, tol, at, got[at], want[at])
		return
	}
	t.Logf("%s: max relative difference %.3g (tolerance %.3g)", name, d, tol)
}

func TestGemm(t *testing.T) {
	for _, prec := range []string{"fp32", "bf16"} {
		b := openT(t, prec)
		cpu := backend.NewCPU()
		tol := tolFP32
		if prec == "bf16" {
			tol = tolBF16
		}
		r := rand.New(rand.NewPCG(1, 2))
		for _, tc := range []struct {
			transA, transB bool
			m, n, k, pad   int
			alpha, beta    float32
		}{
			{false, false, 70, 45, 129, 0, 1, 0},
			{false, true, 64, 128, 256, 0, 1, 0},
			{true, false, 33, 257, 17, 3, 0.7, 0.3},
			{true, true, 130, 5, 64, 1, -1.5, 1},
			{false, true, 1, 1024, 256, 0, 1, 0},
			{false, false, 9, 11, 0, 2, 1, 0.5}, // k = 0: C = beta*C
		} {
			name := fmt.Sprintf("%s/tA=%v,tB=%v,%dx%dx%d,pad=%d,beta=%g", prec, tc.transA, tc.transB, tc.m, tc.n, tc.k, tc.pad, tc.beta)
			t.Run(name, func(t *testing.T) {
				ra, ca := tc.m, tc.k
				if tc.transA {
					ra, ca = tc.k, tc.m
				}
				rb, cb := tc.k, tc.n
				if tc.transB {
					rb, cb = tc.n, tc.k
				}
				lda, ldb, ldc := ca+tc.pad, cb+tc.pad, tc.n+tc.pad
				a := randSlice(r, max(1, ra)*lda, 1)
				bb := randSlice(r, max(1, rb)*ldb, 1)
				c0 := randSlice(r, tc.m*ldc, 1)
				want, got := slices.Clone(c0), slices.Clone(c0)
				cpu.Gemm(tc.transA, tc.transB, tc.m, tc.n, tc.k, tc.alpha, a, lda, bb, ldb, tc.beta, want, ldc)
				b.Gemm(tc.transA, tc.transB, tc.m, tc.n, tc.k, tc.alpha, a, lda, bb, ldb, tc.beta, got, ldc)
				checkErr(t, b)
				near(t, "C", got, want, tol)
				for i := 0; i < tc.m; i++ { // the padding between rows is not written
					for j := tc.n; j < ldc; j++ {
						if got[i*ldc+j] != c0[i*ldc+j] {
							t.Fatalf("C[%d,%d] in the padding changed", i, j)
						}
					}
				}
			})
		}
	}
}

// TestRowLinear checks RowLinear against the CPU and that a row's result
// is bitwise the same alone and in a batch, in both precisions.
func TestRowLinear(t *testing.T) {
	for _, prec := range []string{"fp32", "bf16"} {
		t.Run(prec, func(t *testing.T) {
			b := openT(t, prec)
			cpu := backend.NewCPU()
			r := rand.New(rand.NewPCG(3, 4))
			rows, in, out := 37, 256, 1000
			x, w := randSlice(r, rows*in, 1), randSlice(r, out*in, 0.1)
			want, got := make([]float32, rows*out), make([]float32, rows*out)
			cpu.RowLinear(want, x, rows, in, w, out)
			b.RowLinear(got, x, rows, in, w, out)
			checkErr(t, b)
			near(t, "y", got, want, tolFP32)
			for _, i := range []int{0, 17, rows - 1} {
				one := make([]float32, out)
				b.RowLinear(one, x[i*in:(i+1)*in], 1, in, w, out)
				checkErr(t, b)
				if !slices.Equal(one, got[i*out:(i+1)*out]) {
					t.Fatalf("row %d alone differs from the same row in a batch of %d", i, rows)
				}
			}
		})
	}
}

func TestRMSNorm(t *testing.T) {
	b := openT(t, "fp32")
	cpu := backend.NewCPU()
	r := rand.New(rand.NewPCG(5, 6))
	for _, sh := range []struct{ rows, n int }{{37, 256}, {37 * 4, 64}, {300, 1000}, {2, 1}} {
		t.Run(fmt.Sprintf("%dx%d", sh.rows, sh.n), func(t *testing.T) {
			rows, n := sh.rows, sh.n
			x, w := randSlice(r, rows*n, 2), randSlice(r, n, 1)
			yw, rw := make([]float32, rows*n), make([]float32, rows)
			yg, rg := make([]float32, rows*n), make([]float32, rows)
			cpu.RMSNorm(yw, rw, x, rows, n, w, 1e-6)
			b.RMSNorm(yg, rg, x, rows, n, w, 1e-6)
			ynil := make([]float32, rows*n)
			b.RMSNorm(ynil, nil, x, rows, n, w, 1e-6)
			checkErr(t, b)
			near(t, "y", yg, yw, tolFP32)
			near(t, "r", rg, rw, tolFP32)
			if !slices.Equal(ynil, yg) {
				t.Error("y with r = nil differs")
			}

			dy := randSlice(r, rows*n, 1)
			dx0, dw0 := randSlice(r, rows*n, 1), randSlice(r, n, 1)
			dxw, dww := slices.Clone(dx0), slices.Clone(dw0)
			dxg, dwg := slices.Clone(dx0), slices.Clone(dw0)
			cpu.RMSNormBack(dxw, dww, dy, x, rows, n, w, rw)
			b.RMSNormBack(dxg, dwg, dy, x, rows, n, w, rw)
			checkErr(t, b)
			near(t, "dx", dxg, dxw, tolFP32)
			near(t, "dw", dwg, dww, tolFP32)
		})
	}
}

func TestSwiGLU(t *testing.T) {
	b := openT(t, "fp32")
	cpu := backend.NewCPU()
	r := rand.New(rand.NewPCG(7, 8))
	n := 37*768 + 5
	g, u := randSlice(r, n, 8), randSlice(r, n, 2)
	g[0], g[1] = 100, -100 // saturated sigmoid
	aw, ag := make([]float32, n), make([]float32, n)
	cpu.SwiGLU(aw, g, u)
	b.SwiGLU(ag, g, u)
	checkErr(t, b)
	near(t, "act", ag, aw, tolFP32)

	dact := randSlice(r, n, 1)
	dgw, duw := make([]float32, n), make([]float32, n)
	dgg := make([]float32, n)
	cpu.SwiGLUBack(dgw, duw, dact, g, u)
	dug := slices.Clone(dact) // du aliases dact, as the model calls it
	b.SwiGLUBack(dgg, dug, dug, g, u)
	checkErr(t, b)
	near(t, "dg", dgg, dgw, tolFP32)
	near(t, "du", dug, duw, tolFP32)
}

func TestAttention(t *testing.T) {
	b := openT(t, "fp32")
	cpu := backend.NewCPU()
	r := rand.New(rand.NewPCG(9, 10))
	for _, tc := range []struct {
		a       backend.AttnShape
		probs   bool
		scratch int // Backend.attnScratch; 0 keeps the default
	}{
		{backend.AttnShape{S: 37, Heads: 4, KV: 2, HeadDim: 64, Block: 64}, true, 0},
		{backend.AttnShape{S: 37, Heads: 4, KV: 2, HeadDim: 64, Block: 16}, false, 0},
		{backend.AttnShape{S: 300, Heads: 2, KV: 2, HeadDim: 32, Block: 64}, true, 0},
		{backend.AttnShape{S: 5, Pos0: 40, Heads: 4, KV: 2, HeadDim: 64, Block: 64}, false, 0},
		{backend.AttnShape{S: 1, Pos0: 299, Heads: 4, KV: 1, HeadDim: 128, Block: 64}, false, 0},
		{backend.AttnShape{S: 20, Pos0: 7, Heads: 4, KV: 2, HeadDim: 64, Block: 64}, true, 0},
		{backend.AttnShape{S: 50, Pos0: 3, Heads: 4, KV: 2, HeadDim: 64, Block: 64}, false, 4 * 4 * 53 * 7}, // chunks of 7 rows
	} {
		a := tc.a
		name := fmt.Sprintf("S=%d,Pos0=%d,H=%d,KV=%d,hd=%d,probs=%v,scratch=%d", a.S, a.Pos0, a.Heads, a.KV, a.HeadDim, tc.probs, tc.scratch)
		t.Run(name, func(t *testing.T) {
			if tc.scratch > 0 {
				b.attnScratch = tc.scratch
				defer func() { b.attnScratch = defaultAttnScratch }()
			}
			N := a.Pos0 + a.S
			q := randSlice(r, a.S*a.Heads*a.HeadDim, 1)
			k, v := randSlice(r, N*a.KV*a.HeadDim, 1), randSlice(r, N*a.KV*a.HeadDim, 1)
			ow, og := make([]float32, len(q)), make([]float32, len(q))
			var pw, pg []float32
			if tc.probs {
				pw, pg = make([]float32, a.Heads*a.S*N), make([]float32, a.Heads*a.S*N)
				for i := range pg {
					pg[i] = float32(math.NaN()) // every element must be written
				}
			}
			cpu.Attention(ow, pw, q, k, v, a)
			b.Attention(og, pg, q, k, v, a)
			checkErr(t, b)
			near(t, "out", og, ow, tolFP32)
			if tc.probs {
				near(t, "probs", pg, pw, tolFP32)
			}
			if !tc.probs || a.Pos0 != 0 {
				return
			}
			dout := randSlice(r, len(q), 1)
			dqw, dkw, dvw := make([]float32, len(q)), make([]float32, len(k)), make([]float32, len(v))
			dqg, dkg, dvg := make([]float32, len(q)), randSlice(r, len(k), 1), randSlice(r, len(v), 1) // set, not added to
			cpu.AttentionBack(dqw, dkw, dvw, dout, q, k, v, pw, a)
			b.AttentionBack(dqg, dkg, dvg, dout, q, k, v, pw, a)
			checkErr(t, b)
			near(t, "dq", dqg, dqw, tolFP32)
			near(t, "dk", dkg, dkw, tolFP32)
			near(t, "dv", dvg, dvw, tolFP32)
		})
	}
}

func TestLogprobs(t *testing.T) {
	b := openT(t, "fp32")
	cpu := backend.NewCPU()
	r := rand.New(rand.NewPCG(11, 12))
	for _, tc := range []struct {
		rows, vocab int
		temp        float64
		keep        bool
	}{
		{20, 4096, 1, true},
		{20, 4096, 0.7, false},
		{3, 1000, 1.3, true},
		{1, 151936, 1, true},
	} {
		t.Run(fmt.Sprintf("%dx%d,T=%g,keep=%v", tc.rows, tc.vocab, tc.temp, tc.keep), func(t *testing.T) {
			logits := randSlice(r, tc.rows*tc.vocab, 10)
			targets := make([]int32, tc.rows)
			w := make([]float32, tc.rows)
			for i := range targets {
				targets[i] = int32(r.IntN(tc.vocab))
				w[i] = 2*r.Float32() - 1
			}
			zw, zg := slices.Clone(logits), slices.Clone(logits)
			lw, lg := make([]float32, tc.rows), make([]float32, tc.rows)
			cpu.Logprobs(lw, zw, tc.vocab, targets, 1/tc.temp, tc.keep)
			b.Logprobs(lg, zg, tc.vocab, targets, 1/tc.temp, tc.keep)
			checkErr(t, b)
			near(t, "logprobs", lg, lw, tolFP32)
			if !tc.keep {
				return
			}
			near(t, "probs", zg, zw, tolFP32)
			cpu.LogprobsBack(zw, tc.vocab, targets, w, tc.temp)
			b.LogprobsBack(zg, tc.vocab, targets, w, tc.temp)
			checkErr(t, b)
			near(t, "dlogits", zg, zw, tolFP32)
		})
	}
}

func TestAdamW(t *testing.T) {
	b := openT(t, "fp32")
	cpu := backend.NewCPU()
	r := rand.New(rand.NewPCG(13, 14))
	n := 10007
	for _, s := range []backend.AdamWStep{
		{Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, StepSize: 1e-3 / (1 - 0.9), SqrtBC2: math.Sqrt(1 - 0.999), Shrink: 1, GradScale: 1},
		{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, StepSize: 3e-4, SqrtBC2: 0.5, Shrink: 0.999, GradScale: 0.25},
	} {
		t.Run(fmt.Sprintf("shrink=%g,scale=%g", s.Shrink, s.GradScale), func(t *testing.T) {
			p, g := randSlice(r, n, 1), randSlice(r, n, 0.1)
			m, v := randSlice(r, n, 0.01), randSlice(r, n, 0.01)
			for i := range v {
				v[i] *= v[i]
			}
			pw, gw, mw, vw := slices.Clone(p), slices.Clone(g), slices.Clone(m), slices.Clone(v)
			cpu.AdamW(pw, gw, mw, vw, s)
			b.AdamW(p, g, m, v, s)
			checkErr(t, b)
			near(t, "p", p, pw, tolFP32)
			near(t, "g", g, gw, tolFP32)
			near(t, "m", m, mw, tolFP32)
			near(t, "v", v, vw, tolFP32)
		})
	}
}

// TestStickyError checks that a bad argument becomes the sticky error
// without a panic, that later operations do nothing, and Close.
func TestStickyError(t *testing.T) {
	b, err := open(backend.Options{})
	if err != nil {
		t.Fatal(err)
	}
	y := []float32{7}
	b.RowLinear(y, []float32{1, 2}, 1, 2, []float32{1}, 1) // w too short
	if err := b.Err(); !errors.Is(err, ErrArgument) {
		t.Fatalf("Err() = %v, want ErrArgument", err)
	}
	b.RowLinear(y, []float32{1, 2}, 1, 2, []float32{1, 1}, 1)
	if y[0] != 7 {
		t.Fatal("an operation ran after a sticky error")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}

	b2, err := open(backend.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b2.Close(); err != nil {
		t.Fatal(err)
	}
	b2.SwiGLU(y, y, y)
	if err := b2.Err(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Err() after Close = %v, want ErrClosed", err)
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := open(backend.Options{Precision: "fp16"}); !errors.Is(err, ErrArgument) {
		t.Errorf("precision fp16: %v, want ErrArgument", err)
	}
	if _, err := open(backend.Options{Device: 1 << 20}); !errors.Is(err, ErrArgument) {
		t.Errorf("device 1<<20: %v, want ErrArgument", err)
	}
}
