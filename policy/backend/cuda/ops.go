//go:build cuda

package cuda

import (
	"math"

	"gorgonia.org/cu"

	"github.com/legorl/legorl/policy/backend"
	"github.com/legorl/legorl/policy/backend/cuda/kernels"
)

const rt = kernels.RowThreads

// defaultAttnScratch bounds the score buffer of an Attention call without
// probs: rows are processed in chunks that fit it (Backend.attnScratch).
const defaultAttnScratch = 256 << 20

// length is a slice argument's length and the length its operation needs.
type length struct {
	name       string
	have, want int
}

// need reports, as a sticky ErrArgument of op, the first slice shorter than
// its operation needs.
func (b *Backend) need(op string, ls ...length) bool {
	for _, l := range ls {
		if l.have < l.want {
			b.argErr(op, "%s has %d elements, needs %d", l.name, l.have, l.want)
			return false
		}
	}
	return true
}

// Gemm implements backend.Ops: C = alpha*op(A)*op(B) + beta*C. In bf16
// precision the product goes to cuBLAS with A and B rounded to bfloat16.
func (b *Backend) Gemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, bm []float32, ldb int,
	beta float32, c []float32, ldc int) {
	if m <= 0 || n <= 0 {
		return
	}
	ra, ca := m, k
	if transA {
		ra, ca = k, m
	}
	rb, cb := k, n
	if transB {
		rb, cb = n, k
	}
	if k < 0 || lda < ca || ldb < cb || ldc < n {
		b.argErr("Gemm", "m=%d n=%d k=%d lda=%d ldb=%d ldc=%d", m, n, k, lda, ldb, ldc)
		return
	}
	ea, eb, ec := extent(ra, ca, lda), extent(rb, cb, ldb), extent(m, n, ldc)
	if !b.need("Gemm", length{"a", len(a), ea}, length{"b", len(bm), eb}, length{"c", len(c), ec}) {
		return
	}
	b.do("Gemm", func(cl *call) {
		dA, dB := cl.up(a[:ea]), cl.up(bm[:eb])
		var dC cu.DevicePtr
		if beta != 0 {
			dC = cl.up(c[:ec])
		} else {
			dC = cl.allocF(ec)
		}
		if b.blas != nil && k > 0 {
			cl.gemmBF16(transA, transB, m, n, k, alpha, dA, lda, ea, dB, ldb, eb, beta, dC, ldc)
		} else {
			cl.sgemm(transA, transB, m, n, k, alpha, dA, lda, dB, ldb, beta, dC, ldc)
		}
		cl.downRows(c, dC, m, n, ldc)
	})
}

// sgemm launches the fp32 kernel on device matrices.
func (c *call) sgemm(transA, transB bool, m, n, k int, alpha float32, a cu.DevicePtr, lda int, b cu.DevicePtr, ldb int,
	beta float32, cc cu.DevicePtr, ldc int) {
	c.launch(kernels.Sgemm, ceilDiv(n, kernels.GemmTile), ceilDiv(m, kernels.GemmTile), kernels.GemmThreads,
		i64(bool01(transA)), i64(bool01(transB)), i64(m), i64(n), i64(k), f64(float64(alpha)), ptr(a), i64(lda),
		ptr(b), i64(ldb), f64(float64(beta)), ptr(cc), i64(ldc))
}

// gemmBF16 rounds the ea and eb elements of A and B to bfloat16 on the
// device and multiplies them with cuBLAS. cuBLAS is column-major: the
// row-major C [m,n] is the column-major C^T [n,m] = op(B)^T op(A)^T, so
// the operands swap and each row-major matrix with leading dimension ld is
// read as its column-major transpose with the same ld.
func (c *call) gemmBF16(transA, transB bool, m, n, k int, alpha float32, a cu.DevicePtr, lda, ea int, b cu.DevicePtr,
	ldb, eb int, beta float32, cc cu.DevicePtr, ldc int) {
	ha, hb := c.alloc(2*ea), c.alloc(2*eb)
	c.launch(kernels.F32ToBF16, ceilDiv(ea, rt), 1, rt, ptr(ha), ptr(a), i64(ea))
	c.launch(kernels.F32ToBF16, ceilDiv(eb, rt), 1, rt, ptr(hb), ptr(b), i64(eb))
	if c.err != nil {
		return
	}
	if err := c.b.blas.gemmBF16(transB, transA, n, m, k, alpha, hb, ldb, ha, lda, beta, cc, ldc); err != nil {
		c.err = err
	}
}

func bool01(v bool) int {
	if v {
		return 1
	}
	return 0
}

// RowLinear implements backend.Ops: y = x W^T with the SGEMM kernel in
// both precisions, whose every element is one dot product in k order, so a
// row's result does not depend on the other rows.
func (b *Backend) RowLinear(y, x []float32, rows, in int, w []float32, out int) {
	if rows <= 0 || out <= 0 {
		return
	}
	if in < 0 {
		b.argErr("RowLinear", "in=%d", in)
		return
	}
	if !b.need("RowLinear", length{"x", len(x), rows * in}, length{"w", len(w), out * in},
		length{"y", len(y), rows * out}) {
		return
	}
	b.do("RowLinear", func(c *call) {
		dx, dw, dy := c.up(x[:rows*in]), c.up(w[:out*in]), c.allocF(rows*out)
		c.sgemm(false, true, rows, out, in, 1, dx, in, dw, in, 0, dy, out)
		c.down(y[:rows*out], dy)
	})
}

// RMSNorm implements backend.Ops.
func (b *Backend) RMSNorm(y, r, x []float32, rows, n int, w []float32, eps float64) {
	if rows <= 0 || n <= 0 {
		return
	}
	if !b.need("RMSNorm", length{"x", len(x), rows * n}, length{"y", len(y), rows * n}, length{"w", len(w), n}) {
		return
	}
	if r != nil && !b.need("RMSNorm", length{"r", len(r), rows}) {
		return
	}
	b.do("RMSNorm", func(c *call) {
		dx, dw, dy := c.up(x[:rows*n]), c.up(w[:n]), c.allocF(rows*n)
		var dr cu.DevicePtr
		if r != nil {
			dr = c.allocF(rows)
		}
		c.launch(kernels.RMSNormFwd, rows, 1, rt, ptr(dy), ptr(dr), ptr(dx), ptr(dw), i64(n), f64(eps))
		c.down(y[:rows*n], dy)
		if r != nil {
			c.down(r[:rows], dr)
		}
	})
}

// RMSNormBack implements backend.Ops. dw is reduced over the rows in two
// deterministic passes (chunks of rows, then the chunks in order) in
// double precision.
func (b *Backend) RMSNormBack(dx, dw, dy, x []float32, rows, n int, w, r []float32) {
	if rows <= 0 || n <= 0 {
		return
	}
	if !b.need("RMSNormBack", length{"dx", len(dx), rows * n}, length{"dy", len(dy), rows * n},
		length{"x", len(x), rows * n}, length{"dw", len(dw), n}, length{"w", len(w), n}, length{"r", len(r), rows}) {
		return
	}
	chunk := max(32, ceilDiv(rows, 65535))
	chunks := ceilDiv(rows, chunk)
	b.do("RMSNormBack", func(c *call) {
		ddx, ddw := c.up(dx[:rows*n]), c.up(dw[:n])
		ddy, dxin, dwt, dr := c.up(dy[:rows*n]), c.up(x[:rows*n]), c.up(w[:n]), c.up(r[:rows])
		part := c.alloc(8 * chunks * n)
		c.launch(kernels.RMSNormBwdDx, rows, 1, rt, ptr(ddx), ptr(ddy), ptr(dxin), ptr(dwt), ptr(dr), i64(n))
		c.launch(kernels.RMSNormBwdDwPart, ceilDiv(n, rt), chunks, rt, ptr(part), ptr(ddy), ptr(dxin), ptr(dr),
			i64(rows), i64(n), i64(chunk))
		c.launch(kernels.RMSNormBwdDwSum, ceilDiv(n, rt), 1, rt, ptr(ddw), ptr(part), i64(n), i64(chunks))
		c.down(dx[:rows*n], ddx)
		c.down(dw[:n], ddw)
	})
}

// SwiGLU implements backend.Ops.
func (b *Backend) SwiGLU(act, g, u []float32) {
	n := len(g)
	if n == 0 || !b.need("SwiGLU", length{"u", len(u), n}, length{"act", len(act), n}) {
		return
	}
	b.do("SwiGLU", func(c *call) {
		dg, du, da := c.up(g), c.up(u[:n]), c.allocF(n)
		c.launch(kernels.SwiGLUFwd, ceilDiv(n, rt), 1, rt, ptr(da), ptr(dg), ptr(du), i64(n))
		c.down(act[:n], da)
	})
}

// SwiGLUBack implements backend.Ops. du may alias dact: dact is copied to
// the device before du is written back.
func (b *Backend) SwiGLUBack(dg, du, dact, g, u []float32) {
	n := len(g)
	if n == 0 || !b.need("SwiGLUBack", length{"u", len(u), n}, length{"dact", len(dact), n}, length{"dg", len(dg), n},
		length{"du", len(du), n}) {
		return
	}
	b.do("SwiGLUBack", func(c *call) {
		ddact, dgin, duin := c.up(dact[:n]), c.up(g), c.up(u[:n])
		ddg, ddu := c.allocF(n), c.allocF(n)
		c.launch(kernels.SwiGLUBwd, ceilDiv(n, rt), 1, rt, ptr(ddg), ptr(ddu), ptr(ddact), ptr(dgin), ptr(duin), i64(n))
		c.down(dg[:n], ddg)
		c.down(du[:n], ddu)
	})
}

// attnScale is the CPU's float32 1/sqrt(hd), passed to the kernels exactly.
func attnScale(hd int) float64 { return float64(float32(1 / math.Sqrt(float64(hd)))) }

// checkAttn validates the shape of an attention call.
func (b *Backend) checkAttn(op string, a backend.AttnShape) bool {
	if a.S < 0 || a.Pos0 < 0 || a.Heads <= 0 || a.KV <= 0 || a.Heads%a.KV != 0 || a.HeadDim <= 0 || a.HeadDim > kernels.MaxHeadDim {
		b.argErr(op, "shape %+v (want Heads a multiple of KV and 0 < HeadDim <= %d)", a, kernels.MaxHeadDim)
		return false
	}
	return true
}

// Attention implements backend.Ops: one block per (query row, head). With
// probs the scores live in the probs buffer; without, in a scratch buffer
// of at most b.attnScratch bytes, chunk of rows by chunk.
func (b *Backend) Attention(out, probs, q, k, v []float32, a backend.AttnShape) {
	if a.S == 0 || !b.checkAttn("Attention", a) {
		return
	}
	S, H, KV, hd := a.S, a.Heads, a.KV, a.HeadDim
	N := a.Pos0 + S
	if !b.need("Attention", length{"q", len(q), S * H * hd}, length{"k", len(k), N * KV * hd},
		length{"v", len(v), N * KV * hd}, length{"out", len(out), S * H * hd}) {
		return
	}
	if probs != nil && !b.need("Attention", length{"probs", len(probs), H * S * N}) {
		return
	}
	scale := attnScale(hd)
	b.do("Attention", func(c *call) {
		dq, dk, dv := c.up(q[:S*H*hd]), c.up(k[:N*KV*hd]), c.up(v[:N*KV*hd])
		dout := c.allocF(S * H * hd)
		chunk := S
		if probs == nil {
			chunk = max(1, min(S, b.attnScratch/(4*H*N)))
		}
		dP := c.allocF(H * chunk * N)
		for r0 := 0; r0 < S; r0 += chunk {
			rows := min(chunk, S-r0)
			pRow0 := r0
			c.launch(kernels.AttnFwd, rows, H, rt, ptr(dout), ptr(dP), ptr(dq), ptr(dk), ptr(dv), i64(S), i64(a.Pos0),
				i64(H), i64(KV), i64(hd), i64(r0), i64(chunk), i64(pRow0), f64(scale))
		}
		c.down(out[:S*H*hd], dout)
		if probs != nil {
			c.down(probs[:H*S*N], dP)
		}
	})
}

// AttendRows implements backend.Ops on the host, with the CPU backend's
// row-invariant kernels: the decoding engine keeps its KV cache in host
// memory (model.Cache), so a device kernel would first upload the whole
// cache at every step. It does not touch the device, and reports no error.
func (b *Backend) AttendRows(out, q []float32, ld, nq int, k, v []float32, ldkv, first, hd int) {
	backend.CPUOps[float32]{}.AttendRows(out, q, ld, nq, k, v, ldkv, first, hd)
}

// AttentionBack implements backend.Ops (Pos0 must be 0): dS and dq with one
// block per (query row, head), then dk and dv with one block per (key row,
// key/value head), summing the group's heads in order.
func (b *Backend) AttentionBack(dq, dk, dv, dout, q, k, v, probs []float32, a backend.AttnShape) {
	if a.S == 0 || !b.checkAttn("AttentionBack", a) {
		return
	}
	if a.Pos0 != 0 {
		b.argErr("AttentionBack", "Pos0 = %d, the backward pass needs 0", a.Pos0)
		return
	}
	S, H, KV, hd := a.S, a.Heads, a.KV, a.HeadDim
	if !b.need("AttentionBack", length{"dout", len(dout), S * H * hd}, length{"q", len(q), S * H * hd},
		length{"k", len(k), S * KV * hd}, length{"v", len(v), S * KV * hd}, length{"probs", len(probs), H * S * S},
		length{"dq", len(dq), S * H * hd}, length{"dk", len(dk), S * KV * hd}, length{"dv", len(dv), S * KV * hd}) {
		return
	}
	scale := attnScale(hd)
	threads := min(rt, ceilDiv(hd, 32)*32)
	b.do("AttentionBack", func(c *call) {
		ddout, dqin, dkin, dvin, dP := c.up(dout[:S*H*hd]), c.up(q[:S*H*hd]), c.up(k[:S*KV*hd]), c.up(v[:S*KV*hd]), c.up(probs[:H*S*S])
		dS := c.allocF(H * S * S)
		ddq, ddk, ddv := c.allocF(S*H*hd), c.allocF(S*KV*hd), c.allocF(S*KV*hd)
		c.launch(kernels.AttnBwdDS, S, H, rt, ptr(dS), ptr(ddq), ptr(ddout), ptr(dkin), ptr(dvin), ptr(dP),
			i64(S), i64(H), i64(KV), i64(hd), f64(scale))
		c.launch(kernels.AttnBwdDKV, S, KV, threads, ptr(ddk), ptr(ddv), ptr(dS), ptr(dP), ptr(ddout), ptr(dqin),
			i64(S), i64(H), i64(KV), i64(hd), f64(scale))
		c.down(dq[:S*H*hd], ddq)
		c.down(dk[:S*KV*hd], ddk)
		c.down(dv[:S*KV*hd], ddv)
	})
}

// checkTargets validates the targets of a logprobs call.
func (b *Backend) checkTargets(op string, targets []int32, vocab int) bool {
	if vocab <= 0 {
		b.argErr(op, "vocab %d", vocab)
		return false
	}
	for i, t := range targets {
		if t < 0 || int(t) >= vocab {
			b.argErr(op, "target %d is %d, outside the vocabulary of %d", i, t, vocab)
			return false
		}
	}
	return true
}

// Logprobs implements backend.Ops: one block per row. Without keepProbs
// logits is left unchanged.
func (b *Backend) Logprobs(lp, logits []float32, vocab int, targets []int32, invTemp float64, keepProbs bool) {
	rows := len(targets)
	if rows == 0 || !b.checkTargets("Logprobs", targets, vocab) || !b.need("Logprobs",
		length{"logits", len(logits), rows * vocab}, length{"lp", len(lp), rows}) {
		return
	}
	b.do("Logprobs", func(c *call) {
		dz, dt, dlp := c.up(logits[:rows*vocab]), c.upInt(targets), c.allocF(rows)
		c.launch(kernels.LogprobsFwd, rows, 1, rt, ptr(dlp), ptr(dz), ptr(dt), i64(vocab), f64(invTemp), i64(bool01(keepProbs)))
		c.down(lp[:rows], dlp)
		if keepProbs {
			c.down(logits[:rows*vocab], dz)
		}
	})
}

// LogprobsBack implements backend.Ops: the weight of row i is w[i]/temp.
func (b *Backend) LogprobsBack(probs []float32, vocab int, targets []int32, w []float32, temp float64) {
	rows := len(targets)
	if rows == 0 || !b.checkTargets("LogprobsBack", targets, vocab) || !b.need("LogprobsBack",
		length{"probs", len(probs), rows * vocab}, length{"w", len(w), rows}) {
		return
	}
	b.do("LogprobsBack", func(c *call) {
		dp, dt, dw := c.up(probs[:rows*vocab]), c.upInt(targets), c.up(w[:rows])
		c.launch(kernels.LogprobsBwd, rows, ceilDiv(vocab, rt), rt, ptr(dp), ptr(dt), ptr(dw), i64(vocab), f64(temp))
		c.down(probs[:rows*vocab], dp)
	})
}

// AdamW implements backend.Backend, in double precision per element as
// the CPU backend.
func (b *Backend) AdamW(p, g, m, v []float32, s backend.AdamWStep) {
	n := len(p)
	if n == 0 || !b.need("AdamW", length{"g", len(g), n}, length{"m", len(m), n}, length{"v", len(v), n}) {
		return
	}
	b.do("AdamW", func(c *call) {
		dp, dg, dm, dv := c.up(p), c.up(g[:n]), c.up(m[:n]), c.up(v[:n])
		c.launch(kernels.AdamW, ceilDiv(n, rt), 1, rt, ptr(dp), ptr(dg), ptr(dm), ptr(dv), i64(n), f64(s.Beta1), f64(s.Beta2),
			f64(s.Eps), f64(s.StepSize), f64(s.SqrtBC2), f64(float64(s.Shrink)), f64(s.GradScale))
		c.down(p, dp)
		c.down(m[:n], dm)
		c.down(v[:n], dv)
		if s.GradScale != 1 {
			c.down(g[:n], dg)
		}
	})
}
