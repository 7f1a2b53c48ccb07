package chat

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

const (
	coderDefaultSystem = "You are Qwen, a helpful AI assistant that can interact with a computer to solve tasks."
	coderToolsHead     = "\n\nYou have access to the following functions:\n\n<tools>"
	coderToolsTail     = "\n</tools>\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n" +
		"<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n" +
		"<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat can span\nmultiple lines\n" +
		"</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n" +
		"- Function calls MUST follow the specified format: an inner <function=...></function> block must be nested within <tool_call></tool_call> XML tags\n" +
		"- Required parameters MUST be specified\n" +
		"- You may provide optional reasoning for your function call in natural language BEFORE the function call, but NOT after\n" +
		"- If there is no function call available, answer the question like normal with your current knowledge and do not tell the user about function calls\n" +
		"</IMPORTANT>"
)

// Render returns the Qwen3-Coder prompt text for msgs and tools: tools as
// <function> blocks with one <parameter> block per schema property (its
// type, description and other schema keys; "enum" is not shown), tool calls
// as XML with each argument's value as Python's str() prints it, and tool
// results as <tool_response> blocks in a user turn. Qwen3-Coder does not
// think: ReasoningContent is not rendered and DisableThinking has no effect.
// A tool without a parameters schema renders an empty <parameters> block
// (the Jinja template fails on one).
func (Qwen3Coder) Render(msgs []Message, tools []Tool, opt Options) (string, error) {
	if err := checkMessages(msgs); err != nil {
		return "", err
	}
	var b strings.Builder
	b.Grow(renderSizeHint(msgs, tools) + len(coderToolsTail))
	loop := msgs
	hasSystem := msgs[0].Role == RoleSystem
	if hasSystem {
		b.WriteString(imStart + "system\n")
		b.WriteString(msgs[0].Content)
		loop = msgs[1:]
	} else if len(tools) > 0 {
		b.WriteString(imStart + "system\n" + coderDefaultSystem)
	}
	if len(tools) > 0 {
		b.WriteString(coderToolsHead)
		for i, t := range tools {
			if err := appendCoderTool(&b, t); err != nil {
				return "", fmt.Errorf("tool %d (%s): %w", i, t.Name, err)
			}
		}
		b.WriteString(coderToolsTail)
	}
	if hasSystem || len(tools) > 0 {
		b.WriteString(imEnd + "\n")
	}
	for i, m := range loop {
		switch {
		case m.Role == RoleAssistant && len(m.ToolCalls) > 0:
			b.WriteString(imStart + "assistant")
			if c := pyStrip(m.Content); c != "" {
				b.WriteString("\n" + c + "\n")
			}
			for j, tc := range m.ToolCalls {
				b.WriteString("\n<tool_call>\n<function=" + tc.Name + ">\n")
				if len(tc.Arguments) > 0 {
					args, err := parsePyJSON(tc.Arguments)
					if err != nil {
						return "", fmt.Errorf("message %d tool call %d (%s): %w", i, j, tc.Name, err)
					}
					if args.kind != 'o' {
						return "", fmt.Errorf("message %d tool call %d (%s): %w: arguments are not an object", i, j, tc.Name, ErrArguments)
					}
					for k, key := range args.keys {
						b.WriteString("<parameter=" + key + ">\n")
						writePyStr(&b, args.items[k])
						b.WriteString("\n</parameter>\n")
					}
				}
				b.WriteString("</function>\n</tool_call>")
			}
			b.WriteString(imEnd + "\n")
		case m.Role == RoleTool:
			if i > 0 && loop[i-1].Role != RoleTool {
				b.WriteString(imStart + "user\n")
			}
			b.WriteString("<tool_response>\n")
			b.WriteString(m.Content)
			b.WriteString("\n</tool_response>\n")
			if i == len(loop)-1 || loop[i+1].Role != RoleTool {
				b.WriteString(imEnd + "\n")
			}
		default:
			b.WriteString(imStart + m.Role + "\n")
			b.WriteString(m.Content)
			b.WriteString(imEnd + "\n")
		}
	}
	if opt.AddGenerationPrompt {
		b.WriteString(imStart + "assistant\n")
	}
	return b.String(), nil
}

// appendCoderTool writes one tool's <function> block.
func appendCoderTool(b *strings.Builder, t Tool) error {
	b.WriteString("\n<function>\n<name>" + t.Name + "</name>")
	b.WriteString("\n<description>" + pyStrip(t.Description) + "</description>")
	b.WriteString("\n<parameters>")
	var params pyValue
	if len(t.Parameters) > 0 {
		var err error
		if params, err = parsePyJSON(t.Parameters); err != nil {
			return err
		}
	}
	props, _ := params.field("properties")
	if props.kind == 'o' {
		for i, name := range props.keys {
			fields := props.items[i]
			b.WriteString("\n<parameter>\n<name>" + name + "</name>")
			if typ, ok := fields.field("type"); ok {
				b.WriteString("\n<type>")
				writePyStr(b, typ)
				b.WriteString("</type>")
			}
			if desc, ok := fields.field("description"); ok {
				var s strings.Builder
				writePyStr(&s, desc)
				b.WriteString("\n<description>" + pyStrip(s.String()) + "</description>")
			}
			if fields.kind == 'o' {
				for k, key := range fields.keys {
					switch key {
					case "", "type", "description", "enum", "required":
						continue
					}
					v := fields.items[k]
					if v.kind == 'b' && v.text == "null" {
						continue
					}
					tag := strings.NewReplacer("-", "_", " ", "_", "$", "").Replace(key)
					b.WriteString("\n<" + tag + ">")
					if v.kind == 'o' {
						writePyValue(b, v)
					} else {
						writePyStr(b, v)
					}
					b.WriteString("</" + tag + ">")
				}
			}
			req, _ := fields.field("required")
			writeItemList(b, req)
			b.WriteString("\n</parameter>")
		}
	}
	req, _ := params.field("required")
	writeItemList(b, req)
	b.WriteString("\n</parameters>\n</function>")
	return nil
}

// field returns an object's value for key.
func (v pyValue) field(key string) (pyValue, bool) {
	if v.kind != 'o' {
		return pyValue{}, false
	}
	if i := indexOf(v.keys, key); i >= 0 {
		return v.items[i], true
	}
	return pyValue{}, false
}

// writeItemList writes a non-empty sequence as
// "\n<required>[`a`, `b`]</required>", strings in backquotes, other items as
// str() prints them. As Jinja's "sequence" test does, it also takes an
// object (its keys) and a string (its characters).
func writeItemList(b *strings.Builder, v pyValue) {
	var items []pyValue
	switch v.kind {
	case 'a':
		items = v.items
	case 'o':
		for _, k := range v.keys {
			items = append(items, pyValue{kind: 's', text: k})
		}
	case 's':
		for _, r := range v.text {
			items = append(items, pyValue{kind: 's', text: string(r)})
		}
	}
	if len(items) == 0 {
		return
	}
	b.WriteString("\n<required>[")
	for i, item := range items {
		if i > 0 {
			b.WriteString(", ")
		}
		if item.kind == 's' {
			b.WriteString("`" + item.text + "`")
		} else {
			writePyStr(b, item)
		}
	}
	b.WriteString("]</required>")
}

// writePyStr writes Python's str() of a JSON value: a string as itself,
// anything else as its repr (True, None, {'k': [1, 2.5]}).
func writePyStr(b *strings.Builder, v pyValue) {
	if v.kind == 's' {
		b.WriteString(v.text)
		return
	}
	writePyRepr(b, v)
}

// writePyRepr writes Python's repr() of a JSON value.
func writePyRepr(b *strings.Builder, v pyValue) { writePyWith(b, v, writeReprLeaf) }

// writeReprLeaf writes Python's repr() of a string, number or boolean.
func writeReprLeaf(b *strings.Builder, v pyValue) {
	switch v.kind {
	case 's':
		writePyStringRepr(b, v.text)
	case 'n':
		switch v.text { // json.dumps and repr disagree only on these
		case "Infinity":
			b.WriteString("inf")
		case "-Infinity":
			b.WriteString("-inf")
		default:
			b.WriteString(v.text)
		}
	case 'b':
		switch v.text {
		case "true":
			b.WriteString("True")
		case "false":
			b.WriteString("False")
		default:
			b.WriteString("None")
		}
	}
}

// writePyStringRepr writes Python's repr() of a string: single quotes unless
// the text has a single quote and no double quote; backslash escapes for
// the quote, backslash, \t \n \r and characters that are not printable.
func writePyStringRepr(b *strings.Builder, s string) {
	quote := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		quote = '"'
	}
	b.WriteByte(quote)
	for _, r := range s {
		switch {
		case r == rune(quote) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == ' ' || (r < utf8.RuneSelf && r >= 0x20 && r < 0x7f):
			b.WriteRune(r)
		case !pyPrintable(r):
			switch {
			case r < 0x100:
				fmt.Fprintf(b, `\x%02x`, r)
			case r < 0x10000:
				fmt.Fprintf(b, `\u%04x`, r)
			default:
				fmt.Fprintf(b, `\U%08x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte(quote)
}

// pyPrintable approximates Python's str.isprintable for one character:
// not a control, format, surrogate, private-use or unassigned character,
// nor a separator other than the space.
func pyPrintable(r rune) bool {
	if r == ' ' {
		return true
	}
	return unicode.IsPrint(r) && !unicode.Is(unicode.Co, r)
}

// pyStrip is Python's str.strip() (Jinja's trim): it removes white space as
// str.isspace defines it, which adds the separators U+001C..U+001F to Go's
// unicode.IsSpace.
func pyStrip(s string) string {
	return strings.TrimFunc(s, func(r rune) bool {
		return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
	})
}
