package proxy

import (
	"bytes"
	"strconv"
)

// jsonScan reads a JSON document for the fast request decoders (scanChat):
// it walks the bytes once, building no generic values, and returns the raw
// bytes of the values its caller wants. It checks syntax at least as
// strictly as encoding/json and gives up (a false result) on anything it is
// unsure of; the caller then decodes with encoding/json, which gives the
// same result or the error to answer with.
type jsonScan struct {
	b     []byte
	i     int
	depth int
}

// maxScanDepth bounds nesting; deeper documents go to encoding/json (whose
// own limit is 10,000).
const maxScanDepth = 256

// ws skips whitespace.
func (s *jsonScan) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek returns the byte at s.i, 0 at the end.
func (s *jsonScan) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// value skips the value at s.i, checking its syntax, and returns its bytes.
func (s *jsonScan) value() ([]byte, bool) {
	start := s.i
	ok := s.skip()
	return s.b[start:s.i], ok
}

// skip skips the value at s.i, checking its syntax.
func (s *jsonScan) skip() bool {
	switch c := s.peek(); {
	case c == '"':
		return s.str()
	case c == '{':
		return s.object(func([]byte) bool { return s.skip() })
	case c == '[':
		return s.array(func() bool { return s.skip() })
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || ('0' <= c && c <= '9'):
		return s.number()
	}
	return false
}

// literal skips lit.
func (s *jsonScan) literal(lit string) bool {
	if !bytes.HasPrefix(s.b[s.i:], []byte(lit)) {
		return false
	}
	s.i += len(lit)
	return true
}

// str skips a string literal: no control characters, known escapes only.
// Bytes that are not UTF-8 pass (encoding/json accepts and replaces them;
// the decoders leave such strings to it).
func (s *jsonScan) str() bool {
	s.i++ // the opening quote
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return true
		case c == '\\':
			if s.i+1 >= len(s.b) {
				return false
			}
			switch s.b[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				if s.i+6 > len(s.b) {
					return false
				}
				for _, h := range s.b[s.i+2 : s.i+6] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return false
					}
				}
				s.i += 6
			default:
				return false
			}
		case c < 0x20:
			return false
		default:
			s.i++
		}
	}
	return false
}

// number skips a number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *jsonScan) number() bool {
	digits := func() bool {
		start := s.i
		for s.i < len(s.b) && '0' <= s.b[s.i] && s.b[s.i] <= '9' {
			s.i++
		}
		return s.i > start
	}
	if s.peek() == '-' {
		s.i++
	}
	switch c := s.peek(); {
	case c == '0':
		s.i++
	case '1' <= c && c <= '9':
		digits()
	default:
		return false
	}
	if s.peek() == '.' {
		s.i++
		if !digits() {
			return false
		}
	}
	if c := s.peek(); c == 'e' || c == 'E' {
		s.i++
		if c := s.peek(); c == '+' || c == '-' {
			s.i++
		}
		if !digits() {
			return false
		}
	}
	return true
}

// object walks the object at s.i, calling member for each member with s.i
// at its value (whitespace skipped) and key its raw bytes between the
// quotes; member must consume the value.
func (s *jsonScan) object(member func(key []byte) bool) bool {
	if s.depth++; s.depth > maxScanDepth {
		return false
	}
	defer func() { s.depth-- }()
	s.i++ // '{'
	s.ws()
	if s.peek() == '}' {
		s.i++
		return true
	}
	for {
		if s.peek() != '"' {
			return false
		}
		k := s.i + 1
		if !s.str() {
			return false
		}
		key := s.b[k : s.i-1]
		s.ws()
		if s.peek() != ':' {
			return false
		}
		s.i++
		s.ws()
		if !member(key) {
			return false
		}
		s.ws()
		switch s.peek() {
		case ',':
			s.i++
			s.ws()
		case '}':
			s.i++
			return true
		default:
			return false
		}
	}
}

// array walks the array at s.i, calling elem with s.i at each element
// (whitespace skipped); elem must consume the element.
func (s *jsonScan) array(elem func() bool) bool {
	s.i++ // '['
	s.ws()
	if s.peek() == ']' {
		s.i++
		return true
	}
	return s.arrayRest(elem)
}

// arrayRest walks an array from s.i, at an element, to its end.
func (s *jsonScan) arrayRest(elem func() bool) bool {
	if s.depth++; s.depth > maxScanDepth {
		return false
	}
	defer func() { s.depth-- }()
	for {
		if !elem() {
			return false
		}
		if !s.arrayNext() {
			return s.peek() == ']' && s.close()
		}
	}
}

// arrayNext moves past the comma after an array element to the next
// element; it reports false (s.i then at what follows the element) when
// there is no comma.
func (s *jsonScan) arrayNext() bool {
	s.ws()
	if s.peek() != ',' {
		return false
	}
	s.i++
	s.ws()
	return true
}

// close moves past a closing bracket.
func (s *jsonScan) close() bool { s.i++; return true }

// plainKey reports whether key is ASCII without escapes: the keys the
// decoders match byte for byte. Any other key might name a known field
// (encoding/json unescapes keys and matches them ignoring case).
func plainKey(key []byte) bool {
	for _, c := range key {
		if c == '\\' || c >= 0x80 {
			return false
		}
	}
	return true
}

// fields reads the object at s.i whose known keys are names, calling
// read(k) for the value of names[k]; other keys are skipped. It reports
// false, so that the caller falls back to encoding/json, for what the
// scanner does not decode the same way: a value that is not an object, a
// known key seen twice, or a key that encoding/json would match to a known
// one ignoring case (or after unescaping). At most 64 names.
func (s *jsonScan) fields(names []string, read func(k int) bool) bool {
	if s.peek() != '{' {
		return false
	}
	var seen uint64
	return s.object(func(key []byte) bool {
		for k, n := range names {
			if string(key) == n {
				if seen&(1<<k) != 0 {
					return false
				}
				seen |= 1 << k
				return read(k)
			}
		}
		if !plainKey(key) || foldsTo(key, names...) {
			return false
		}
		return s.skip()
	})
}

// foldsTo reports whether key matches one of names ignoring case, as
// encoding/json matches a struct field when no name is equal.
func foldsTo(key []byte, names ...string) bool {
	for _, n := range names {
		if bytes.EqualFold(key, []byte(n)) {
			return true
		}
	}
	return false
}

// Typed values. Each reads the value at s.i into the Go type the request
// structs use, as encoding/json would, and reports false for a value of
// another type (an error there). JSON null reads as the zero value, which
// is what encoding/json leaves when a field appears once.

// stringValue reads a string.
func (s *jsonScan) stringValue() (string, bool) {
	switch s.peek() {
	case 'n':
		return "", s.literal("null")
	case '"':
		raw, ok := s.value()
		if !ok {
			return "", false
		}
		v, e := jsonStringValue(raw, "")
		return v, e == nil
	}
	return "", false
}

// stringPtr reads a *string.
func (s *jsonScan) stringPtr() (*string, bool) {
	if s.peek() == 'n' {
		return nil, s.literal("null")
	}
	if s.peek() != '"' {
		return nil, false
	}
	v, ok := s.stringValue()
	return &v, ok
}

// boolPtr reads a *bool.
func (s *jsonScan) boolPtr() (*bool, bool) {
	var v bool
	switch s.peek() {
	case 'n':
		return nil, s.literal("null")
	case 't':
		v = true
		if !s.literal("true") {
			return nil, false
		}
	case 'f':
		if !s.literal("false") {
			return nil, false
		}
	default:
		return nil, false
	}
	return &v, true
}

// numberText reads a number's text; null reads as "".
func (s *jsonScan) numberText() (string, bool) {
	if s.peek() == 'n' {
		return "", s.literal("null")
	}
	raw, ok := s.value()
	if !ok || !(raw[0] == '-' || '0' <= raw[0] && raw[0] <= '9') {
		return "", false
	}
	return string(raw), true
}

// intPtr reads a *int (encoding/json refuses fractions and exponents).
func (s *jsonScan) intPtr() (*int, bool) {
	text, ok := s.numberText()
	if !ok || text == "" {
		return nil, ok
	}
	n, err := strconv.ParseInt(text, 10, strconv.IntSize)
	if err != nil {
		return nil, false
	}
	v := int(n)
	return &v, true
}

// int64Ptr reads a *int64.
func (s *jsonScan) int64Ptr() (*int64, bool) {
	text, ok := s.numberText()
	if !ok || text == "" {
		return nil, ok
	}
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return nil, false
	}
	return &n, true
}

// floatPtr reads a *float64 (out of range is an error).
func (s *jsonScan) floatPtr() (*float64, bool) {
	text, ok := s.numberText()
	if !ok || text == "" {
		return nil, ok
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil {
		return nil, false
	}
	return &f, true
}
