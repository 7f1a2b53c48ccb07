package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/legorl/legorl/policy/internal/cputime"
)

// ulps is the distance between two float32s in units in the last place.
func ulps(a, b float32) int64 {
	ia, ib := int64(math.Float32bits(a)), int64(math.Float32bits(b))
	if ia < 0x80000000 != (ib < 0x80000000) {
		return math.MaxInt32 // opposite signs
	}
	if d := ia - ib; d >= 0 {
		return d
	}
	return ib - ia
}

// TestExp checks Exp against math.Exp over the whole float32 range of the
// argument (every element within 2 ulp, the sum within float64 rounding of
// the sum of the elements), the ends of the range, NaN, and every length
// up to 40 (the masked tail).
func TestExp(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	x := make([]float32, 4099)
	for i := range x {
		x[i] = float32(r.Float64()*200 - 110)
	}
	x[0], x[1], x[2], x[3] = 0, 88.5, -103, float32(math.Inf(-1))
	dst := make([]float32, len(x))
	sum := Exp(dst, x, 1, 0)
	var want float64
	for i, v := range x {
		e := float32(math.Exp(float64(v)))
		if d := ulps(dst[i], e); d > 2 && !(e < 1e-37 && math.Abs(float64(dst[i]-e)) < 1e-44) {
			t.Fatalf("Exp(%g) = %g, want %g (%d ulp)", v, dst[i], e, d)
		}
		want += float64(dst[i])
	}
	if math.Abs(sum-want) > 1e-12*math.Abs(want) {
		t.Errorf("sum %g, want %g", sum, want)
	}
	big := []float32{89, 100, float32(math.Inf(1)), float32(math.NaN())}
	Exp(big, big, 1, 0)
	if !math.IsInf(float64(big[0]), 1) || !math.IsInf(float64(big[1]), 1) || !math.IsInf(float64(big[2]), 1) || !math.IsNaN(float64(big[3])) {
		t.Errorf("e^[89 100 +Inf NaN] = %v", big)
	}
	// scale and shift, every tail length; in place.
	for n := 1; n <= 40; n++ {
		src := append([]float32(nil), x[100:100+n]...)
		in := append([]float32(nil), src...)
		s := Exp(in, in, 0.5, 3)
		var ws float64
		for i, v := range src {
			e := float32(math.Exp(float64(float32(math.FMA(float64(v), 0.5, -3)))))
			if d := ulps(in[i], e); d > 2 && e > 1e-37 {
				t.Fatalf("n=%d: e^(%g/2-3) = %g, want %g", n, v, in[i], e)
			}
			ws += float64(in[i])
		}
		if math.Abs(s-ws) > 1e-12*ws {
			t.Fatalf("n=%d: sum %g, want %g", n, s, ws)
		}
	}
}

// TestExpPositionInvariant checks that an element's exp does not depend
// on where it sits in the slice (vector body or masked tail).
func TestExpPositionInvariant(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	x := make([]float32, 37)
	for i := range x {
		x[i] = float32(r.NormFloat64() * 5)
	}
	all := make([]float32, len(x))
	Exp(all, x, 1.25, 0.5)
	for i := range x {
		one := make([]float32, 1)
		Exp(one, x[i:i+1], 1.25, 0.5)
		if math.Float32bits(one[0]) != math.Float32bits(all[i]) {
			t.Fatalf("element %d: alone %g, in a slice %g", i, one[0], all[i])
		}
	}
}

func TestSwiGLU(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, n := range []int{1, 7, 16, 33, 1000} {
		g, u, da := make([]float32, n), make([]float32, n), make([]float32, n)
		for i := range g {
			g[i], u[i], da[i] = float32(r.NormFloat64()*4), float32(r.NormFloat64()), float32(r.NormFloat64())
		}
		g[0] = -120 // e^-g overflows: silu is -0
		act, dg, du := make([]float32, n), make([]float32, n), make([]float32, n)
		SwiGLU(act, g, u)
		SwiGLUBack(dg, du, da, g, u)
		for i := range g {
			gv, uv, dv := float64(g[i]), float64(u[i]), float64(da[i])
			s := 1 / (1 + math.Exp(-gv))
			want := []float64{gv * s * uv, dv * uv * s * (1 + gv*(1-s)), dv * s * gv}
			for j, got := range []float32{act[i], dg[i], du[i]} {
				if d := math.Abs(float64(got) - want[j]); d > 1e-6*math.Max(1, math.Abs(want[j])) {
					t.Fatalf("n=%d i=%d g=%g: output %d is %g, want %g", n, i, gv, j, got, want[j])
				}
			}
		}
		// du may alias dact.
		du2 := append([]float32(nil), da...)
		dg2 := make([]float32, n)
		SwiGLUBack(dg2, du2, du2, g, u)
		for i := range du {
			if du2[i] != du[i] || dg2[i] != dg[i] {
				t.Fatalf("n=%d: aliased du differs at %d", n, i)
			}
		}
	}
}

func TestMaxScaleAxpy(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for n := 1; n <= 70; n++ {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		want := x[0]
		for _, v := range x {
			want = max(want, v)
		}
		if got := Max(x); got != want {
			t.Fatalf("n=%d: Max %g, want %g", n, got, want)
		}
		x[n-1] = 100 // in the tail
		if got := Max(x); got != 100 {
			t.Fatalf("n=%d: Max %g, want 100", n, got)
		}
		y := make([]float32, n+1)
		for i := range y {
			y[i] = float32(i)
		}
		Axpy(0.5, x, y)
		for i := range x {
			if w := float32(math.FMA(0.5, float64(x[i]), float64(i))); y[i] != w {
				t.Fatalf("n=%d: Axpy y[%d] = %g, want %g", n, i, y[i], w)
			}
		}
		if y[n] != float32(n) {
			t.Fatalf("n=%d: Axpy wrote past len(x)", n)
		}
		c := append([]float32(nil), x...)
		Scale(c, 3)
		for i := range x {
			if c[i] != 3*x[i] {
				t.Fatalf("n=%d: Scale", n)
			}
		}
	}
}

// TestVecPortable runs the portable loops against the vector kernels (when
// this CPU has them) on the same inputs: both within 2 ulp of each other.
func TestVecPortable(t *testing.T) {
	if vec.exp == nil {
		t.Skip("no vector kernels on this CPU")
	}
	saved := vec
	r := rand.New(rand.NewPCG(13, 14))
	x := make([]float32, 1000)
	for i := range x {
		x[i] = float32(r.NormFloat64() * 10)
	}
	a, b := make([]float32, len(x)), make([]float32, len(x))
	sa := Exp(a, x, 1, 2)
	vec = vecKernels{}
	sb := Exp(b, x, 1, 2)
	vec = saved
	for i := range a {
		if d := ulps(a[i], b[i]); d > 2 && b[i] > 1e-37 {
			t.Fatalf("element %d: vector %g, portable %g", i, a[i], b[i])
		}
	}
	if math.Abs(sa-sb) > 1e-6*sb {
		t.Fatalf("sums %g and %g", sa, sb)
	}
}

func BenchmarkExp(b *testing.B) {
	x := make([]float32, 4096)
	for i := range x {
		x[i] = float32(i%97) * -0.1
	}
	dst := make([]float32, len(x))
	for b.Loop() {
		Exp(dst, x, 1, 0)
	}
	b.SetBytes(4 * int64(len(x)))
}

// TestRowDots checks that every element of RowDots has the bits of Dot on
// its own row and weight row, for shapes around the 4x4 tiles (edge tiles
// of 1 to 3 rows or columns), strided rows, and lengths around blocks of
// 16; and that Dot's bits do not depend on the slices' alignment.
func TestRowDots(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	for _, n := range []int{0, 1, 15, 16, 17, 48, 64, 100, 256} {
		for _, rows := range []int{1, 2, 3, 4, 5, 9, 12} {
			for _, cols := range []int{1, 2, 3, 4, 7, 9, 17} {
				ldx, ldw := n+3, n+5
				x := make([]float32, rows*ldx)
				w := make([]float32, cols*ldw)
				for i := range x {
					x[i] = float32(r.NormFloat64())
				}
				for i := range w {
					w[i] = float32(r.NormFloat64())
				}
				ldy := cols + 2
				y := make([]float32, (rows-1)*ldy+cols)
				RowDots(y, ldy, x, ldx, rows, w, ldw, cols, n)
				for i := range rows {
					for j := range cols {
						want := Dot(x[i*ldx:i*ldx+n], w[j*ldw:j*ldw+n])
						if math.Float32bits(y[i*ldy+j]) != math.Float32bits(want) {
							t.Fatalf("n=%d rows=%d cols=%d: y[%d,%d] = %g, Dot %g", n, rows, cols, i, j, y[i*ldy+j], want)
						}
					}
				}
			}
		}
	}
	// Dot itself: close to the float64 sum.
	x, w := make([]float32, 300), make([]float32, 300)
	for i := range x {
		x[i], w[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
	}
	for _, n := range []int{1, 16, 33, 300} {
		var want float64
		for i := range n {
			want += float64(x[i]) * float64(w[i])
		}
		if got := Dot(x[:n], w); math.Abs(float64(got)-want) > 1e-5*math.Sqrt(float64(n)) {
			t.Errorf("Dot of %d: %g, want %g", n, got, want)
		}
	}
}

func BenchmarkRowDots(b *testing.B) {
	// 32 rows by 64 weight rows of 256 is one task of the engine's
	// RowLinear; 4 query rows by 512 keys of 64 one of its attention
	// blocks (scores).
	for _, sh := range []struct{ rows, cols, n int }{{64, 256, 256}, {32, 64, 256}, {4, 512, 64}} {
		rows, cols, n := sh.rows, sh.cols, sh.n
		r := rand.New(rand.NewPCG(1, 2))
		x, w := randSlice(r, rows*n), randSlice(r, cols*n)
		y := make([]float32, rows*cols)
		flops := 2 * float64(rows*cols*n)
		name := fmt.Sprintf("%dx%dx%d/", rows, cols, n)
		b.Run(name+"rowdots", func(b *testing.B) {
			cpu0 := cputime.Process()
			for b.Loop() {
				RowDots(y, cols, x, n, rows, w, n, cols, n)
			}
			reportFlops(b, flops*float64(b.N), cputime.Process()-cpu0)
		})
		b.Run(name+"dot", func(b *testing.B) {
			cpu0 := cputime.Process()
			for b.Loop() {
				for i := range rows {
					for j := range cols {
						y[i*cols+j] = Dot(x[i*n:(i+1)*n], w[j*n:(j+1)*n])
					}
				}
			}
			reportFlops(b, flops*float64(b.N), cputime.Process()-cpu0)
		})
		b.Run(name+"sgemm", func(b *testing.B) {
			cpu0 := cputime.Process()
			for b.Loop() {
				Sgemm(false, true, rows, cols, n, 1, x, n, w, n, 0, y, cols)
			}
			reportFlops(b, flops*float64(b.N), cputime.Process()-cpu0)
		})
	}
}

// TestWeightedSum checks WeightedSum against Axpy calls in key order, bit
// for bit, for row counts around 4 and widths around 64.
func TestWeightedSum(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 20))
	for _, nk := range []int{0, 1, 5, 40} {
		for _, rows := range []int{1, 3, 4, 5, 8} {
			for _, n := range []int{16, 64, 80, 128} {
				const ldp, ldv, ldo = 41, 130, 131
				p, v := randSlice(r, rows*ldp), randSlice(r, max(nk, 1)*ldv)
				out := randSlice(r, rows*ldo)
				WeightedSum(out, ldo, p, ldp, rows, nk, v, ldv, n)
				for i := range rows {
					want := make([]float32, n)
					for j := range nk {
						Axpy(p[i*ldp+j], v[j*ldv:j*ldv+n], want)
					}
					for d := range n {
						if math.Float32bits(out[i*ldo+d]) != math.Float32bits(want[d]) {
							t.Fatalf("nk=%d rows=%d n=%d: out[%d,%d] = %g, want %g", nk, rows, n, i, d, out[i*ldo+d], want[d])
						}
					}
				}
			}
		}
	}
}
