package chat

import (
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"
)

// parsePyLiteral reads a Python literal, the subset ast.literal_eval accepts
// that has a JSON value: strings in single or double quotes (no prefixes,
// no triple quotes), ints, floats, True, False, None, lists, tuples (as
// lists) and dicts with string keys. Qwen3-Coder's template shows object and
// array arguments as Python's str() ({'a': True}), so the model writes them
// back that way; vLLM's qwen3_coder parser falls back to literal_eval too.
func parsePyLiteral(s string) (pyValue, bool) {
	p := pyLit{s: s}
	v, ok := p.value(0)
	p.skip()
	return v, ok && p.i == len(p.s)
}

type pyLit struct {
	s string
	i int
}

func (p *pyLit) skip() {
	for p.i < len(p.s) && strings.IndexByte(" \t\r\n", p.s[p.i]) >= 0 {
		p.i++
	}
}

// maxLiteralDepth bounds nesting, so hostile text cannot exhaust the stack.
const maxLiteralDepth = 100

func (p *pyLit) value(depth int) (pyValue, bool) {
	p.skip()
	if p.i >= len(p.s) || depth > maxLiteralDepth {
		return pyValue{}, false
	}
	switch c := p.s[p.i]; {
	case c == '\'' || c == '"':
		s, ok := p.str()
		return pyValue{kind: 's', text: s}, ok
	case c == '[' || c == '(':
		end := byte(']')
		if c == '(' {
			end = ')'
		}
		p.i++
		v := pyValue{kind: 'a'}
		for {
			p.skip()
			if p.i < len(p.s) && p.s[p.i] == end {
				p.i++
				return v, true
			}
			item, ok := p.value(depth + 1)
			if !ok {
				return pyValue{}, false
			}
			v.items = append(v.items, item)
			if !p.sep(end) {
				return pyValue{}, false
			}
		}
	case c == '{':
		p.i++
		v := pyValue{kind: 'o'}
		for {
			p.skip()
			if p.i < len(p.s) && p.s[p.i] == '}' {
				p.i++
				return v, true
			}
			key, ok := p.value(depth + 1)
			if !ok || key.kind != 's' {
				return pyValue{}, false
			}
			p.skip()
			if p.i >= len(p.s) || p.s[p.i] != ':' {
				return pyValue{}, false
			}
			p.i++
			val, ok := p.value(depth + 1)
			if !ok {
				return pyValue{}, false
			}
			if k := indexOf(v.keys, key.text); k >= 0 {
				v.items[k] = val
			} else {
				v.keys = append(v.keys, key.text)
				v.items = append(v.items, val)
			}
			if !p.sep('}') {
				return pyValue{}, false
			}
		}
	default:
		j := p.i
		for j < len(p.s) && (isAlnum(p.s[j]) || strings.IndexByte("+-._", p.s[j]) >= 0) {
			j++
		}
		word := p.s[p.i:j]
		p.i = j
		switch word {
		case "True":
			return pyValue{kind: 'b', text: "true"}, true
		case "False":
			return pyValue{kind: 'b', text: "false"}, true
		case "None":
			return pyValue{kind: 'b', text: "null"}, true
		}
		return pyNumberLiteral(word)
	}
}

// sep consumes a comma, or sees the closing byte (left for the caller).
func (p *pyLit) sep(end byte) bool {
	p.skip()
	if p.i >= len(p.s) {
		return false
	}
	if p.s[p.i] == ',' {
		p.i++
		return true
	}
	return p.s[p.i] == end
}

// str reads a quoted string with Python's escapes.
func (p *pyLit) str() (string, bool) {
	q := p.s[p.i]
	p.i++
	if strings.HasPrefix(p.s[p.i:], string([]byte{q, q})) {
		return "", false // a triple-quoted string
	}
	var b strings.Builder
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == q:
			p.i++
			return b.String(), true
		case c == '\n':
			return "", false
		case c != '\\':
			b.WriteByte(c)
			p.i++
			continue
		}
		if p.i+1 >= len(p.s) {
			return "", false
		}
		e := p.s[p.i+1]
		p.i += 2
		switch e {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case '0':
			b.WriteByte(0)
		case 'a':
			b.WriteByte(7)
		case 'b':
			b.WriteByte(8)
		case 'f':
			b.WriteByte(12)
		case 'v':
			b.WriteByte(11)
		case '\\', '\'', '"':
			b.WriteByte(e)
		case '\n':
		case 'x', 'u', 'U':
			n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			if p.i+n > len(p.s) {
				return "", false
			}
			r, err := strconv.ParseUint(p.s[p.i:p.i+n], 16, 32)
			if err != nil || r > utf8.MaxRune {
				return "", false
			}
			b.WriteRune(rune(r))
			p.i += n
		default:
			b.WriteByte('\\') // Python keeps unknown escapes as written
			b.WriteByte(e)
		}
	}
	return "", false
}

// pyNumberLiteral reads a Python int or float literal (no hex, octal or
// binary forms) as the JSON number json.dumps would print.
func pyNumberLiteral(word string) (pyValue, bool) {
	w := strings.ReplaceAll(word, "_", "")
	if w == "" || strings.Contains(word, "__") || strings.HasSuffix(word, "_") {
		return pyValue{}, false
	}
	if n, ok := new(big.Int).SetString(w, 10); ok && !strings.ContainsAny(w, "xXoObB") {
		return pyValue{kind: 'n', text: n.String()}, true
	}
	f, err := strconv.ParseFloat(w, 64)
	if err != nil || strings.ContainsAny(w, "xXpP") || strings.Contains(strings.ToLower(w), "n") {
		return pyValue{}, false
	}
	return pyValue{kind: 'n', text: pyFloat(f)}, true
}

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
