package tokenizer

import (
	"fmt"
	"unicode/utf8"
)

// Decode returns the bytes that ids stand for, special tokens included. The
// result need not be valid UTF-8: a prefix of an encoding may end inside a
// multi-byte character.
func (t *Tokenizer) Decode(ids []int32) ([]byte, error) {
	return t.AppendDecode(nil, ids)
}

// AppendDecode appends the bytes of ids to dst.
func (t *Tokenizer) AppendDecode(dst []byte, ids []int32) ([]byte, error) {
	for i, id := range ids {
		b, err := t.TokenBytes(id)
		if err != nil {
			return dst, fmt.Errorf("ids[%d]: %w", i, err)
		}
		dst = append(dst, b...)
	}
	return dst, nil
}

// TokenBytes returns the bytes of one token; the slice must not be changed.
func (t *Tokenizer) TokenBytes(id int32) ([]byte, error) {
	if id < 0 || int(id) >= len(t.pieces) || t.pieces[id] == nil {
		return nil, fmt.Errorf("%w: %d (vocabulary has %d ids)", ErrUnknownID, id, len(t.pieces))
	}
	return t.pieces[id], nil
}

// StreamDecoder turns a stream of token ids into text a piece at a time,
// holding back the bytes of a character that later tokens complete, so that
// every piece it returns ends on a character boundary. Bytes that can never
// become valid UTF-8 are passed through as they are.
type StreamDecoder struct {
	t       *Tokenizer
	pending []byte
}

// NewStreamDecoder returns a decoder for t.
func (t *Tokenizer) NewStreamDecoder() *StreamDecoder { return &StreamDecoder{t: t} }

// Add decodes one more id and returns the text that is now complete (often
// empty while a character is incomplete).
func (d *StreamDecoder) Add(id int32) (string, error) {
	b, err := d.t.TokenBytes(id)
	if err != nil {
		return "", err
	}
	d.pending = append(d.pending, b...)
	cut := completePrefix(d.pending)
	out := string(d.pending[:cut])
	d.pending = append(d.pending[:0], d.pending[cut:]...)
	return out, nil
}

// Flush returns the bytes held back, complete or not, and resets the
// decoder; call it at the end of the stream.
func (d *StreamDecoder) Flush() string {
	out := string(d.pending)
	d.pending = d.pending[:0]
	return out
}

// completePrefix returns the length of b without a trailing incomplete, but
// so far valid, UTF-8 sequence.
func completePrefix(b []byte) int {
	for k := 1; k <= utf8.UTFMax-1 && k <= len(b); k++ {
		i := len(b) - k
		c := b[i]
		if c < 0xC0 { // ASCII or a continuation byte: keep looking left
			if c < utf8.RuneSelf {
				return len(b)
			}
			continue
		}
		if !utf8.FullRune(b[i:]) {
			return i
		}
		return len(b)
	}
	return len(b)
}
