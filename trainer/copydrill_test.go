package trainer_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/legorl/legorl/policy/model"
	"github.com/legorl/legorl/policy/tokenizer"
	"github.com/legorl/legorl/trainer"
)

// TestCopyDrills: a drill's prompt is its span and the span's first token
// again, its completion the rest of the span; its tokens are ordinary
// ids the model may predict; one seed, phase and step draw one set.
func TestCopyDrills(t *testing.T) {
	tok, err := tokenizer.Load(sftTokenizer)
	if err != nil {
		t.Fatal(err)
	}
	ids := trainer.DrillTokens(tok, 40)
	if len(ids) == 0 || len(ids) > 40 {
		t.Fatalf("%d drill ids for support 40", len(ids))
	}
	for _, id := range ids {
		if tok.IsSpecial(id) || id >= 40 {
			t.Fatalf("drill id %d: special or past the support", id)
		}
	}
	all := trainer.DrillTokens(tok, tok.VocabSize())
	for id := range int32(tok.VocabSize()) {
		if tok.IsSpecial(id) == slices.Contains(all, id) {
			t.Fatalf("id %d: special %v, drawn %v", id, tok.IsSpecial(id), !tok.IsSpecial(id))
		}
	}
	drills := trainer.CopyDrillsFunc(trainer.DrillRand(3, 1, 7), ids, 5, trainer.CopyDrills{Length: 12})
	if len(drills) != 5 {
		t.Fatalf("%d drills", len(drills))
	}
	for i, d := range drills {
		if len(d.Prompt) != 13 || len(d.Completion) != 11 || d.Prompt[12] != d.Prompt[0] || !slices.Equal(d.Prompt[1:12], d.Completion) {
			t.Errorf("drill %d: prompt %v completion %v", i, d.Prompt, d.Completion)
		}
		for _, id := range d.Prompt {
			if !slices.Contains(ids, id) {
				t.Errorf("drill %d: id %d not drawable", i, id)
			}
		}
	}
	again := trainer.CopyDrillsFunc(trainer.DrillRand(3, 1, 7), ids, 5, trainer.CopyDrills{Length: 12})
	other := trainer.CopyDrillsFunc(trainer.DrillRand(3, 1, 8), ids, 5, trainer.CopyDrills{Length: 12})
	if !slices.EqualFunc(drills, again, func(a, b model.Sequence) bool { return slices.Equal(a.Prompt, b.Prompt) }) {
		t.Error("one seed, phase and step drew two sets")
	}
	if slices.EqualFunc(drills, other, func(a, b model.Sequence) bool { return slices.Equal(a.Prompt, b.Prompt) }) {
		t.Error("two steps drew one set")
	}
	// Random layouts: a prefix of 0 to Pad tokens, a span of 8 to Length,
	// the cue right after the span.
	prefixes, spans := map[int]bool{}, map[int]bool{}
	for i, d := range trainer.CopyDrillsFunc(trainer.DrillRand(3, 0, 1), ids, 64, trainer.CopyDrills{Length: 16, Pad: 20}) {
		span := len(d.Completion) + 1
		prefix := len(d.Prompt) - 1 - span
		if span < 8 || span > 16 || prefix < 0 || prefix > 20 || d.Prompt[len(d.Prompt)-1] != d.Prompt[prefix] || !slices.Equal(d.Prompt[prefix+1:len(d.Prompt)-1], d.Completion) {
			t.Fatalf("drill %d: prompt %v completion %v", i, d.Prompt, d.Completion)
		}
		prefixes[prefix], spans[span] = true, true
	}
	if len(prefixes) < 10 || len(spans) < 5 {
		t.Errorf("64 random layouts: %d prefix lengths, %d span lengths", len(prefixes), len(spans))
	}
}

// copyProb is the mean probability the model gives the completion tokens
// of drills: 1/vocabulary for a model that cannot copy, near 1 for one
// that can.
func copyProb(t *testing.T, m *model.Model, drills []model.Sequence) float64 {
	t.Helper()
	res, err := m.Logprobs(drills)
	if err != nil {
		t.Fatal(err)
	}
	var s float64
	var n int
	for _, r := range res {
		for _, l := range r.Logprobs {
			s += math.Exp(float64(l))
			n++
		}
	}
	return s / float64(n)
}

// TestSFTCopyDrills: pretraining steps on drills teach the model to copy
// a span of tokens it has never seen, laid out as the drills are (the
// probability of the copied tokens goes from about 1/vocabulary to most of
// the mass; CopyDrills says why the layout matters), the drills in every step keep
// the skill through the demonstrations, the lineage records both, two runs
// with one seed give the same bytes, and a config without drills neither
// marshals nor hashes them. Its drills are of one layout, which teaches a
// copy by position; TestCopyDrillsRandomLayouts shows that the random
// layouts (Pad > 0) teach a copy by content.
func TestSFTCopyDrills(t *testing.T) {
	policy, demos := sftPolicy(t), sftDemos(t)
	tok, err := tokenizer.Load(sftTokenizer)
	if err != nil {
		t.Fatal(err)
	}
	m0, err := model.Load(policy)
	if err != nil {
		t.Fatal(err)
	}
	fresh := trainer.CopyDrillsFunc(trainer.DrillRand(99, 9, 9), trainer.DrillTokens(tok, m0.Support()), 16, trainer.CopyDrills{Length: 16})
	before := copyProb(t, m0, fresh)
	cfg := trainer.SFTConfig{Epochs: 3, LR: 3e-3, BatchSize: 3, Seed: 9, Copy: &trainer.CopyDrills{PretrainSteps: 400, PerStep: 2, Length: 16}}
	var weights [][]byte
	var lin *trainer.SFTLineage
	var dir string
	for range 2 {
		res, err := trainer.SFT(context.Background(), trainer.SFTOptions{Demos: demos, PolicyDir: policy, OutDir: filepath.Join(t.TempDir(), "sft"), Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		w, err := os.ReadFile(filepath.Join(res.Dir, "model.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		weights, lin, dir = append(weights, w), res.Lineage, res.Dir
	}
	if !bytes.Equal(weights[0], weights[1]) {
		t.Error("two runs with one seed differ")
	}
	pre := lin.CopyPretrain
	if len(pre) != 400 || pre[0].Epoch != -1 || pre[399].Step != 399 || pre[0].Tokens != 0 {
		t.Fatalf("copy pretraining steps: %d, first %+v", len(pre), pre[0])
	}
	if !(pre[399].CopyLoss < pre[0].CopyLoss/4) {
		t.Errorf("copy loss %v -> %v: not learned", pre[0].CopyLoss, pre[399].CopyLoss)
	}
	for i, st := range lin.Steps {
		if st.CopyLoss <= 0 || st.Loss <= 0 || st.Epoch < 0 {
			t.Errorf("SFT step %d: %+v, want a demonstrations loss and a copy loss", i, st)
		}
	}
	if lin.Config.Copy == nil || lin.Config.Copy.PerStep != 2 {
		t.Errorf("lineage config %+v", lin.Config)
	}
	m1, err := model.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	after := copyProb(t, m1, fresh)
	t.Logf("probability of the copied tokens of unseen drills: %.3f -> %.3f", before, after)
	if !(before < 0.05 && after > 0.5) {
		t.Errorf("probability of the copied tokens %.3f -> %.3f: the model did not learn to copy", before, after)
	}
	b, _ := json.Marshal(trainer.SFTConfig{}.WithDefaults())
	if bytes.Contains(b, []byte("copy")) {
		t.Errorf("the default config marshals the drills: %s", b)
	}
}

// TestCopyDrillsBadConfig: a drill of fewer than 2 tokens or a negative
// count is refused before any work, and nothing is written.
func TestCopyDrillsBadConfig(t *testing.T) {
	policy, demos := sftPolicy(t), sftDemos(t)
	for _, c := range []trainer.CopyDrills{{Length: 1}, {PretrainSteps: -1}, {PerStep: -2}, {Length: -3}, {Pad: -1}, {Batch: -1}, {LR: -1}, {Pad: 4, Length: 6}} {
		out := filepath.Join(t.TempDir(), "sft")
		_, err := trainer.SFT(context.Background(), trainer.SFTOptions{Demos: demos, PolicyDir: policy, OutDir: out, Config: trainer.SFTConfig{Epochs: 1, Copy: &c}})
		if !errors.Is(err, trainer.ErrConfig) || !strings.Contains(err.Error(), "copy drills") {
			t.Errorf("%+v: err %v, want ErrConfig naming the copy drills", c, err)
		}
		if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%+v: %s written", c, out)
		}
	}
}

// TestCopyDrillsRandomLayouts: drills of random layouts (Pad > 0, what
// tools-induct's starter is made with) teach a copy by content, and drills
// of one layout do not. A fresh 2-layer model of 64 tokens trains on
// drills through SFT's step alone; then it is given unseen drills laid out
// as no drill of one layout is (8 random tokens, a span of 12, 2 random
// tokens, the cue): a copy by content (an induction head) finds the span
// wherever it is and gives the copied tokens most of the mass, a copy of
// the token a fixed distance back gives them chance, 1/64. 900 steps of
// 16 drills in all: under 13 s of CPU time.
func TestCopyDrillsRandomLayouts(t *testing.T) {
	c := tinyConfig(t, false)
	ids := make([]int32, c.VocabSize)
	for i := range ids {
		ids[i] = int32(i)
	}
	r := rand.New(rand.NewPCG(1, 2))
	draw := func(k int) []int32 {
		out := make([]int32, k)
		for j := range out {
			out[j] = ids[r.IntN(len(ids))]
		}
		return out
	}
	moved := make([]model.Sequence, 32)
	for i := range moved {
		span := draw(12)
		moved[i] = model.Sequence{Prompt: slices.Concat(draw(8), span, draw(2), span[:1]), Completion: span[1:]}
	}
	// train returns the probability of the copied tokens in the drills'
	// own layouts and in the moved ones.
	train := func(cfg trainer.CopyDrills, steps int) (own, away float64) {
		m, err := model.New(c, 5)
		if err != nil {
			t.Fatal(err)
		}
		opt, err := model.NewAdamW(m, model.AdamWConfig{LR: 3e-3})
		if err != nil {
			t.Fatal(err)
		}
		g := m.NewGrads()
		for s := range steps {
			if _, err := trainer.SFTStepFunc(m, opt, g, nil, trainer.CopyDrillsFunc(trainer.DrillRand(9, 0, s), ids, 16, cfg), false, 0); err != nil {
				t.Fatal(err)
			}
		}
		return copyProb(t, m, trainer.CopyDrillsFunc(trainer.DrillRand(77, 0, 0), ids, 32, cfg)), copyProb(t, m, moved)
	}
	chance := 1 / float64(len(ids))
	own, away := train(trainer.CopyDrills{Length: 16, Pad: 16}, 600)
	t.Logf("random layouts: copied tokens %.3f in the drills' layouts, %.3f with random tokens around the span (chance %.3f)", own, away, chance)
	if !(away > 0.5) {
		t.Errorf("after drills of random layouts the copied tokens get %.3f with random tokens around the span (chance %.3f): no copy by content", away, chance)
	}
	// One layout, learned in fewer steps (the copy loss is near 0 by
	// 300): the same measure must fail, or it cannot tell the two apart.
	own, away = train(trainer.CopyDrills{Length: 16}, 300)
	t.Logf("one layout: copied tokens %.3f in the drills' layout, %.3f with random tokens around the span", own, away)
	if !(own > 0.8 && away < 5*chance) {
		t.Errorf("after drills of one layout the copied tokens get %.3f in it and %.3f with random tokens around the span: want a copy learned in its layout only", own, away)
	}
}
