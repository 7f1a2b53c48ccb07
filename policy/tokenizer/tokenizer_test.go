package tokenizer

import (
	"encoding/json"
	"errors"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func pieces(next pretokenizer, s string) []string {
	var out []string
	split(next, s, func(p string) { out = append(out, p) })
	return out
}

// TestPretokenize pins the scanners to what the regexes match (the expected
// pieces come from JavaScript's regex engine, except where noted).
func TestPretokenize(t *testing.T) {
	tests := []struct {
		in                  string
		qwen2, gpt2, llama3 []string // llama3 nil: same as qwen2
	}{
		{"Hello world", []string{"Hello", " world"}, []string{"Hello", " world"}, nil},
		{"I'm here, they'RE", []string{"I", "'m", " here", ",", " they", "'RE"}, []string{"I", "'m", " here", ",", " they", "'", "RE"}, nil},
		{"'sup 'x", []string{"'s", "up", " '", "x"}, []string{"'s", "up", " '", "x"}, nil},
		{"  two  spaces", []string{" ", " two", " ", " spaces"}, []string{" ", " two", " ", " spaces"}, nil},
		{"a   \n  b", []string{"a", "   \n", " ", " b"}, []string{"a", "   \n ", " b"}, nil},
		{"x \n\n y  ", []string{"x", " \n\n", " y", "  "}, []string{"x", " \n\n", " y", "  "}, nil},
		{"\t\tindent()", []string{"\t", "\tindent", "()"}, []string{"\t", "\t", "indent", "()"}, nil},
		{"abc123def", []string{"abc", "1", "2", "3", "def"}, []string{"abc", "123", "def"}, []string{"abc", "123", "def"}},
		{"1234567 ٣٤٥٦", []string{"1", "2", "3", "4", "5", "6", "7", " ", "٣", "٤", "٥", "٦"}, []string{"1234567", " ٣٤٥٦"}, []string{"123", "456", "7", " ", "٣٤٥", "٦"}},
		{"(foo)\n\n", []string{"(foo", ")\n\n"}, []string{"(", "foo", ")", "\n\n"}, nil},
		{" !!\r\n", []string{" !!\r\n"}, []string{" !!", "\r\n"}, nil},
		{"中文，字", []string{"中文", "，字"}, []string{"中文", "，", "字"}, nil},
		{"a\u00a0b", []string{"a", "\u00a0b"}, []string{"a", "\u00a0", "b"}, nil},
		{"  ", []string{"  "}, []string{"  "}, nil},
		{"x\u3000\u3000y", []string{"x", "\u3000", "\u3000y"}, []string{"x", "\u3000", "\u3000", "y"}, nil},
		{"tail  ", []string{"tail", "  "}, []string{"tail", "  "}, nil},
		{"== x", []string{"==", " x"}, []string{"==", " x"}, nil},
		{"'''", []string{"'''"}, []string{"'''"}, nil},
		{"12 345", []string{"1", "2", " ", "3", "4", "5"}, []string{"12", " 345"}, []string{"12", " ", "345"}},
		{"", nil, nil, nil},
		// Hugging Face semantics where JavaScript differs: U+0085 is \s, U+FEFF is not.
		{"a\u0085\u0085b", []string{"a", "\u0085", "\u0085b"}, []string{"a", "\u0085", "\u0085", "b"}, nil},
		{"\ufeff\ufeffx", []string{"\ufeff\ufeff", "x"}, []string{"\ufeff\ufeff", "x"}, nil},
		// Invalid UTF-8: each bad byte is one character of the "other" class.
		{"\xff\xfeab", []string{"\xff\xfe", "ab"}, []string{"\xff\xfe", "ab"}, nil},
		{"\xffab \xc3", []string{"\xffab", " \xc3"}, []string{"\xff", "ab", " \xc3"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := pieces(qwen2Next, tt.in); !slices.Equal(got, tt.qwen2) {
				t.Errorf("qwen2: %q, want %q", got, tt.qwen2)
			}
			if got := pieces(gpt2Next, tt.in); !slices.Equal(got, tt.gpt2) {
				t.Errorf("gpt2: %q, want %q", got, tt.gpt2)
			}
			if tt.llama3 == nil {
				tt.llama3 = tt.qwen2
			}
			if got := pieces(llama3Next, tt.in); !slices.Equal(got, tt.llama3) {
				t.Errorf("llama3: %q, want %q", got, tt.llama3)
			}
		})
	}
}

// TestPretokenizeCovers checks on random input that the pieces are
// non-empty and cover the text exactly.
func TestPretokenizeCovers(t *testing.T) {
	for _, s := range append(randomCorpus(5, 2000), "\xff\x80\xc3(\xe2\x82", strings.Repeat(" \t\n", 50)) {
		for name, split := range map[string]pretokenizer{"qwen2": qwen2Next, "gpt2": gpt2Next, "llama3": llama3Next} {
			ps := pieces(split, s)
			if strings.Join(ps, "") != s || slices.Contains(ps, "") {
				t.Fatalf("%s(%q) = %q", name, s, ps)
			}
		}
	}
}

func TestMergeSmallMatchesHeap(t *testing.T) {
	tok := loadSmall(t)
	r := rand.New(rand.NewPCG(3, 4))
	alphabet := []byte("ab ()\n\tetnrs_=")
	for range 3000 {
		n := 2 + r.IntN(smallWord-1)
		syms := make([]int32, n)
		for i := range syms {
			syms[i] = tok.byteID[alphabet[r.IntN(len(alphabet))]]
		}
		a := tok.mergeSmall(slices.Clone(syms))
		b := tok.mergeHeap(slices.Clone(syms))
		if !slices.Equal(a, b) {
			t.Fatalf("%v: mergeSmall %v, mergeHeap %v", syms, a, b)
		}
	}
}

// TestRoundTrip checks Decode(Encode(x)) == x, invalid UTF-8 included.
func TestRoundTrip(t *testing.T) {
	tok := loadSmall(t)
	for _, s := range []string{
		"plain text", "\xff\xfe\xfd", "half a char \xe4\xb8", "\xe4\xb8 starts badly", "mixed \xc3(\xa0 \x80",
		"<|im_start|>\xff<|im_end|>", strings.Repeat("長い行", 200), strings.Repeat(" ", 1000) + "x",
	} {
		for _, special := range []bool{false, true} {
			ids := tok.AppendEncode(nil, s, special)
			back, err := tok.Decode(ids)
			if err != nil {
				t.Fatal(err)
			}
			if string(back) != s {
				t.Errorf("special=%v: Decode(Encode(%.40q)) = %.40q", special, s, back)
			}
		}
	}
}

func TestSpecialTokens(t *testing.T) {
	tok := loadSmall(t)
	start, _ := tok.TokenID("<|im_start|>")
	think, _ := tok.TokenID("<think>")
	if !tok.IsSpecial(start) || tok.IsSpecial(think) {
		t.Fatalf("IsSpecial(<|im_start|>) = %v, IsSpecial(<think>) = %v", tok.IsSpecial(start), tok.IsSpecial(think))
	}
	text := "<|im_start|>user<think>"
	if got := tok.EncodeSpecial(text); got[0] != start || got[len(got)-1] != think {
		t.Errorf("EncodeSpecial(%q) = %v, want %d first and %d last", text, got, start, think)
	}
	got := tok.Encode(text)
	if slices.Contains(got, start) || got[len(got)-1] != think {
		t.Errorf("Encode(%q) = %v, want no %d (plain text) but %d (not special) last", text, got, start, think)
	}
}

func TestStreamDecoder(t *testing.T) {
	tok := loadSmall(t)
	for _, s := range []string{"héllo 中文 😀👨‍👩‍👧 done", "bad \xff byte", "ends inside \xe4\xb8"} {
		ids := tok.Encode(s)
		d := tok.NewStreamDecoder()
		var all strings.Builder
		for _, id := range ids {
			piece, err := d.Add(id)
			if err != nil {
				t.Fatal(err)
			}
			if utf8.ValidString(s) && !utf8.ValidString(piece) {
				t.Errorf("%q: piece %q is not valid UTF-8", s, piece)
			}
			all.WriteString(piece)
		}
		all.WriteString(d.Flush())
		if all.String() != s {
			t.Errorf("streamed %q, want %q", all.String(), s)
		}
	}
	if _, err := tok.NewStreamDecoder().Add(-1); !errors.Is(err, ErrUnknownID) {
		t.Errorf("Add(-1): err = %v, want ErrUnknownID", err)
	}
}

func TestCompletePrefix(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int
	}{
		{"", 0}, {"abc", 3}, {"a\xe4", 1}, {"a\xe4\xb8", 1}, {"a\xe4\xb8\xad", 4},
		{"\xf0\x9f\x98", 0}, {"\xf0\x9f\x98\x80", 4}, {"a\xff", 2}, {"a\x80", 2},
		{"a\xe0\x80", 3}, // E0 80 can never be valid: passed through
		{"\xc3", 0}, {"\xc3(", 2},
	} {
		if got := completePrefix([]byte(tt.in)); got != tt.want {
			t.Errorf("completePrefix(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

func TestDecodeUnknownID(t *testing.T) {
	tok := loadSmall(t)
	for _, id := range []int32{-1, int32(tok.VocabSize()), 1 << 30} {
		if _, err := tok.Decode([]int32{1, id}); !errors.Is(err, ErrUnknownID) {
			t.Errorf("Decode(%d): err = %v, want ErrUnknownID", id, err)
		}
	}
}

func TestParseErrors(t *testing.T) {
	const byteVocab = `"!":0`
	valid := func(model string) string {
		return `{"pre_tokenizer":{"type":"ByteLevel"},"model":` + model + `}`
	}
	tests := []struct {
		name, json string
		sentinel   error
		want       string
	}{
		{"not json", `{"model":`, ErrFormat, "unexpected end"},
		{"no model", `{"pre_tokenizer":{"type":"ByteLevel"}}`, ErrFormat, "no model"},
		{"wordpiece", valid(`{"type":"WordPiece","vocab":{"a":0}}`), ErrUnsupported, `model type "WordPiece"`},
		{"byte fallback", valid(`{"type":"BPE","byte_fallback":true,"vocab":{"a":0}}`), ErrUnsupported, "byte_fallback"},
		{"empty vocab", valid(`{"type":"BPE","vocab":{}}`), ErrFormat, "empty model.vocab"},
		{"missing bytes", valid(`{"type":"BPE","vocab":{` + byteVocab + `}}`), ErrFormat, "lacks the byte-level token"},
		{"negative id", valid(`{"type":"BPE","vocab":{"a":-3}}`), ErrFormat, "negative id"},
		{"bad normalizer", `{"normalizer":{"type":"Lowercase"},"pre_tokenizer":{"type":"ByteLevel"},"model":{"vocab":{"a":0}}}`, ErrUnsupported, `normalizer type "Lowercase"`},
		{"no pre-tokenizer", `{"model":{"vocab":{"a":0}}}`, ErrUnsupported, "no pre_tokenizer"},
		{"other regex", `{"pre_tokenizer":{"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"\\w+"},"behavior":"Isolated"},{"type":"ByteLevel","use_regex":false}]},"model":{"vocab":{"a":0}}}`, ErrUnsupported, "only the Qwen2 and Llama 3 regexes"},
		{"metaspace", `{"pre_tokenizer":{"type":"Metaspace"},"model":{"vocab":{"a":0}}}`, ErrUnsupported, `pre_tokenizer type "Metaspace"`},
		{"wordpiece decoder", `{"pre_tokenizer":{"type":"ByteLevel"},"decoder":{"type":"WordPiece"},"model":{"vocab":{"a":0}}}`, ErrUnsupported, `decoder type "WordPiece"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.json))
			if !errors.Is(err, tt.sentinel) || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("err = %v, want %v naming %q on one line", err, tt.sentinel, tt.want)
			}
		})
	}
}

// TestLoadSize checks that LoadSize gives the VocabSize of the loaded
// tokenizer (added tokens past the vocabulary count) and refuses what Parse
// refuses about ids.
func TestLoadSize(t *testing.T) {
	small := string(trainSmall(t))
	withAdded := strings.Replace(small, `"added_tokens": [`, `"added_tokens": [{"id": 1500, "content": "<|pad|>", "special": true}, `, 1)
	if withAdded == small {
		t.Fatal("fixture lacks added_tokens")
	}
	tests := []struct {
		name, json string
		want       int    // the size; 0 when an error is expected
		err        string // part of the error
	}{
		{"small", small, 0, ""},
		{"added token past the vocabulary", withAdded, 1501, ""},
		{"not json", `{"model":`, 0, "unexpected end"},
		{"no model", `{"added_tokens":[]}`, 0, "no model"},
		{"empty vocab", `{"model":{"vocab":{}}}`, 0, "empty model.vocab"},
		{"negative id", `{"model":{"vocab":{"a":-3}}}`, 0, "negative id"},
		{"added without id", `{"added_tokens":[{"content":"x"}],"model":{"vocab":{"a":0}}}`, 0, "no valid id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "tokenizer.json")
			if err := os.WriteFile(path, []byte(tt.json), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := LoadSize(path)
			if tt.err != "" {
				if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), path) {
					t.Fatalf("LoadSize = %d, %v; want ErrFormat naming %q and the file", got, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tok, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			if got != tok.VocabSize() || (tt.want != 0 && got != tt.want) {
				t.Errorf("LoadSize = %d, Load's VocabSize %d, want %d", got, tok.VocabSize(), max(tt.want, tok.VocabSize()))
			}
		})
	}
	if _, err := LoadSize(filepath.Join(t.TempDir(), "missing.json")); !errors.Is(err, ErrFormat) {
		t.Errorf("missing file: err = %v, want ErrFormat", err)
	}
}

// TestParseInconsistent edits the small tokenizer to break one invariant at
// a time.
func TestParseInconsistent(t *testing.T) {
	data := string(trainSmall(t))
	tests := []struct {
		name, old, new, want string
	}{
		{"merge of unknown token", `"merges": [`, `"merges": [["zzz", "q"], `, `merge 0 "zzz q" uses a token not in the vocab`},
		{"merge result missing", `"merges": [`, `"merges": [["!", "!"], `, `makes "!!", which is not in the vocab`},
		{"bad merge item", `"merges": [`, `"merges": [["a"], `, `merge 0 ["a"] is not two tokens`},
		{"mixed merge forms", `"merges": [`, `"merges": [["a", "b"], "a b", `, "is not a list of"},
		{"duplicate id", `"\"": 1,`, `"\"": 0,`, `share id 0`},
		{"added id clash", `"id": 991, "content": "<|endoftext|>"`, `"id": 5, "content": "<|endoftext|>"`, `reuses id 5`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(data, tt.old) {
				t.Fatalf("fixture lacks %q", tt.old)
			}
			_, err := Parse([]byte(strings.Replace(data, tt.old, tt.new, 1)))
			if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want ErrFormat naming %q", err, tt.want)
			}
		})
	}
}

func TestParseMerges(t *testing.T) {
	for _, tt := range []struct {
		in, err string
		want    [][2]string
	}{
		{in: `["a b", "ab c"]`, want: [][2]string{{"a", "b"}, {"ab", "c"}}},
		{in: `[["a", "b"], ["a b", "c"]]`, want: [][2]string{{"a", "b"}, {"a b", "c"}}},
		{in: `[]`, want: [][2]string{}},
		{in: `null`},
		{in: `["a b c"]`, err: `merge 0 "a b c" is not two tokens`},
		{in: `["ab"]`, err: `merge 0 "ab" is not two tokens`},
		{in: `[["a", "b", "c"]]`, err: `merge 0 ["a" "b" "c"] is not two tokens`},
		{in: `{"a": "b"}`, err: "neither a list"},
	} {
		got, err := parseMerges([]byte(tt.in))
		if tt.err != "" {
			if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("parseMerges(%s): err = %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("parseMerges(%s) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

// TestConcurrentEncode shares one Tokenizer (and its cache) between
// goroutines; run with -race.
func TestConcurrentEncode(t *testing.T) {
	tok := loadSmall(t)
	texts := randomCorpus(9, 300)
	want := make([][]int32, len(texts))
	for i, s := range texts {
		want[i] = tok.EncodeSpecial(s)
	}
	errs := make(chan string, 4)
	for g := range 4 {
		go func() {
			for k := range texts {
				i := (k + g*37) % len(texts)
				if got := tok.EncodeSpecial(texts[i]); !slices.Equal(got, want[i]) {
					errs <- texts[i]
					return
				}
			}
			errs <- ""
		}()
	}
	for range 4 {
		if s := <-errs; s != "" {
			t.Errorf("concurrent EncodeSpecial(%q) differs", s)
		}
	}
}

// TestScanVocab checks the fast vocabulary reader against encoding/json,
// and that it gives up (so that encoding/json decides) on unusual input.
func TestScanVocab(t *testing.T) {
	for _, tt := range []struct {
		in   string
		fast bool // the scanner handles it
	}{
		{`{"a": 1, "b":2 , "Ġthe" :3}`, true},
		{`{"a\"b": 1, "\u0120x": 2, "\\": 3, "\/": 4, "\ud83d\ude00": 5}`, true},
		{` { } `, true},
		{`{"a": 1, "a": 2}`, true}, // the last wins, as in encoding/json
		{`{"a": -1}`, false},
		{`{"a": 1.5}`, false},
		{`{"a": 1,}`, false},
		{`{"a": 99999999999}`, false},
		{`{"a": 1} x`, false},
		{"{\"a\tb\": 1}", false},
	} {
		got, ok := scanVocab([]byte(tt.in))
		if ok != tt.fast {
			t.Errorf("scanVocab(%s): ok = %v, want %v", tt.in, ok, tt.fast)
			continue
		}
		if !ok {
			continue
		}
		var want map[string]int32
		if err := json.Unmarshal([]byte(tt.in), &want); err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(got, want) {
			t.Errorf("scanVocab(%s) = %v, want %v", tt.in, got, want)
		}
	}
}
