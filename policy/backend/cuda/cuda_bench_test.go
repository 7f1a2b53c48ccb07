//go:build cuda

package cuda

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/legorl/legorl/policy/model"
)

// Benchmarks of the model on the CUDA backend, run by `make device-check`
// (scripts/cuda/device-check.sh) on a machine with a GPU:
//
//	cuda.test -test.run '^$' -test.bench . -test.benchtime 3x
//
// They report tokens/s and the model FLOP utilisation (MFU) against
// peakBF16, with the usual estimate of 6 x parameters x tokens FLOPs for a
// training step (forward and backward) and 2 x parameters x tokens for a
// logprob recompute (forward only); attention's own FLOPs are left out.

// peakBF16 is the bf16 matrix-product peak measured on the reference GPU
// (H200, PyTorch bf16 matmul: about 790 TFLOP/s), the MFU denominator for
// both precisions.
const peakBF16 = 790e12

// benchConfig is a dense Qwen3 model between the tiny test configs and a
// real one: 8 layers, d=1024, 16 query / 8 key-value heads of 64, SwiGLU
// 3072, vocabulary 16384, tied embeddings (about 118M parameters).
const benchConfig = `{
  "model_type": "qwen3", "vocab_size": 16384, "hidden_size": 1024, "intermediate_size": 3072,
  "num_hidden_layers": 8, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 64,
  "max_position_embeddings": 4096, "tie_word_embeddings": true
}`

// benchSeqs, benchLen: the batch of every benchmark, 8 sequences of 512
// tokens (a 1-token prompt and 511 scored tokens).
const benchSeqs, benchLen = 8, 512

func benchSetup(b *testing.B, prec string) (*model.Model, []model.Sequence, [][]float32, int) {
	c, err := model.ParseConfig([]byte(benchConfig))
	if err != nil {
		b.Fatal(err)
	}
	m, err := model.New(c, 1)
	if err != nil {
		b.Fatal(err)
	}
	m.SetBackend(openT(b, prec))
	r := rand.New(rand.NewPCG(1, 2))
	seqs := make([]model.Sequence, benchSeqs)
	ws := make([][]float32, benchSeqs)
	for i := range seqs {
		seqs[i].Prompt = []int32{int32(r.IntN(c.VocabSize))}
		for range benchLen - 1 {
			seqs[i].Completion = append(seqs[i].Completion, int32(r.IntN(c.VocabSize)))
			ws[i] = append(ws[i], -1/float32(benchSeqs*benchLen))
		}
	}
	return m, seqs, ws, benchSeqs * benchLen
}

// reportRate reports tokens/s and MFU for b.N iterations since start.
func reportRate(b *testing.B, start time.Time, m *model.Model, tokens int, flopsPerParamToken float64) {
	sec := time.Since(start).Seconds() / float64(b.N)
	b.ReportMetric(float64(tokens)/sec, "tokens/s")
	b.ReportMetric(100*flopsPerParamToken*float64(m.NumParams())*float64(tokens)/sec/peakBF16, "MFU%")
	b.ReportMetric(float64(m.NumParams())/1e6, "Mparams")
}

// BenchmarkTrainTokens is one training step (Backward and an AdamW update)
// over the batch.
func BenchmarkTrainTokens(b *testing.B) {
	for _, prec := range []string{"fp32", "bf16"} {
		b.Run(prec, func(b *testing.B) {
			m, seqs, ws, tokens := benchSetup(b, prec)
			opt, err := model.NewAdamW(m, model.AdamWConfig{LR: 1e-5, WeightDecay: 0.01, MaxGradNorm: 1})
			if err != nil {
				b.Fatal(err)
			}
			g := m.NewGrads()
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				g.Zero()
				if _, err := m.Backward(seqs, ws, g); err != nil {
					b.Fatal(err)
				}
				if _, err := opt.Step(m, g, 0); err != nil {
					b.Fatal(err)
				}
			}
			reportRate(b, start, m, tokens, 6)
		})
	}
}

// BenchmarkRecomputeTokens is the logprob recompute of the batch (the
// forward pass the trainer runs for the old policy's logprobs).
func BenchmarkRecomputeTokens(b *testing.B) {
	for _, prec := range []string{"fp32", "bf16"} {
		b.Run(prec, func(b *testing.B) {
			m, seqs, _, tokens := benchSetup(b, prec)
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				if _, err := m.Logprobs(seqs); err != nil {
					b.Fatal(err)
				}
			}
			reportRate(b, start, m, tokens, 2)
		})
	}
}

// BenchmarkGemm is one square product through the backend, host copies
// included (as the model sees it), in TFLOP/s.
func BenchmarkGemm(b *testing.B) {
	for _, prec := range []string{"fp32", "bf16"} {
		for _, n := range []int{1024, 4096} {
			b.Run(fmt.Sprintf("%s/%d", prec, n), func(b *testing.B) {
				be := openT(b, prec)
				r := rand.New(rand.NewPCG(1, 2))
				x, y, z := randSlice(r, n*n, 1), randSlice(r, n*n, 1), make([]float32, n*n)
				b.ResetTimer()
				start := time.Now()
				for range b.N {
					be.Gemm(false, true, n, n, n, 1, x, n, y, n, 0, z, n)
				}
				sec := time.Since(start).Seconds() / float64(b.N)
				checkErr(b, be)
				b.ReportMetric(2*float64(n)*float64(n)*float64(n)/sec/1e12, "TFLOP/s")
			})
		}
	}
}
