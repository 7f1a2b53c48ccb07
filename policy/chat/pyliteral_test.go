package chat

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestPyLiteral(t *testing.T) {
	tests := []struct {
		in, want string // want "" means not a literal
	}{
		{`{'a': True, 'b': None, 'c': [1, 2.5, -3], "d": 'it\'s'}`, `{"a": true, "b": null, "c": [1, 2.5, -3], "d": "it's"}`},
		{`['a"b\'c', '\x01\xa0\u200b 🎉 é\t\n\\']`, `["a\"b'c", "\u0001` + "\u00a0\u200b 🎉 é" + `\t\n\\"]`},
		{`(1, 2,)`, `[1, 2]`},
		{`{'k': {'n': 1_000, 'f': 1e-07, 'g': .5}}`, `{"k": {"n": 1000, "f": 1e-07, "g": 0.5}}`},
		{`[]`, `[]`},
		{`{}`, `{}`},
		{`{'a': 1, 'a': 2}`, `{"a": 2}`},
		{`'unknown \q escape'`, `"unknown \\q escape"`},
		{`[1,`, ``},
		{`{1: 2}`, ``},
		{`'''triple'''`, ``},
		{`inf`, ``},
		{`nan`, ``},
		{`0x10`, ``},
		{`[1] x`, ``},
		{`'unterminated`, ``},
		{strings.Repeat("[", 200) + strings.Repeat("]", 200), ``},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			v, ok := parsePyLiteral(tt.in)
			if tt.want == "" {
				if ok {
					t.Fatalf("accepted %q", tt.in)
				}
				return
			}
			if !ok {
				t.Fatalf("rejected %q", tt.in)
			}
			var b strings.Builder
			writePyValue(&b, v)
			if b.String() != tt.want {
				t.Errorf("got %s, want %s", b.String(), tt.want)
			}
		})
	}
}

// TestQwen3CoderRoundTrip renders an assistant turn with Qwen3-Coder's
// template and parses the completion part back: every argument, of every
// schema type, comes back with its value.
func TestQwen3CoderRoundTrip(t *testing.T) {
	args := `{"path": "a \"b\" 'c'.py", "count": 7, "ratio": 0.125, "force": true, "lines": [1, "two", null], ` +
		`"opts": {"nested": {"x": false}, "s": "it's"}, "either": "text", "extra": "42"}`
	msgs := []Message{{Role: RoleUser, Content: "go"}, {Role: RoleAssistant, Content: "Editing.",
		ToolCalls: []ToolCall{{Name: "edit", Arguments: json.RawMessage(args)}, {Name: "noargs"}}}}
	prompt, err := Qwen3Coder{}.Render(msgs[:1], testTools, Options{AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	full, err := Qwen3Coder{}.Render(msgs, testTools, Options{})
	if err != nil {
		t.Fatal(err)
	}
	completion, ok := strings.CutPrefix(full, prompt)
	if !ok {
		t.Fatal("rendered turn does not extend the prompt")
	}
	got := Qwen3Coder{}.Parse(strings.TrimSuffix(completion, "\n"), testTools)
	if got.Failed || got.Content != "Editing." || len(got.ToolCalls) != 2 {
		t.Fatalf("parsed %+v", got)
	}
	var want, have any
	if err := json.Unmarshal([]byte(args), &want); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(got.ToolCalls[0].Arguments, &have); err != nil {
		t.Fatal(err)
	}
	wantJSON, _ := json.Marshal(want)
	haveJSON, _ := json.Marshal(have)
	if string(wantJSON) != string(haveJSON) {
		t.Errorf("arguments = %s, want %s", haveJSON, wantJSON)
	}
	if string(got.ToolCalls[1].Arguments) != "{}" {
		t.Errorf("noargs arguments = %s", got.ToolCalls[1].Arguments)
	}
	// The tool loop is append-only when the model wrote the template's form.
	next := append(msgs, Message{Role: RoleTool, Content: "done"})
	c, err := AppendOnly(Qwen3Coder{}, full[:len(full)-1], next, testTools, Options{AddGenerationPrompt: true})
	if err != nil || !c.Extends || c.Suffix != "\n"+imStart+"user\n<tool_response>\ndone\n</tool_response>\n"+imEnd+"\n"+imStart+"assistant\n" {
		t.Errorf("coder tool loop: extends=%v suffix=%q err=%v", c.Extends, c.Suffix, err)
	}
}
