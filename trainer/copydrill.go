package trainer

import (
	"fmt"
	"math/rand/v2"

	"github.com/legorl/legorl/policy/model"
	"github.com/legorl/legorl/policy/tokenizer"
)

// CopyDrills configures SFT's copy drills: synthetic sequences that teach
// the model to copy a span of its context, the skill a fix needs when it
// must repeat a number from the statement or a name from a file it has
// just read (DESIGN.md §6). A drill's prompt is Length random tokens
// followed by the first of them again; its completion is the rest of the
// span, so every completion token is predictable only by finding the
// previous occurrence of the token before it and copying what followed
// (an induction head). A 2-layer model learns this in a few hundred
// steps; the demonstrations alone never teach it at this size.
type CopyDrills struct {
	// PretrainSteps are optimizer steps on drills alone (8 per step),
	// before the first epoch.
	PretrainSteps int `json:"pretrain_steps,omitempty"`
	// PerStep drills join every SFT step (their own backward pass, so the
	// demonstrations keep their shared prefix), so the skill survives the
	// demonstrations' epochs.
	PerStep int `json:"per_step,omitempty"`
	// Length is the random tokens of a drill. Defaults to 32.
	Length int `json:"length,omitempty"`
}

// pretrainDrills is the number of drills of a pretraining step.
const pretrainDrills = 8

func (c CopyDrills) withDefaults() CopyDrills {
	if c.Length == 0 {
		c.Length = 32
	}
	return c
}

func (c CopyDrills) validate() error {
	if c.PretrainSteps < 0 || c.PerStep < 0 || c.Length < 0 || c.Length == 1 {
		return fmt.Errorf("%w: sft copy drills %+v: counts must be >= 0 and the length >= 2", ErrConfig, c)
	}
	return nil
}

// drillTokens are the ids a drill draws from: every id the model may
// predict (below support) that is not a special token.
func drillTokens(tok *tokenizer.Tokenizer, support int) []int32 {
	var ids []int32
	for i := range min(tok.VocabSize(), support) {
		if !tok.IsSpecial(int32(i)) {
			ids = append(ids, int32(i))
		}
	}
	return ids
}

// copyDrills returns n drills of length tokens drawn from ids by r.
func copyDrills(r *rand.Rand, ids []int32, n, length int) []model.Sequence {
	out := make([]model.Sequence, n)
	for i := range out {
		span := make([]int32, length)
		for k := range span {
			span[k] = ids[r.IntN(len(ids))]
		}
		out[i] = model.Sequence{Prompt: append(span[:length:length], span[0]), Completion: span[1:]}
	}
	return out
}

// drillRand is the drill source of one step: a stream of its own per
// seed, phase (0 pretraining, 1 SFT) and step, so a resumed or reordered
// run draws the same drills.
func drillRand(seed uint64, phase, step int) *rand.Rand {
	return rand.New(rand.NewPCG(seed^0x636f7079, uint64(phase)<<32|uint64(step)))
}
