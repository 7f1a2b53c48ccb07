package backend

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func randSlice(r *rand.Rand, n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = r.NormFloat64()
	}
	return s
}

func to32(x []float64) []float32 {
	y := make([]float32, len(x))
	for i, v := range x {
		y[i] = float32(v)
	}
	return y
}

func TestExpShiftSigmoid(t *testing.T) {
	z := []float32{0, -1, 2}
	sum := ExpShift(z, 0.5, 1)
	want := []float64{math.Exp(-1), math.Exp(-1.5), 1}
	for i, w := range want {
		if math.Abs(float64(z[i])-w) > 1e-7 {
			t.Errorf("z[%d] = %v, want %v", i, z[i], w)
		}
	}
	if math.Abs(sum-(want[0]+want[1]+want[2])) > 1e-6 {
		t.Errorf("sum %v", sum)
	}
	s := make([]float64, 2)
	Sigmoid(s, []float64{0, 2})
	if s[0] != 0.5 || math.Abs(s[1]-1/(1+math.Exp(-2))) > 1e-15 {
		t.Errorf("sigmoid %v", s)
	}
}

// naiveAttention is causal GQA attention written as the definition, in
// float64, for positions pos0.. of the queries.
func naiveAttention(q, k, v []float64, a AttnShape) (out, probs []float64) {
	N := a.Pos0 + a.S
	H, KV, hd := a.Heads, a.KV, a.HeadDim
	out = make([]float64, a.S*H*hd)
	probs = make([]float64, H*a.S*N)
	for h := 0; h < H; h++ {
		kh := h / (H / KV)
		for i := 0; i < a.S; i++ {
			last := a.Pos0 + i
			sc := make([]float64, last+1)
			mx := math.Inf(-1)
			for j := 0; j <= last; j++ {
				var s float64
				for x := 0; x < hd; x++ {
					s += q[(i*H+h)*hd+x] * k[(j*KV+kh)*hd+x]
				}
				sc[j] = s / math.Sqrt(float64(hd))
				mx = max(mx, sc[j])
			}
			var sum float64
			for j := range sc {
				sc[j] = math.Exp(sc[j] - mx)
				sum += sc[j]
			}
			for j := range sc {
				p := sc[j] / sum
				probs[(h*a.S+i)*N+j] = p
				for x := 0; x < hd; x++ {
					out[(i*H+h)*hd+x] += p * v[(j*KV+kh)*hd+x]
				}
			}
		}
	}
	return out, probs
}

func maxDiff(a []float32, b []float64) float64 {
	var m float64
	for i := range b {
		m = max(m, math.Abs(float64(a[i])-b[i]))
	}
	return m
}

func TestCPUAttentionMatchesDefinition(t *testing.T) {
	cases := []AttnShape{
		{S: 5, Pos0: 0, Heads: 4, KV: 2, HeadDim: 8, Block: 2},  // training shape, GQA, blocks
		{S: 3, Pos0: 6, Heads: 2, KV: 1, HeadDim: 4, Block: 64}, // extending a KV cache
		{S: 1, Pos0: 9, Heads: 3, KV: 3, HeadDim: 2, Block: 1},  // one decode row, MHA
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, a := range cases {
		N := a.Pos0 + a.S
		q := randSlice(r, a.S*a.Heads*a.HeadDim)
		k := randSlice(r, N*a.KV*a.HeadDim)
		v := randSlice(r, N*a.KV*a.HeadDim)
		wantOut, wantP := naiveAttention(q, k, v, a)
		out := make([]float32, len(wantOut))
		var probs []float32
		if a.Pos0 == 0 {
			probs = make([]float32, len(wantP))
		}
		NewCPU().Attention(out, probs, to32(q), to32(k), to32(v), a)
		if d := maxDiff(out, wantOut); d > 1e-5 {
			t.Errorf("%+v: out differs by %g", a, d)
		}
		if probs != nil {
			if d := maxDiff(probs, wantP); d > 1e-6 {
				t.Errorf("%+v: probs differ by %g", a, d)
			}
		}
	}
}

// TestCPUBackwardsAgainstFiniteDifferences checks every backward operation
// in float64 against central differences of its forward operation, through
// a random linear functional of the output.
func TestCPUBackwardsAgainstFiniteDifferences(t *testing.T) {
	var o CPUOps[float64]
	r := rand.New(rand.NewPCG(3, 4))
	const h = 1e-6
	// check compares an analytic gradient g of f at x with central
	// differences.
	check := func(name string, x, g []float64, f func() float64) {
		t.Helper()
		for i := range x {
			x0 := x[i]
			x[i] = x0 + h
			fp := f()
			x[i] = x0 - h
			fm := f()
			x[i] = x0
			num := (fp - fm) / (2 * h)
			if math.Abs(num-g[i]) > 1e-6*max(1, math.Abs(num)) {
				t.Fatalf("%s: d/dx[%d] = %v, finite difference %v", name, i, g[i], num)
			}
		}
	}
	dotWith := func(c, y []float64) float64 {
		var s float64
		for i := range y {
			s += c[i] * y[i]
		}
		return s
	}

	t.Run("rmsnorm", func(t *testing.T) {
		rows, n := 3, 5
		x, w, c := randSlice(r, rows*n), randSlice(r, n), randSlice(r, rows*n)
		y, rr := make([]float64, rows*n), make([]float64, rows)
		f := func() float64 { o.RMSNorm(y, rr, x, rows, n, w, 1e-6); return dotWith(c, y) }
		f()
		dx, dw := make([]float64, rows*n), make([]float64, n)
		o.RMSNormBack(dx, dw, c, x, rows, n, w, rr)
		check("dx", x, dx, f)
		check("dw", w, dw, f)
	})
	t.Run("swiglu", func(t *testing.T) {
		n := 7
		g, u, c := randSlice(r, n), randSlice(r, n), randSlice(r, n)
		act := make([]float64, n)
		f := func() float64 { o.SwiGLU(act, g, u); return dotWith(c, act) }
		dg, du := make([]float64, n), append([]float64(nil), c...)
		o.SwiGLUBack(dg, du, du, g, u) // du aliases dact, as the model calls it
		check("dg", g, dg, f)
		check("du", u, du, f)
	})
	t.Run("attention", func(t *testing.T) {
		a := AttnShape{S: 4, Heads: 4, KV: 2, HeadDim: 3, Block: 3}
		q, k, v := randSlice(r, a.S*a.Heads*a.HeadDim), randSlice(r, a.S*a.KV*a.HeadDim), randSlice(r, a.S*a.KV*a.HeadDim)
		c := randSlice(r, a.S*a.Heads*a.HeadDim)
		out, probs := make([]float64, len(c)), make([]float64, a.Heads*a.S*a.S)
		f := func() float64 { o.Attention(out, probs, q, k, v, a); return dotWith(c, out) }
		f()
		dq, dk, dv := make([]float64, len(q)), make([]float64, len(k)), make([]float64, len(v))
		o.AttentionBack(dq, dk, dv, c, q, k, v, probs, a)
		check("dq", q, dq, f)
		check("dk", k, dk, f)
		check("dv", v, dv, f)
	})
	t.Run("logprobs", func(t *testing.T) {
		rows, V := 3, 6
		targets := []int32{2, 0, 5}
		z, w := randSlice(r, rows*V), []float32{0.5, -1, 2}
		const temp = 0.7
		lp, scratch := make([]float64, rows), make([]float64, rows*V)
		f := func() float64 {
			copy(scratch, z)
			o.Logprobs(lp, scratch, V, targets, 1/temp, false)
			var s float64
			for i := range lp {
				s += float64(w[i]) * lp[i]
			}
			return s
		}
		probs := append([]float64(nil), z...)
		o.Logprobs(lp, probs, V, targets, 1/temp, true)
		for i := 0; i < rows; i++ {
			var s float64
			for _, p := range probs[i*V : (i+1)*V] {
				s += p
			}
			if math.Abs(s-1) > 1e-12 {
				t.Fatalf("row %d of the kept softmax sums to %v", i, s)
			}
		}
		o.LogprobsBack(probs, V, targets, w, temp)
		check("dlogits", z, probs, f)
	})
}

func TestCPURowLinearIsRowInvariant(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	rows, in, out := 40, 33, 70
	x, w := to32(randSlice(r, rows*in)), to32(randSlice(r, out*in))
	cpu := NewCPU()
	all := make([]float32, rows*out)
	cpu.RowLinear(all, x, rows, in, w, out)
	ref := make([]float32, rows*out)
	cpu.Gemm(false, true, rows, out, in, 1, x, in, w, in, 0, ref, out)
	for i := 0; i < rows; i++ {
		one := make([]float32, out)
		cpu.RowLinear(one, x[i*in:(i+1)*in], 1, in, w, out)
		for j := range one {
			if one[j] != all[i*out+j] {
				t.Fatalf("row %d col %d: alone %v, in the batch %v", i, j, one[j], all[i*out+j])
			}
			if d := math.Abs(float64(one[j] - ref[i*out+j])); d > 1e-4 {
				t.Fatalf("row %d col %d: %v, Gemm gives %v", i, j, one[j], ref[i*out+j])
			}
		}
	}
}

func TestCPUAdamWByHand(t *testing.T) {
	// One element, second step (t = 2): m = 0.1, v = 0.01 before.
	b1, b2, lr, eps, wd := 0.9, 0.999, 0.01, 1e-8, 0.1
	step := 2.0
	s := AdamWStep{Beta1: b1, Beta2: b2, Eps: eps, StepSize: lr / (1 - math.Pow(b1, step)),
		SqrtBC2: math.Sqrt(1 - math.Pow(b2, step)), Shrink: float32(1 - lr*wd), GradScale: 0.5}
	p, g, m, v := []float32{1}, []float32{0.4}, []float32{0.1}, []float32{0.01}
	NewCPU().AdamW(p, g, m, v, s)
	gi := 0.2 // clipped
	mi := b1*0.1 + (1-b1)*gi
	vi := b2*float64(float32(0.01)) + (1-b2)*gi*gi
	want := float64(float32(1)*float32(1-lr*wd)) - lr/(1-b1*b1)*mi/(math.Sqrt(vi)/math.Sqrt(1-b2*b2)+eps)
	if math.Abs(float64(p[0])-want) > 1e-7 || g[0] != float32(gi) {
		t.Fatalf("p = %v, g = %v; want %v, %v", p[0], g[0], want, gi)
	}
	if math.Abs(float64(m[0])-mi) > 1e-8 || math.Abs(float64(v[0])-vi) > 1e-9 {
		t.Fatalf("moments %v %v, want %v %v", m[0], v[0], mi, vi)
	}
}

func TestOpen(t *testing.T) {
	b, err := Open("", Options{})
	if err != nil || b.Name() != "cpu" {
		t.Fatalf("Open(\"\") = %v, %v", b, err)
	}
	if b, err := Open("cpu", Options{Precision: "bf16"}); err != nil || b.Name() != "cpu" || b.(interface{ Precision() string }).Precision() != "bf16" {
		t.Fatalf("Open(cpu, bf16) = %v, %v", b, err)
	}
	for _, c := range []struct {
		name string
		opt  Options
		want string
	}{
		{"cuda", Options{}, "build with -tags cuda"},
		{"tpu", Options{}, `unknown backend "tpu" (have cpu`},
		{"cpu", Options{Precision: "fp8"}, `unknown precision "fp8"`},
	} {
		_, err := Open(c.name, c.opt)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("Open(%q, %+v) = %v, want one line containing %q", c.name, c.opt, err, c.want)
		}
	}
}

func TestRegister(t *testing.T) {
	const name = "test-backend"
	Register(name, func(Options) (Backend, error) { return NewCPU(), nil })
	t.Cleanup(func() { mu.Lock(); delete(factories, name); mu.Unlock() })
	if b, err := Open(name, Options{}); err != nil || b == nil {
		t.Fatalf("Open(%q) = %v, %v", name, b, err)
	}
	for _, n := range []string{name, "cpu", ""} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%q) did not panic", n)
				}
			}()
			Register(n, func(Options) (Backend, error) { return nil, nil })
		}()
	}
}

// TestCPUAttendRows checks the decode attention against the definition in
// both float types, over GQA heads, and that a query row's float32 result
// is the same bits whether it runs alone or in a block of rows.
func TestCPUAttendRows(t *testing.T) {
	cases := []AttnShape{
		{S: 4, Pos0: 0, Heads: 4, KV: 2, HeadDim: 8},   // a prefill block from position 0
		{S: 3, Pos0: 37, Heads: 2, KV: 1, HeadDim: 64}, // a chunk after a cache, GQA
		{S: 1, Pos0: 9, Heads: 3, KV: 3, HeadDim: 2},   // one decode row, MHA
	}
	r := rand.New(rand.NewPCG(7, 8))
	for _, a := range cases {
		N, H, KV, hd := a.Pos0+a.S, a.Heads, a.KV, a.HeadDim
		q := randSlice(r, a.S*H*hd)
		k := randSlice(r, N*KV*hd)
		v := randSlice(r, N*KV*hd)
		want, _ := naiveAttention(q, k, v, a)
		q32, k32, v32 := to32(q), to32(k), to32(v)
		out32 := make([]float32, len(want))
		out64 := make([]float64, len(want))
		for h := range H {
			kh := h / (H / KV)
			NewCPU().AttendRows(out32[h*hd:], q32[h*hd:], H*hd, a.S, k32[kh*hd:], v32[kh*hd:], KV*hd, a.Pos0, hd)
			CPUOps[float64]{}.AttendRows(out64[h*hd:], q[h*hd:], H*hd, a.S, k[kh*hd:], v[kh*hd:], KV*hd, a.Pos0, hd)
			for i := range a.S { // each row alone
				one := make([]float32, hd)
				off := (i*H + h) * hd
				NewCPU().AttendRows(one, q32[off:], H*hd, 1, k32[kh*hd:], v32[kh*hd:], KV*hd, a.Pos0+i, hd)
				for x := range one {
					if one[x] != out32[off+x] {
						t.Fatalf("%+v head %d row %d: alone %v, in the block %v", a, h, i, one[x], out32[off+x])
					}
				}
			}
		}
		if d := maxDiff(out32, want); d > 1e-5 {
			t.Errorf("%+v: float32 differs from the definition by %g", a, d)
		}
		for i, w := range want {
			if d := math.Abs(out64[i] - w); d > 1e-12 {
				t.Fatalf("%+v: float64 element %d differs by %g", a, i, d)
			}
		}
	}
}
