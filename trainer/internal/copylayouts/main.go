// Command copylayouts measures whether a checkpoint copies a span of its
// context by content (an induction head) or by position, and can train a
// model on copy drills of random layouts to see whether one forms.
//
// A drill is a span of random ordinary tokens, the span's first token
// again as the cue, and the rest of the span as the completion (the
// layout of trainer.CopyDrills). "pad N" puts N random tokens around the
// span (some before it, the rest between it and the cue): a model that
// copies by content still copies; one that copies the token a fixed
// distance back does not. It prints the mean probability of the copied
// tokens over 32 drills of 32 tokens for pads 0, 64, 256 and 1024.
//
//	go run ./trainer/internal/copylayouts -policy policy/starter/tools-copy
//	go run ./trainer/internal/copylayouts -policy policy/starter/tools-sft -train 2000 -lr 0.003
//
// With -train N it first trains a freshly initialised model of the
// checkpoint's architecture (seed 1) for N steps of -batch drills of random
// layouts (a random prefix of 0-64 tokens, a span of 8-64 tokens, the cue
// right after it), printing the probabilities every 200 steps. -subset K
// draws the drill tokens from the first K ordinary ids only.
package main

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/legorl/legorl/policy/model"
	"github.com/legorl/legorl/policy/tokenizer"
)

func main() {
	policy := flag.String("policy", "", "checkpoint folder (required)")
	train := flag.Int("train", 0, "train a fresh model of the checkpoint's architecture for this many steps first")
	lr := flag.Float64("lr", 0.003, "AdamW learning rate of -train")
	subset := flag.Int("subset", 0, "draw drill tokens from the first K ordinary ids (0: all)")
	batch := flag.Int("batch", 8, "drills per step of -train")
	flag.Parse()
	if err := run(*policy, *train, *lr, *subset, *batch); err != nil {
		fmt.Fprintln(os.Stderr, "copylayouts:", err)
		os.Exit(1)
	}
}

// drill is one copy drill: pad random tokens, pre of them before the span.
func drill(r *rand.Rand, ids []int32, span, pad, pre int) model.Sequence {
	draw := func(n int) []int32 {
		out := make([]int32, n)
		for i := range out {
			out[i] = ids[r.IntN(len(ids))]
		}
		return out
	}
	x, noise := draw(span), draw(pad)
	p := append(append(append(append([]int32{}, noise[:pre]...), x...), noise[pre:]...), x[0])
	return model.Sequence{Prompt: p, Completion: append([]int32{}, x[1:]...)}
}

// copyProb is the mean probability of the copied tokens of 32 drills of 32
// tokens with pad random tokens around the span.
func copyProb(m *model.Model, ids []int32, pad int) (float64, error) {
	r := rand.New(rand.NewPCG(9, uint64(pad)))
	var seqs []model.Sequence
	for range 32 {
		seqs = append(seqs, drill(r, ids, 32, pad, r.IntN(pad+1)))
	}
	res, err := m.Logprobs(seqs)
	if err != nil {
		return 0, err
	}
	var s float64
	var n int
	for _, q := range res {
		for _, l := range q.Logprobs {
			s += math.Exp(float64(l))
			n++
		}
	}
	return s / float64(n), nil
}

func report(m *model.Model, ids []int32) (string, error) {
	var parts []string
	for _, pad := range []int{0, 64, 256, 1024} {
		p, err := copyProb(m, ids, pad)
		if err != nil {
			return "", err
		}
		parts = append(parts, fmt.Sprintf("pad %d: %.3f", pad, p))
	}
	return strings.Join(parts, ", "), nil
}

func run(policy string, steps int, lr float64, subset, batchSize int) error {
	if policy == "" {
		return fmt.Errorf("-policy is required")
	}
	m, err := model.Load(policy)
	if err != nil {
		return err
	}
	tok, err := tokenizer.Load(filepath.Join(policy, "tokenizer.json"))
	if err != nil {
		return err
	}
	var ids []int32
	for i := range min(tok.VocabSize(), m.Support()) {
		if !tok.IsSpecial(int32(i)) {
			ids = append(ids, int32(i))
		}
	}
	if subset > 0 && subset < len(ids) {
		ids = ids[:subset]
	}
	fmt.Printf("%s: %d drill token ids\n", policy, len(ids))
	if steps == 0 {
		line, err := report(m, ids)
		fmt.Println("probability of the copied tokens:", line)
		return err
	}
	if m, err = model.New(m.Config(), 1); err != nil {
		return err
	}
	opt, err := model.NewAdamW(m, model.AdamWConfig{LR: lr, MaxGradNorm: 1})
	if err != nil {
		return err
	}
	g, r, start := m.NewGrads(), rand.New(rand.NewPCG(1, 2)), time.Now()
	for s := 1; s <= steps; s++ {
		var batch []model.Sequence
		var n int
		for range batchSize {
			pad := r.IntN(65)
			d := drill(r, ids, 8+r.IntN(57), pad, pad)
			batch, n = append(batch, d), n+len(d.Completion)
		}
		w := float32(-1 / float64(n))
		g.Zero()
		if _, err := m.BackwardFunc(batch, func(_ int, lp []float32) []float32 {
			ws := make([]float32, len(lp))
			for k := range ws {
				ws[k] = w
			}
			return ws
		}, g); err != nil {
			return err
		}
		if _, err := opt.Step(m, g, 0); err != nil {
			return err
		}
		if s%200 == 0 || s == steps {
			line, err := report(m, ids)
			if err != nil {
				return err
			}
			fmt.Printf("step %d (%.0fs): %s\n", s, time.Since(start).Seconds(), line)
		}
	}
	return nil
}
