package tokenizer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// The vocabulary and merges of a tokenizer.json are most of its bytes
// (11 MB for Qwen3), and encoding/json's reflection makes reading them take
// most of a second. The scanner below reads their usual shapes directly;
// whenever it meets anything unusual it gives up and the caller falls back
// to encoding/json, which also words the errors.

// scanner reads JSON values from the front of b.
type scanner struct{ b []byte }

func (s *scanner) ws() {
	for len(s.b) > 0 && (s.b[0] == ' ' || s.b[0] == '\n' || s.b[0] == '\r' || s.b[0] == '\t') {
		s.b = s.b[1:]
	}
}

// byte consumes c (after whitespace) and reports whether it was there.
func (s *scanner) byte(c byte) bool {
	s.ws()
	if len(s.b) > 0 && s.b[0] == c {
		s.b = s.b[1:]
		return true
	}
	return false
}

// str reads a JSON string.
func (s *scanner) str() (string, bool) {
	s.ws()
	if len(s.b) == 0 || s.b[0] != '"' {
		return "", false
	}
	escaped := false
	for i := 1; i < len(s.b); i++ {
		switch c := s.b[i]; {
		case c == '\\':
			escaped = true
			i++
		case c < 0x20:
			return "", false
		case c == '"':
			raw := s.b[:i+1]
			s.b = s.b[i+1:]
			if !escaped {
				return string(raw[1 : len(raw)-1]), true
			}
			var out string
			if err := json.Unmarshal(raw, &out); err != nil {
				return "", false
			}
			return out, true
		}
	}
	return "", false
}

// int32 reads a non-negative integer.
func (s *scanner) int32() (int32, bool) {
	s.ws()
	i := 0
	for i < len(s.b) && s.b[i] >= '0' && s.b[i] <= '9' {
		i++
	}
	if i == 0 || i > 10 {
		return 0, false
	}
	n, err := strconv.ParseInt(string(s.b[:i]), 10, 32)
	if err != nil {
		return 0, false
	}
	s.b = s.b[i:]
	return int32(n), true
}

func (s *scanner) end() bool {
	s.ws()
	return len(s.b) == 0
}

// scanVocab reads {"token": id, ...}.
func scanVocab(raw []byte) (map[string]int32, bool) {
	s := &scanner{raw}
	if !s.byte('{') {
		return nil, false
	}
	vocab := make(map[string]int32, bytes.Count(raw, []byte{':'}))
	if s.byte('}') {
		return vocab, s.end()
	}
	for {
		k, ok := s.str()
		if !ok || !s.byte(':') {
			return nil, false
		}
		v, ok := s.int32()
		if !ok {
			return nil, false
		}
		vocab[k] = v
		if s.byte('}') {
			return vocab, s.end()
		}
		if !s.byte(',') {
			return nil, false
		}
	}
}

// scanMerges reads ["a b", ...] or [["a", "b"], ...]; pairs holds the
// strings as they are (split later), or both halves.
func scanMerges(raw []byte) (strs []string, pairs [][2]string, ok bool) {
	s := &scanner{raw}
	if !s.byte('[') {
		return nil, nil, false
	}
	if s.byte(']') {
		return nil, [][2]string{}, s.end()
	}
	s.ws()
	nested := len(s.b) > 0 && s.b[0] == '['
	if nested {
		pairs = make([][2]string, 0, bytes.Count(raw, []byte{']'}))
	} else {
		strs = make([]string, 0, bytes.Count(raw, []byte{','})+1)
	}
	for {
		if nested {
			if !s.byte('[') {
				return nil, nil, false
			}
			a, ok1 := s.str()
			ok2 := s.byte(',')
			b, ok3 := s.str()
			if !ok1 || !ok2 || !ok3 || !s.byte(']') {
				return nil, nil, false
			}
			pairs = append(pairs, [2]string{a, b})
		} else {
			v, ok := s.str()
			if !ok {
				return nil, nil, false
			}
			strs = append(strs, v)
		}
		if s.byte(']') {
			return strs, pairs, s.end()
		}
		if !s.byte(',') {
			return nil, nil, false
		}
	}
}

// parseVocab reads model.vocab.
func parseVocab(raw json.RawMessage) (map[string]int32, error) {
	if v, ok := scanVocab(raw); ok {
		return v, nil
	}
	var v map[string]int32
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("%w: model.vocab: %v", ErrFormat, err)
	}
	return v, nil
}
