package tokenizer

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/small/tokenizer.json and testdata/small.golden.json (the ids come from the node reference)")

var (
	smallJSON   = filepath.Join("testdata", "small", "tokenizer.json")
	smallGolden = filepath.Join("testdata", "small.golden.json")
)

// trainSmall trains the committed test tokenizer from the committed corpus.
func trainSmall(t testing.TB) []byte {
	t.Helper()
	tr := NewTrainer(nil)
	for _, s := range readCorpus(t) {
		tr.Add(s)
	}
	for _, s := range randomCorpus(7, 2000) {
		tr.Add(s)
	}
	data, err := tr.Train(TrainOptions{VocabSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func loadSmall(t testing.TB) *Tokenizer {
	t.Helper()
	tok, err := Load(smallJSON)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func goldenTexts(t testing.TB) []string { return append(readCorpus(t), randomCorpus(2, 200)...) }

type golden struct {
	Special [][]int32 `json:"special"`
	Plain   [][]int32 `json:"plain"`
}

// TestGolden checks, without node, that the trainer still reproduces the
// committed small tokenizer byte for byte and that encoding with it gives
// the ids the node reference gave when the golden file was written.
func TestGolden(t *testing.T) {
	data := trainSmall(t)
	if *update {
		if err := os.MkdirAll(filepath.Dir(smallJSON), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(smallJSON, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	committed, err := os.ReadFile(smallJSON)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, committed) {
		t.Errorf("training on the committed corpus no longer reproduces %s (run go test -update if the change is intended)", smallJSON)
	}
	texts := goldenTexts(t)
	if *update {
		abs, err := filepath.Abs(smallJSON)
		if err != nil {
			t.Fatal(err)
		}
		g := golden{
			Special: nodeEncode(t, texts, "--tokenizer", abs),
			Plain:   nodeEncode(t, texts, "--tokenizer", abs, "--no-special"),
		}
		out, err := json.Marshal(g)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(smallGolden, append(out, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile(smallGolden)
	if err != nil {
		t.Fatal(err)
	}
	var g golden
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Special) != len(texts) || len(g.Plain) != len(texts) {
		t.Fatalf("%s has %d/%d encodings for %d texts (run go test -update)", smallGolden, len(g.Special), len(g.Plain), len(texts))
	}
	tok := loadSmall(t)
	for i, text := range texts {
		if got := tok.EncodeSpecial(text); !slices.Equal(got, g.Special[i]) {
			t.Errorf("EncodeSpecial(text %d %.60q): %s", i, text, firstDiff(got, g.Special[i]))
		}
		if got := tok.Encode(text); !slices.Equal(got, g.Plain[i]) {
			t.Errorf("Encode(text %d %.60q): %s", i, text, firstDiff(got, g.Plain[i]))
		}
	}
}
