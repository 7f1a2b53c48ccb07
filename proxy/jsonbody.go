package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"unicode/utf16"
	"unicode/utf8"
)

// unmarshalAt decodes b into v for the request field at path (empty for
// the whole body). Malformed JSON and a field of the wrong type are 400s;
// the latter names the field (path plus the field's own path inside b).
// Unknown fields are ignored.
func unmarshalAt(b []byte, v any, path string) *apiError {
	if err := json.Unmarshal(b, v); err != nil {
		return jsonError(err, path)
	}
	return nil
}

// jsonError turns an error of json.Unmarshal, for the request field at
// path, into a 400.
func jsonError(err error, path string) *apiError {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := joinPath(path, te.Field)
		if field == "" {
			return badRequest("", "proxy: the request body must be a JSON object, not %s", te.Value)
		}
		return badRequest(field, "proxy: %s must be %s, not %s", field, jsonTypeName(te.Type), te.Value)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return badRequest("", "proxy: malformed JSON at byte %d: %v", se.Offset, err)
	}
	where := path
	if where == "" {
		where = "request body"
	}
	return badRequest(path, "proxy: %s: %v", where, err)
}

// joinPath joins a request path and a field path inside it.
func joinPath(path, field string) string {
	switch {
	case path == "":
		return field
	case field == "":
		return path
	}
	return path + "." + field
}

// jsonTypeName names a Go type as the JSON type it decodes from.
func jsonTypeName(t reflect.Type) string {
	if t == nil {
		return "a valid value"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Pointer:
		return jsonTypeName(t.Elem())
	}
	return "a valid value"
}

// jsonKind is the JSON type of a raw value: 'n' (null or absent), 's', 'a',
// 'o', 'b' (boolean) or '0' (number).
func jsonKind(raw json.RawMessage) byte {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return 'n'
	}
	switch raw[0] {
	case 'n':
		return 'n'
	case '"':
		return 's'
	case '[':
		return 'a'
	case '{':
		return 'o'
	case 't', 'f':
		return 'b'
	}
	return '0'
}

// kindName names a jsonKind for messages.
func kindName(k byte) string {
	return map[byte]string{'n': "null", 's': "a string", 'a': "an array", 'o': "an object", 'b': "a boolean", '0': "a number"}[k]
}

// jsonStringValue decodes a JSON string that the request's decode has
// already checked: unquoteJSON on the common case (no surrogate escapes,
// valid UTF-8), encoding/json otherwise.
func jsonStringValue(raw json.RawMessage, path string) (string, *apiError) {
	raw = bytes.TrimSpace(raw)
	if s, ok := unquoteJSON(raw); ok {
		return s, nil
	}
	var s string
	return s, unmarshalAt(raw, &s, path)
}

// unquoteJSON decodes a JSON string literal without encoding/json's
// validating scan and reflection: message contents are most of a request's
// bytes and all of them are strings. It reports false for anything it
// does not decode exactly as encoding/json would (invalid UTF-8, which
// encoding/json replaces; surrogate escapes; malformed literals): the
// caller falls back to encoding/json.
func unquoteJSON(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	s := raw[1 : len(raw)-1]
	if bytes.IndexByte(s, '\\') < 0 {
		for _, c := range s {
			if c < 0x20 || c == '"' {
				return "", false
			}
		}
		if !utf8.Valid(s) {
			return "", false
		}
		return string(s), true
	}
	if !utf8.Valid(s) {
		return "", false
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' {
			if c < 0x20 || c == '"' {
				return "", false
			}
			j := i + 1
			for j < len(s) && s[j] != '\\' && s[j] != '"' && s[j] >= 0x20 {
				j++
			}
			b = append(b, s[i:j]...)
			i = j
			continue
		}
		if i+1 >= len(s) {
			return "", false
		}
		switch e := s[i+1]; e {
		case '"', '\\', '/':
			b = append(b, e)
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			if i+6 > len(s) {
				return "", false
			}
			var r rune
			for _, h := range s[i+2 : i+6] {
				switch {
				case '0' <= h && h <= '9':
					r = r<<4 | rune(h-'0')
				case 'a' <= h && h <= 'f':
					r = r<<4 | rune(h-'a'+10)
				case 'A' <= h && h <= 'F':
					r = r<<4 | rune(h-'A'+10)
				default:
					return "", false
				}
			}
			if utf16.IsSurrogate(r) {
				return "", false
			}
			b = utf8.AppendRune(b, r)
			i += 6
			continue
		default:
			return "", false
		}
		i += 2
	}
	return string(b), true
}

// indexPath is "path[i]".
func indexPath(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }
