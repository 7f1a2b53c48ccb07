package kernels

import "math"

// Elementwise kernels of the model: the exponentials of softmaxes, the
// SwiGLU activation and its gradient, and the max, scale and axpy passes
// around them. On amd64 with AVX-512 they are vector assembly, sixteen floats
// at a time, with a degree-7 polynomial exp (within 2 ulp of e^x in
// float32); elsewhere, portable loops over math.Exp. Within one build the
// rounding of an element depends only on its own inputs (and a sum only on
// the length), never on its position, on other elements or on the number of
// goroutines: the engine's batch invariance relies on this.

// vec holds the vector implementations this CPU runs; nil fields fall back
// to the portable loops.
var vec = availableVec()

// Exp sets dst[i] = e^(x[i]*scale - shift) for the len(x) elements of x and
// returns their sum, accumulated in float64. dst may be x; it must be at
// least as long. The argument is rounded to float32 once (a fused
// multiply-subtract), so e^t carries a relative error of up to |t|*2^-24
// beyond the exp's own: negligible for a softmax, whose terms with large |t|
// are tiny.
func Exp(dst, x []float32, scale, shift float32) float64 {
	n := len(x)
	if n == 0 {
		return 0
	}
	dst = dst[:n]
	if vec.exp != nil {
		return vec.exp(n, &dst[0], &x[0], scale, shift)
	}
	var sum float64
	s, sh := float64(scale), float64(shift)
	for i, v := range x {
		t := float32(math.FMA(float64(v), s, -sh)) // rounded as the vector path's
		e := float32(math.Exp(float64(t)))
		dst[i] = e
		sum += float64(e)
	}
	return sum
}

// SwiGLU sets act[i] = silu(g[i]) * u[i] = g[i]*u[i] / (1 + e^-g[i]) for
// the len(g) elements of g; act and u must be at least as long.
func SwiGLU(act, g, u []float32) {
	n := len(g)
	if n == 0 {
		return
	}
	act, u = act[:n], u[:n]
	if vec.swiglu != nil {
		vec.swiglu(n, &act[0], &g[0], &u[0])
		return
	}
	for i, gv := range g {
		act[i] = gv * u[i] / (1 + float32(math.Exp(-float64(gv))))
	}
}

// SwiGLUBack sets, for act = SwiGLU(g, u) and its gradient dact, dg[i] =
// dact[i]*s*u[i]*(1 + g[i]*(1-s)) and du[i] = dact[i]*s*g[i] with s =
// sigmoid(g[i]). du may be dact.
func SwiGLUBack(dg, du, dact, g, u []float32) {
	n := len(g)
	if n == 0 {
		return
	}
	dg, du, dact, u = dg[:n], du[:n], dact[:n], u[:n]
	if vec.swigluBack != nil {
		vec.swigluBack(n, &dg[0], &du[0], &dact[0], &g[0], &u[0])
		return
	}
	for i, gv := range g {
		s := 1 / (1 + float32(math.Exp(-float64(gv))))
		ds := dact[i] * s
		dg[i] = ds * u[i] * (1 + gv*(1-s))
		du[i] = ds * gv
	}
}

// Max returns the largest element of x, which must not be empty. With a
// NaN in x the result is unspecified (Exp then propagates the NaN).
func Max(x []float32) float32 {
	if vec.max != nil {
		return vec.max(len(x), &x[0])
	}
	m := x[0]
	for _, v := range x[1:] {
		if v > m {
			m = v
		}
	}
	return m
}

// Scale multiplies every element of x by a.
func Scale(x []float32, a float32) {
	if len(x) == 0 {
		return
	}
	if vec.scale != nil {
		vec.scale(len(x), &x[0], a)
		return
	}
	for i := range x {
		x[i] *= a
	}
}

// Axpy adds a*x[i] to y[i] for the len(x) elements of x, one fused
// multiply-add per element on the vector path (math.FMA otherwise, so both
// round once).
func Axpy(a float32, x, y []float32) {
	n := len(x)
	if n == 0 {
		return
	}
	y = y[:n]
	if vec.axpy != nil {
		vec.axpy(n, a, &x[0], &y[0])
		return
	}
	for i, v := range x {
		y[i] = float32(math.FMA(float64(a), float64(v), float64(y[i])))
	}
}

// WeightedSum sets, for the rows r < rows, out[r*ldo+d] (d < n) to the sum
// over j < nk of p[r*ldp+j] * v[j*ldv+d], with the bits of Axpy(p[r*ldp+j],
// v[j*ldv:j*ldv+n], row) called for j = 0, 1, ... on a zeroed row: the
// weighted sum of attention, computed for several query rows at once (up
// to four share each load of v) without changing any row's rounding.
func WeightedSum(out []float32, ldo int, p []float32, ldp, rows, nk int, v []float32, ldv, n int) {
	if rows == 0 || n == 0 {
		return
	}
	_ = out[(rows-1)*ldo+n-1]
	if nk > 0 {
		_ = p[(rows-1)*ldp+nk-1]
		_ = v[(nk-1)*ldv+n-1]
	}
	r := 0
	if ws := vec.wsum4x64; ws != nil && nk > 0 {
		for ; r+4 <= rows; r += 4 {
			d := 0
			for ; d+64 <= n; d += 64 {
				ws(nk, &p[r*ldp], ldp, &v[d], ldv, &out[r*ldo+d], ldo)
			}
			if d < n {
				for k := range 4 {
					o := out[(r+k)*ldo+d : (r+k)*ldo+n]
					clear(o)
					for j := range nk {
						Axpy(p[(r+k)*ldp+j], v[j*ldv+d:j*ldv+n], o)
					}
				}
			}
		}
	}
	for ; r < rows; r++ {
		o := out[r*ldo : r*ldo+n]
		clear(o)
		for j := range nk {
			Axpy(p[r*ldp+j], v[j*ldv:j*ldv+n], o)
		}
	}
}

// vecKernels are the vector implementations of one instruction set; each
// takes n >= 1 and pointers to the first elements.
type vecKernels struct {
	exp        func(n int, dst, src *float32, scale, shift float32) float64
	swiglu     func(n int, act, g, u *float32)
	swigluBack func(n int, dg, du, dact, g, u *float32)
	max        func(n int, x *float32) float32
	scale      func(n int, x *float32, a float32)
	axpy       func(n int, a float32, x, y *float32)
	// dotTile sets out[r*4+c] to the dot product of row r < 4 of x (rows
	// ldx apart) and row c < 4 of w (ldw apart), each rounded as dot
	// rounds it; n >= 1.
	dotTile func(n int, x *float32, ldx int, w *float32, ldw int, out *float32)
	// dotPanel sets y[i*ldy+j] (i < 4*rows4, j < 4*cols4) to the dot
	// product of row i of x and row j of w, with dotTile's bits; n, rows4,
	// cols4 >= 1.
	dotPanel func(n int, x *float32, ldx, rows4 int, w *float32, ldw, cols4 int, y *float32, ldy int)
	// dotRow sets out[4j+t] (j, t < 4) to the dot product of one row x
	// with row 4t+j of w (ldw apart), rounded as dot.
	dotRow func(n int, x *float32, w *float32, ldw int, out *float32)
	// wsum4x64 sets four rows of 64 outputs to weighted sums of nk >= 1
	// rows of v, as WeightedSum defines them.
	wsum4x64 func(nk int, p *float32, ldp int, v *float32, ldv int, out *float32, ldo int)
	// dot is Dot's vector kernel (n >= 1).
	dot func(n int, x, y *float32) float32
}
