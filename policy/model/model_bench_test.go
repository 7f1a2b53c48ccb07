package model

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/legorl/legorl/policy/backend"
	"github.com/legorl/legorl/policy/internal/cputime"
	"github.com/legorl/legorl/policy/kernels"
)

// Benchmarks on the reference tiny config (testdata/tiny.json: 4 layers,
// d=256, 4 heads / 2 KV heads, head_dim 64, SwiGLU 768, vocab 4096) at
// batch 8 x 512 tokens, as in the PyTorch comparison. Each reports
// tokens/s and the achieved GFLOP/s; BenchmarkSgemmAnchor measures the raw
// matmul kernel in the same run, so the model's efficiency is the ratio.
//
//	go test -run XXX -bench . -benchtime 2x ./policy/model/

const benchSeq, benchBatch = 512, 8

func benchModel(b *testing.B, cfgFile string, seq, batch int) (*Model, []Sequence, [][]float32) {
	c, err := LoadConfig("testdata/" + cfgFile)
	if err != nil {
		b.Fatal(err)
	}
	m, err := New(c, 1)
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	var seqs []Sequence
	var ws [][]float32
	for range batch {
		s := Sequence{Prompt: []int32{int32(r.IntN(c.VocabSize))}}
		w := make([]float32, seq-1)
		for i := range w {
			s.Completion = append(s.Completion, int32(r.IntN(c.VocabSize)))
			w[i] = -1.0 / float32(seq*batch)
		}
		seqs, ws = append(seqs, s), append(ws, w)
	}
	return m, seqs, ws
}

// forwardFLOPs estimates the multiply-adds x2 of one forward pass over
// batch x seq tokens (matmuls and attention; elementwise work ignored).
func forwardFLOPs(c Config, seq, batch int) float64 {
	d, hd := float64(c.HiddenSize), float64(c.HeadDim)
	H, KV := float64(c.NumAttentionHeads), float64(c.NumKeyValueHeads)
	S := float64(seq)
	var perTok float64
	for l := 0; l < c.NumHiddenLayers; l++ {
		perTok += 2 * d * hd * (2*H + 2*KV) // q, k, v, o
		perTok += 2 * S * hd * H            // scores and P V over the causal half
		if c.IsMoE(l) {
			perTok += 2*d*float64(c.NumExperts) + float64(c.NumExpertsPerTok)*2*3*d*float64(c.MoEIntermediateSize)
		} else {
			perTok += 2 * 3 * d * float64(c.IntermediateSize)
		}
	}
	perTok += 2 * d * float64(c.VocabSize)
	return perTok * S * float64(batch)
}

// report prints tokens/s and GFLOP/s over wall time and tokens/cpu-s over
// the process's CPU time (user + system, every thread) since cpu0: the
// figure a shared machine dilutes least, and the one compared with
// PyTorch's tokens/cpu-s (bench/tiny_train.py) in the same run.
func report(b *testing.B, start time.Time, cpu0 time.Duration, flops float64, tokens int) {
	sec := time.Since(start).Seconds() / float64(b.N)
	b.ReportMetric(float64(tokens)/sec, "tokens/s")
	b.ReportMetric(flops/sec/1e9, "GFLOP/s")
	if cpu := (cputime.Process() - cpu0).Seconds() / float64(b.N); cpu > 0 {
		b.ReportMetric(float64(tokens)/cpu, "tokens/cpu-s")
	}
}

func benchTrain(b *testing.B, cfgFile string, seq, batch int) {
	m, seqs, ws := benchModel(b, cfgFile, seq, batch)
	opt, err := NewAdamW(m, AdamWConfig{LR: 1e-4, WeightDecay: 0.01, MaxGradNorm: 1})
	if err != nil {
		b.Fatal(err)
	}
	g := m.NewGrads()
	b.ResetTimer()
	start, cpu0 := time.Now(), cputime.Process()
	for range b.N {
		g.Zero()
		if _, err := m.Backward(seqs, ws, g); err != nil {
			b.Fatal(err)
		}
		if _, err := opt.Step(m, g, 0); err != nil {
			b.Fatal(err)
		}
	}
	report(b, start, cpu0, 3*forwardFLOPs(m.cfg, seq, batch), seq*batch)
}

func benchLogprobs(b *testing.B, cfgFile string, seq, batch int) {
	m, seqs, _ := benchModel(b, cfgFile, seq, batch)
	b.ResetTimer()
	start, cpu0 := time.Now(), cputime.Process()
	for range b.N {
		if _, err := m.Logprobs(seqs); err != nil {
			b.Fatal(err)
		}
	}
	report(b, start, cpu0, forwardFLOPs(m.cfg, seq, batch), seq*batch)
}

// BenchmarkTrainStep is one optimizer step (forward, backward, AdamW with
// clipping) on 8 x 512 tokens of the dense tiny config.
func BenchmarkTrainStep(b *testing.B) { benchTrain(b, "tiny.json", benchSeq, benchBatch) }

// BenchmarkLogprobs is the logprob-only forward on 8 x 512 tokens.
func BenchmarkLogprobs(b *testing.B) { benchLogprobs(b, "tiny.json", benchSeq, benchBatch) }

// BenchmarkTrainStepShort is a quick variant (2 x 128 tokens) for
// profiling and iterating.
func BenchmarkTrainStepShort(b *testing.B) { benchTrain(b, "tiny.json", 128, 2) }

// BenchmarkTrainStepMoE and BenchmarkLogprobsMoE use testdata/tiny_moe.json.
func BenchmarkTrainStepMoE(b *testing.B) { benchTrain(b, "tiny_moe.json", benchSeq, benchBatch) }
func BenchmarkLogprobsMoE(b *testing.B)  { benchLogprobs(b, "tiny_moe.json", benchSeq, benchBatch) }

// BenchmarkSgemmAnchor is the anchor of the ratios: kernels.Sgemm on the
// shape of the tiny model's MLP up projection for one sequence (512 x 768
// x 256, y = x W^T), one call per goroutine on every core.
func BenchmarkSgemmAnchor(b *testing.B) {
	const m, n, k = benchSeq, 768, 256
	x := make([]float32, m*k)
	w := make([]float32, n*k)
	for i := range x {
		x[i] = float32(i%7) * 0.1
	}
	for i := range w {
		w[i] = float32(i%5) * 0.1
	}
	workers := 2
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		backend.ParallelFor(workers, func(int) {
			y := make([]float32, m*n)
			kernels.Sgemm(false, true, m, n, k, 1, x, k, w, k, 0, y, n)
		})
	}
	sec := time.Since(start).Seconds() / float64(b.N)
	b.ReportMetric(float64(workers)*2*m*n*k/sec/1e9, "GFLOP/s")
}
