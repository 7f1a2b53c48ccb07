package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// class is a character's class as the pre-tokenizer regexes see it.
type class uint8

const (
	clsOther   class = iota // [^\s\p{L}\p{N}], and any byte of invalid UTF-8
	clsLetter               // \p{L}
	clsNumber               // \p{N}
	clsSpace                // \s other than \r and \n
	clsNewline              // \r or \n
)

var asciiClass = func() (t [utf8.RuneSelf]class) {
	for c := 0; c < utf8.RuneSelf; c++ {
		t[c] = classOf(rune(c))
	}
	return t
}()

func classOf(r rune) class {
	switch {
	case r == '\r' || r == '\n':
		return clsNewline
	case unicode.IsLetter(r):
		return clsLetter
	case unicode.IsNumber(r):
		return clsNumber
	case unicode.IsSpace(r):
		return clsSpace
	}
	return clsOther
}

// classAt returns the class and byte width of the character at s[i]; an
// invalid UTF-8 byte is one character of class clsOther. At the end of s it
// returns width 0.
func classAt(s string, i int) (class, int) {
	if i >= len(s) {
		return clsOther, 0
	}
	if c := s[i]; c < utf8.RuneSelf {
		return asciiClass[c], 1
	}
	r, w := utf8.DecodeRuneInString(s[i:])
	if r == utf8.RuneError && w == 1 {
		return clsOther, 1
	}
	return classOf(r), w
}

// span returns the end of the run of characters of class want (or, with
// want2, of either class) starting at i.
func span(s string, i int, want, want2 class) int {
	for i < len(s) {
		c, w := classAt(s, i)
		if c != want && c != want2 {
			break
		}
		i += w
	}
	return i
}

// pretokenizer cuts a section of text into the pieces that BPE merges
// within: given the start i of a piece (i < len(s)), it returns its end.
type pretokenizer func(s string, i int) int

// split calls emit with the consecutive pieces that cover s.
func split(next pretokenizer, s string, emit func(piece string)) {
	for i := 0; i < len(s); {
		j := next(s, i)
		emit(s[i:j])
		i = j
	}
}

// qwen2Pattern is the Split regex of Qwen2 and Qwen3 tokenizer.json files.
const qwen2Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// contraction returns the length of an English contraction ('s, 't, 're,
// 've, 'm, 'll, 'd) at s[i], or 0. fold makes the letters case-insensitive
// (ASCII only).
func contraction(s string, i int, fold bool) int {
	if s[i] != '\'' || i+1 >= len(s) {
		return 0
	}
	low := func(c byte) byte {
		if fold && c >= 'A' && c <= 'Z' {
			return c + 'a' - 'A'
		}
		return c
	}
	switch low(s[i+1]) {
	case 's', 't', 'm', 'd':
		return 2
	case 'r', 'v':
		if i+2 < len(s) && low(s[i+2]) == 'e' {
			return 3
		}
	case 'l':
		if i+2 < len(s) && low(s[i+2]) == 'l' {
			return 3
		}
	}
	return 0
}

// whitespace handles the last alternatives shared by both patterns,
// \s+(?!\S)|\s+ , for the whitespace run starting at i. With newlines set it
// first tries Qwen2's \s*[\r\n]+ .
func whitespace(s string, i int, newlines bool) int {
	end, last, lastNL := i, i, -1
	for end < len(s) {
		c, w := classAt(s, end)
		if c != clsSpace && c != clsNewline {
			break
		}
		if c == clsNewline {
			lastNL = end
		}
		last = end
		end += w
	}
	switch {
	case newlines && lastNL >= 0: // \s*[\r\n]+ backtracks to the last newline
		return lastNL + 1
	case end == len(s): // \s+(?!\S) at the end of the text
		return end
	case last > i: // \s+(?!\S) leaves the last space for the next piece
		return last
	}
	return end // \s+ : a single whitespace character before a non-space
}

// llama3Pattern is Llama 3's Split regex: Qwen2's with up to three digits
// per piece.
const llama3Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// qwen2Next is the scanner for qwen2Pattern.
func qwen2Next(s string, i int) int { return splitNext(s, i, 1) }

// llama3Next is the scanner for llama3Pattern.
func llama3Next(s string, i int) int { return splitNext(s, i, 3) }

// splitNext scans one piece of qwen2Pattern, or of llama3Pattern with
// digits = 3 (the most number characters in one piece).
func splitNext(s string, i int, digits int) int {
	if n := contraction(s, i, true); n > 0 {
		return i + n
	}
	c0, w0 := classAt(s, i)
	switch c0 {
	case clsLetter:
		return span(s, i+w0, clsLetter, clsLetter)
	case clsNumber:
		j := i + w0
		for k := 1; k < digits; k++ {
			c, w := classAt(s, j)
			if c != clsNumber || w == 0 {
				break
			}
			j += w
		}
		return j
	case clsNewline:
		return whitespace(s, i, true)
	}
	// c0 is space or other: [^\r\n\p{L}\p{N}]?\p{L}+
	if c1, w1 := classAt(s, i+w0); c1 == clsLetter {
		return span(s, i+w0+w1, clsLetter, clsLetter)
	}
	// ' ?[^\s\p{L}\p{N}]+[\r\n]*'
	j := i
	if s[i] == ' ' {
		j = i + 1
	}
	if c, _ := classAt(s, j); c == clsOther && j < len(s) {
		j = span(s, j, clsOther, clsOther)
		for j < len(s) && (s[j] == '\r' || s[j] == '\n') {
			j++
		}
		return j
	}
	return whitespace(s, i, true)
}

// gpt2Pattern is the regex that the ByteLevel pre-tokenizer applies when its
// use_regex option is on (GPT-2 and its descendants).
const gpt2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

// gpt2Next is the scanner for gpt2Pattern.
func gpt2Next(s string, i int) int {
	if n := contraction(s, i, false); n > 0 {
		return i + n
	}
	j := i
	if s[i] == ' ' {
		j = i + 1
	}
	if c, w := classAt(s, j); w > 0 && c != clsSpace && c != clsNewline {
		return span(s, j+w, c, c)
	}
	return whitespace(s, i, false)
}

// wholeNext keeps the whole section as one piece (ByteLevel without regex).
func wholeNext(s string, i int) int { return len(s) }
