package kernels

// Dot returns the sum of x[i]*y[i] over the len(x) elements of x; y must
// be at least as long. Its rounding depends only on len(x), never on what
// else is being computed, so an inference path that builds every matrix
// product from Dot (or RowDots, which has its bits) gets results per row
// that do not change with the batch (Sgemm's rounding depends on the
// number of rows: a dot-product path for a few rows, packed k-blocks
// otherwise). With AVX-512 it is one 16-lane fused multiply-add chain over
// blocks of 16 (the last zero-padded) and a fixed tree over the lanes;
// elsewhere a portable loop with four accumulators.
func Dot(x, y []float32) float32 {
	n := len(x)
	if n == 0 {
		return 0
	}
	y = y[:n] // panics, before any raw-pointer read, when y is too short
	if d := vec.dot; d != nil {
		return d(n, &x[0], &y[0])
	}
	return dotGeneric(x, y)
}

// dotGeneric is Dot in portable Go: four interleaved accumulators (for
// instruction-level parallelism), added pairwise at the end.
func dotGeneric(x, y []float32) float32 {
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(x); i += 4 {
		xs, ys := x[i:i+4:i+4], y[i:i+4:i+4]
		s0 += xs[0] * ys[0]
		s1 += xs[1] * ys[1]
		s2 += xs[2] * ys[2]
		s3 += xs[3] * ys[3]
	}
	s := (s0 + s1) + (s2 + s3)
	for ; i < len(x); i++ {
		s += x[i] * y[i]
	}
	return s
}
