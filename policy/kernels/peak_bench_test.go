//go:build amd64 && !purego

package kernels

import (
	"fmt"
	"runtime"
	"testing"

	"golang.org/x/sys/cpu"

	"github.com/legorl/legorl/policy/internal/cputime"
)

// BenchmarkFMAPeak measures one core's AVX-512 FMA throughput on registers
// only (12 independent accumulators): the ceiling Sgemm's GFLOP/s are
// compared with in the same run.
func BenchmarkFMAPeak(b *testing.B) {
	if !cpu.X86.HasAVX512F {
		b.Skip("no AVX-512 on this CPU")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const iters = 1 << 16
	cpu0 := cputime.Process()
	for b.Loop() {
		fmaLoopAVX512(iters)
	}
	reportFlops(b, 384*iters*float64(b.N), cputime.Process()-cpu0)
}

// BenchmarkMicroKernel measures the best micro-kernel alone on packed
// panels that stay in L1, for several depths: what Sgemm would reach if
// packing and cache misses cost nothing.
func BenchmarkMicroKernel(b *testing.B) {
	kern := availableKernels()[0]
	for _, kb := range []int{64, 256} {
		a := make([]float32, kern.mr*kb)
		bp := make([]float32, kern.nr*kb)
		c := make([]float32, kern.mr*kern.nr)
		b.Run(fmt.Sprintf("%s/k=%d", kern.name, kb), func(b *testing.B) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
			const calls = 100
			cpu0 := cputime.Process()
			for b.Loop() {
				for range calls {
					kern.fn(kb, &a[0], &bp[0], &c[0], kern.nr, 1, 0)
				}
			}
			reportFlops(b, calls*2*float64(kern.mr*kern.nr*kb)*float64(b.N), cputime.Process()-cpu0)
		})
	}
}
