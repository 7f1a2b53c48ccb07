package model

import (
	"math"

	"github.com/legorl/legorl/policy/backend"
)

// linear computes y = x W^T for x [rows, in] and W [out, in] (nn.Linear).
func linear[T Float](o backend.Ops[T], x []T, rows, in int, w []T, out int) []T {
	y := make([]T, rows*out)
	o.Gemm(false, true, rows, out, in, 1, x, in, w, in, 0, y, out)
	return y
}

// linearBack accumulates dx += dy W and dW += dy^T x for y = x W^T.
// dx may be nil when the input gradient is not needed.
func linearBack[T Float](o backend.Ops[T], dy []T, rows, out int, x []T, in int, w, dw, dx []T) {
	if dx != nil {
		o.Gemm(false, false, rows, in, out, 1, dy, out, w, in, 1, dx, in)
	}
	o.Gemm(true, false, out, in, rows, 1, dy, out, x, in, 1, dw, in)
}

// rmsnorm normalises each row of x [rows, n]: y = w * x / sqrt(mean(x²)+eps).
// It returns y and the reciprocal root of each row.
func rmsnorm[T Float](o backend.Ops[T], x []T, rows, n int, w []T, eps float64) (y, r []T) {
	y = make([]T, rows*n)
	r = make([]T, rows)
	o.RMSNorm(y, r, x, rows, n, w, eps)
	return y, r
}

// rmsnormBack accumulates into dx and dw the gradient of rmsnorm given dy.
func rmsnormBack[T Float](o backend.Ops[T], dy, x []T, rows, n int, w, r, dw, dx []T) {
	o.RMSNormBack(dx, dw, dy, x, rows, n, w, r)
}

// ropeTable holds cos and sin of every position's angles: [pos][hd/2].
type ropeTable[T Float] struct {
	half     int
	cos, sin []T
}

// newRope computes the rotary tables for positions 0..n-1 the way the HF
// code does: inv_freq = 1/theta^(2i/hd), angle = pos*inv_freq, in float32
// arithmetic for float32 models so the two agree to the last bit or so.
func newRope[T Float](n, hd int, theta float64) ropeTable[T] {
	half := hd / 2
	t := ropeTable[T]{half: half, cos: make([]T, n*half), sin: make([]T, n*half)}
	var zero T
	_, f32 := any(zero).(float32)
	for i := 0; i < half; i++ {
		inv32 := float32(1 / math.Pow(theta, float64(float32(2*i)/float32(hd))))
		div := math.Pow(theta, float64(2*i)/float64(hd))
		for p := 0; p < n; p++ {
			var ang float64
			if f32 {
				ang = float64(float32(p) * inv32)
			} else {
				ang = float64(p) / div
			}
			t.cos[p*half+i] = T(math.Cos(ang))
			t.sin[p*half+i] = T(math.Sin(ang))
		}
	}
	return t
}

// apply rotates x [S, heads, hd], rows at positions pos0.., in place: out[i] = x[i]cos - x[i+h]sin,
// out[i+h] = x[i+h]cos + x[i]sin (rotate_half). inverse applies the
// transpose, which is the backward pass.
func (t ropeTable[T]) apply(x []T, pos0, S, heads int, inverse bool) {
	h := t.half
	hd := 2 * h
	for p := 0; p < S; p++ {
		a := pos0 + p
		cs, sn := t.cos[a*h:(a+1)*h], t.sin[a*h:(a+1)*h]
		for k := 0; k < heads; k++ {
			v := x[(p*heads+k)*hd : (p*heads+k+1)*hd]
			for i := 0; i < h; i++ {
				a, b := v[i], v[i+h]
				s := sn[i]
				if inverse {
					s = -s
				}
				v[i] = a*cs[i] - b*s
				v[i+h] = b*cs[i] + a*s
			}
		}
	}
}
