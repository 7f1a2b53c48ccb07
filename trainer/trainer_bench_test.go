package trainer_test

import (
	"testing"
	"time"

	"github.com/legorl/legorl/policy/model"
	"github.com/legorl/legorl/trainer"
)

// Benchmarks on policy/model's reference tiny configs (testdata/tiny.json:
// 4 layers, d=256, vocab 4096; tiny_moe.json: 8 experts, 2 per token) at 8
// segments x 512 tokens (64 prompt tokens, then 160 sampled, 128
// observation and 160 sampled tokens), the shape of policy/model's
// BenchmarkTrainStep and BenchmarkLogprobs (8 x 512), so the trainer's
// overhead over the model shows as the ratio of the tokens/s figures.
//
//	go test -run '^$' -bench . -benchtime 2x ./trainer/

var benchShape = shape{prompt: 64, turns: 3, sampled: 160, obs: 128, temperature: 1}

func benchData(b *testing.B, cfgFile string) (*model.Model, *trainer.Data) {
	c, err := model.LoadConfig("../policy/model/testdata/" + cfgFile)
	if err != nil {
		b.Fatal(err)
	}
	m, err := model.New(c, 1)
	if err != nil {
		b.Fatal(err)
	}
	it := makeIteration(b, m, "bench", 0, 0, benchShape, groups([]float64{1, 0, 0, 1}, []float64{0, 1, 1, 0}), 1)
	d := it.data()
	adv, _ := trainer.Advantages(d.Rollouts, false)
	trainer.SetAdvantages(d.Samples, adv)
	return m, d
}

// meter reports tokens per wall second and per CPU second (user plus
// system, all threads): on a shared machine the second is the steadier.
type meter struct {
	b     *testing.B
	wall  time.Time
	cpu   time.Duration
	cpuOK bool
}

func startMeter(b *testing.B) *meter {
	b.ResetTimer()
	m := &meter{b: b, wall: time.Now()}
	m.cpu, m.cpuOK = processCPU()
	return m
}

func (m *meter) report(tokensPerOp int) {
	n := float64(tokensPerOp * m.b.N)
	m.b.ReportMetric(n/time.Since(m.wall).Seconds(), "tokens/s")
	if cpu, ok := processCPU(); ok && m.cpuOK {
		m.b.ReportMetric(n/(cpu-m.cpu).Seconds(), "tokens/cpu-s")
	}
}

func tokens(d *trainer.Data) int {
	n := 0
	for i := range d.Samples {
		n += d.Samples[i].Tokens()
	}
	return n
}

// benchStep measures Trainer.Step: packing, forward and backward of every
// micro-batch with the PPO weights, clipping and AdamW.
func benchStep(b *testing.B, cfgFile string) {
	m, d := benchData(b, cfgFile)
	old, err := trainer.Recompute(m, d.Samples, 1<<20, true, nil)
	if err != nil {
		b.Fatal(err)
	}
	tr, err := trainer.New(m, nil, trainer.Config{LR: 1e-6})
	if err != nil {
		b.Fatal(err)
	}
	mt := startMeter(b)
	for range b.N {
		if _, err := tr.Step(d.Samples, old, nil); err != nil {
			b.Fatal(err)
		}
	}
	mt.report(tokens(d))
}

// benchRecompute measures Recompute (forward only, routes replayed).
func benchRecompute(b *testing.B, cfgFile string) {
	m, d := benchData(b, cfgFile)
	mt := startMeter(b)
	for range b.N {
		if _, err := trainer.Recompute(m, d.Samples, 16384, true, nil); err != nil {
			b.Fatal(err)
		}
	}
	mt.report(tokens(d))
}

// BenchmarkTrainStep is one optimizer step over 8 x 512 tokens (dense).
func BenchmarkTrainStep(b *testing.B) { benchStep(b, "tiny.json") }

// BenchmarkRecompute is the logprob recomputation of 8 x 512 tokens (dense).
func BenchmarkRecompute(b *testing.B) { benchRecompute(b, "tiny.json") }

// BenchmarkTrainStepMoE and BenchmarkRecomputeMoE use tiny_moe.json.
func BenchmarkTrainStepMoE(b *testing.B) { benchStep(b, "tiny_moe.json") }
func BenchmarkRecomputeMoE(b *testing.B) { benchRecompute(b, "tiny_moe.json") }

// BenchmarkIteration is the whole update of Trainer.Iteration (advantages,
// recompute, gate, one step) and reports the recompute and training
// throughput measured inside it.
func BenchmarkIteration(b *testing.B) {
	m, d := benchData(b, "tiny.json")
	tr, err := trainer.New(m, nil, trainer.Config{LR: 1e-9, MinPearson: -1})
	if err != nil {
		b.Fatal(err)
	}
	var rt, rs, tt, ts float64
	b.ResetTimer()
	for range b.N {
		res, err := tr.Iteration(d, 0, nil)
		if err != nil {
			b.Fatal(err)
		}
		rt, rs = rt+float64(res.RecomputeTokens), rs+res.RecomputeSeconds
		for _, s := range res.Steps {
			tt, ts = tt+float64(s.Tokens), ts+s.Seconds
		}
	}
	b.ReportMetric(rt/rs, "recompute-tokens/s")
	b.ReportMetric(tt/ts, "train-tokens/s")
}

// The model-level baselines on the same 8 segments: model.Backward with
// fixed weights plus AdamW, and model.Logprobs, with replayed routes, with
// nothing of the trainer around them. The trainer's figures over these are
// its overhead (packing, loss weights, statistics, data conversion).
func benchModelTrain(b *testing.B, cfgFile string) {
	m, d := benchData(b, cfgFile)
	seqs, ws := modelInputs(b, m, d)
	opt, err := model.NewAdamW(m, model.AdamWConfig{LR: 1e-6, MaxGradNorm: 1})
	if err != nil {
		b.Fatal(err)
	}
	g := m.NewGrads()
	mt := startMeter(b)
	for range b.N {
		g.Zero()
		if _, err := m.Backward(seqs, ws, g); err != nil {
			b.Fatal(err)
		}
		if _, err := opt.Step(m, g, 0); err != nil {
			b.Fatal(err)
		}
	}
	mt.report(tokens(d))
}

func benchModelLogprobs(b *testing.B, cfgFile string) {
	m, d := benchData(b, cfgFile)
	seqs, _ := modelInputs(b, m, d)
	mt := startMeter(b)
	for range b.N {
		if _, err := m.Logprobs(seqs); err != nil {
			b.Fatal(err)
		}
	}
	mt.report(tokens(d))
}

// modelInputs returns the samples as model sequences with their recorded
// routes, and per-token weights -A/tokens on sampled tokens.
func modelInputs(b *testing.B, m *model.Model, d *trainer.Data) ([]model.Sequence, [][]float32) {
	var seqs []model.Sequence
	var ws [][]float32
	for _, s := range d.Samples {
		seq := model.Sequence{Prompt: s.Prompt, Completion: s.Completion, Temperature: s.Temperature}
		if !s.Routes.Empty() {
			seq.Routing = make([][][]int16, s.Routes.Tokens)
			for t := range seq.Routing {
				for l := 0; l < s.Routes.Layers; l++ {
					seq.Routing[t] = append(seq.Routing[t], s.Routes.At(t, l))
				}
			}
		}
		w := make([]float32, len(s.Completion))
		for i, mk := range s.Mask {
			w[i] = -float32(s.Advantage) * float32(mk) / 2560
		}
		seqs, ws = append(seqs, seq), append(ws, w)
	}
	return seqs, ws
}

// BenchmarkModelTrainStep and BenchmarkModelLogprobs are the baselines of
// BenchmarkTrainStep and BenchmarkRecompute; the MoE ones of the MoE ones.
func BenchmarkModelTrainStep(b *testing.B)    { benchModelTrain(b, "tiny.json") }
func BenchmarkModelLogprobs(b *testing.B)     { benchModelLogprobs(b, "tiny.json") }
func BenchmarkModelTrainStepMoE(b *testing.B) { benchModelTrain(b, "tiny_moe.json") }
func BenchmarkModelLogprobsMoE(b *testing.B)  { benchModelLogprobs(b, "tiny_moe.json") }

// The model of the loop's demo config (loop/demo.json: width 128, 2
// layers, vocabulary 1024): the model-level anchors of the loop's own
// training and recompute throughput (docs/PERFORMANCE.md).
func BenchmarkModelTrainStepDemo(b *testing.B) { benchModelTrain(b, "demo.json") }
func BenchmarkModelLogprobsDemo(b *testing.B)  { benchModelLogprobs(b, "demo.json") }
