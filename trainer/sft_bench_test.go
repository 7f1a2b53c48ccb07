package trainer_test

import (
	"math/rand/v2"
	"testing"

	"github.com/legorl/legorl/policy/model"
	"github.com/legorl/legorl/trainer"
)

// BenchmarkSFTStep is one SFT step (forward, backward, AdamW with
// clipping) on the model size of the committed starters
// (policy/starter/bash-sed: 2 layers, d=128, vocab 1024) with random
// weights, over a batch shaped like an SFT step's: 8 turns that share a
// 250-token prefix (the system prompt and tool schemas) and then have
// their own 30-90 prompt tokens and 130-70 completion tokens, 410 tokens
// each. unshared is the default step (model.BackwardFunc), shared
// SFTConfig.SharedPrefix (model.BackwardSharedPrefix); run with -count,
// the two alternate. tokens/s and tokens/cpu-s count every token of the
// batch, so their ratio is the speed-up.
//
//	go test -run '^$' -bench SFTStep -benchtime 3x -count 5 ./trainer/
func BenchmarkSFTStep(b *testing.B) {
	c, err := model.LoadConfig("../policy/starter/bash-sed/config.json")
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	tok := func(n int) []int32 {
		ids := make([]int32, n)
		for i := range ids {
			ids[i] = int32(r.IntN(c.VocabSize))
		}
		return ids
	}
	prefix := tok(250)
	var batch []model.Sequence
	n := 0
	for i := range 8 {
		s := model.Sequence{Prompt: append(append([]int32(nil), prefix...), tok(30+60*i/7)...), Completion: tok(130 - 60*i/7)}
		batch = append(batch, s)
		n += len(s.Prompt) + len(s.Completion)
	}
	for _, shared := range []bool{false, true} {
		b.Run(map[bool]string{false: "unshared", true: "shared"}[shared], func(b *testing.B) {
			m, err := model.New(c, 1)
			if err != nil {
				b.Fatal(err)
			}
			opt, err := model.NewAdamW(m, model.AdamWConfig{LR: 1e-4, MaxGradNorm: 1})
			if err != nil {
				b.Fatal(err)
			}
			g := m.NewGrads()
			mt := startMeter(b)
			for range b.N {
				if _, err := trainer.SFTStepFunc(m, opt, g, batch, nil, shared, 0); err != nil {
					b.Fatal(err)
				}
			}
			mt.report(n)
		})
	}
}
