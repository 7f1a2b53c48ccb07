package chat

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// checkParseInvariants holds for any completion text: a failure carries a
// one-line reason and no calls; a success yields calls to known tools with
// JSON object arguments that render back without error.
func checkParseInvariants(t *testing.T, r Renderer, text string, p Parsed) {
	t.Helper()
	if p.Failed {
		if p.Reason == "" || strings.Contains(p.Reason, "\n") || len(p.ToolCalls) != 0 {
			t.Fatalf("bad failure: reason %q, %d calls", p.Reason, len(p.ToolCalls))
		}
		return
	}
	for _, c := range p.ToolCalls {
		if _, ok := findTool(testTools, c.Name); !ok {
			t.Fatalf("call to unknown tool %q", c.Name)
		}
		var obj map[string]any
		if err := json.Unmarshal(c.Arguments, &obj); err != nil {
			t.Fatalf("arguments %q: %v", c.Arguments, err)
		}
	}
	msgs := []Message{{Role: RoleUser, Content: "q"},
		{Role: RoleAssistant, Content: p.Content, ReasoningContent: p.Reasoning, ToolCalls: p.ToolCalls}}
	if _, err := r.Render(msgs, testTools, Options{}); err != nil {
		t.Fatalf("parsed output does not render: %v", err)
	}
}

func FuzzQwen3Parse(f *testing.F) {
	for _, s := range []string{
		"plain", "<think>\nr\n</think>\n\nok<|im_end|>", "<think>open",
		"x\n<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"command\": \"ls\"}}\n</tool_call>",
		`<tool_call>{"name": "noargs"}</tool_call><tool_call>{"name": "edit", "arguments": "{\"path\": 1}"}</tool_call>`,
		"<tool_call>{\"name\": \"bash\"", "</tool_call>", `<tool_call>{"name": "x", "arguments": {}}</tool_call>`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		checkParseInvariants(t, Qwen3{}, text, Qwen3{}.Parse(text, testTools))
	})
}

func FuzzQwen3CoderParse(f *testing.F) {
	for _, s := range []string{
		"<tool_call>\n<function=bash>\n<parameter=command>\nls\n</parameter>\n</function>\n</tool_call>",
		"<tool_call>\n<function=edit>\n<parameter=count>\n3\n</parameter>\n<parameter=ratio>\n1e3\n</parameter>\n<parameter=force>\ntrue\n</parameter>\n<parameter=lines>\n[1, 2.5]\n</parameter>\n<parameter=opts>\n{\"a\": null}\n</parameter>\n<parameter=either>\nnull\n</parameter>\n</function>\n</tool_call>",
		"<think>r</think>text<tool_call><function=noargs></function></tool_call>",
		"<tool_call><function=bash><parameter=command>ls</function></tool_call>", "<tool_call><function=", "<think>",
		"<tool_call>\n<function=edit>\n<parameter=opts>\n{'a': [True, None, 1.5e-3, 'it\\'s', (1,)], \"b\": '\\x41\\u00e9'}\n</parameter>\n<parameter=lines>\n[1, 2,]\n</parameter>\n</function>\n</tool_call>",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		checkParseInvariants(t, Qwen3{}, text, Qwen3Coder{}.Parse(text, testTools))
	})
}

// FuzzPyJSON checks the tojson reproduction on any valid JSON: the output is
// JSON with the same value, and formatting it again changes nothing.
func FuzzPyJSON(f *testing.F) {
	for _, s := range []string{`{"a": 1, "b": [1.5, -0, 1e20, "x\u0001\"\\"], "a": {"c": null}}`, `"é🎉\n"`, `[]`, `1E-7`, `{"":true}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var b strings.Builder
		err := appendPyJSON(&b, []byte(in))
		if !json.Valid([]byte(in)) {
			if err == nil {
				t.Fatalf("invalid JSON %q accepted", in)
			}
			return
		}
		if err != nil {
			t.Fatalf("valid JSON %q rejected: %v", in, err)
		}
		out := b.String()
		if strings.Contains(out, "Infinity") && !strings.Contains(in, "Infinity") {
			return // a float overflow prints as Python does, which is not JSON
		}
		if !json.Valid([]byte(out)) {
			t.Fatalf("output %q of %q is not JSON", out, in)
		}
		var x, y any
		if json.Unmarshal([]byte(in), &x) != nil {
			return // valid JSON whose numbers overflow float64: nothing to compare in Go
		}
		if json.Unmarshal([]byte(out), &y) != nil {
			t.Fatalf("output %q of %q does not decode", out, in)
		}
		if !reflect.DeepEqual(x, y) && strings.ToValidUTF8(in, "") == in {
			t.Fatalf("value changed: %q -> %q", in, out)
		}
		var again strings.Builder
		if err := appendPyJSON(&again, []byte(out)); err != nil || again.String() != out {
			t.Fatalf("not idempotent: %q -> %q (%v)", out, again.String(), err)
		}
	})
}
