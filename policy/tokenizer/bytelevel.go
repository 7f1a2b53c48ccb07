package tokenizer

// byteToRune is GPT-2's byte-to-unicode table: printable bytes map to
// themselves, the others to code points from U+0100 up, so that every token
// of a byte-level vocabulary is a printable string.
var byteToRune = func() (t [256]rune) {
	n := rune(0)
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			t[b] = rune(b)
		} else {
			t[b] = 256 + n
			n++
		}
	}
	return t
}()

// runeToByte inverts byteToRune; runeToByteOK says which entries are set.
var runeToByte, runeToByteOK = func() (t [324]byte, ok [324]bool) {
	for b, r := range byteToRune {
		t[r] = byte(b)
		ok[r] = true
	}
	return t, ok
}()

// byteLevelString maps raw bytes to their byte-level token text.
func byteLevelString(b []byte) string {
	rs := make([]rune, len(b))
	for i, c := range b {
		rs[i] = byteToRune[c]
	}
	return string(rs)
}

// byteLevelBytes maps a byte-level token text back to raw bytes; ok is false
// when the text holds a character outside the 256-character alphabet.
func byteLevelBytes(s string) (b []byte, ok bool) {
	b = make([]byte, 0, len(s))
	for _, r := range s {
		if r < 0 || int(r) >= len(runeToByte) || !runeToByteOK[r] {
			return nil, false
		}
		b = append(b, runeToByte[r])
	}
	return b, true
}

// byteAlphabet lists the 256 byte-level characters in code point order,
// the order in which GPT-2 style vocabularies number them.
func byteAlphabet() []byte {
	out := make([]byte, 0, 256)
	for r := 0; r < len(runeToByte); r++ {
		if runeToByteOK[r] {
			out = append(out, runeToByte[r])
		}
	}
	return out
}
