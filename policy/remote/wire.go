package remote

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// number is a JSON number as an engine sends it: a plain number; null
// (pydantic and orjson write NaN and ±Inf as null); or, from a server that
// uses Python's json module, the bare literals NaN, Infinity and -Infinity
// (sanitize turns those into strings first, since encoding/json rejects them).
type number struct {
	v  float64
	ok bool // false: the server sent null
}

func (n *number) UnmarshalJSON(b []byte) error {
	switch s := string(b); s {
	case "null":
		*n = number{}
		return nil
	case `"NaN"`:
		*n = number{math.NaN(), true}
		return nil
	case `"Infinity"`:
		*n = number{math.Inf(1), true}
		return nil
	case `"-Infinity"`:
		*n = number{math.Inf(-1), true}
		return nil
	default:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return fmt.Errorf("not a number: %.40s", s)
		}
		*n = number{f, true}
		return nil
	}
}

// sanitize quotes the bare NaN, Infinity and -Infinity literals that Python's
// json.dumps writes (allow_nan=True), outside strings, so that encoding/json
// can read the document and validation can name the bad value. It returns b
// itself when there is nothing to quote.
func sanitize(b []byte) []byte {
	if !bytes.Contains(b, []byte("NaN")) && !bytes.Contains(b, []byte("Infinity")) {
		return b
	}
	var out []byte
	last := 0
	inString, escaped := false, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		var lit string
		switch {
		case c == '"':
			inString = true
		case c == 'N' && bytes.HasPrefix(b[i:], []byte("NaN")):
			lit = "NaN"
		case c == 'I' && bytes.HasPrefix(b[i:], []byte("Infinity")):
			lit = "Infinity"
		case c == '-' && bytes.HasPrefix(b[i:], []byte("-Infinity")):
			lit = "-Infinity"
		}
		if lit == "" {
			continue
		}
		out = append(out, b[last:i]...)
		out = append(out, '"')
		out = append(out, lit...)
		out = append(out, '"')
		i += len(lit) - 1
		last = i + 1
	}
	if out == nil {
		return b
	}
	return append(out, b[last:]...)
}

// decodeJSON reads one JSON document into v after sanitize.
func decodeJSON(b []byte, v any) error {
	return json.Unmarshal(sanitize(b), v)
}

// wireError is the error body of either engine, in the shapes they use:
// vLLM's {"error": {"message", "type", "param", "code"}} (older releases
// put those fields at the top level with "object": "error"), SGLang's
// {"error": {"message"}} or {"object": "error", "message", ...}, and
// FastAPI's {"detail": ...} for requests that fail validation.
type wireError struct {
	Object  string          `json:"object"`
	Message string          `json:"message"`
	Code    json.RawMessage `json:"code"`
	Error   json.RawMessage `json:"error"`
	Detail  json.RawMessage `json:"detail"`
}

// text is the server's message, or "" when the body carries none.
func (w *wireError) text() string {
	if len(w.Error) > 0 && string(w.Error) != "null" {
		var inner wireError
		if json.Unmarshal(w.Error, &inner) == nil {
			if t := inner.text(); t != "" {
				return t
			}
		}
		var s string
		if json.Unmarshal(w.Error, &s) == nil && s != "" {
			return s
		}
	}
	if w.Message != "" {
		return w.Message
	}
	if len(w.Detail) > 0 && string(w.Detail) != "null" {
		var s string
		if json.Unmarshal(w.Detail, &s) == nil {
			return s
		}
		return string(w.Detail)
	}
	return ""
}

// present reports whether a decoded document was an error object.
func (w *wireError) present() bool {
	return w.Object == "error" || (len(w.Error) > 0 && string(w.Error) != "null")
}

// status is the HTTP-like code an error event carries, or 0.
func (w *wireError) status() int {
	for _, raw := range []json.RawMessage{w.Code, w.innerCode()} {
		var n int
		if len(raw) > 0 && json.Unmarshal(raw, &n) == nil {
			return n
		}
	}
	return 0
}

func (w *wireError) innerCode() json.RawMessage {
	var inner wireError
	if len(w.Error) > 0 && json.Unmarshal(w.Error, &inner) == nil {
		return inner.Code
	}
	return nil
}

// overlongPhrases are how vLLM and SGLang say a request does not fit the
// context (matched lower-case):
//   - vLLM: "This model's maximum context length is N tokens. However, you
//     requested ..." and "The decoder prompt (length N) is longer than the
//     maximum model length of M."
//   - SGLang: "The input (N tokens) is longer than the model's context
//     length (M tokens)." and "Requested token count exceeds the model's
//     maximum context length of M tokens. ..."
var overlongPhrases = []string{
	"maximum context length",
	"longer than the model's context length",
	"longer than the maximum model length",
}

func isOverlong(msg string) bool {
	m := strings.ToLower(msg)
	for _, p := range overlongPhrases {
		if strings.Contains(m, p) {
			return true
		}
	}
	return false
}
