//go:build amd64 && !purego

package kernels

import (
	"math/rand/v2"
	"slices"
	"testing"

	"golang.org/x/sys/cpu"
)

// TestPackAVX512 checks the assembly packers against the portable loops on
// full and partial panels, both transposes, and depths around multiples of
// 16.
func TestPackAVX512(t *testing.T) {
	if !cpu.X86.HasAVX512F {
		t.Skip("no AVX-512 on this CPU")
	}
	portable := &microKernel{mr: 12, nr: 32}
	r := rand.New(rand.NewPCG(15, 16))
	const ld = 301
	src := randSlice(r, 300*ld)
	for _, kb := range []int{1, 15, 16, 17, 33, 64, 256} {
		for _, trans := range []bool{false, true} {
			for rows := 1; rows <= 12; rows++ {
				want := slices.Repeat([]float32{-1}, 12*kb)
				got := slices.Repeat([]float32{-2}, 12*kb)
				packA(portable, want, trans, src, ld, 5, rows, 3, kb, 12)
				packA(avx512Kernel, got, trans, src, ld, 5, rows, 3, kb, 12)
				if !slices.Equal(got, want) {
					t.Fatalf("packA kb=%d trans=%v rows=%d differs", kb, trans, rows)
				}
			}
			for cols := 1; cols <= 32; cols++ {
				want := slices.Repeat([]float32{-1}, 32*kb)
				got := slices.Repeat([]float32{-2}, 32*kb)
				packB(portable, want, trans, src, ld, 7, cols, 2, kb, 32)
				packB(avx512Kernel, got, trans, src, ld, 7, cols, 2, kb, 32)
				if !slices.Equal(got, want) {
					t.Fatalf("packB kb=%d trans=%v cols=%d differs", kb, trans, cols)
				}
			}
		}
	}
}
