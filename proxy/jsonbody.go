package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
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
// already checked; one without escapes is its bytes between the quotes.
func jsonStringValue(raw json.RawMessage, path string) (string, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"' && bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return string(raw[1 : len(raw)-1]), nil
	}
	var s string
	return s, unmarshalAt(raw, &s, path)
}

// indexPath is "path[i]".
func indexPath(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }
