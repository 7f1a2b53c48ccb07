package engine

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/legorl/legorl/policy/internal/cputime"
)

// Benchmarks on the reference tiny config (policy/model/testdata/tiny.json:
// 4 layers, hidden 256, vocabulary 4096).

// BenchmarkDecode runs 1, 8 and 32 concurrent sessions, each generating 64
// tokens after a 16-token prompt, and reports completion tokens per second
// over all of them: what continuous batching buys.
func BenchmarkDecode(b *testing.B) {
	m := tinyModel(b, "tiny.json", 1, 0)
	const prompt, gen = 16, 64
	for _, n := range []int{1, 8, 32} {
		b.Run(fmt.Sprint("sessions=", n), func(b *testing.B) {
			e := New(m, 1, Options{})
			defer e.Close()
			b.ResetTimer()
			cpu0 := cputime.Process()
			for i := 0; b.Loop(); i++ {
				var wg sync.WaitGroup
				for s := range n {
					wg.Go(func() {
						req := Request{Prompt: randPrompt(uint64(s), prompt), MaxTokens: gen, Sampling: DefaultSampling(uint64(i*n + s))}
						if _, err := e.Generate(context.Background(), req, nil); err != nil {
							b.Error(err)
						}
					})
				}
				wg.Wait()
			}
			b.ReportMetric(float64(b.N*n*gen)/b.Elapsed().Seconds(), "tokens/s")
			reportCPU(b, cpu0, b.N*n*gen)
		})
	}
	// The anchor, same run: one sequence decoded with the model's own
	// Cache.Extend (packed Sgemm, not batch-invariant), argmax, no engine.
	b.Run("anchor=extend", func(b *testing.B) {
		cpu0 := cputime.Process()
		for i := 0; b.Loop(); i++ {
			c := m.NewCache()
			logits, _, err := c.Extend(randPrompt(uint64(i), prompt), nil)
			for range gen {
				if err != nil {
					b.Fatal(err)
				}
				logits, _, err = c.Extend([]int32{int32(argmax(logits))}, nil)
			}
		}
		b.ReportMetric(float64(b.N*gen)/b.Elapsed().Seconds(), "tokens/s")
		reportCPU(b, cpu0, b.N*gen)
	})
}

// reportCPU reports tokens per CPU-second of the process (all threads)
// since cpu0: the figure a shared machine dilutes least.
func reportCPU(b *testing.B, cpu0 time.Duration, tokens int) {
	if cpu := (cputime.Process() - cpu0).Seconds(); cpu > 0 {
		b.ReportMetric(float64(tokens)/cpu, "tokens/cpu-s")
	}
}

func argmax(xs []float32) int {
	best := 0
	for i, x := range xs {
		if x > xs[best] {
			best = i
		}
	}
	return best
}

// BenchmarkPrefill reports prompt tokens per second for one 512-token
// prompt (one completion token), dense and MoE.
func BenchmarkPrefill(b *testing.B) {
	for _, cfg := range configs {
		b.Run(cfg, func(b *testing.B) {
			e := New(tinyModel(b, cfg, 1, 0), 1, Options{})
			defer e.Close()
			const n = 512
			req := Request{Prompt: randPrompt(1, n), MaxTokens: 1, Sampling: DefaultSampling(1)}
			cpu0 := cputime.Process()
			for b.Loop() {
				if _, err := e.Generate(context.Background(), req, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "tokens/s")
			reportCPU(b, cpu0, b.N*n)
		})
		// The anchor: the same prompt through Cache.Extend in one call.
		b.Run(cfg+"/anchor=extend", func(b *testing.B) {
			m := tinyModel(b, cfg, 1, 0)
			prompt := randPrompt(1, 512)
			cpu0 := cputime.Process()
			for b.Loop() {
				if _, _, err := m.NewCache().Extend(prompt, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*512)/b.Elapsed().Seconds(), "tokens/s")
			reportCPU(b, cpu0, b.N*512)
		})
	}
}

// BenchmarkSharedPrefix runs 8 requests in 8 new sessions, one after the
// other, whose prompts share a 1024-token system prompt and differ in a
// 32-token tail (4 tokens generated each): the first turn of 8 rollouts of
// one harness. It reports requests/s and the fraction of prompt tokens
// reused from a cache (cached-frac); without prefix caching across
// sessions every request prefills its whole prompt.
func BenchmarkSharedPrefix(b *testing.B) {
	m := tinyModel(b, "tiny.json", 1, 0)
	system := randPrompt(1, 1024)
	var prompt, cached int
	for i := 0; b.Loop(); i++ {
		e := New(m, 1, Options{})
		for s := range 8 {
			p := append(append([]int32{}, system...), randPrompt(uint64(100+s), 32)...)
			g, err := e.Generate(context.Background(), Request{Session: fmt.Sprint(i, "/", s), Prompt: p, MaxTokens: 4, Sampling: DefaultSampling(uint64(s))}, nil)
			if err != nil {
				b.Fatal(err)
			}
			prompt += g.PromptTokens
			cached += g.CachedTokens
		}
		e.Close()
	}
	b.ReportMetric(float64(8*b.N)/b.Elapsed().Seconds(), "requests/s")
	b.ReportMetric(float64(cached)/float64(prompt), "cached-frac")
}
