package backend

import (
	"math"
	"runtime"
	"sync"

	"github.com/legorl/legorl/policy/kernels"
)

// CPUOps is the pure-Go implementation of Ops for either float type:
// float32 matrix products go to kernels.Sgemm (AVX2/FMA on amd64), float64
// ones (the gradient checks) to a plain loop. It has no state; the zero
// value is ready to use.
type CPUOps[T Float] struct{}

// CPU is the default backend: CPUOps[float32] plus the optimizer step.
type CPU struct{ CPUOps[float32] }

// NewCPU returns the CPU backend.
func NewCPU() *CPU { return &CPU{} }

// Name implements Backend.
func (*CPU) Name() string { return "cpu" }

// Err implements Backend: CPU operations do not fail.
func (*CPU) Err() error { return nil }

// Close implements Backend.
func (*CPU) Close() error { return nil }

// Gemm implements Ops.
func (CPUOps[T]) Gemm(transA, transB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	switch a := any(a).(type) {
	case []float32:
		kernels.Sgemm(transA, transB, m, n, k, float32(alpha), a, lda, any(b).([]float32), ldb, float32(beta), any(c).([]float32), ldc)
	case []float64:
		kernels.Ref(transA, transB, m, n, k, float64(alpha), a, lda, any(b).([]float64), ldb, float64(beta), any(c).([]float64), ldc)
	}
}

// RowLinear implements Ops with one dot product per element (kernels.Dot's
// rounding for float32, through kernels.RowDots). Work is split into blocks
// of weight rows by blocks of input rows, so a block of weights is reused
// across the batch while in cache.
func (CPUOps[T]) RowLinear(y, x []T, rows, in int, w []T, out int) {
	const colBlock, rowBlock = 64, 32
	cb, rb := (out+colBlock-1)/colBlock, (rows+rowBlock-1)/rowBlock
	var body func(t int)
	if y32, ok := any(y).([]float32); ok {
		x32, w32 := any(x).([]float32), any(w).([]float32)
		body = func(t int) {
			j0, i0 := t/rb*colBlock, t%rb*rowBlock
			j1, i1 := min(j0+colBlock, out), min(i0+rowBlock, rows)
			kernels.RowDots(y32[i0*out+j0:], out, x32[i0*in:i1*in], in, i1-i0, w32[j0*in:j1*in], in, j1-j0, in)
		}
	} else {
		dot := dotFunc[T]()
		body = func(t int) {
			j0, i0 := t/rb*colBlock, t%rb*rowBlock
			for j := j0; j < min(j0+colBlock, out); j++ {
				wr := w[j*in : (j+1)*in]
				for i := i0; i < min(i0+rowBlock, rows); i++ {
					y[i*out+j] = dot(x[i*in:(i+1)*in], wr)
				}
			}
		}
	}
	if rows*out*in < 1<<18 {
		for t := range cb * rb {
			body(t)
		}
	} else {
		ParallelFor(cb*rb, body)
	}
}

// dotFunc returns kernels.Dot for float32 and a plain loop for float64.
func dotFunc[T Float]() func(x, y []T) T {
	if f, ok := any(kernels.Dot).(func(x, y []T) T); ok {
		return f
	}
	return func(x, y []T) T {
		var s T
		for i, v := range x {
			s += v * y[i]
		}
		return s
	}
}

// RMSNorm implements Ops.
func (CPUOps[T]) RMSNorm(y, r, x []T, rows, n int, w []T, eps float64) {
	for i := 0; i < rows; i++ {
		xr := x[i*n : (i+1)*n]
		var ss float64
		for _, v := range xr {
			ss += float64(v) * float64(v)
		}
		ri := T(1 / math.Sqrt(ss/float64(n)+eps))
		if r != nil {
			r[i] = ri
		}
		yr := y[i*n : (i+1)*n]
		for j, v := range xr {
			yr[j] = w[j] * (v * ri)
		}
	}
}

// RMSNormBack implements Ops.
func (CPUOps[T]) RMSNormBack(dx, dw, dy, x []T, rows, n int, w, r []T) {
	for i := 0; i < rows; i++ {
		xr, dyr, dxr := x[i*n:(i+1)*n], dy[i*n:(i+1)*n], dx[i*n:(i+1)*n]
		ri := r[i]
		var dot float64
		for j := range xr {
			g := dyr[j] * w[j]
			dot += float64(g) * float64(xr[j])
			dw[j] += dyr[j] * xr[j] * ri
		}
		c := T(dot) * ri * ri * ri / T(n)
		for j := range xr {
			dxr[j] += dyr[j]*w[j]*ri - xr[j]*c
		}
	}
}

// SwiGLU implements Ops (kernels.SwiGLU for float32).
func (CPUOps[T]) SwiGLU(act, g, u []T) {
	if a, ok := any(act).([]float32); ok {
		kernels.SwiGLU(a, any(g).([]float32), any(u).([]float32))
		return
	}
	Sigmoid(act, g)
	for i, gv := range g {
		act[i] *= gv * u[i]
	}
}

// SwiGLUBack implements Ops (kernels.SwiGLUBack for float32).
func (CPUOps[T]) SwiGLUBack(dg, du, dact, g, u []T) {
	if d, ok := any(dg).([]float32); ok {
		kernels.SwiGLUBack(d, any(du).([]float32), any(dact).([]float32), any(g).([]float32), any(u).([]float32))
		return
	}
	Sigmoid(dg, g)
	for i, gv := range g {
		s := dg[i]
		da := dact[i]
		dg[i] = da * u[i] * s * (1 + gv*(1-s))
		du[i] = da * gv * s
	}
}

// Attention implements Ops, one goroutine per head. A block of query rows
// multiplies only the keys up to its last row, which skips most of the
// masked upper triangle while keeping the products large.
func (o CPUOps[T]) Attention(out, probs, q, k, v []T, a AttnShape) {
	S, p0 := a.S, a.Pos0
	H, KV, hd := a.Heads, a.KV, a.HeadDim
	N := p0 + S // keys, and the row stride of the probabilities
	group := H / KV
	scale := T(1 / math.Sqrt(float64(hd)))
	block := max(a.Block, 1)
	ParallelFor(H, func(h int) {
		kh := h / group
		var scratch []T
		if probs == nil {
			scratch = make([]T, min(block, S)*N) // inference keeps one row block
		}
		// Causal: row block [r0, r1) only needs keys [0, p0+r1).
		for r0 := 0; r0 < S; r0 += block {
			r1 := min(r0+block, S)
			P := scratch // rows r0..r1-1 with stride N
			if probs != nil {
				P = probs[(h*S+r0)*N : (h+1)*S*N]
			}
			o.Gemm(false, true, r1-r0, p0+r1, hd, scale, q[(r0*H+h)*hd:], H*hd, k[kh*hd:], KV*hd, 0, P, N)
			for i := r0; i < r1; i++ {
				row := P[(i-r0)*N : (i-r0+1)*N]
				last := p0 + i // the last key this query sees
				softmax(row[:last+1])
				clear(row[last+1:])
			}
			o.Gemm(false, false, r1-r0, hd, p0+r1, 1, P, N, v[kh*hd:], KV*hd, 0, out[(r0*H+h)*hd:], H*hd)
		}
	})
}

// AttendRows implements Ops. For float32 the scores are kernels.RowDots
// (each element Dot's bits), the softmax is per row, and the weighted sum of
// the values is one fused multiply-add chain per element with the keys in
// position order: the keys every row sees together (kernels.WeightedSum,
// four rows sharing each load of a value row), then each row's own last
// ones. float64 (the gradient checks) takes plain loops in the same order.
func (CPUOps[T]) AttendRows(out, q []T, ld, nq int, k, v []T, ldkv, first, hd int) {
	if nq <= 0 {
		return
	}
	N := first + nq // the keys the last row sees
	if out32, ok := any(out).([]float32); ok {
		sp, _ := scoreScratch.Get().(*[]float32)
		if sp == nil {
			sp = new([]float32)
		}
		if cap(*sp) < nq*N {
			*sp = make([]float32, nq*N)
		}
		attendRows32(out32, any(q).([]float32), ld, nq, any(k).([]float32), any(v).([]float32), ldkv, first, hd, (*sp)[:nq*N])
		scoreScratch.Put(sp)
		return
	}
	s := make([]T, nq*N)
	scale := T(1 / math.Sqrt(float64(hd)))
	dot := dotFunc[T]()
	for r := range nq {
		p := s[r*N : r*N+first+r+1]
		for j := range p {
			p[j] = dot(q[r*ld:r*ld+hd], k[j*ldkv:j*ldkv+hd]) * scale
		}
		softmax(p)
		o := out[r*ld : r*ld+hd]
		clear(o)
		for j, pj := range p {
			for i, vv := range v[j*ldkv : j*ldkv+hd] {
				o[i] += pj * vv
			}
		}
	}
}

// scoreScratch holds score buffers of finished AttendRows calls (one a
// query block: a prefill makes thousands); attendRows32 writes every score
// it reads.
var scoreScratch sync.Pool

// attendRows32 is AttendRows for float32 with s, the scores [nq, first+nq],
// as scratch.
func attendRows32(out, q []float32, ld, nq int, k, v []float32, ldkv, first, hd int, s []float32) {
	N := first + nq
	scale := float32(1 / math.Sqrt(float64(hd)))
	kernels.RowDots(s, N, q, ld, nq, k, ldkv, N, hd)
	for r := range nq {
		p := s[r*N : r*N+first+r+1]
		kernels.Scale(p, scale) // the bits of p[j] *= scale
		inv := float32(1 / ExpShift(p, 1, float64(kernels.Max(p))))
		kernels.Scale(p, inv)
	}
	kernels.WeightedSum(out, ld, s, N, nq, first+1, v, ldkv, hd)
	for r := 1; r < nq; r++ {
		o := out[r*ld : r*ld+hd]
		for j := first + 1; j <= first+r; j++ {
			kernels.Axpy(s[r*N+j], v[j*ldkv:j*ldkv+hd], o)
		}
	}
}

// AttentionBack implements Ops, one goroutine per query head; heads sharing
// a key/value head write their dk and dv to private buffers summed
// afterwards in head order.
func (o CPUOps[T]) AttentionBack(dq, dk, dv, dout, q, k, v, probs []T, a AttnShape) {
	S := a.S
	H, KV, hd := a.Heads, a.KV, a.HeadDim
	group := H / KV
	scale := T(1 / math.Sqrt(float64(hd)))
	block := max(a.Block, 1)
	dkH := make([]T, H*S*hd)
	dvH := make([]T, H*S*hd)
	ParallelFor(H, func(h int) {
		kh := h / group
		P := probs[h*S*S : (h+1)*S*S]
		dP := make([]T, S*S)
		// O = P V: dP = dO V^T, dV = P^T dO
		// Causal blocks as in the forward pass: P and dS are lower
		// triangular, so row block [r0, r1) needs columns [0, r1) and
		// column block [c0, c1) needs rows [c0, S).
		for r0 := 0; r0 < S; r0 += block {
			r1 := min(r0+block, S)
			o.Gemm(false, true, r1-r0, r1, hd, 1, dout[(r0*H+h)*hd:], H*hd, v[kh*hd:], KV*hd, 0, dP[r0*S:], S)
			o.Gemm(true, false, r1-r0, hd, S-r0, 1, P[r0*S+r0:], S, dout[(r0*H+h)*hd:], H*hd, 0, dvH[(h*S+r0)*hd:], hd)
		}
		// softmax: dS = P * (dP - rowsum(dP * P))
		for i := 0; i < S; i++ {
			pr, dr := P[i*S:i*S+i+1], dP[i*S:(i+1)*S]
			var dot T
			for j, p := range pr {
				dot += p * dr[j]
			}
			for j, p := range pr {
				dr[j] = p * (dr[j] - dot)
			}
			clear(dr[i+1:])
		}
		// S = scale * Q K^T
		for r0 := 0; r0 < S; r0 += block {
			r1 := min(r0+block, S)
			o.Gemm(false, false, r1-r0, hd, r1, scale, dP[r0*S:], S, k[kh*hd:], KV*hd, 0, dq[(r0*H+h)*hd:], H*hd)
			o.Gemm(true, false, r1-r0, hd, S-r0, scale, dP[r0*S+r0:], S, q[(r0*H+h)*hd:], H*hd, 0, dkH[(h*S+r0)*hd:], hd)
		}
	})
	clear(dk[:S*KV*hd])
	clear(dv[:S*KV*hd])
	for h := 0; h < H; h++ {
		kh := h / group
		for t := 0; t < S; t++ {
			src, dst := dkH[(h*S+t)*hd:(h*S+t+1)*hd], dk[(t*KV+kh)*hd:(t*KV+kh+1)*hd]
			srv, dsv := dvH[(h*S+t)*hd:(h*S+t+1)*hd], dv[(t*KV+kh)*hd:(t*KV+kh+1)*hd]
			for j := range src {
				dst[j] += src[j]
				dsv[j] += srv[j]
			}
		}
	}
}

// softmax replaces x by its softmax: e^(x - max) / sum, in place.
func softmax[T Float](x []T) {
	if x32, ok := any(x).([]float32); ok {
		sum := kernels.Exp(x32, x32, 1, kernels.Max(x32))
		kernels.Scale(x32, float32(1/sum))
		return
	}
	mx := x[0]
	for _, s := range x[1:] {
		mx = max(mx, s)
	}
	inv := T(1 / ExpShift(x, 1, float64(mx)))
	for j := range x {
		x[j] *= inv
	}
}

// Logprobs implements Ops; float32 logits go through the vector kernels.
func (CPUOps[T]) Logprobs(lp, logits []T, vocab int, targets []int32, invTemp float64, keepProbs bool) {
	if l32, ok := any(logits).([]float32); ok {
		logprobs32(any(lp).([]float32), l32, vocab, targets, invTemp, keepProbs)
		return
	}
	for i, target := range targets {
		z := logits[i*vocab : (i+1)*vocab]
		mx := math.Inf(-1)
		for _, v := range z {
			mx = max(mx, float64(v)*invTemp)
		}
		zt := float64(z[target]) * invTemp
		sum := ExpShift(z, invTemp, mx)
		lp[i] = T(zt - mx - math.Log(sum))
		if keepProbs {
			inv := T(1 / sum)
			for j := range z {
				z[j] *= inv
			}
		}
	}
}

// logprobs32 is Logprobs for float32: the row's max and its exponentials
// in the vector kernels, with the shift and the scaled target logit taken
// in the same float32 arithmetic as the exponentials.
func logprobs32(lp, logits []float32, vocab int, targets []int32, invTemp float64, keepProbs bool) {
	scale := float32(invTemp)
	for i, target := range targets {
		z := logits[i*vocab : (i+1)*vocab]
		shift := kernels.Max(z) * scale // scale > 0
		zt := float64(z[target])*float64(scale) - float64(shift)
		sum := kernels.Exp(z, z, scale, shift)
		lp[i] = float32(zt - math.Log(sum))
		if keepProbs {
			kernels.Scale(z, float32(1/sum))
		}
	}
}

// LogprobsBack implements Ops.
func (CPUOps[T]) LogprobsBack(probs []T, vocab int, targets []int32, w []float32, temp float64) {
	for i, target := range targets {
		z := probs[i*vocab : (i+1)*vocab]
		wt := T(float64(w[i]) / temp)
		for j := range z {
			z[j] *= -wt
		}
		z[target] += wt
	}
}

// AdamW implements Backend, in float64 arithmetic per element.
func (*CPU) AdamW(p, g, m, v []float32, s AdamWStep) {
	b1, b2 := s.Beta1, s.Beta2
	for i, w := range p {
		gi := float64(g[i]) * s.GradScale
		if s.GradScale != 1 {
			g[i] = float32(gi)
		}
		mi := b1*float64(m[i]) + (1-b1)*gi
		vi := b2*float64(v[i]) + (1-b2)*gi*gi
		m[i], v[i] = float32(mi), float32(vi)
		p[i] = float32(float64(w*s.Shrink) - s.StepSize*mi/(math.Sqrt(vi)/s.SqrtBC2+s.Eps))
	}
}

// ExpShift sets z[j] = e^(z[j]*scale - shift) and returns the sum of the
// results in float64: kernels.Exp for float32 (vector code), math.Exp for
// float64.
func ExpShift[T Float](z []T, scale, shift float64) float64 {
	if z32, ok := any(z).([]float32); ok {
		return kernels.Exp(z32, z32, float32(scale), float32(shift))
	}
	var sum float64
	for j, v := range z {
		e := math.Exp(float64(v)*scale - shift)
		z[j] = T(e)
		sum += e
	}
	return sum
}

// Sigmoid sets dst[i] = 1 / (1 + e^-x[i]).
func Sigmoid[T Float](dst, x []T) {
	for i, v := range x {
		dst[i] = T(1 / (1 + math.Exp(-float64(v))))
	}
}

// ParallelFor runs f(i) for i in [0, n) on up to GOMAXPROCS goroutines.
func ParallelFor(n int, f func(i int)) {
	w := min(runtime.GOMAXPROCS(0), n)
	if w <= 1 {
		for i := 0; i < n; i++ {
			f(i)
		}
		return
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	next := 0
	for range w {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= n {
					return
				}
				f(i)
			}
		}()
	}
	wg.Wait()
}
