package proxy

import (
	"testing"
	"unicode/utf8"

	"github.com/legorl/legorl/policy/chat"
)

// FuzzDecodeChat: the Chat Completions decoder never panics, every
// failure is an API error with a 4xx status, and every accepted request
// renders without a panic. Run it with
// go test -run '^$' -fuzz '^FuzzDecodeChat$' -fuzztime 30s ./proxy
func FuzzDecodeChat(f *testing.F) {
	for _, seed := range []string{
		okBody,
		`{"model": "m", "stream": true, "stream_options": {"include_usage": true}, "max_completion_tokens": 5,
		  "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": [{"type": "text", "text": "a"}, "b"]},
		  {"role": "assistant", "content": null, "reasoning_content": "r", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"x\": 1}"}}]},
		  {"role": "tool", "tool_call_id": "c1", "content": "out"}],
		  "tools": [{"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object"}}}],
		  "tool_choice": {"type": "function", "function": {"name": "f"}}, "chat_template_kwargs": {"enable_thinking": false}}`,
		`{"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": {"x": [1, 2]}}}]}]}`,
		`{"messages": [{"role": 1}]}`,
		`{"messages": {}}`,
		`{"n": 2, "messages": [{"role": "user", "content": "x"}]}`,
		`{"tools": [null], "messages": [{"role": "user", "content": "x"}]}`,
		`{"messages": [{"role": "user", "content": "\ud800"}]}`,
		`[`, `null`, `"x"`, ``, `{}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		turn, e := chatFormat{}.decode(body)
		if e != nil {
			if e.Status < 400 || e.Status > 499 || e.Kind == "" || e.Message == "" || !utf8.ValidString(e.Param) {
				t.Fatalf("bad error %+v for %q", e, body)
			}
			return
		}
		if len(turn.Messages) == 0 {
			t.Fatalf("accepted without messages: %q", body)
		}
		for _, r := range []chat.Renderer{chat.Qwen3{}, chat.Qwen3Coder{}} {
			r.Render(turn.Messages, turn.Tools, chat.Options{AddGenerationPrompt: true, DisableThinking: turn.DisableThinking})
		}
	})
}
