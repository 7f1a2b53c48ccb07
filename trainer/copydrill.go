package trainer

import (
	"fmt"
	"math"
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
// Layout matters (docs/results/tools-copy-grpo-raft/NOTES.md and
// docs/results/tools-induct-grpo-raft/NOTES.md; measured with
// trainer/internal/copylayouts). With one layout (Pad 0: the span at the
// start, the cue right after it) the 2-layer tools model learns the drills
// in a few hundred steps, but by position: it copies the token Length
// places back, and with 64 random tokens around the span the probability
// of the copied tokens is 0.001, as before the drills. With random layouts
// (Pad > 0: a random prefix of up to Pad tokens and a span of 8 to Length
// tokens) only a copy by content works, and the model forms an induction
// head after about 800 steps of 64 drills (Batch), not within 2,000-3,000
// steps of 8.
type CopyDrills struct {
	// PretrainSteps are optimizer steps on drills alone (Batch per step),
	// before the first epoch.
	PretrainSteps int `json:"pretrain_steps,omitempty"`
	// PerStep drills join every SFT step (their own backward pass, so the
	// demonstrations keep their shared prefix), so the skill survives the
	// demonstrations' epochs.
	PerStep int `json:"per_step,omitempty"`
	// Length is the random tokens of a drill's span (with Pad, the most).
	// Defaults to 32.
	Length int `json:"length,omitempty"`
	// Pad, when above 0, gives every drill a random layout: 0 to Pad
	// random tokens before the span, a span of 8 to Length tokens.
	// Defaults to 0: one layout, which teaches a copy by position.
	Pad int `json:"pad,omitempty"`
	// Batch is the drills of a pretraining step. Defaults to 8.
	Batch int `json:"batch,omitempty"`
	// LR is the learning rate of the pretraining steps. Defaults to the
	// SFT's.
	LR float64 `json:"lr,omitempty"`
}

// batch is the drills of a pretraining step.
func (c CopyDrills) batch() int {
	if c.Batch == 0 {
		return 8
	}
	return c.Batch
}

// minSpan is the shortest span of a drill of random layout.
const minSpan = 8

func (c CopyDrills) withDefaults() CopyDrills {
	if c.Length == 0 {
		c.Length = 32
	}
	return c
}

func (c CopyDrills) validate() error {
	if c.PretrainSteps < 0 || c.PerStep < 0 || c.Length < 0 || c.Length == 1 || c.Pad < 0 || c.Batch < 0 || !(c.LR >= 0) || math.IsInf(c.LR, 0) {
		return fmt.Errorf("%w: sft copy drills %+v: counts and the learning rate must be >= 0 and the length >= 2", ErrConfig, c)
	}
	if c.Pad > 0 && c.Length < minSpan {
		return fmt.Errorf("%w: sft copy drills %+v: with pad the length must be at least %d", ErrConfig, c, minSpan)
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

// copyDrills returns n drills drawn from ids by r: spans of c.Length
// tokens, or with c.Pad random layouts.
func copyDrills(r *rand.Rand, ids []int32, n int, c CopyDrills) []model.Sequence {
	draw := func(k int) []int32 {
		out := make([]int32, k)
		for i := range out {
			out[i] = ids[r.IntN(len(ids))]
		}
		return out
	}
	out := make([]model.Sequence, n)
	for i := range out {
		var prefix []int32
		length := c.Length
		if c.Pad > 0 {
			prefix, length = draw(r.IntN(c.Pad+1)), minSpan+r.IntN(c.Length-minSpan+1)
		}
		span := draw(length)
		prompt := append(append(prefix, span...), span[0])
		out[i] = model.Sequence{Prompt: prompt, Completion: span[1:]}
	}
	return out
}

// drillRand is the drill source of one step: a stream of its own per
// seed, phase (0 pretraining, 1 SFT) and step, so a resumed or reordered
// run draws the same drills.
func drillRand(seed uint64, phase, step int) *rand.Rand {
	return rand.New(rand.NewPCG(seed^0x636f7079, uint64(phase)<<32|uint64(step)))
}
