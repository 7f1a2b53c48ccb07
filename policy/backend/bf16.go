package backend

import "math"

// CPUBF16 is the CPU backend with the inputs of its matrix products (Gemm
// and RowLinear) rounded to bfloat16, round to nearest even, and float32
// accumulation: how a bf16 inference engine (vLLM, SGLang on a GPU)
// computes them. A rollout engine on it samples in reduced precision
// beside a float32 trainer, so that their logprobs, and a MoE's routes,
// differ the way they do between a serving engine and a trainer; routing
// replay (package trainer) is what makes the trainer follow the engine's
// experts anyway. Every other operation is the CPU backend's, in float32.
// Open("cpu", Options{Precision: "bf16"}) returns one. It is a numerics
// reference, not a fast path: each product rounds fresh copies of both
// inputs, the weights included.
type CPUBF16 struct{ CPU }

// NewCPUBF16 returns the bf16-rounding CPU backend.
func NewCPUBF16() *CPUBF16 { return &CPUBF16{} }

// Precision reports "bf16" (the loop passes it on to rollout engines).
func (*CPUBF16) Precision() string { return "bf16" }

// Gemm is CPU.Gemm on bf16-rounded copies of a and b.
func (c *CPUBF16) Gemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, cc []float32, ldc int) {
	c.CPU.Gemm(transA, transB, m, n, k, alpha, roundedBF16(a), lda, roundedBF16(b), ldb, beta, cc, ldc)
}

// RowLinear is CPU.RowLinear on bf16-rounded copies of x and w.
func (c *CPUBF16) RowLinear(y, x []float32, rows, in int, w []float32, out int) {
	c.CPU.RowLinear(y, roundedBF16(x), rows, in, roundedBF16(w), out)
}

// roundedBF16 is a copy of x with each value rounded to the nearest
// bfloat16 (ties to even), kept as float32.
func roundedBF16(x []float32) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = RoundBF16(v)
	}
	return out
}

// RoundBF16 rounds f to the nearest bfloat16 value (ties to even) and
// returns it as a float32; NaN stays NaN and infinities stay infinite.
func RoundBF16(f float32) float32 {
	b := math.Float32bits(f)
	if f != f {
		return f
	}
	b += 0x7fff + (b>>16)&1
	return math.Float32frombits(b &^ 0xffff)
}
