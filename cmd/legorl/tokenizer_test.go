package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/legorl/legorl/policy/tokenizer"
)

var smallTokenizer = filepath.Join("..", "..", "policy", "tokenizer", "testdata", "small", "tokenizer.json")

func TestTokenizerEncodeDecode(t *testing.T) {
	tok, err := tokenizer.Load(smallTokenizer)
	if err != nil {
		t.Fatal(err)
	}
	text := "<|im_start|>user\nfunc main() { println(\"héllo\") }<|im_end|>\n"
	for _, special := range []bool{false, true} {
		args := []string{"--tokenizer", smallTokenizer}
		if special {
			args = append(args, "--special")
		}
		var out, errOut strings.Builder
		if err := tokenizerEncode(context.Background(), args, strings.NewReader(text), &out, &errOut); err != nil {
			t.Fatal(err)
		}
		var ids []int32
		if err := json.Unmarshal([]byte(out.String()), &ids); err != nil {
			t.Fatalf("encode output %q: %v", out.String(), err)
		}
		if want := tok.AppendEncode(nil, text, special); !slices.Equal(ids, want) {
			t.Errorf("special=%v: ids %v, want %v", special, ids, want)
		}
		var back strings.Builder
		if err := tokenizerDecode(context.Background(), []string{"--tokenizer", smallTokenizer}, strings.NewReader(out.String()), &back, &errOut); err != nil {
			t.Fatal(err)
		}
		if back.String() != text {
			t.Errorf("decode gave %q, want %q", back.String(), text)
		}
	}
	var out strings.Builder
	if err := tokenizerEncode(context.Background(), []string{"--tokenizer", smallTokenizer}, strings.NewReader(""), &out, &out); err != nil || out.String() != "[]\n" {
		t.Errorf("encoding nothing: %q, %v; want []", out.String(), err)
	}
}

func TestTokenizerTrain(t *testing.T) {
	dir := t.TempDir()
	corpus := filepath.Join(dir, "corpus")
	if err := os.MkdirAll(filepath.Join(corpus, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{
		"a.go":     strings.Repeat("func main() {\n\tfmt.Println(\"hello, world\")\n}\n", 50),
		"sub/b.py": strings.Repeat("def main():\n    print('hello, world')\n", 50),
	} {
		if err := os.WriteFile(filepath.Join(corpus, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	extra := filepath.Join(dir, "extra.txt")
	if err := os.WriteFile(extra, []byte("the cat sat on the mat"), 0o644); err != nil {
		t.Fatal(err)
	}
	out1, out2 := filepath.Join(dir, "t1.json"), filepath.Join(dir, "t2.json")
	for _, args := range [][]string{
		{"tokenizer", "train", "--vocab", "300", "--corpus", corpus, "--out", out1, extra},
		{"tokenizer", "train", "--vocab", "300", "--out", out2, "--corpus", corpus, "--corpus", extra},
	} {
		code, stdout, stderr := runCLI(t, testEnv(nil), args...)
		if code != 0 || !strings.Contains(stderr, "300 ids from 3 files") {
			t.Fatalf("%v: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
	a, _ := os.ReadFile(out1)
	b, _ := os.ReadFile(out2)
	if len(a) == 0 || string(a) != string(b) {
		t.Error("the same corpus gave different tokenizer.json files")
	}
	tok, err := tokenizer.Load(out1)
	if err != nil {
		t.Fatal(err)
	}
	line := "func main() {"
	if n := len(tok.Encode(line)); 2*n > len(line) {
		t.Errorf("trained tokenizer takes %d tokens for the %d bytes of a line of its corpus", n, len(line))
	}
}

func TestTokenizerBadInput(t *testing.T) {
	dir := t.TempDir()
	corpus := filepath.Join(dir, "c.txt")
	if err := os.WriteFile(corpus, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no subcommand", []string{"tokenizer"}, "missing subcommand"},
		{"unknown subcommand", []string{"tokenizer", "split"}, `unknown subcommand "split"`},
		{"no tokenizer", []string{"tokenizer", "encode"}, "--tokenizer is required"},
		{"missing file", []string{"tokenizer", "decode", "--tokenizer", filepath.Join(dir, "nope.json")}, "nope.json"},
		{"not a tokenizer", []string{"tokenizer", "encode", "--tokenizer", corpus}, "bad tokenizer.json"},
		{"train without vocab", []string{"tokenizer", "train", "--corpus", corpus, "--out", filepath.Join(dir, "t.json")}, "--vocab, --corpus and --out are required"},
		{"train tiny vocab", []string{"tokenizer", "train", "--vocab", "10", "--corpus", corpus, "--out", filepath.Join(dir, "t.json")}, "vocabulary size 10 is below 265"},
		{"train missing corpus", []string{"tokenizer", "train", "--vocab", "300", "--corpus", filepath.Join(dir, "none"), "--out", filepath.Join(dir, "t.json")}, "corpus:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, testEnv(nil), tt.args...)
			if code != 2 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 and one line naming %q", code, stdout, stderr, tt.want)
			}
		})
	}
	var out strings.Builder
	err := tokenizerDecode(context.Background(), []string{"--tokenizer", smallTokenizer}, strings.NewReader(`[1, "x"]`), &out, &out)
	if err == nil || !strings.Contains(err.Error(), "not a JSON array of token ids") {
		t.Errorf("decoding bad JSON: %v", err)
	}
	err = tokenizerDecode(context.Background(), []string{"--tokenizer", smallTokenizer}, strings.NewReader(`[1, 999999]`), &out, &out)
	if err == nil || !strings.Contains(err.Error(), "unknown token id: 999999") {
		t.Errorf("decoding an unknown id: %v", err)
	}
}
