package tokenizer

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestTrainMatchesReference trains on this repository's code, then requires
// the node reference to read the result and encode with it exactly as Go does.
func TestTrainMatchesReference(t *testing.T) {
	needReference(t)
	source := sourceCorpus(t)
	tr := NewTrainer(nil)
	for _, s := range source {
		tr.Add(s)
	}
	data, err := tr.Train(TrainOptions{VocabSize: 3000})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	tok, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if tok.VocabSize() != 3000 {
		t.Errorf("VocabSize = %d, want 3000", tok.VocabSize())
	}
	for _, name := range []string{"<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</tool_call>"} {
		if _, ok := tok.TokenID(name); !ok {
			t.Errorf("trained vocabulary lacks %s", name)
		}
	}
	texts := append(readCorpus(t), randomCorpus(3, 1000)...)
	t.Run("special", func(t *testing.T) { compareWithReference(t, tok, append(texts, source...), true, "--tokenizer", path) })
	t.Run("plain", func(t *testing.T) { compareWithReference(t, tok, texts, false, "--tokenizer", path, "--no-special") })
	// Code compresses: the trained vocabulary should take well under a token per 2 bytes.
	var n, b int
	for _, s := range source {
		n += len(tok.Encode(s))
		b += len(s)
	}
	if float64(b)/float64(n) < 2.5 {
		t.Errorf("trained tokenizer gives %.2f bytes per token on its own corpus, want >= 2.5", float64(b)/float64(n))
	}
}

func TestTrainDeterministic(t *testing.T) {
	texts := append(readCorpus(t), randomCorpus(11, 500)...)
	train := func(order []string) []byte {
		tr := NewTrainer(nil)
		for _, s := range order {
			tr.Add(s)
		}
		data, err := tr.Train(TrainOptions{VocabSize: 700})
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	a := train(texts)
	rev := slices.Clone(texts)
	slices.Reverse(rev)
	if b := train(rev); !bytes.Equal(a, b) {
		t.Error("training on the same texts in another order gave another tokenizer.json")
	}
	if b := train(texts); !bytes.Equal(a, b) {
		t.Error("training twice gave different tokenizer.json files")
	}
}

func TestTrainErrors(t *testing.T) {
	tr := NewTrainer(nil)
	tr.Add("hello hello hello")
	for _, tc := range []struct {
		name string
		opts TrainOptions
	}{
		{"vocabulary too small", TrainOptions{VocabSize: 100}},
		{"repeated added token", TrainOptions{VocabSize: 300, Added: []AddedToken{{"<a>", true}, {"<a>", false}}}},
		{"empty added token", TrainOptions{VocabSize: 300, Added: []AddedToken{{"", true}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tr.Train(tc.opts); !errors.Is(err, ErrTrain) {
				t.Errorf("err = %v, want ErrTrain", err)
			}
		})
	}
}

// TestTrainSmallCorpus: a corpus without enough repeated pairs stops early
// and still gives a consistent, loadable tokenizer.
func TestTrainSmallCorpus(t *testing.T) {
	tr := NewTrainer(nil)
	tr.Add("abab abab cd")
	data, err := tr.Train(TrainOptions{VocabSize: 5000})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	// merges: "a b" (4), then "ab ab" or " ab"... at least one merge, far fewer than asked.
	if n := tok.VocabSize(); n <= 256+len(DefaultAddedTokens) || n >= 5000 {
		t.Errorf("VocabSize = %d", n)
	}
	if got := tok.Encode("abab"); len(got) != 1 {
		t.Errorf(`Encode("abab") = %v, want one token`, got)
	}
}

func TestTrainerAddCutsAddedTokens(t *testing.T) {
	tr := NewTrainer(nil)
	tr.Add("a<|im_end|>b\x00c<think><think>e\u0301")
	want := map[string]int64{"a": 1, "b": 1, "\x00c": 1, "é": 1}
	if len(tr.words) != len(want) {
		t.Errorf("words = %v, want %v", tr.words, want)
	}
	for w, n := range want {
		if tr.words[w] != n {
			t.Errorf("words[%q] = %d, want %d (all: %v)", w, tr.words[w], n, tr.words)
		}
	}
}
