package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/legorl/legorl/policy/chat"
)

func TestMessagesDecode(t *testing.T) {
	sys := func(s string) chat.Message { return chat.Message{Role: chat.RoleSystem, Content: s} }
	user := func(s string) chat.Message { return chat.Message{Role: chat.RoleUser, Content: s} }
	tool := func(id, name, out string) chat.Message {
		return chat.Message{Role: chat.RoleTool, ToolCallID: id, Name: name, Content: out}
	}
	call := func(id, name, args string) chat.ToolCall {
		return chat.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(args)}
	}
	bash := chat.Tool{Name: "Bash", Description: "Run a command.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}`)}
	tests := []struct {
		name, body string
		want       Turn
	}{
		{"claude code", `{"model":"claude-sonnet-4-5","max_tokens":32000,"stream":true,"temperature":1,"metadata":{"user_id":"u"},
			"system":[{"type":"text","text":"You are Claude Code.","cache_control":{"type":"ephemeral"}},{"type":"text","text":"Be careful."}],
			"thinking":{"type":"enabled","budget_tokens":4096},"tool_choice":{"type":"auto","disable_parallel_tool_use":false},
			"tools":[{"name":"Bash","description":"Run a command.","input_schema":{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}},
				{"type":"web_search_20250305","name":"web_search","max_uses":8}],
			"messages":[
			{"role":"user","content":[{"type":"text","text":"<system-reminder>x</system-reminder>"},{"type":"text","text":"List files.","cache_control":{"type":"ephemeral"}}]},
			{"role":"assistant","content":[{"type":"thinking","thinking":"I should run ls.","signature":"sig"},{"type":"text","text":"Looking."},
				{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls"}},{"type":"tool_use","id":"toolu_2","name":"Bash","input":{"command":"pwd"}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"a.txt"},
				{"type":"tool_result","tool_use_id":"toolu_2","is_error":true,"content":[{"type":"text","text":"<tool_use_error>no</tool_use_error>"},{"type":"image","source":{"type":"base64"}}]},
				{"type":"text","text":"<system-reminder>y</system-reminder>"}]},
			{"role":"assistant","content":"Done."},
			{"role":"user","content":[{"type":"image","source":{}},{"type":"document","source":{}},{"type":"text","text":"What is this?"}]}]}`,
			Turn{Model: "claude-sonnet-4-5", MaxTokens: 32000, Stream: true, StreamUsage: true, ToolChoice: "auto", Tools: []chat.Tool{bash},
				Messages: []chat.Message{
					sys("You are Claude Code.\nBe careful."), user("<system-reminder>x</system-reminder>\nList files."),
					{Role: chat.RoleAssistant, ReasoningContent: "I should run ls.", Content: "Looking.",
						ToolCalls: []chat.ToolCall{call("toolu_1", "Bash", `{"command":"ls"}`), call("toolu_2", "Bash", `{"command":"pwd"}`)}},
					tool("toolu_1", "Bash", "a.txt"), tool("toolu_2", "Bash", "<tool_use_error>no</tool_use_error>\n"+omittedWireMedia("image")),
					user("<system-reminder>y</system-reminder>"),
					{Role: chat.RoleAssistant, Content: "Done."},
					user(omittedWireMedia("image") + "\n" + omittedWireMedia("document") + "\nWhat is this?"),
				}}},
		{"no thinking field turns thinking off", `{"model":"m","max_tokens":5,"system":"Be brief.","messages":[{"role":"user","content":"hi"}],
			"top_p":0.9,"top_k":40,"stop_sequences":[]}`,
			Turn{Model: "m", MaxTokens: 5, StreamUsage: true, DisableThinking: true, Messages: []chat.Message{sys("Be brief."), user("hi")}}},
		{"thinking disabled", `{"model":"m","max_tokens":5,"thinking":{"type":"disabled"},"messages":[{"role":"user","content":"hi"}]}`,
			Turn{Model: "m", MaxTokens: 5, StreamUsage: true, DisableThinking: true, Messages: []chat.Message{user("hi")}}},
		{"adaptive thinking, text around results", `{"model":"m","max_tokens":5,"thinking":{"type":"adaptive"},"messages":[
			{"role":"assistant","content":[{"type":"redacted_thinking","data":"xx"},{"type":"tool_use","id":"t","name":"f","input":{}}]},
			{"role":"user","content":[{"type":"text","text":"a"},{"type":"tool_result","tool_use_id":"t"},{"type":"tool_result","tool_use_id":"u","content":[]},{"type":"text","text":"b"}]},
			{"role":"user","content":[]}]}`,
			Turn{Model: "m", MaxTokens: 5, StreamUsage: true, Messages: []chat.Message{
				{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{call("t", "f", "{}")}},
				user("a"), tool("t", "f", ""), tool("u", "", ""), user("b"), user("")}}},
		{"server tools left out", `{"model":"m","max_tokens":5,"thinking":{"type":"enabled","budget_tokens":1024},"tool_choice":{"type":"any"},
			"tools":[{"type":"web_fetch_20250910","name":"web_fetch"},{"type":"code_execution_20250825","name":"code_execution"},
				{"type":"tool_search_tool_regex_20251119","name":"tool_search"},{"type":"mcp_toolset","mcp_server_name":"x"},
				{"type":"custom","name":"f","input_schema":{"type":"object"}}],
			"messages":[{"role":"user","content":"hi"}]}`,
			Turn{Model: "m", MaxTokens: 5, StreamUsage: true, ToolChoice: "required",
				Tools: []chat.Tool{{Name: "f", Parameters: json.RawMessage(`{"type":"object"}`)}}, Messages: []chat.Message{user("hi")}}},
		{"named tool", `{"model":"m","max_tokens":5,"tool_choice":{"type":"tool","name":"f"},"thinking":null,"messages":[{"role":"user","content":"hi"}]}`,
			Turn{Model: "m", MaxTokens: 5, StreamUsage: true, DisableThinking: true, ToolChoice: "f", Messages: []chat.Message{user("hi")}}},
		{"tool choice none", `{"model":"m","max_tokens":5,"tool_choice":{"type":"none"},"messages":[{"role":"user","content":"hi"}]}`,
			Turn{Model: "m", MaxTokens: 5, StreamUsage: true, DisableThinking: true, ToolChoice: "none", Messages: []chat.Message{user("hi")}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, e := messagesFormat{}.decode([]byte(tc.body))
			if e != nil {
				t.Fatalf("decode: %+v", *e)
			}
			checkTurn(t, got, tc.want)
		})
	}
}

func TestMessagesDecodeCountTokens(t *testing.T) {
	got, e := messagesFormat{}.decodeCountTokens([]byte(`{"model":"m","system":"s","thinking":{"type":"enabled","budget_tokens":2048},
		"tools":[{"name":"f","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"hi"}]}`))
	if e != nil {
		t.Fatalf("decode: %+v", *e)
	}
	checkTurn(t, got, Turn{Model: "m", Tools: []chat.Tool{{Name: "f", Parameters: json.RawMessage(`{"type":"object"}`)}},
		Messages: []chat.Message{{Role: chat.RoleSystem, Content: "s"}, {Role: chat.RoleUser, Content: "hi"}}})
	if _, e := (messagesFormat{}).decodeCountTokens([]byte(`{"model":"m","max_tokens":"x"}`)); e == nil || e.Param != "messages" {
		t.Fatalf("count_tokens without messages: %+v", e)
	}
	rec := httptest.NewRecorder()
	messagesFormat{}.countTokens(rec, 42)
	if rec.Code != 200 || strings.TrimSpace(rec.Body.String()) != `{"input_tokens":42}` {
		t.Fatalf("count_tokens reply %d %s", rec.Code, rec.Body)
	}
}

func TestMessagesDecodeErrors(t *testing.T) {
	msgs := func(s string) string { return `{"model":"m","max_tokens":5,"messages":[` + s + `]}` }
	with := func(s string) string {
		return `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],` + s + `}`
	}
	tests := []struct{ name, body, param string }{
		{"not JSON", `{"model"`, ""},
		{"not an object", `"hi"`, ""},
		{"no model", `{"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, "model"},
		{"no max_tokens", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, "max_tokens"},
		{"max_tokens zero", `{"model":"m","max_tokens":0,"messages":[{"role":"user","content":"hi"}]}`, "max_tokens"},
		{"max_tokens string", `{"model":"m","max_tokens":"5","messages":[{"role":"user","content":"hi"}]}`, "max_tokens"},
		{"stream type", with(`"stream":"yes"`), "stream"},
		{"temperature type", with(`"temperature":"hot"`), "temperature"},
		{"top_k type", with(`"top_k":[1]`), "top_k"},
		{"stop sequences", with(`"stop_sequences":["\n\nHuman:"]`), "stop_sequences"},
		{"stop sequences type", with(`"stop_sequences":"STOP"`), "stop_sequences"},
		{"thinking type", with(`"thinking":"on"`), "thinking"},
		{"thinking without type", with(`"thinking":{}`), "thinking.type"},
		{"thinking kind", with(`"thinking":{"type":"deep"}`), "thinking.type"},
		{"thinking budget", with(`"thinking":{"type":"enabled","budget_tokens":"x"}`), "thinking.budget_tokens"},
		{"tools type", with(`"tools":{}`), "tools"},
		{"tool not an object", with(`"tools":[1]`), "tools[0]"},
		{"bash tool", with(`"tools":[{"name":"f","input_schema":{}},{"type":"bash_20250124","name":"bash"}]`), "tools[1].type"},
		{"text editor tool", with(`"tools":[{"type":"text_editor_20250728","name":"str_replace_based_edit_tool"}]`), "tools[0].type"},
		{"tool without name", with(`"tools":[{"input_schema":{}}]`), "tools[0].name"},
		{"tool without schema", with(`"tools":[{"name":"f"}]`), "tools[0].input_schema"},
		{"schema not an object", with(`"tools":[{"name":"f","input_schema":"object"}]`), "tools[0].input_schema"},
		{"tool_choice string", with(`"tool_choice":"auto"`), "tool_choice"},
		{"tool_choice without name", with(`"tool_choice":{"type":"tool"}`), "tool_choice.name"},
		{"tool_choice kind", with(`"tool_choice":{"type":"required"}`), "tool_choice.type"},
		{"tool_choice parallel", with(`"tool_choice":{"type":"auto","disable_parallel_tool_use":"no"}`), "tool_choice.disable_parallel_tool_use"},
		{"system type", with(`"system":5`), "system"},
		{"system block", with(`"system":[{"type":"image"}]`), "system[0].type"},
		{"system block without type", with(`"system":[{"text":"s"}]`), "system[0].type"},
		{"system text", with(`"system":[{"type":"text","text":1}]`), "system[0].text"},
		{"no messages", `{"model":"m","max_tokens":5}`, "messages"},
		{"messages empty", `{"model":"m","max_tokens":5,"messages":[]}`, "messages"},
		{"messages object", `{"model":"m","max_tokens":5,"messages":{}}`, "messages"},
		{"message not an object", msgs(`"hi"`), "messages[0]"},
		{"role", msgs(`{"role":"system","content":"x"}`), "messages[0].role"},
		{"no content", msgs(`{"role":"user"}`), "messages[0].content"},
		{"content number", msgs(`{"role":"user","content":1}`), "messages[0].content"},
		{"block not an object", msgs(`{"role":"user","content":["hi"]}`), "messages[0].content[0]"},
		{"block without type", msgs(`{"role":"user","content":[{"text":"hi"}]}`), "messages[0].content[0].type"},
		{"text type", msgs(`{"role":"user","content":[{"type":"text","text":["hi"]}]}`), "messages[0].content[0].text"},
		{"user tool_use", msgs(`{"role":"user","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]}`), "messages[0].content[0].type"},
		{"assistant tool_result", msgs(`{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"tool_result","tool_use_id":"t"}]}`), "messages[1].content[0].type"},
		{"assistant image", msgs(`{"role":"assistant","content":[{"type":"image","source":{}}]}`), "messages[0].content[0].type"},
		{"server tool use", msgs(`{"role":"assistant","content":[{"type":"server_tool_use","id":"s","name":"web_search","input":{}}]}`), "messages[0].content[0].type"},
		{"result without id", msgs(`{"role":"user","content":[{"type":"tool_result","content":"x"}]}`), "messages[0].content[0].tool_use_id"},
		{"result is_error", msgs(`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","is_error":"yes"}]}`), "messages[0].content[0].is_error"},
		{"result content", msgs(`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":3}]}`), "messages[0].content[0].content"},
		{"result block", msgs(`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"tool_reference"}]}]}`), "messages[0].content[0].content[0].type"},
		{"tool_use without id", msgs(`{"role":"assistant","content":[{"type":"tool_use","name":"f","input":{}}]}`), "messages[0].content[0].id"},
		{"tool_use without name", msgs(`{"role":"assistant","content":[{"type":"tool_use","id":"t","input":{}}]}`), "messages[0].content[0].name"},
		{"tool_use without input", msgs(`{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f"}]}`), "messages[0].content[0].input"},
		{"tool_use input string", msgs(`{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":"{}"}]}`), "messages[0].content[0].input"},
		{"thinking text type", msgs(`{"role":"assistant","content":[{"type":"thinking","thinking":false}]}`), "messages[0].content[0].thinking"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { wireDecodeError(t, messagesFormat{}, tc.body, tc.param) })
	}
}

func TestMessagesGolden(t *testing.T) {
	wireGoldens(t, messagesFormat{}, "messages", "msg_0123456789abcdef")
}

func TestMessagesFail(t *testing.T) {
	tests := []struct {
		e       *apiError
		status  int
		typ     string
		message string
	}{
		{badRequest("messages[1].role", "proxy: bad role"), 400, "invalid_request_error", "proxy: bad role"},
		{unknownRollout("r1"), 404, "not_found_error", `proxy: no open rollout "r1"`},
		{&apiError{Status: 400, Kind: KindContextLength, Message: "proxy: 9000 tokens > 8192"}, 400, "invalid_request_error", "prompt is too long: proxy: 9000 tokens > 8192"},
		{&apiError{Status: 400, Kind: KindContextLength, Message: "Prompt is too long"}, 400, "invalid_request_error", "Prompt is too long"},
		{tooLarge(1 << 20), 413, "request_too_large", "proxy: request body over 1048576 bytes"},
		{&apiError{Status: 429, Kind: KindOverloaded, Message: "slow down"}, 429, "rate_limit_error", "slow down"},
		{&apiError{Status: 503, Kind: KindOverloaded, Message: "busy"}, 503, "overloaded_error", "busy"},
		{serverError("boom"), 500, "api_error", "boom"},
	}
	for _, tc := range tests {
		t.Run(tc.e.Message, func(t *testing.T) {
			rec := httptest.NewRecorder()
			messagesFormat{}.fail(rec, tc.e)
			var body messagesErrorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatal(err)
			}
			if rec.Code != tc.status || body.Type != "error" || body.Error.Type != tc.typ || body.Error.Message != tc.message {
				t.Fatalf("status %d, body %s", rec.Code, rec.Body)
			}
		})
	}
}

// checkMessagesSDK checks that the SDK sees r in m.
func checkMessagesSDK(t *testing.T, m *anthropic.Message, r *Reply) {
	t.Helper()
	if m.ID != r.ID || m.Model != r.Model || m.Role != "assistant" || m.Type != "message" || m.StopSequence != "" {
		t.Errorf("message %s", m.RawJSON())
	}
	if want := messagesStopReason(r.Finish); string(m.StopReason) != want {
		t.Errorf("stop reason %q, want %q", m.StopReason, want)
	}
	var text, thinking string
	var calls []chat.ToolCall
	for _, b := range m.Content {
		switch b.Type {
		case "text":
			text += b.Text
		case "thinking":
			thinking += b.Thinking
		case "tool_use":
			calls = append(calls, chat.ToolCall{ID: b.ID, Name: b.Name, Arguments: b.Input})
		default:
			t.Errorf("block type %q", b.Type)
		}
	}
	if text != r.Content || thinking != r.Reasoning {
		t.Errorf("text %q thinking %q", text, thinking)
	}
	checkWireCalls(t, calls, r.ToolCalls)
	u := m.Usage
	if int(u.InputTokens+u.CacheReadInputTokens) != r.Usage.PromptTokens || int(u.CacheReadInputTokens) != r.Usage.CachedTokens ||
		int(u.OutputTokens) != r.Usage.CompletionTokens || u.CacheCreationInputTokens != 0 {
		t.Errorf("usage %+v, want %+v", u, r.Usage)
	}
}

// TestMessagesSDK runs the official SDK against a server that speaks only
// messagesFormat, the way Claude Code calls it: a first call, then its
// message sent back with the tool results, streamed; and count_tokens.
func TestMessagesSDK(t *testing.T) {
	for _, tc := range wireTestReplies("msg_0123456789abcdef") {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.r
			srv := newWireServer(t, messagesFormat{}, func(w http.ResponseWriter, path string, turn Turn) {
				if strings.HasSuffix(path, "/count_tokens") {
					messagesFormat{}.countTokens(w, 7*len(turn.Messages))
					return
				}
				answerWith(messagesFormat{}, r)(w, path, turn)
			})
			client := anthropic.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("test"), option.WithMaxRetries(0))
			ctx := context.Background()
			params := anthropic.MessageNewParams{
				Model:     "qwen3-test",
				MaxTokens: 256,
				System:    []anthropic.TextBlockParam{{Text: "You are Claude Code."}, {Text: "Be careful."}},
				Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("List the files."))},
				Tools: []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "shell", Description: anthropic.String("Run a command."),
					InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"command": map[string]any{"type": "string"}}, Required: []string{"command"}}}}},
				Thinking: anthropic.ThinkingConfigParamOfEnabled(1024),
			}
			m, err := client.Messages.New(ctx, params)
			if err != nil {
				t.Fatal(err)
			}
			checkMessagesSDK(t, m, &r)
			turn := srv.last(t)
			if turn.Model != "qwen3-test" || turn.MaxTokens != 256 || turn.Stream || turn.DisableThinking || len(turn.Messages) != 2 ||
				turn.Messages[0].Content != "You are Claude Code.\nBe careful." || turn.Messages[1].Content != "List the files." ||
				len(turn.Tools) != 1 || turn.Tools[0].Name != "shell" || turn.Tools[0].Description != "Run a command." ||
				!sameJSON(t, turn.Tools[0].Parameters, []byte(`{"properties":{"command":{"type":"string"}},"required":["command"],"type":"object"}`)) {
				t.Fatalf("first turn:\n%s", turnJSON(t, turn))
			}

			// The second call sends the message back with a result for
			// every tool call and a reminder after them, and streams.
			params.Messages = append(params.Messages, m.ToParam())
			var results []anthropic.ContentBlockParamUnion
			for _, tc := range r.ToolCalls {
				results = append(results, anthropic.NewToolResultBlock(tc.ID, "output of "+tc.Name, false))
			}
			results = append(results, anthropic.NewTextBlock("<system-reminder>go on</system-reminder>"))
			params.Messages = append(params.Messages, anthropic.NewUserMessage(results...))
			stream := client.Messages.NewStreaming(ctx, params)
			var acc anthropic.Message
			var text, thinking string
			for stream.Next() {
				ev := stream.Current()
				if err := acc.Accumulate(ev); err != nil {
					t.Fatal(err)
				}
				switch ev.Delta.Type {
				case "text_delta":
					text += ev.Delta.Text
				case "thinking_delta":
					thinking += ev.Delta.Thinking
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			if text != r.Content || thinking != r.Reasoning {
				t.Errorf("streamed text %q thinking %q", text, thinking)
			}
			checkMessagesSDK(t, &acc, &r)

			turn = srv.last(t)
			want := []chat.Message{{Role: chat.RoleSystem, Content: "You are Claude Code.\nBe careful."}, {Role: chat.RoleUser, Content: "List the files."},
				{Role: chat.RoleAssistant, ReasoningContent: r.Reasoning, Content: r.Content, ToolCalls: r.ToolCalls}}
			for _, tc := range r.ToolCalls {
				want = append(want, chat.Message{Role: chat.RoleTool, ToolCallID: tc.ID, Name: tc.Name, Content: "output of " + tc.Name})
			}
			want = append(want, chat.Message{Role: chat.RoleUser, Content: "<system-reminder>go on</system-reminder>"})
			checkSecondTurn(t, turn, want)

			count, err := client.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: "qwen3-test", Messages: params.Messages,
				System: anthropic.MessageCountTokensParamsSystemUnion{OfString: anthropic.String("s")}})
			if err != nil {
				t.Fatal(err)
			}
			if int(count.InputTokens) != 7*len(want) {
				t.Errorf("count_tokens %d, want %d", count.InputTokens, 7*len(want))
			}
		})
	}
}

// TestMessagesSDKErrors checks errors as the SDK reads them: a 4xx before
// the stream, and an error event in the middle of one.
func TestMessagesSDKErrors(t *testing.T) {
	r := wireTestReplies("msg_1")[0].r
	srv := newWireServer(t, messagesFormat{}, func(w http.ResponseWriter, _ string, turn Turn) {
		sw := messagesFormat{}.stream(w, &r)
		_ = sw.text("partial")
		sw.fail(&apiError{Status: 503, Kind: KindOverloaded, Message: "proxy: the engine is closed"})
	})
	client := anthropic.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("test"), option.WithMaxRetries(0))
	ctx := context.Background()
	user := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}
	_, err := client.Messages.New(ctx, anthropic.MessageNewParams{Model: "m", MaxTokens: 5, Messages: user, StopSequences: []string{"STOP"}})
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Type() != "invalid_request_error" ||
		!strings.Contains(apiErr.Message, "stop_sequences") {
		t.Fatalf("error %v", err)
	}

	stream := client.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: "m", MaxTokens: 5, Messages: user})
	var acc anthropic.Message
	for stream.Next() {
		if err := acc.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if !errors.As(stream.Err(), &apiErr) || apiErr.Type() != "overloaded_error" || apiErr.Message != "proxy: the engine is closed" {
		t.Fatalf("stream error %v", stream.Err())
	}
	if len(acc.Content) != 1 || acc.Content[0].Text != "partial" {
		t.Fatalf("partial message %s", acc.RawJSON())
	}
}

// FuzzDecodeMessages checks that decode never panics and that every error
// is a 4xx invalid_request error; a decoded Turn always has a message.
func FuzzDecodeMessages(f *testing.F) {
	seeds := []string{
		`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","max_tokens":5,"system":[{"type":"text","text":"s"}],"thinking":{"type":"enabled","budget_tokens":1024},
			"tools":[{"name":"f","input_schema":{"type":"object"}},{"type":"web_search_20250305","name":"w"}],"tool_choice":{"type":"tool","name":"f"},
			"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image","source":{}}]},
			{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":""},{"type":"text","text":"b"},{"type":"tool_use","id":"i","name":"f","input":{"x":1}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"i","content":[{"type":"text","text":"r"}],"is_error":true},{"type":"text","text":"c"}]}]}`,
		`{"model":"m","max_tokens":5,"stop_sequences":["x"],"messages":[]}`,
		`{"model":"m","max_tokens":-1,"messages":[{"role":"user","content":[{"type":"tool_result"}]}]}`,
		`[]`, `null`, ``, `{"messages":[null,[],{"role":"user","content":[null]}]}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, decode := range []func([]byte) (Turn, *apiError){messagesFormat{}.decode, messagesFormat{}.decodeCountTokens} {
			turn, e := decode(body)
			if e != nil {
				if e.Status < 400 || e.Status > 499 || e.Kind != KindInvalidRequest || e.Message == "" {
					t.Fatalf("error %+v", *e)
				}
				continue
			}
			if len(turn.Messages) == 0 || turn.Model == "" {
				t.Fatalf("turn %+v", turn)
			}
		}
	})
}
