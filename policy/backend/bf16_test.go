package backend

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/legorl/legorl/policy/safetensors"
)

// TestRoundBF16 agrees with the checkpoint writer's narrowing (round to
// nearest even) on edge cases and random values.
func TestRoundBF16(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	vals := []float32{0, -0, 1, -1, 1.00390625, 1.01171875, 3.1415927, 65504, 1e-40, math.MaxFloat32, float32(math.Inf(1)), float32(math.Inf(-1))}
	for range 10000 {
		vals = append(vals, math.Float32frombits(r.Uint32()))
	}
	for _, v := range vals {
		got := RoundBF16(v)
		if v != v {
			if got == got {
				t.Errorf("RoundBF16(NaN) = %v", got)
			}
			continue
		}
		want := math.Float32frombits(uint32(safetensors.BF16FromFloat32(v)) << 16)
		if math.Float32bits(got) != math.Float32bits(want) {
			t.Errorf("RoundBF16(%g) = %g, want %g", v, got, want)
		}
	}
	// Ties go to even: 1 + 2^-8 is halfway between 1 and 1 + 2^-7.
	if got := RoundBF16(1 + 1.0/256); got != 1 {
		t.Errorf("RoundBF16(1+2^-8) = %v, want 1", got)
	}
}

// TestCPUBF16 computes the products of bf16-rounded inputs: equal to the
// float32 backend on pre-rounded inputs, different from it on the raw
// ones, and row-invariant like the CPU's RowLinear.
func TestCPUBF16(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const m, n, k = 5, 7, 33
	a, b := make([]float32, m*k), make([]float32, n*k)
	for i := range a {
		a[i] = r.Float32()*2 - 1
	}
	for i := range b {
		b[i] = r.Float32()*2 - 1
	}
	cpu, bf := NewCPU(), NewCPUBF16()
	got, want, raw := make([]float32, m*n), make([]float32, m*n), make([]float32, m*n)
	bf.Gemm(false, true, m, n, k, 1, a, k, b, k, 0, got, n)
	cpu.Gemm(false, true, m, n, k, 1, roundedBF16(a), k, roundedBF16(b), k, 0, want, n)
	cpu.Gemm(false, true, m, n, k, 1, a, k, b, k, 0, raw, n)
	differ := 0
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("Gemm[%d] = %v, want %v (float32 on rounded inputs)", i, got[i], want[i])
		}
		if got[i] != raw[i] {
			differ++
		}
	}
	if differ == 0 {
		t.Error("bf16 Gemm equals the float32 one on unrounded inputs")
	}
	// RowLinear: a row's result alone equals its result among others.
	all := make([]float32, m*n)
	bf.RowLinear(all, a, m, k, b, n)
	for i := range m {
		one := make([]float32, n)
		bf.RowLinear(one, a[i*k:(i+1)*k], 1, k, b, n)
		for j := range one {
			if one[j] != all[i*n+j] {
				t.Fatalf("row %d: alone %v, in a batch %v", i, one[j], all[i*n+j])
			}
		}
	}
	cpu.RowLinear(want, roundedBF16(a), m, k, roundedBF16(b), n)
	for i := range want {
		if want[i] != all[i] {
			t.Fatalf("RowLinear[%d] = %v, want %v", i, all[i], want[i])
		}
	}
}
