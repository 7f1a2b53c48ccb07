package tokenizer

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Encode returns the token ids of text read as ordinary text: special
// tokens such as <|im_start|> written in it are encoded as the characters
// they are made of, while non-special added tokens (Qwen3's <think> or
// <tool_call>) are still recognised, as Hugging Face's tokenizers do with
// split_special_tokens. Use it for text that users or tools wrote.
//
// Bytes that are not valid UTF-8 are encoded as themselves, so
// Decode(Encode(s)) == s for every s that normalization leaves unchanged.
func (t *Tokenizer) Encode(text string) []int32 { return t.encode(nil, text, false) }

// EncodeSpecial returns the token ids of text with every added token
// recognised, special ones included: use it for text rendered by a chat
// template. It matches the default of the reference implementations.
func (t *Tokenizer) EncodeSpecial(text string) []int32 { return t.encode(nil, text, true) }

// AppendEncode appends the ids of text to dst and returns the extended
// slice; special selects EncodeSpecial's behaviour.
func (t *Tokenizer) AppendEncode(dst []int32, text string, special bool) []int32 {
	return t.encode(dst, text, special)
}

// section is a stretch of the input: plain text, or one added token.
type section struct {
	text  string
	added *addedToken
}

func (t *Tokenizer) encode(out []int32, text string, special bool) []int32 {
	if len(t.added) == 0 {
		return t.encodeText(out, text)
	}
	var secs []section
	start := 0
	for i := 0; i < len(text); {
		if !t.first[text[i]] {
			i++
			continue
		}
		a := t.matchAdded(text[i:], special)
		if a == nil {
			i++
			continue
		}
		if i > start {
			secs = append(secs, section{text: text[start:i]})
		}
		secs = append(secs, section{text: a.content, added: a})
		i += len(a.content)
		start = i
	}
	if len(secs) == 0 {
		return t.encodeText(out, text)
	}
	if start < len(text) {
		secs = append(secs, section{text: text[start:]})
	}
	for i, s := range secs {
		if s.added == nil {
			continue
		}
		if s.added.lstrip && i > 0 && secs[i-1].added == nil {
			secs[i-1].text = strings.TrimRightFunc(secs[i-1].text, unicode.IsSpace)
		}
		if s.added.rstrip && i+1 < len(secs) && secs[i+1].added == nil {
			secs[i+1].text = strings.TrimLeftFunc(secs[i+1].text, unicode.IsSpace)
		}
	}
	for _, s := range secs {
		if s.added != nil {
			out = append(out, s.added.id)
		} else {
			out = t.encodeText(out, s.text)
		}
	}
	return out
}

// matchAdded returns the longest added token that s starts with, or nil.
func (t *Tokenizer) matchAdded(s string, special bool) *addedToken {
	for i := range t.added { // longest first
		a := &t.added[i]
		if (special || !a.special) && strings.HasPrefix(s, a.content) {
			return a
		}
	}
	return nil
}

// encodeText encodes text that holds no added token.
func (t *Tokenizer) encodeText(out []int32, text string) []int32 {
	if t.nfc && !isASCII(text) && !norm.NFC.IsNormalString(text) {
		text = norm.NFC.String(text)
	}
	if text == "" {
		return out
	}
	if t.prefix && text[0] != ' ' {
		text = " " + text
	}
	for i := 0; i < len(text); {
		j := t.split(text, i)
		out = t.appendPiece(out, text[i:j])
		i = j
	}
	return out
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
