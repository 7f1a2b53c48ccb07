package proxy

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
)

// checkScanChat requires scanChat, from the memos of prev, to decode body
// exactly as decodeChatSlow does whenever it vouches for its result, and
// decode (the path calls take) to answer as decodeChatSlow. It returns
// what scanChat returned.
func checkScanChat(t *testing.T, body []byte, prev ...*chatMemo) (chatScanned, bool) {
	t.Helper()
	want, werr := decodeChatSlow(body)
	got, out, ok := scanChat(body, prev)
	if ok && (werr != nil || !reflect.DeepEqual(got, want)) {
		t.Fatalf("scanChat decoded %q\n as %+v\nencoding/json: %+v (error %v)", body, got, want, werr)
	}
	viaDecode, _, derr := chatFormat{}.decodeFrom(body, prev)
	if !reflect.DeepEqual(derr, werr) || (werr == nil && !reflect.DeepEqual(viaDecode, want)) {
		t.Fatalf("decodeFrom(%q) = %+v, %v; encoding/json: %+v, %v", body, viaDecode, derr, want, werr)
	}
	return out, ok
}

// TestScanChat compares the scanner with encoding/json on bodies it must
// decode itself (fast) and on bodies it must leave to encoding/json: rare
// fields, keys that match a field only ignoring case, a field given twice,
// values of the wrong type, malformed JSON anywhere.
func TestScanChat(t *testing.T) {
	msg := `{"role": "user", "content": "hi"}`
	tests := []struct {
		name string
		body string
		fast bool
	}{
		{"minimal", `{"messages": [` + msg + `]}`, true},
		{"ok body", okBody, true},
		{"everything common", `{"model": "m", "stream": true, "stream_options": {"include_usage": true, "x": 1}, "max_completion_tokens": 5,
		  "temperature": 0.5, "top_p": 1, "seed": 7, "n": 1, "user": "u", "logprobs": false, "top_logprobs": 2,
		  "frequency_penalty": 0, "presence_penalty": -1.5e0, "parallel_tool_calls": true, "audio": null, "unknown": {"a": [1, "x", null]},
		  "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": [{"type": "text", "text": "a"}, "b"]},
		  {"role": "assistant", "content": null, "reasoning_content": "r", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"x\": 1}"}}]},
		  {"role": "assistant", "reasoning": "r2", "tool_calls": [{"function": {"name": "f", "arguments": {"x": [1, 2]}}}]},
		  {"role": "tool", "tool_call_id": "c1", "name": "f", "content": "out \u00e9 \n \ud83c\udf89"}],
		  "tools": [{"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object"}, "strict": true}}],
		  "tool_choice": {"type": "function", "function": {"name": "f"}}, "chat_template_kwargs": {"enable_thinking": false}}`, true},
		{"nulls", `{"model": null, "tools": null, "tool_choice": null, "max_tokens": null, "stream": null, "stream_options": null,
		  "chat_template_kwargs": null, "response_format": null, "modalities": null, "logit_bias": null,
		  "messages": [{"role": "user", "content": null, "name": null, "tool_calls": null, "reasoning_content": null}]}`, true},
		{"whitespace", " \n\t{ \"messages\" : [ " + msg + " , " + msg + " ] } \r\n", true},
		{"empty messages", `{"messages": []}`, false},
		{"no messages", `{"model": "m"}`, false},
		{"response_format", `{"response_format": {"type": "text"}, "messages": [` + msg + `]}`, false},
		{"json_schema", `{"response_format": {"type": "json_schema"}, "messages": [` + msg + `]}`, false},
		{"modalities", `{"modalities": ["text"], "messages": [` + msg + `]}`, false},
		{"logit_bias", `{"logit_bias": {"1": 2}, "messages": [` + msg + `]}`, false},
		{"field twice", `{"model": "a", "model": "b", "messages": [` + msg + `]}`, false},
		{"stream_options twice", `{"stream_options": {"include_usage": true}, "stream_options": {}, "messages": [` + msg + `]}`, false},
		{"message field twice", `{"messages": [{"role": "user", "role": "tool", "content": "x"}]}`, false},
		{"key in another case", `{"Messages": [` + msg + `], "messages": [` + msg + `]}`, false},
		{"key folding to a field", `{"MODEL": "x", "messages": [` + msg + `]}`, false},
		{"message key in another case", `{"messages": [{"Role": "user", "content": "x"}]}`, false},
		{"escaped key", `{"mod\u0065l": "x", "messages": [` + msg + `]}`, false},
		{"non-ASCII key", `{"ſtream": true, "messages": [` + msg + `]}`, false},
		{"int as float", `{"max_tokens": 1.0, "messages": [` + msg + `]}`, false},
		{"int with exponent", `{"max_tokens": 1e2, "messages": [` + msg + `]}`, false},
		{"float out of range", `{"temperature": 1e999, "messages": [` + msg + `]}`, false},
		{"seed too large", `{"seed": 99999999999999999999, "messages": [` + msg + `]}`, false},
		{"string for bool", `{"stream": "yes", "messages": [` + msg + `]}`, false},
		{"bad literal", `{"stream": tru, "messages": [` + msg + `]}`, false},
		{"bad number", `{"temperature": 01, "messages": [` + msg + `]}`, false},
		{"bad number 2", `{"temperature": 1., "messages": [` + msg + `]}`, false},
		{"bad number 3", `{"temperature": -, "messages": [` + msg + `]}`, false},
		{"malformed unknown field", `{"x": [1, 2,], "messages": [` + msg + `]}`, false},
		{"control character", "{\"messages\": [{\"role\": \"user\", \"content\": \"a\x01b\"}]}", false},
		{"bad escape", `{"messages": [{"role": "user", "content": "a\qb"}]}`, false},
		{"bad unicode escape", `{"messages": [{"role": "user", "content": "a\u12G4"}]}`, false},
		// Content strings encoding/json would decode differently are
		// left to it one by one; the body stays on the fast path.
		{"lone surrogate", `{"messages": [{"role": "user", "content": "\ud800"}]}`, true},
		{"invalid UTF-8", "{\"messages\": [{\"role\": \"user\", \"content\": \"a\xffb\"}]}", true},
		{"invalid UTF-8 role", "{\"messages\": [{\"role\": \"us\xffer\", \"content\": \"x\"}]}", false},
		{"trailing data", `{"messages": [` + msg + `]} x`, false},
		{"trailing comma", `{"messages": [` + msg + `],}`, false},
		{"two values", `{"messages": [` + msg + `]}{}`, false},
		{"not an object", `[` + msg + `]`, false},
		{"message not an object", `{"messages": [null]}`, false},
		{"tool call not an object", `{"messages": [{"role": "assistant", "tool_calls": [1]}]}`, false},
		{"function null", `{"messages": [{"role": "assistant", "tool_calls": [{"function": null}]}]}`, false},
		{"tool function null", `{"tools": [{"type": "function", "function": null}], "messages": [` + msg + `]}`, false},
		{"bad role", `{"messages": [{"role": "wizard", "content": "x"}]}`, false},
		{"bad arguments", `{"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{"}}]}]}`, false},
		{"n=2", `{"n": 2, "messages": [` + msg + `]}`, false},
		{"deep", `{"x": ` + strings.Repeat("[", 300) + strings.Repeat("]", 300) + `, "messages": [` + msg + `]}`, false},
		{"empty", ``, false},
		{"truncated", `{"messages": [` + msg, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, ok := checkScanChat(t, []byte(tt.body)); ok != tt.fast {
				t.Errorf("scanChat vouched: %v, want %v", ok, tt.fast)
			}
		})
	}
}

// wireConversation is policy/chat's 20-turn agent conversation as a
// client sends it: 42 messages (tool arguments as JSON strings) and tools.
func wireConversation(t testing.TB) (msgs []map[string]any, tools []any) {
	t.Helper()
	raw, err := os.ReadFile("../policy/chat/testdata/qwen3/bench_20_turns.json")
	if err != nil {
		t.Fatal(err)
	}
	var conv struct {
		Messages []map[string]any `json:"messages"`
		Tools    []any            `json:"tools"`
	}
	if err := json.Unmarshal(raw, &conv); err != nil {
		t.Fatal(err)
	}
	for _, m := range conv.Messages {
		calls, _ := m["tool_calls"].([]any)
		for _, c := range calls {
			fn := c.(map[string]any)["function"].(map[string]any)
			args, _ := json.Marshal(fn["arguments"])
			fn["arguments"] = string(args)
		}
	}
	return conv.Messages, conv.Tools
}

// wireBody is a Chat Completions body of msgs and tools.
func wireBody(t testing.TB, msgs []map[string]any, tools []any) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"model": "tiny", "messages": msgs, "tools": tools})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// edited returns a deep copy of msgs with edit applied to it.
func edited(t testing.TB, msgs []map[string]any, edit func([]map[string]any)) []map[string]any {
	t.Helper()
	var out []map[string]any
	b, _ := json.Marshal(msgs)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	edit(out)
	return out
}

// firstToolCall is the index of the first assistant message with a tool
// call.
func firstToolCall(msgs []map[string]any) int {
	for i, m := range msgs {
		if calls, _ := m["tool_calls"].([]any); len(calls) > 0 {
			return i
		}
	}
	return -1
}

// TestScanChatIncremental decodes a body from the memo of the one before
// it: an agent's next call reuses every repeated message, and an edit
// anywhere (an early message, a tool call's arguments, the system prompt,
// the tools) reuses only what precedes it, and decodes the same as
// encoding/json in every case.
func TestScanChatIncremental(t *testing.T) {
	msgs, tools := wireConversation(t)
	n := len(msgs)
	prevBody := wireBody(t, msgs[:n-2], tools)
	prev, ok := checkScanChat(t, prevBody)
	if !ok {
		t.Fatal("the first body was left to encoding/json")
	}
	call := firstToolCall(msgs)
	otherTools := edited(t, []map[string]any{{"t": tools}}, func(m []map[string]any) {
		m[0]["t"].([]any)[0].(map[string]any)["function"].(map[string]any)["description"] = "changed"
	})[0]["t"].([]any)
	tests := []struct {
		name   string
		body   []byte
		reused int
		tools  bool
	}{
		{"append", wireBody(t, msgs, tools), n - 2, true},
		{"same", prevBody, n - 2, true},
		{"cut", wireBody(t, msgs[:n-4], tools), n - 4, true},
		{"early message edited", wireBody(t, edited(t, msgs, func(m []map[string]any) { m[3]["content"] = "edited" }), tools), 3, true},
		{"tool call arguments edited", wireBody(t, edited(t, msgs, func(m []map[string]any) {
			m[call]["tool_calls"].([]any)[0].(map[string]any)["function"].(map[string]any)["arguments"] = `{"command": "edited"}`
		}), tools), call, true},
		{"system prompt edited", wireBody(t, edited(t, msgs, func(m []map[string]any) { m[0]["content"] = "You are someone else." }), tools), 0, true},
		{"tools changed", wireBody(t, msgs, otherTools), n - 2, false},
		{"tools dropped", wireBody(t, msgs, nil), n - 2, false},
		{"whitespace", []byte(strings.Replace(string(wireBody(t, msgs, tools)), `"messages":[{`, `"messages":[ {`, 1)), 0, true},
		{"messages last", []byte(`{"tools": ` + mustJSON(t, tools) + `, "messages": ` + mustJSON(t, msgs) + `}`), n - 2, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, ok := checkScanChat(t, tt.body, nil, prev.memo)
			if !ok {
				t.Fatal("left to encoding/json")
			}
			wantBase := -1
			if tt.reused > 0 {
				wantBase = 1
			}
			if out.reused != tt.reused || out.base != wantBase {
				t.Errorf("reused %d messages of memo %d, want %d of %d", out.reused, out.base, tt.reused, wantBase)
			}
			if tt.reused > 0 && out.toolsReused != tt.tools {
				t.Errorf("tools reused: %v, want %v", out.toolsReused, tt.tools)
			}
			// And a chain: the next body from this one's memo.
			next := wireBody(t, append(append([]map[string]any(nil), msgs...), map[string]any{"role": "user", "content": "more"}), tools)
			checkScanChat(t, next, out.memo, prev.memo)
		})
	}
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// FuzzScanChat: for any body, decoded alone or from the memo of any other
// body, scanChat decodes exactly as encoding/json or leaves the body to it.
// Run it with go test -run '^$' -fuzz '^FuzzScanChat$' -fuzztime 60s ./proxy
func FuzzScanChat(f *testing.F) {
	msg := `{"role": "user", "content": "hi"}`
	asst := `{"role": "assistant", "content": "x", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{}"}}]}`
	for _, seed := range [][2]string{
		{okBody, okBody},
		{`{"messages": [` + msg + `]}`, `{"messages": [` + msg + `, ` + asst + `]}`},
		{`{"messages": [` + msg + `, ` + asst + `]}`, `{"messages": [` + msg + `, ` + asst + `, {"role": "tool", "content": "out"}]}`},
		{`{"messages": [` + msg + `, ` + asst + `]}`, `{"messages": [` + msg + `, ` + asst + `]  }`},
		{`{"messages": [` + msg + `, ` + asst + `]}`, `{"messages": [` + msg + `, ` + asst + `, null]}`},
		{`{"messages": [` + msg + `, ` + asst + `]}`, `{"messages": [` + msg + `, ` + asst},
		{`{"messages": [` + msg + `], "tools": [{"type": "function", "function": {"name": "f"}}]}`,
			`{"messages": [` + msg + `, ` + asst + `], "tools": [{"type": "function", "function": {"name": "f"}}]}`},
		{`{"messages": [` + msg + `]}`, `{"messages": [` + msg + `], "messages": []}`},
		{`{"messages": [` + msg + `]}`, `{"stream": true, "messages": [` + msg + `,` + msg + `]}`},
	} {
		f.Add([]byte(seed[0]), []byte(seed[1]))
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		out, _ := checkScanChat(t, a)
		checkScanChat(t, b, out.memo)
		checkScanChat(t, b, nil, out.memo)
	})
}
