package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// Qwen3Coder is the chat format of Qwen3-Coder, whose tool calls are XML:
//
//	<tool_call>
//	<function=NAME>
//	<parameter=P>
//	VALUE
//	</parameter>
//	</function>
//	</tool_call>
//
// Parse follows the paper's tool-call parser, vLLM's qwen3_coder.
type Qwen3Coder struct{}

// Parse reads a Qwen3-Coder completion: optional <think> reasoning, then text
// and XML <tool_call> blocks. A call must name one of tools. Each parameter
// value loses one leading and one trailing newline and is converted by the
// type its tool's JSON schema declares, as vLLM's qwen3_coder parser does:
// "null" is null; string types stay strings; integer and number types
// become numbers; boolean is true only for "true"; any other type is parsed
// as JSON, else as a Python literal ({'a': True}, the form the template
// shows the model). A value that does not convert, or a parameter the
// schema does not declare, stays a string. Malformed markup (unclosed tags,
// text between parameters, an unknown function) comes back with Failed set,
// never a panic. Unlike vLLM, which accepts a missing </parameter> or
// </function>, an unclosed tag is a failure.
func (Qwen3Coder) Parse(text string, tools []Tool) Parsed {
	return parseCompletion(text, tools, parseXMLCall)
}

func parseXMLCall(body string, tools []Tool) (ToolCall, error) {
	s := strings.TrimSpace(body)
	if !strings.HasPrefix(s, "<function=") {
		return ToolCall{}, errors.New("expected <function=NAME>")
	}
	s = s[len("<function="):]
	name, s, ok := strings.Cut(s, ">")
	if !ok || name == "" || strings.ContainsAny(name, "<\n") {
		return ToolCall{}, errors.New("bad <function=NAME> tag")
	}
	tool, ok := findTool(tools, name)
	if !ok {
		return ToolCall{}, fmt.Errorf("unknown function %q", name)
	}
	inner, tail, ok := strings.Cut(s, "</function>")
	if !ok {
		return ToolCall{}, fmt.Errorf("unclosed <function=%s>", name)
	}
	if strings.TrimSpace(tail) != "" {
		return ToolCall{}, fmt.Errorf("text after </function> of %s", name)
	}
	types := schemaTypes(tool.Parameters)
	args := pyValue{kind: 'o'}
	index := map[string]int{}
	for {
		inner = strings.TrimLeft(inner, " \t\r\n")
		if inner == "" {
			break
		}
		if !strings.HasPrefix(inner, "<parameter=") {
			return ToolCall{}, fmt.Errorf("text between parameters of %s", name)
		}
		inner = inner[len("<parameter="):]
		pname, rest, ok := strings.Cut(inner, ">")
		if !ok || pname == "" || strings.ContainsAny(pname, "<\n") {
			return ToolCall{}, fmt.Errorf("bad <parameter=NAME> tag in %s", name)
		}
		value, rest, ok := strings.Cut(rest, "</parameter>")
		if !ok {
			return ToolCall{}, fmt.Errorf("unclosed <parameter=%s> in %s", pname, name)
		}
		value = strings.TrimPrefix(value, "\n")
		value = strings.TrimSuffix(value, "\n")
		v := convertParam(value, types[pname])
		if i, dup := index[pname]; dup {
			args.items[i] = v
		} else {
			index[pname] = len(args.keys)
			args.keys = append(args.keys, pname)
			args.items = append(args.items, v)
		}
		inner = rest
	}
	var b strings.Builder
	writePyValue(&b, args)
	return ToolCall{Name: name, Arguments: json.RawMessage(b.String())}, nil
}

// schemaTypes maps each property of a JSON object schema to its declared
// "type": the lower-cased string, or "" (parse as JSON) for a missing or
// non-string type. Undeclared parameters are absent (kept as strings).
func schemaTypes(params json.RawMessage) map[string]*string {
	if len(params) == 0 {
		return nil
	}
	schema, err := parsePyJSON(params)
	if err != nil {
		return nil
	}
	props, _ := schema.field("properties")
	if props.kind != 'o' {
		return nil
	}
	out := make(map[string]*string, len(props.keys))
	for i, k := range props.keys {
		var t string
		if typ, ok := props.items[i].field("type"); ok && typ.kind == 's' {
			t = strings.ToLower(strings.TrimSpace(typ.text))
		}
		out[k] = &t
	}
	return out
}

// convertParam turns a parameter's text into a JSON value by its declared
// type; typ is nil for a parameter the schema does not declare.
func convertParam(value string, typ *string) pyValue {
	str := pyValue{kind: 's', text: value}
	if strings.ToLower(value) == "null" {
		return pyValue{kind: 'b', text: "null"}
	}
	if typ == nil {
		return str
	}
	t := *typ
	switch {
	case t == "string" || t == "str" || t == "text" || t == "varchar" || t == "char" || t == "enum":
		return str
	case strings.HasPrefix(t, "int") || strings.HasPrefix(t, "uint") || strings.HasPrefix(t, "long") ||
		strings.HasPrefix(t, "short") || strings.HasPrefix(t, "unsigned"):
		if n, ok := new(big.Int).SetString(strings.TrimSpace(value), 10); ok {
			return pyValue{kind: 'n', text: n.String()}
		}
		return str
	case strings.HasPrefix(t, "num") || strings.HasPrefix(t, "float"):
		v := strings.TrimSpace(value)
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) || strings.ContainsAny(v, "xX_") {
			return str
		}
		if f == math.Trunc(f) { // Python's int(f): the float's exact integer value
			n, _ := big.NewFloat(f).Int(nil)
			return pyValue{kind: 'n', text: n.String()}
		}
		return pyValue{kind: 'n', text: pyFloat(f)}
	case t == "boolean" || t == "bool" || t == "binary":
		if strings.ToLower(strings.TrimSpace(value)) == "true" {
			return pyValue{kind: 'b', text: "true"}
		}
		return pyValue{kind: 'b', text: "false"}
	default:
		if v, err := parsePyJSON([]byte(value)); err == nil && finite(v) {
			return v
		}
		if v, ok := parsePyLiteral(value); ok && finite(v) {
			return v
		}
		return str
	}
}

// finite reports that v holds no number too large for a float64 (which
// Python would print as Infinity, not JSON).
func finite(v pyValue) bool {
	switch v.kind {
	case 'n':
		return !strings.HasSuffix(v.text, "Infinity")
	case 'a', 'o':
		for _, item := range v.items {
			if !finite(item) {
				return false
			}
		}
	}
	return true
}
