package tokenizer

import (
	"os"
	"slices"
	"strings"
	"testing"

	"golang.org/x/text/unicode/norm"
)

// FuzzEncodeDecode: any bytes survive Decode(Encode(x)) up to NFC
// normalization, with and without special tokens, the streaming decoder
// gives the same bytes, and both merge loops agree.
func FuzzEncodeDecode(f *testing.F) {
	tok := loadSmall(f)
	for _, s := range readCorpus(f) {
		f.Add(s)
	}
	f.Add("\xff\xfe<|im_start|>\xe4\xb8")
	f.Add("'s'S'll \u0085\ufeff\u3000\r\n\t ")
	f.Fuzz(func(t *testing.T, s string) {
		want := norm.NFC.String(s)
		for _, special := range []bool{false, true} {
			ids := tok.AppendEncode(nil, s, special)
			back, err := tok.Decode(ids)
			if err != nil {
				t.Fatal(err)
			}
			got := string(back)
			if special {
				// Special tokens are split out before normalization (as Hugging
				// Face does), so NFC applies per section: a combining mark right
				// after "<|im_start|>" stays apart from its ">". The result is
				// still canonically equivalent to the input.
				got = norm.NFC.String(got)
			}
			if got != want {
				t.Fatalf("special=%v: Decode(Encode(%q)) = %q, want %q", special, s, back, want)
			}
			d := tok.NewStreamDecoder()
			var b strings.Builder
			for _, id := range ids {
				p, err := d.Add(id)
				if err != nil {
					t.Fatal(err)
				}
				b.WriteString(p)
			}
			if b.String()+d.Flush() != string(back) {
				t.Fatalf("stream decoding of %q differs", s)
			}
		}
		if len(s) >= 2 {
			syms := make([]int32, len(s))
			for i := range len(s) {
				syms[i] = tok.byteID[s[i]]
			}
			if a, b := tok.mergeSmall(slices.Clone(syms[:min(len(syms), smallWord)])), tok.mergeHeap(slices.Clone(syms[:min(len(syms), smallWord)])); !slices.Equal(a, b) {
				t.Fatalf("merge loops differ on %q: %v vs %v", s, a, b)
			}
		}
	})
}

// FuzzParse: a damaged tokenizer.json gives an error, never a panic.
func FuzzParse(f *testing.F) {
	data, err := os.ReadFile(smallJSON)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(data))
	f.Add(`{"pre_tokenizer":{"type":"ByteLevel"},"model":{"vocab":{"a":0},"merges":["a b"]}}`)
	f.Add(`{"added_tokens":[{"id":1,"content":"x"}],"pre_tokenizer":{"type":"ByteLevel"},"model":{"vocab":{"a":0},"merges":[["a","b"]]}}`)
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := Parse([]byte(s))
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error on several lines: %v", err)
			}
			return
		}
		ids := tok.EncodeSpecial("hello <|im_start|> wörld")
		if _, err := tok.Decode(ids); err != nil {
			t.Fatal(err)
		}
	})
}
