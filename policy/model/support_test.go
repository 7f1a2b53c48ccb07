package model

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legorl/legorl/policy/backend"
)

// paddedPair returns two models with the same weights: full scores all 11
// ids of the vocabulary, padded only the first support of them. The LM
// head rows past the support are scaled up so that, unmasked, the padding
// would take most of the probability.
func paddedPair(t *testing.T, c Config, support int) (full, padded *Model) {
	t.Helper()
	p := randomParams[float32](c, 77)
	d := c.HiddenSize
	for i := support * d; i < c.VocabSize*d; i++ {
		p.lmHead.data[i] *= 40
	}
	full = &Model{cfg: c, p: p, be: backend.NewCPU(), support: c.VocabSize}
	padded = &Model{cfg: c, p: p, be: backend.NewCPU(), support: c.VocabSize}
	if err := padded.SetSupport(support); err != nil {
		t.Fatal(err)
	}
	return full, padded
}

// TestSupportMasksPaddedIDs checks that a model whose Support is below its
// vocabulary scores each completion token under the softmax of the
// support's logits only (the full distribution renormalised over the
// support, as if the logits past it were -inf), at several temperatures,
// in Logprobs, Step and Cache.Extend; that it refuses to score a padded id;
// and that a padded id is still a valid prompt token.
func TestSupportMasksPaddedIDs(t *testing.T) {
	const support = 7
	tests := []struct {
		name string
		cfg  Config
		temp float64
	}{
		{"dense tied", tinyDense(true), 1},
		{"dense untied", tinyDense(false), 1},
		{"dense untied T=0.6", tinyDense(false), 0.6},
		{"moe T=1.3", tinyMoE(true), 1.3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.cfg
			full, padded := paddedPair(t, c, support)
			prompt := []int32{3, 9, 1, 10} // 9 and 10 are padded ids: valid input
			var seqs []Sequence
			for j := range c.VocabSize {
				seqs = append(seqs, Sequence{Prompt: prompt, Completion: []int32{int32(j)}, Temperature: tt.temp})
			}
			all, err := full.Logprobs(seqs)
			if err != nil {
				t.Fatal(err)
			}
			var inSupport float64 // the full distribution's mass on the support
			for j := range support {
				inSupport += math.Exp(float64(all[j].Logprobs[0]))
			}
			if inSupport > 0.5 {
				t.Fatalf("the padding holds only %.3f of the full distribution: the test would not tell masking apart", 1-inSupport)
			}
			got, err := padded.Logprobs(seqs[:support])
			if err != nil {
				t.Fatal(err)
			}
			var sum float64
			for j := range support {
				want := float64(all[j].Logprobs[0]) - math.Log(inSupport)
				if d := math.Abs(float64(got[j].Logprobs[0]) - want); d > 1e-4 {
					t.Errorf("id %d: logprob %g, want %g (renormalised over the support)", j, got[j].Logprobs[0], want)
				}
				sum += math.Exp(float64(got[j].Logprobs[0]))
			}
			if math.Abs(sum-1) > 1e-5 {
				t.Errorf("probabilities over the support sum to %g", sum)
			}

			_, err = padded.Logprobs([]Sequence{{Prompt: prompt, Completion: []int32{2, support}}})
			if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), fmt.Sprintf("completion token 1 is id %d, outside the model's support of %d ids", support, support)) {
				t.Errorf("scoring a padded id: err = %v", err)
			}

			// Step and Extend: the support's logits, bitwise those of the
			// full model.
			fo, err := full.Step([]StepInput{{Cache: full.NewCache(), IDs: prompt}})
			if err != nil {
				t.Fatal(err)
			}
			po, err := padded.Step([]StepInput{{Cache: padded.NewCache(), IDs: prompt}})
			if err != nil {
				t.Fatal(err)
			}
			if len(po[0].Logits) != support || sameBits(po[0].Logits, fo[0].Logits[:support]) != nil {
				t.Errorf("Step: %d logits %v, want the first %d of %v", len(po[0].Logits), po[0].Logits, support, fo[0].Logits)
			}
			el, _, err := padded.NewCache().Extend(prompt, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(el) != support {
				t.Errorf("Extend: %d logits, want %d", len(el), support)
			}
		})
	}
}

// TestLoadSupport checks where Load takes the Support from: the size of
// the checkpoint's tokenizer.json, capped at vocab_size; vocab_size
// without one; an unreadable one is an error naming the folder.
func TestLoadSupport(t *testing.T) {
	c := tinyDense(true) // vocab_size 11
	m := mustNew(t, c, 3)
	tests := []struct {
		name      string
		tokenizer string // "" for none
		want      int
		err       string
	}{
		{"no tokenizer", "", 11, ""},
		{"padded vocabulary", `{"model":{"vocab":{"a":0,"b":5}},"added_tokens":[{"id":6,"content":"<x>"}]}`, 7, ""},
		{"no padding", `{"model":{"vocab":{"a":10}}}`, 11, ""},
		{"tokenizer larger than the model", `{"model":{"vocab":{"a":30}}}`, 11, ""},
		{"unreadable tokenizer", `{"model":`, 0, "the tokenizer's size bounds the ids the model samples"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var files []string
			if tt.tokenizer != "" {
				tok := filepath.Join(t.TempDir(), "tokenizer.json")
				if err := os.WriteFile(tok, []byte(tt.tokenizer), 0o644); err != nil {
					t.Fatal(err)
				}
				files = append(files, tok)
			}
			dir := t.TempDir()
			if err := m.Save(dir, SaveOptions{TokenizerFiles: files}); err != nil {
				t.Fatal(err)
			}
			got, err := Load(dir)
			if tt.err != "" {
				if !errors.Is(err, ErrCheckpoint) || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), dir) {
					t.Fatalf("err = %v, want ErrCheckpoint naming %q and the folder", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Support() != tt.want {
				t.Errorf("Support() = %d, want %d", got.Support(), tt.want)
			}
		})
	}
}

func TestSetSupport(t *testing.T) {
	m := mustNew(t, tinyDense(true), 4)
	if m.Support() != 11 {
		t.Fatalf("a new model's Support() = %d, want its vocab_size 11", m.Support())
	}
	for _, n := range []int{0, -1, 12} {
		if err := m.SetSupport(n); !errors.Is(err, ErrInput) || m.Support() != 11 {
			t.Errorf("SetSupport(%d): err = %v, Support() = %d", n, err, m.Support())
		}
	}
	if err := m.SetSupport(5); err != nil || m.Support() != 5 {
		t.Errorf("SetSupport(5): err = %v, Support() = %d", err, m.Support())
	}
}

// TestTrimVocab checks that the trimmed copy of a padded model has the
// support as its vocabulary and scores and steps bitwise as the padded
// model does, and that the original is untouched.
func TestTrimVocab(t *testing.T) {
	for _, c := range []Config{tinyDense(true), tinyDense(false), tinyMoE(true)} {
		t.Run(fmt.Sprintf("%s tied=%v", c.ModelType, c.TieWordEmbeddings), func(t *testing.T) {
			_, padded := paddedPair(t, c, 7)
			trimmed := padded.TrimVocab()
			if tc := trimmed.Config(); tc.VocabSize != 7 || trimmed.Support() != 7 || padded.Config().VocabSize != c.VocabSize {
				t.Fatalf("trimmed vocab_size %d support %d, original vocab_size %d", tc.VocabSize, trimmed.Support(), padded.Config().VocabSize)
			}
			if want := padded.NumParams() - (c.VocabSize-7)*c.HiddenSize*map[bool]int{true: 1, false: 2}[c.TieWordEmbeddings]; trimmed.NumParams() != want {
				t.Errorf("%d parameters, want %d", trimmed.NumParams(), want)
			}
			seqs := []Sequence{{Prompt: []int32{1, 2, 3}, Completion: []int32{6, 0, 4}}, {Prompt: []int32{5}, Completion: []int32{2}, Temperature: 0.7}}
			a, err := padded.Logprobs(seqs)
			if err != nil {
				t.Fatal(err)
			}
			b, err := trimmed.Logprobs(seqs)
			if err != nil {
				t.Fatal(err)
			}
			for i := range a {
				if err := sameBits(a[i].Logprobs, b[i].Logprobs); err != nil || fmt.Sprint(a[i].Routing) != fmt.Sprint(b[i].Routing) {
					t.Errorf("sequence %d: logprobs %v, routing equal %v", i, err, fmt.Sprint(a[i].Routing) == fmt.Sprint(b[i].Routing))
				}
			}
			sa, err := padded.Step([]StepInput{{Cache: padded.NewCache(), IDs: []int32{1, 2, 3}}})
			if err != nil {
				t.Fatal(err)
			}
			sb, err := trimmed.Step([]StepInput{{Cache: trimmed.NewCache(), IDs: []int32{1, 2, 3}}})
			if err != nil {
				t.Fatal(err)
			}
			if err := sameBits(sa[0].Logits, sb[0].Logits); err != nil {
				t.Errorf("step logits: %v", err)
			}
		})
	}
}
