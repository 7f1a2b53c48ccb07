package trainer

import (
	"fmt"
	"math/rand/v2"

	"github.com/legorl/legorl/policy/model"
	"github.com/legorl/legorl/policy/tokenizer"
)

// CopyDrills configures SFT's copy drills: synthetic sequences meant to
// teach the model to copy a span of its context, the skill a fix needs
// when it must repeat a number from the statement or a name from a file it
// has just read (DESIGN.md §6). A drill's prompt is Length random tokens
// followed by the first of them again; its completion is the rest of the
// span.
//
// What they teach, measured on the 2-layer tools model
// (docs/RESULTS.md, "Copy drills"): the model learns these drills in a
// few hundred steps (copy loss 0.003 after 600), but by position, not by
// content: every drill has one layout (the span at the start, the cue
// right after it), and the model copies the token Length places back.
// Put 64 random tokens around the span and the probability of the copied
// tokens is 0.000, as before the drills; drills of random layouts (a
// random prefix, a random span length) did not form a content-based
// induction head in 2,000-3,000 steps. So the drills do not transfer to
// the tasks' copies; they stay as the measured record and for larger
// models.
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
