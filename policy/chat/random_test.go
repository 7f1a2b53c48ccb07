package chat

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// randomConversations writes n random conversations as fixture files under
// dir: every role order, reasoning given or inline, <think> and
// <tool_response> text in odd places, tool calls, tools or none, and each
// template switch. The seed is fixed, so a failure reproduces.
func randomConversations(t *testing.T, dir string, n int) []string {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	text := func() string {
		var b strings.Builder
		for range rng.IntN(4) {
			b.WriteString(pick("", "hi", "\n\nlead", "trail\n\n", "<think>\nr\n</think>\n\nafter", "a</think>b",
				"<think>x", "<tool_response>\nx\n</tool_response>", "é🎉", "  spaced  ", "multi\nline", "\"q\" \\ 'a'"))
		}
		return b.String()
	}
	// str is a random JSON string with quotes, escapes, control and
	// non-ASCII characters.
	str := func() string {
		var b strings.Builder
		writePyString(&b, pick("", "plain", "it's", `say "hi"`, "both ' and \"", "tab\there", "nl\nx", "\x01\x1f\x7f",
			"\u00a0nbsp", "zw\u200bsp", "é🎉", "back\\slash", "<tool_call>", " padded ", "\n\x1c sep \x1f\n"))
		return b.String()
	}
	// nonEmpty is a random non-empty JSON string: Qwen3.Render leaves an
	// empty tool description out, where Jinja prints it.
	nonEmpty := func() string {
		for {
			if s := str(); s != `""` {
				return s
			}
		}
	}
	// value is a random JSON value: numbers in every float range, strings
	// with quotes, escapes, control and non-ASCII characters, nesting.
	var value func(depth int) string
	value = func(depth int) string {
		switch k := rng.IntN(9); {
		case k == 0:
			return pick("true", "false", "null")
		case k == 1:
			return pick("0", "-7", "12345678901234567890", "1.5", "-0.0", "1e-5", "2.5e-7", "1e16", "123456789.125", "3.0", "1E400", "0.1")
		case k <= 4 || depth > 2:
			return str()
		case k <= 6:
			var items []string
			for range rng.IntN(4) {
				items = append(items, value(depth+1))
			}
			return "[" + strings.Join(items, ", ") + "]"
		default:
			var items []string
			for i := range rng.IntN(4) {
				items = append(items, fmt.Sprintf(`"%s%d": %s`, pick("k", "key", "x-y", "$a b"), i, value(depth+1)))
			}
			return "{" + strings.Join(items, ", ") + "}"
		}
	}
	object := func() string {
		var items []string
		for i := range rng.IntN(4) {
			items = append(items, fmt.Sprintf(`"%s%d": %s`, pick("command", "path", "n", "opts"), i, value(1)))
		}
		return "{" + strings.Join(items, ", ") + "}"
	}
	argsOf := []string{`{}`, `{"command": "ls -la", "timeout": 30}`, `{"path": "a.go", "n": [1, 2.5, -0.0, 1e21], "o": {"k": null, "b": true}}`,
		`{"s": "tab\t \"x\" <tool_call> é"}`}
	for range 20 {
		argsOf = append(argsOf, object())
	}
	schema := func() string {
		var props []string
		for i := range rng.IntN(4) {
			var keys []string
			for _, k := range []string{"type", "description", "default", "enum", "items", "minimum", "required", "x-extra", "nullable", "examples"} {
				if rng.IntN(3) == 0 {
					keys = append(keys, fmt.Sprintf("%q: %s", k, value(2)))
				}
			}
			props = append(props, fmt.Sprintf(`"p%d": {%s}`, i, strings.Join(keys, ", ")))
		}
		return `{"type": "object", "properties": {` + strings.Join(props, ", ") + `}, "required": ` + pick(`["p0"]`, `[]`, `["p0", 1, true]`) + "}"
	}
	toolsOf := []string{
		`{"type": "function", "function": {"name": "bash", "description": "Run.", "parameters": {"type": "object", "properties": {"command": {"type": "string"}, "timeout": {"type": "integer", "default": 10.0}}, "required": ["command"]}}}`,
		`{"type": "function", "function": {"name": "edit", "parameters": {"type": "object", "properties": {"path": {"type": "string", "description": " where "}}}}}`,
	}
	for range 3 {
		toolsOf = append(toolsOf, `{"type": "function", "function": {"name": "gen", "description": `+nonEmpty()+`, "parameters": `+schema()+`}}`)
	}
	var paths []string
	for i := range n {
		var msgs []map[string]any
		if rng.IntN(2) == 0 {
			msgs = append(msgs, map[string]any{"role": "system", "content": text()})
		}
		for range 1 + rng.IntN(8) {
			m := map[string]any{"role": pick("user", "user", "assistant", "assistant", "tool", "tool", "system"), "content": text()}
			if m["role"] == "assistant" {
				if r := pick("", "", "why", "\nwhy\n"); r != "" {
					m["reasoning_content"] = r
				}
				var calls []map[string]any
				for range rng.IntN(3) {
					calls = append(calls, map[string]any{"type": "function", "function": map[string]any{
						"name": pick("bash", "edit"), "arguments": json.RawMessage(argsOf[rng.IntN(len(argsOf))])}})
				}
				if calls != nil {
					m["tool_calls"] = calls
				}
			}
			msgs = append(msgs, m)
		}
		fx := map[string]any{"messages": msgs, "add_generation_prompt": rng.IntN(2) == 0}
		if k := rng.IntN(3); k < 2 {
			fx["enable_thinking"] = k == 0
		}
		if k := rng.IntN(4); k > 0 {
			var tools []json.RawMessage
			for range k {
				tools = append(tools, json.RawMessage(toolsOf[rng.IntN(len(toolsOf))]))
			}
			fx["tools"] = tools
		}
		data, err := json.Marshal(fx)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, fmt.Sprintf("random-%03d.json", i))
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, path)
	}
	return paths
}

// TestQwen3RandomMatchesJinja renders 300 random conversations with the Go
// renderer and with real Jinja, and requires identical text.
func TestQwen3RandomMatchesJinja(t *testing.T) {
	randomMatchesJinja(t, Qwen3{}, qwen3Template)
}

// coderRandomMatchesJinja does the same for Qwen3-Coder; TestQwen3CoderGolden
// runs it when -coder-template names the template.
func coderRandomMatchesJinja(t *testing.T, template string) {
	randomMatchesJinja(t, Qwen3Coder{}, template)
}

// randomMatchesJinja renders 300 random conversations with r and with the
// Jinja template, and requires identical text.
func randomMatchesJinja(t *testing.T, r Renderer, template string) {
	paths := randomConversations(t, t.TempDir(), 300)
	want := jinjaRender(t, template, paths)
	for _, path := range paths {
		msgs, tools, opt := loadFixture(t, path)
		got, err := r.Render(msgs, tools, opt)
		if err != nil {
			t.Fatalf("%s: %v", filepath.Base(path), err)
		}
		if got != want[path] {
			data, _ := os.ReadFile(path)
			t.Fatalf("%s differs from Jinja at byte %d\nfixture: %s\n got: %q\nwant: %q", filepath.Base(path),
				firstDiff(got, want[path]), data, got, want[path])
		}
	}
}
