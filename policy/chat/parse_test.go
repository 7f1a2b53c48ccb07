package chat

import (
	"encoding/json"
	"strings"
	"testing"
)

// testTools are the tools the parser tests may call.
var testTools = []Tool{
	{Name: "bash", Description: "Run a command.", Parameters: json.RawMessage(
		`{"type": "object", "properties": {"command": {"type": "string"}, "timeout": {"type": "integer"}}, "required": ["command"]}`)},
	{Name: "edit", Parameters: json.RawMessage(`{"type": "object", "properties": {
		"path": {"type": "string"}, "count": {"type": "integer"}, "ratio": {"type": "number"},
		"force": {"type": "boolean"}, "lines": {"type": "array"}, "opts": {"type": "object"},
		"either": {"type": ["string", "null"]}}}`)},
	{Name: "noargs"},
}

type parseCase struct {
	name      string
	text      string
	content   string
	reasoning string
	calls     []string // "name args" with args as JSON text
	reason    string   // substring of Reason; "" means success
}

func checkParsed(t *testing.T, tt parseCase, got Parsed) {
	t.Helper()
	if tt.reason == "" {
		if got.Failed {
			t.Fatalf("failed: %s", got.Reason)
		}
	} else {
		if !got.Failed || !strings.Contains(got.Reason, tt.reason) {
			t.Fatalf("Failed=%v Reason=%q, want a failure with %q", got.Failed, got.Reason, tt.reason)
		}
		if len(got.ToolCalls) != 0 {
			t.Errorf("a failed parse returned %d tool calls", len(got.ToolCalls))
		}
		if strings.Contains(got.Reason, "\n") {
			t.Errorf("reason is not one line: %q", got.Reason)
		}
	}
	if got.Content != tt.content {
		t.Errorf("content = %q, want %q", got.Content, tt.content)
	}
	if got.Reasoning != tt.reasoning {
		t.Errorf("reasoning = %q, want %q", got.Reasoning, tt.reasoning)
	}
	var calls []string
	for _, c := range got.ToolCalls {
		calls = append(calls, c.Name+" "+string(c.Arguments))
	}
	if strings.Join(calls, "|") != strings.Join(tt.calls, "|") {
		t.Errorf("calls = %q, want %q", calls, tt.calls)
	}
}

func TestQwen3Parse(t *testing.T) {
	tests := []parseCase{
		{name: "plain text", text: "Hello there.\n", content: "Hello there.\n"},
		{name: "end token removed", text: "Hi<|im_end|>", content: "Hi"},
		{name: "reasoning and answer", text: "<think>\nLet me think.\n</think>\n\nThe answer is 4.<|im_end|>",
			content: "The answer is 4.", reasoning: "Let me think."},
		{name: "reasoning opened in the prompt", text: "just thinking\n</think>\n\nok", content: "ok", reasoning: "just thinking"},
		{name: "text before think stays content", text: "Hello.\n<think>\nhm\n</think>\n\nBye.", content: "Hello.\nBye.", reasoning: "hm"},
		{name: "empty reasoning", text: "<think>\n\n</think>\n\nok", content: "ok"},
		{name: "one call", text: "<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"command\": \"ls\"}}\n</tool_call><|im_end|>",
			calls: []string{`bash {"command": "ls"}`}},
		{name: "text, think and two calls", text: "<think>\nplan\n</think>\n\nI'll look.\n<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"command\": \"ls\", \"timeout\": 5}}\n</tool_call>\n<tool_call>\n{\"name\":\"edit\",\"arguments\":{\"path\":\"a.py\"}}\n</tool_call>\nDone.",
			content: "I'll look.\nDone.", reasoning: "plan",
			calls: []string{`bash {"command": "ls", "timeout": 5}`, `edit {"path":"a.py"}`}},
		{name: "tool call inside reasoning is not a call", text: "<think>maybe <tool_call>{}</tool_call></think>answer",
			content: "answer", reasoning: "maybe <tool_call>{}</tool_call>"},
		{name: "arguments absent", text: `<tool_call>{"name": "noargs"}</tool_call>`, calls: []string{"noargs {}"}},
		{name: "arguments null", text: `<tool_call>{"name": "noargs", "arguments": null}</tool_call>`, calls: []string{"noargs {}"}},
		{name: "arguments as a JSON string", text: `<tool_call>{"name": "bash", "arguments": "{\"command\": \"pwd\"}"}</tool_call>`,
			calls: []string{`bash {"command": "pwd"}`}},
		{name: "unicode arguments", text: "<tool_call>{\"name\": \"bash\", \"arguments\": {\"command\": \"echo 🎉 \\u00e9\"}}</tool_call>",
			calls: []string{`bash {"command": "echo 🎉 \u00e9"}`}},

		{name: "unclosed think", text: "<think>\nstill thinking", content: "<think>\nstill thinking", reason: "unclosed <think>"},
		{name: "unclosed tool_call", text: "ok\n<tool_call>\n{\"name\": \"bash\", \"arguments\": {}}",
			content: "ok\n<tool_call>\n{\"name\": \"bash\", \"arguments\": {}}", reason: "unclosed <tool_call>"},
		{name: "bad JSON", text: "<think>r</think>x<tool_call>{\"name\": \"bash\", \"arguments\": {\"command\": }}</tool_call>",
			content: "x<tool_call>{\"name\": \"bash\", \"arguments\": {\"command\": }}</tool_call>", reasoning: "r", reason: "bad JSON"},
		{name: "trailing data", text: `<tool_call>{"name": "bash", "arguments": {}}}</tool_call>`,
			content: `<tool_call>{"name": "bash", "arguments": {}}}</tool_call>`, reason: "data after the object"},
		{name: "unknown function", text: `<tool_call>{"name": "rm_rf", "arguments": {}}</tool_call>`,
			content: `<tool_call>{"name": "rm_rf", "arguments": {}}</tool_call>`, reason: `unknown function "rm_rf"`},
		{name: "no name", text: `<tool_call>{"arguments": {}}</tool_call>`, content: `<tool_call>{"arguments": {}}</tool_call>`, reason: "no function name"},
		{name: "arguments not an object", text: `<tool_call>{"name": "bash", "arguments": [1]}</tool_call>`,
			content: `<tool_call>{"name": "bash", "arguments": [1]}</tool_call>`, reason: "not a JSON object"},
		{name: "second call bad", text: "<tool_call>{\"name\": \"noargs\"}</tool_call><tool_call>nope</tool_call>",
			content: "<tool_call>{\"name\": \"noargs\"}</tool_call><tool_call>nope</tool_call>", reason: "tool call 1: bad JSON"},
		{name: "stray close", text: "text </tool_call>", content: "text </tool_call>", reason: "</tool_call> without <tool_call>"},
		{name: "XML body in JSON format", text: "<tool_call>\n<function=bash>\n</function>\n</tool_call>",
			content: "<tool_call>\n<function=bash>\n</function>\n</tool_call>", reason: "bad JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkParsed(t, tt, Qwen3{}.Parse(tt.text, testTools))
		})
	}
}

func TestQwen3CoderParse(t *testing.T) {
	call := func(fn, params string) string {
		return "<tool_call>\n<function=" + fn + ">\n" + params + "</function>\n</tool_call>"
	}
	p := func(name, value string) string { return "<parameter=" + name + ">\n" + value + "\n</parameter>\n" }
	// The first </function> ends a call, even inside a value.
	markup := call("bash", p("command", "echo '<tool_call>' </function>"))
	tests := []parseCase{
		{name: "one call", text: call("bash", p("command", "ls -la")) + "<|im_end|>", calls: []string{`bash {"command": "ls -la"}`}},
		{name: "typed values", text: call("edit", p("path", "a.py")+p("count", "3")+p("ratio", "0.25")+p("force", "True")+
			p("lines", "[1, 2]")+p("opts", `{"x": "y"}`)+p("either", "plain")+p("extra", "42")),
			calls: []string{`edit {"path": "a.py", "count": 3, "ratio": 0.25, "force": true, "lines": [1, 2], "opts": {"x": "y"}, "either": "plain", "extra": "42"}`}},
		{name: "conversions that fail stay strings", text: call("edit", p("count", "three")+p("ratio", "inf")+p("lines", "[1,")+p("force", "yes")+
			p("opts", `{"big": 1e400}`)+p("either", "[1e999]")),
			calls: []string{`edit {"count": "three", "ratio": "inf", "lines": "[1,", "force": false, "opts": "{\"big\": 1e400}", "either": "[1e999]"}`}},
		{name: "python literals", text: call("edit", p("opts", `{'a': True, 'b': None, 's': 'it\'s'}`)+p("lines", "(1, 'x',)")),
			calls: []string{`edit {"opts": {"a": true, "b": null, "s": "it's"}, "lines": [1, "x"]}`}},
		{name: "integral number and big integer", text: call("edit", p("ratio", "2.0")+p("count", "123456789012345678901234567890")),
			calls: []string{`edit {"ratio": 2, "count": 123456789012345678901234567890}`}},
		{name: "null", text: call("bash", p("command", "null")), calls: []string{`bash {"command": null}`}},
		{name: "multi-line value keeps inner newlines", text: call("bash", p("command", "\ncat <<EOF\nx\nEOF\n")),
			calls: []string{`bash {"command": "\ncat <<EOF\nx\nEOF\n"}`}},
		{name: "value with markup", text: markup, content: markup, reason: "text after </function>"},
		{name: "text around and reasoning", text: "<think>\nwhy\n</think>\n\nLet me check.\n" + call("bash", p("command", "ls")) + "\n" + call("noargs", ""),
			content: "Let me check.", reasoning: "why", calls: []string{`bash {"command": "ls"}`, "noargs {}"}},
		{name: "duplicate parameter keeps last value", text: call("bash", p("command", "a")+p("timeout", "1")+p("command", "b")),
			calls: []string{`bash {"command": "b", "timeout": 1}`}},

		{name: "unknown function", text: call("rm", p("x", "1")), content: call("rm", p("x", "1")), reason: `unknown function "rm"`},
		{name: "JSON body", text: `<tool_call>{"name": "bash", "arguments": {}}</tool_call>`,
			content: `<tool_call>{"name": "bash", "arguments": {}}</tool_call>`, reason: "expected <function=NAME>"},
		{name: "unclosed function", text: "<tool_call>\n<function=bash>\n" + p("command", "ls") + "</tool_call>",
			content: "<tool_call>\n<function=bash>\n" + p("command", "ls") + "</tool_call>", reason: "unclosed <function=bash>"},
		{name: "unclosed parameter", text: "<tool_call>\n<function=bash>\n<parameter=command>\nls\n</function>\n</tool_call>",
			content: "<tool_call>\n<function=bash>\n<parameter=command>\nls\n</function>\n</tool_call>", reason: "unclosed <parameter=command>"},
		{name: "unclosed tool_call", text: "x\n<tool_call>\n<function=bash>\n" + p("command", "ls") + "</function>",
			content: "x\n<tool_call>\n<function=bash>\n" + p("command", "ls") + "</function>", reason: "unclosed <tool_call>"},
		{name: "text between parameters", text: call("bash", "junk\n"+p("command", "ls")),
			content: call("bash", "junk\n"+p("command", "ls")), reason: "text between parameters"},
		{name: "bad function tag", text: "<tool_call><function=>x</function></tool_call>",
			content: "<tool_call><function=>x</function></tool_call>", reason: "bad <function=NAME> tag"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkParsed(t, tt, Qwen3Coder{}.Parse(tt.text, testTools))
		})
	}
}

// TestParseRoundTrip renders an assistant turn with Qwen3 and parses the
// completion part back: the calls and content survive.
func TestParseRoundTrip(t *testing.T) {
	msg := Message{Role: RoleAssistant, Content: "Checking.", ReasoningContent: "first look",
		ToolCalls: []ToolCall{
			{Name: "bash", Arguments: json.RawMessage(`{"command": "ls", "timeout": 5}`)},
			{Name: "edit", Arguments: json.RawMessage(`{"path": "x.go", "lines": [1, 2]}`)},
		}}
	msgs := []Message{{Role: RoleUser, Content: "go"}, msg}
	prompt, err := Qwen3{}.Render(msgs[:1], testTools, Options{AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	full, err := Qwen3{}.Render(msgs, testTools, Options{})
	if err != nil {
		t.Fatal(err)
	}
	completion, ok := strings.CutPrefix(full, prompt)
	if !ok {
		t.Fatalf("rendered turn does not extend the prompt")
	}
	got := Qwen3{}.Parse(strings.TrimSuffix(completion, "\n"), testTools)
	if got.Failed || got.Content != msg.Content || got.Reasoning != msg.ReasoningContent || len(got.ToolCalls) != 2 {
		t.Fatalf("parsed %+v", got)
	}
	for i, c := range got.ToolCalls {
		if c.Name != msg.ToolCalls[i].Name || string(c.Arguments) != string(msg.ToolCalls[i].Arguments) {
			t.Errorf("call %d = %s %s, want %s %s", i, c.Name, c.Arguments, msg.ToolCalls[i].Name, msg.ToolCalls[i].Arguments)
		}
	}
}
