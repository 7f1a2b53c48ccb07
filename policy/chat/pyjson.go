package chat

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// This file reproduces the `tojson` filter of Hugging Face chat templates:
// Python's json.dumps(json.loads(raw), ensure_ascii=False) with the default
// separators (", " and ": "), keys in their original order (a repeated key
// keeps its first position and its last value, as a Python dict does),
// integers as written, floats in Python's repr and non-ASCII text unescaped.

// pyValue is a parsed JSON value that keeps object key order.
type pyValue struct {
	kind  byte // 's' string, 'n' number, 'b' bool/null literal, 'a' array, 'o' object
	text  string
	items []pyValue // array items, or object values in key order
	keys  []string  // object keys
}

// appendPyJSON appends raw (one JSON value) to b as Python's json.dumps
// would print it.
func appendPyJSON(b *strings.Builder, raw []byte) error {
	v, err := parsePyJSON(raw)
	if err != nil {
		return err
	}
	writePyValue(b, v)
	return nil
}

// parsePyJSON parses exactly one JSON value.
func parsePyJSON(raw []byte) (pyValue, error) {
	if !json.Valid(raw) {
		return pyValue{}, fmt.Errorf("%w: %.40q", ErrArguments, raw)
	}
	p := pyParser{s: string(raw)}
	return p.value(), nil
}

// pyParser reads JSON already checked by json.Valid, so it need not report
// syntax errors; strings without escapes are shared with the input.
type pyParser struct {
	s string
	i int
}

func (p *pyParser) skip() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *pyParser) value() pyValue {
	p.skip()
	switch c := p.s[p.i]; {
	case c == '"':
		return pyValue{kind: 's', text: p.str()}
	case c == '[':
		p.i++
		v := pyValue{kind: 'a'}
		p.skip()
		if p.s[p.i] == ']' {
			p.i++
			return v
		}
		for {
			v.items = append(v.items, p.value())
			p.skip()
			c := p.s[p.i]
			p.i++
			if c == ']' {
				return v
			}
		}
	case c == '{':
		p.i++
		v := pyValue{kind: 'o'}
		p.skip()
		if p.s[p.i] == '}' {
			p.i++
			return v
		}
		for {
			p.skip()
			key := p.str()
			p.skip()
			p.i++ // ':'
			val := p.value()
			if k := indexOf(v.keys, key); k >= 0 {
				v.items[k] = val // a repeated key keeps its place, takes the last value
			} else {
				v.keys = append(v.keys, key)
				v.items = append(v.items, val)
			}
			p.skip()
			c := p.s[p.i]
			p.i++
			if c == '}' {
				return v
			}
		}
	case c == 't':
		p.i += 4
		return pyValue{kind: 'b', text: "true"}
	case c == 'f':
		p.i += 5
		return pyValue{kind: 'b', text: "false"}
	case c == 'n':
		p.i += 4
		return pyValue{kind: 'b', text: "null"}
	default:
		j := p.i
		for j < len(p.s) && strings.IndexByte("+-0123456789.eE", p.s[j]) >= 0 {
			j++
		}
		lit := p.s[p.i:j]
		p.i = j
		return pyValue{kind: 'n', text: pyNumber(lit)}
	}
}

// indexOf returns the position of key in keys, or -1. Objects in tool
// schemas and arguments are small, so a scan beats a map.
func indexOf(keys []string, key string) int {
	for i, k := range keys {
		if k == key {
			return i
		}
	}
	return -1
}

// str reads a string at p.i, decoding escapes as encoding/json does (an
// unpaired surrogate or invalid UTF-8 becomes U+FFFD).
func (p *pyParser) str() string {
	p.i++ // opening quote
	start := p.i
	for p.i < len(p.s) && p.s[p.i] != '"' && p.s[p.i] != '\\' {
		p.i++
	}
	if p.s[p.i] == '"' {
		out := p.s[start:p.i]
		p.i++
		if !utf8.ValidString(out) {
			out = strings.ToValidUTF8(out, "\uFFFD")
		}
		return out
	}
	var b strings.Builder
	b.WriteString(p.s[start:p.i])
	for {
		c := p.s[p.i]
		switch c {
		case '"':
			p.i++
			out := b.String()
			if !utf8.ValidString(out) {
				out = strings.ToValidUTF8(out, "\uFFFD")
			}
			return out
		case '\\':
			e := p.s[p.i+1]
			p.i += 2
			switch e {
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'u':
				r := hex4(p.s[p.i:])
				p.i += 4
				if utf16.IsSurrogate(r) {
					r2 := rune(-1)
					if p.i+6 <= len(p.s) && p.s[p.i] == '\\' && p.s[p.i+1] == 'u' {
						r2 = hex4(p.s[p.i+2:])
					}
					if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
						p.i += 6
						r = d
					} else {
						r = utf8.RuneError
					}
				}
				b.WriteRune(r)
			default: // '"', '\\', '/'
				b.WriteByte(e)
			}
		default:
			b.WriteByte(c)
			p.i++
		}
	}
}

// hex4 decodes the four hex digits at the start of s.
func hex4(s string) rune {
	var r rune
	for _, c := range []byte(s[:4]) {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		default:
			r |= rune(c - 'A' + 10)
		}
	}
	return r
}

func writePyValue(b *strings.Builder, v pyValue) { writePyWith(b, v, writeJSONLeaf) }

// writeJSONLeaf writes a string, number or boolean as json.dumps does
// (numbers and booleans as parsed).
func writeJSONLeaf(b *strings.Builder, v pyValue) {
	if v.kind == 's' {
		writePyString(b, v.text)
		return
	}
	b.WriteString(v.text)
}

// writePyWith writes v with the containers laid out as both json.dumps and
// Python's repr() lay them out ("[a, b]", "{k: v}"; keys are strings) and
// every leaf, keys included, by leaf: the two differ only in their leaves.
func writePyWith(b *strings.Builder, v pyValue, leaf func(*strings.Builder, pyValue)) {
	switch v.kind {
	case 'a':
		b.WriteByte('[')
		for i, item := range v.items {
			if i > 0 {
				b.WriteString(", ")
			}
			writePyWith(b, item, leaf)
		}
		b.WriteByte(']')
	case 'o':
		b.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				b.WriteString(", ")
			}
			leaf(b, pyValue{kind: 's', text: k})
			b.WriteString(": ")
			writePyWith(b, v.items[i], leaf)
		}
		b.WriteByte('}')
	default:
		leaf(b, v)
	}
}

// writePyString writes s as a JSON string the way json.dumps with
// ensure_ascii=False does: only quote, backslash and control characters
// below 0x20 are escaped.
func writePyString(b *strings.Builder, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b.WriteString(s[start:i])
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			b.WriteString(`\u00`)
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		}
		start = i + 1
	}
	b.WriteString(s[start:])
	b.WriteByte('"')
}

// pyNumber formats a JSON number literal as Python prints the value
// json.loads makes of it: integers exactly (Python ints are unbounded),
// anything with a fraction or exponent as a float in repr form.
func pyNumber(lit string) string {
	if !strings.ContainsAny(lit, ".eE") {
		if strings.Trim(lit, "-0") == "" {
			return "0"
		}
		return lit
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil && !math.IsInf(f, 0) {
		return lit // unreachable for literals the decoder accepted
	}
	return pyFloat(f)
}

// pyFloat is Python's repr of a float: the shortest digits that round-trip,
// in positional notation when the decimal exponent is in [-4, 16), else in
// scientific notation with a two-digit-minimum exponent.
func pyFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case math.IsNaN(f):
		return "NaN"
	case f == 0:
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	s := strconv.FormatFloat(f, 'e', -1, 64) // [-]d[.ddd]e±XX
	epos := strings.IndexByte(s, 'e')
	exp, _ := strconv.Atoi(s[epos+1:])
	if exp < -4 || exp >= 16 {
		return s
	}
	sign := ""
	mant := s[:epos]
	if mant[0] == '-' {
		sign, mant = "-", mant[1:]
	}
	digits := strings.Replace(mant, ".", "", 1)
	if exp < 0 {
		return sign + "0." + strings.Repeat("0", -exp-1) + digits
	}
	if len(digits) <= exp+1 {
		return sign + digits + strings.Repeat("0", exp+1-len(digits)) + ".0"
	}
	return sign + digits[:exp+1] + "." + digits[exp+1:]
}
