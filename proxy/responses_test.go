package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/legorl/legorl/policy/chat"
)

// Helpers shared by the tests of the Responses and Messages formats.

// The -update flag rewrites golden files. It is registered here unless
// another test file of the package registered it first (package variables
// are set before init functions run).
func init() {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite the golden files in testdata/")
	}
}

// wireUpdate reports whether -update was given.
func wireUpdate() bool {
	g, ok := flag.Lookup("update").Value.(flag.Getter)
	return ok && g.Get() == true
}

// checkWireGolden compares got with the golden file path (rewriting it
// under -update).
func checkWireGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if wireUpdate() {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./proxy -run %s -update)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("%s: line %d differs:\n got: %s\nwant: %s", path, i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("%s: %d lines, want %d", path, len(gl), len(wl))
	}
}

// indentJSON re-indents a JSON body for a golden file.
func indentJSON(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	out.WriteByte('\n')
	return out.Bytes()
}

// wireEvent is one server-sent event of a stream.
type wireEvent struct {
	Event string          `json:"event"`
	Data  json.RawMessage `json:"data"`
}

// parseWireSSE splits an event stream and checks its framing: every event
// is an "event: NAME" line, one "data: JSON" line and a blank line, and
// its data's type is NAME.
func parseWireSSE(t *testing.T, body string) []wireEvent {
	t.Helper()
	if !strings.HasSuffix(body, "\n\n") {
		t.Fatalf("stream does not end with a blank line: %q", body)
	}
	var events []wireEvent
	for _, block := range strings.Split(strings.TrimSuffix(body, "\n\n"), "\n\n") {
		lines := strings.Split(block, "\n")
		name, ok1 := strings.CutPrefix(lines[0], "event: ")
		data, ok2 := "", false
		if len(lines) == 2 {
			data, ok2 = strings.CutPrefix(lines[1], "data: ")
		}
		if !ok1 || !ok2 {
			t.Fatalf("malformed event %q", block)
		}
		var head struct{ Type string }
		if err := json.Unmarshal([]byte(data), &head); err != nil || head.Type != name {
			t.Fatalf("event %s: data type %q (%v): %s", name, head.Type, err, data)
		}
		events = append(events, wireEvent{Event: name, Data: json.RawMessage(data)})
	}
	return events
}

// wireTestReply is a fixed Reply for golden files and SDK round trips.
type wireTestReply struct {
	name string
	r    Reply
}

// wireTestReplies are the fixed Replies, with the given id.
func wireTestReplies(id string) []wireTestReply {
	created := time.Unix(1767225600, 0).UTC()
	r := func(reasoning, content string, calls []chat.ToolCall, finish string, u Usage) Reply {
		return Reply{ID: id, Model: "qwen3-test", Created: created, Reasoning: reasoning, Content: content,
			ToolCalls: calls, Finish: finish, Usage: u}
	}
	return []wireTestReply{
		{"text", r("", "Hello, <world> & “friends” 👋\nBye.", nil, FinishStop,
			Usage{PromptTokens: 12, CompletionTokens: 9})},
		{"tools", r("The user wants the files.\nI will run ls, then read the README.", "Let me look.",
			[]chat.ToolCall{
				{ID: "call_0001", Name: "shell", Arguments: json.RawMessage(`{"command": ["ls", "-la"]}`)},
				{ID: "call_0002", Name: "read_file", Arguments: json.RawMessage(`{"path":"README.md","limit":20}`)},
			}, FinishToolCalls, Usage{PromptTokens: 120, CompletionTokens: 40, CachedTokens: 96})},
		{"bare_call", r("", "", []chat.ToolCall{{ID: "call_0003", Name: "pwd"}}, FinishToolCalls,
			Usage{PromptTokens: 50, CompletionTokens: 7, CachedTokens: 50})},
		{"length", r("Thinking about a very long", "", nil, FinishLength,
			Usage{PromptTokens: 30, CompletionTokens: 8})},
	}
}

// wireChunks splits s into about three pieces at rune boundaries, as a
// stream delivers it.
func wireChunks(s string) []string {
	var out []string
	size := max(len(s)/3, 1)
	for len(s) > 0 {
		n := min(size, len(s))
		for n < len(s) && !utf8.RuneStart(s[n]) {
			n++
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

// driveWireStream streams r through f the way the proxy does: the stream
// starts with the reply's id, model and time, then reasoning and text
// deltas, then finish with the whole reply.
func driveWireStream(f wireFormat, w http.ResponseWriter, r *Reply) error {
	sw := f.stream(w, &Reply{ID: r.ID, Model: r.Model, Created: r.Created, StreamUsage: true})
	for _, d := range wireChunks(r.Reasoning) {
		if err := sw.reasoning(d); err != nil {
			return err
		}
	}
	for _, d := range wireChunks(r.Content) {
		if err := sw.text(d); err != nil {
			return err
		}
	}
	return sw.finish(r)
}

// wireGoldens writes the golden files of format f under testdata/dir:
// NAME.reply.json and NAME.stream.json for every fixed reply, and
// fail.stream.json for a stream that fails after some text.
func wireGoldens(t *testing.T, f wireFormat, dir, id string) {
	render := func(write func(w http.ResponseWriter)) (int, http.Header, string) {
		rec := httptest.NewRecorder()
		write(rec)
		return rec.Code, rec.Header(), rec.Body.String()
	}
	stream := func(t *testing.T, body string) []byte {
		b, err := json.MarshalIndent(parseWireSSE(t, body), "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		return append(b, '\n')
	}
	for _, tc := range wireTestReplies(id) {
		t.Run(tc.name, func(t *testing.T) {
			code, h, body := render(func(w http.ResponseWriter) { f.reply(w, &tc.r) })
			if code != http.StatusOK || h.Get("Content-Type") != "application/json" {
				t.Fatalf("reply: status %d, content type %q", code, h.Get("Content-Type"))
			}
			checkWireGolden(t, filepath.Join("testdata", dir, tc.name+".reply.json"), indentJSON(t, []byte(body)))

			code, h, body = render(func(w http.ResponseWriter) {
				if err := driveWireStream(f, w, &tc.r); err != nil {
					t.Fatal(err)
				}
			})
			if code != http.StatusOK || h.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("stream: status %d, content type %q", code, h.Get("Content-Type"))
			}
			_, _, again := render(func(w http.ResponseWriter) { _ = driveWireStream(f, w, &tc.r) })
			if again != body {
				t.Fatal("the same reply streamed twice differs")
			}
			checkWireGolden(t, filepath.Join("testdata", dir, tc.name+".stream.json"), stream(t, body))
		})
	}
	t.Run("fail", func(t *testing.T) {
		r := wireTestReplies(id)[0].r
		_, _, body := render(func(w http.ResponseWriter) {
			sw := f.stream(w, &r)
			if err := sw.text("Hel"); err != nil {
				t.Fatal(err)
			}
			sw.fail(serverError("proxy: the engine produced invalid output"))
		})
		checkWireGolden(t, filepath.Join("testdata", dir, "fail.stream.json"), stream(t, body))
	})
}

// wireDecodeError checks that decoding body fails with a 4xx
// invalid_request error naming param.
func wireDecodeError(t *testing.T, f wireFormat, body, param string) {
	t.Helper()
	turn, e := f.decode([]byte(body))
	if e == nil {
		t.Fatalf("decoded %+v, want an error naming %q", turn, param)
	}
	if e.Status != http.StatusBadRequest || e.Kind != KindInvalidRequest || e.Param != param || e.Message == "" {
		t.Fatalf("error %+v, want a 400 invalid_request naming %q", *e, param)
	}
	if param != "" && !strings.Contains(e.Message, param) {
		t.Fatalf("message %q does not name %q", e.Message, param)
	}
}

// turnJSON shows a Turn for comparisons (raw JSON compacted).
func turnJSON(t *testing.T, turn Turn) string {
	t.Helper()
	b, err := json.MarshalIndent(turn, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// checkTurn compares a decoded Turn with want.
func checkTurn(t *testing.T, got, want Turn) {
	t.Helper()
	if g, w := turnJSON(t, got), turnJSON(t, want); g != w {
		t.Fatalf("turn:\n%s\nwant:\n%s", g, w)
	}
}

// wireServer is an httptest server that answers with format f only: it
// decodes each request, records the Turn and answers with respond.
type wireServer struct {
	*httptest.Server
	mu    sync.Mutex
	turns []Turn
}

func newWireServer(t *testing.T, f wireFormat, respond func(w http.ResponseWriter, path string, turn Turn)) *wireServer {
	s := &wireServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Error(err)
			return
		}
		decode := f.decode
		if m, ok := f.(messagesFormat); ok && strings.HasSuffix(r.URL.Path, "/count_tokens") {
			decode = m.decodeCountTokens
		}
		turn, e := decode(body)
		if e != nil {
			f.fail(w, e)
			return
		}
		s.mu.Lock()
		s.turns = append(s.turns, turn)
		s.mu.Unlock()
		respond(w, r.URL.Path, turn)
	}))
	t.Cleanup(s.Close)
	return s
}

// last is the last Turn the server decoded.
func (s *wireServer) last(t *testing.T) Turn {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.turns) == 0 {
		t.Fatal("the server decoded no request")
	}
	return s.turns[len(s.turns)-1]
}

// answerWith answers every call with r, streamed when asked.
func answerWith(f wireFormat, r Reply) func(http.ResponseWriter, string, Turn) {
	return func(w http.ResponseWriter, _ string, turn Turn) {
		if turn.Stream {
			_ = driveWireStream(f, w, &r)
			return
		}
		f.reply(w, &r)
	}
}

// Responses.

func TestResponsesDecode(t *testing.T) {
	sys := func(s string) chat.Message { return chat.Message{Role: chat.RoleSystem, Content: s} }
	user := func(s string) chat.Message { return chat.Message{Role: chat.RoleUser, Content: s} }
	tool := func(id, name, out string) chat.Message {
		return chat.Message{Role: chat.RoleTool, ToolCallID: id, Name: name, Content: out}
	}
	call := func(id, name, args string) chat.ToolCall {
		return chat.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(args)}
	}
	shell := chat.Tool{Name: "shell", Description: "Run a command.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"command":{"type":"array","items":{"type":"string"}}},"required":["command"]}`)}
	tests := []struct {
		name, body string
		want       Turn
	}{
		{"string input", `{"model":"m","input":"hi","instructions":"Be brief.","stream":true,"max_output_tokens":64,
			"temperature":0.2,"top_p":1,"store":false,"include":["reasoning.encrypted_content"],"unknown":{"x":1}}`,
			Turn{Model: "m", Messages: []chat.Message{sys("Be brief."), user("hi")}, MaxTokens: 64, Stream: true, StreamUsage: true}},
		{"codex history", `{"model":"gpt-5-codex","instructions":"You are Codex.","store":false,"stream":true,
			"parallel_tool_calls":false,"tool_choice":"auto","reasoning":{"effort":"medium","summary":"auto"},
			"tools":[{"type":"function","name":"shell","description":"Run a command.","strict":false,
				"parameters":{"type":"object","properties":{"command":{"type":"array","items":{"type":"string"}}},"required":["command"]}},
				{"type":"web_search","external_web_access":false}],
			"input":[
			{"type":"message","role":"developer","content":[{"type":"input_text","text":"<permissions>"}]},
			{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>"},{"type":"input_text","text":"List files."}]},
			{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"I should run ls."}],"encrypted_content":null},
			{"type":"message","role":"assistant","id":"msg_1","content":[{"type":"output_text","text":"Looking.","annotations":[]}]},
			{"type":"function_call","id":"fc_1","call_id":"call_1","name":"shell","arguments":"{\"command\":[\"ls\"]}"},
			{"type":"function_call","call_id":"call_2","name":"shell","arguments":"{\"command\":[\"pwd\"]}"},
			{"type":"function_call_output","call_id":"call_1","output":"a.txt"},
			{"type":"function_call_output","call_id":"call_2","output":[{"type":"input_text","text":"/repo"},{"type":"input_image","image_url":"data:,"}]},
			{"type":"reasoning","summary":[{"type":"summary_text","text":"Part one."},{"type":"summary_text","text":"Part two."}]},
			{"type":"function_call","call_id":"call_3","name":"shell","arguments":""},
			{"type":"function_call_output","call_id":"call_3","output":""},
			{"type":"reasoning","summary":[],"encrypted_content":"gAAAA"},
			{"type":"message","role":"assistant","content":"Done."},
			{"role":"user","content":"Thanks!"}]}`,
			Turn{Model: "gpt-5-codex", Stream: true, StreamUsage: true, ToolChoice: "auto", Tools: []chat.Tool{shell},
				Messages: []chat.Message{
					sys("You are Codex."), sys("<permissions>"), user("<environment_context>\nList files."),
					{Role: chat.RoleAssistant, ReasoningContent: "I should run ls.", Content: "Looking.",
						ToolCalls: []chat.ToolCall{call("call_1", "shell", `{"command":["ls"]}`), call("call_2", "shell", `{"command":["pwd"]}`)}},
					tool("call_1", "shell", "a.txt"), tool("call_2", "shell", "/repo\n"+omittedWireMedia("image")),
					{Role: chat.RoleAssistant, ReasoningContent: "Part one.\nPart two.", ToolCalls: []chat.ToolCall{{ID: "call_3", Name: "shell"}}},
					tool("call_3", "shell", ""),
					{Role: chat.RoleAssistant, Content: "Done."},
					user("Thanks!"),
				}}},
		{"reasoning content wins over summary", `{"model":"m","input":[
			{"type":"reasoning","summary":[{"type":"summary_text","text":"short"}],"content":[{"type":"reasoning_text","text":"long raw"}]},
			{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}]}`,
			Turn{Model: "m", StreamUsage: true, Messages: []chat.Message{
				{Role: chat.RoleAssistant, ReasoningContent: "long raw", ToolCalls: []chat.ToolCall{call("c", "f", "{}")}}}}},
		{"assistant text ends a turn", `{"model":"m","input":[
			{"role":"assistant","content":"one"},{"role":"assistant","content":"two"},
			{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},
			{"type":"function_call_output","call_id":"other","output":"x"},
			{"role":"system","content":"late system"},{"role":"user","content":[{"type":"input_file","file_id":"f"},{"type":"refusal","refusal":"no"}]}]}`,
			Turn{Model: "m", StreamUsage: true, Messages: []chat.Message{
				{Role: chat.RoleAssistant, Content: "one"},
				{Role: chat.RoleAssistant, Content: "two", ToolCalls: []chat.ToolCall{call("c", "f", "{}")}},
				tool("other", "", "x"), sys("late system"), user(omittedWireMedia("file") + "\nno")}}},
		{"hosted tools left out, effort none", `{"model":"m","input":"q","reasoning":{"effort":"none"},
			"tools":[{"type":"file_search"},{"type":"web_search_preview"},{"type":"code_interpreter"},{"type":"image_generation"},
				{"type":"mcp"},{"type":"computer_use_preview"},{"type":"tool_search"},{"type":"function","name":"f"}],
			"tool_choice":"required","text":{"format":{"type":"text"},"verbosity":"low"}}`,
			Turn{Model: "m", StreamUsage: true, DisableThinking: true, Tools: []chat.Tool{{Name: "f"}}, ToolChoice: "required",
				Messages: []chat.Message{user("q")}}},
		{"named tool choice", `{"model":"m","input":"q","tool_choice":{"type":"function","name":"f"}}`,
			Turn{Model: "m", StreamUsage: true, ToolChoice: "f", Messages: []chat.Message{user("q")}}},
		{"allowed tools", `{"model":"m","input":"q","tool_choice":{"type":"allowed_tools","mode":"required","tools":[]}}`,
			Turn{Model: "m", StreamUsage: true, ToolChoice: "required", Messages: []chat.Message{user("q")}}},
		{"nulls are absent", `{"model":"m","input":"q","instructions":null,"previous_response_id":null,"tools":null,
			"max_output_tokens":null,"reasoning":null,"previous_response_id":""}`,
			Turn{Model: "m", StreamUsage: true, Messages: []chat.Message{user("q")}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, e := responsesFormat{}.decode([]byte(tc.body))
			if e != nil {
				t.Fatalf("decode: %+v", *e)
			}
			checkTurn(t, got, tc.want)
		})
	}
}

func TestResponsesDecodeErrors(t *testing.T) {
	item := func(s string) string { return `{"model":"m","input":[` + s + `]}` }
	tests := []struct{ name, body, param string }{
		{"not JSON", `{"model":`, ""},
		{"not an object", `["model"]`, ""},
		{"empty body", ``, ""},
		{"no model", `{"input":"hi"}`, "model"},
		{"model not a string", `{"model":7,"input":"hi"}`, "model"},
		{"previous_response_id", `{"model":"m","input":"hi","previous_response_id":"resp_1"}`, "previous_response_id"},
		{"conversation", `{"model":"m","input":"hi","conversation":{"id":"conv_1"}}`, "conversation"},
		{"prompt", `{"model":"m","input":"hi","prompt":{"id":"pmpt_1"}}`, "prompt"},
		{"background", `{"model":"m","input":"hi","background":true}`, "background"},
		{"store type", `{"model":"m","input":"hi","store":"no"}`, "store"},
		{"stream type", `{"model":"m","input":"hi","stream":"true"}`, "stream"},
		{"temperature type", `{"model":"m","input":"hi","temperature":"hot"}`, "temperature"},
		{"include type", `{"model":"m","input":"hi","include":[1]}`, "include"},
		{"max_output_tokens zero", `{"model":"m","input":"hi","max_output_tokens":0}`, "max_output_tokens"},
		{"max_output_tokens fraction", `{"model":"m","input":"hi","max_output_tokens":1.5}`, "max_output_tokens"},
		{"reasoning type", `{"model":"m","input":"hi","reasoning":"high"}`, "reasoning"},
		{"reasoning effort type", `{"model":"m","input":"hi","reasoning":{"effort":1}}`, "reasoning.effort"},
		{"json schema output", `{"model":"m","input":"hi","text":{"format":{"type":"json_schema","schema":{}}}}`, "text.format.type"},
		{"tools type", `{"model":"m","input":"hi","tools":{}}`, "tools"},
		{"tool not an object", `{"model":"m","input":"hi","tools":["shell"]}`, "tools[0]"},
		{"tool without type", `{"model":"m","input":"hi","tools":[{"name":"f"}]}`, "tools[0].type"},
		{"custom tool", `{"model":"m","input":"hi","tools":[{"type":"function","name":"f"},{"type":"custom","name":"apply_patch","format":{"type":"grammar"}}]}`, "tools[1].type"},
		{"local shell tool", `{"model":"m","input":"hi","tools":[{"type":"local_shell"}]}`, "tools[0].type"},
		{"function without name", `{"model":"m","input":"hi","tools":[{"type":"function","parameters":{}}]}`, "tools[0].name"},
		{"parameters not an object", `{"model":"m","input":"hi","tools":[{"type":"function","name":"f","parameters":[]}]}`, "tools[0].parameters"},
		{"strict type", `{"model":"m","input":"hi","tools":[{"type":"function","name":"f","strict":"yes"}]}`, "tools[0].strict"},
		{"tool_choice value", `{"model":"m","input":"hi","tool_choice":"any"}`, "tool_choice"},
		{"tool_choice hosted", `{"model":"m","input":"hi","tool_choice":{"type":"web_search"}}`, "tool_choice.type"},
		{"tool_choice without name", `{"model":"m","input":"hi","tool_choice":{"type":"function"}}`, "tool_choice.name"},
		{"no input", `{"model":"m","instructions":"x"}`, "input"},
		{"input number", `{"model":"m","input":3}`, "input"},
		{"input empty", `{"model":"m","input":[]}`, "input"},
		{"item not an object", item(`"hi"`), "input[0]"},
		{"item without type", item(`{"content":"hi"}`), "input[0].type"},
		{"custom tool call", item(`{"type":"custom_tool_call","call_id":"c","name":"apply_patch","input":"x"}`), "input[0].type"},
		{"item reference", item(`{"type":"message","role":"user","content":"a"},{"type":"item_reference","id":"msg_1"}`), "input[1].type"},
		{"role", item(`{"role":"tool","content":"x"}`), "input[0].role"},
		{"no role", item(`{"type":"message","content":"x"}`), "input[0].role"},
		{"no content", item(`{"role":"user"}`), "input[0].content"},
		{"content number", item(`{"role":"user","content":5}`), "input[0].content"},
		{"part type", item(`{"role":"user","content":[{"type":"input_audio"}]}`), "input[0].content[0].type"},
		{"part text type", item(`{"role":"user","content":[{"type":"input_text","text":5}]}`), "input[0].content[0].text"},
		{"part not an object", item(`{"role":"user","content":["hi"]}`), "input[0].content[0]"},
		{"call without call_id", item(`{"type":"function_call","name":"f","arguments":"{}"}`), "input[0].call_id"},
		{"call without name", item(`{"type":"function_call","call_id":"c","arguments":"{}"}`), "input[0].name"},
		{"call arguments not JSON", item(`{"type":"function_call","call_id":"c","name":"f","arguments":"{oops"}`), "input[0].arguments"},
		{"call arguments object", item(`{"type":"function_call","call_id":"c","name":"f","arguments":{}}`), "input[0].arguments"},
		{"output without call_id", item(`{"type":"function_call_output","output":"x"}`), "input[0].call_id"},
		{"output missing", item(`{"type":"function_call_output","call_id":"c"}`), "input[0].output"},
		{"output part", item(`{"type":"function_call_output","call_id":"c","output":[{"type":"input_audio"}]}`), "input[0].output[0].type"},
		{"summary type", item(`{"type":"reasoning","summary":"x"}`), "input[0].summary"},
		{"summary text type", item(`{"type":"reasoning","summary":[{"type":"summary_text","text":1}]}`), "input[0].summary[0].text"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { wireDecodeError(t, responsesFormat{}, tc.body, tc.param) })
	}
}

func TestResponsesGolden(t *testing.T) {
	wireGoldens(t, responsesFormat{}, "responses", "resp_0123456789abcdef")
}

func TestResponsesFail(t *testing.T) {
	tests := []struct {
		e          *apiError
		status     int
		typ, code  string
		param      string
		streamCode string
	}{
		{badRequest("input[3].role", "proxy: bad role"), 400, "invalid_request_error", "", "input[3].role", "invalid_prompt"},
		{unknownModel("gpt-9"), 404, "invalid_request_error", "model_not_found", "model", "model_not_found"},
		{&apiError{Status: 400, Kind: KindContextLength, Message: "too long"}, 400, "invalid_request_error", "context_length_exceeded", "", "context_length_exceeded"},
		{&apiError{Status: 503, Kind: KindOverloaded, Message: "busy"}, 503, "server_error", "", "", "server_is_overloaded"},
		{serverError("boom"), 500, "server_error", "", "", "server_error"},
		{&apiError{Kind: KindServer, Message: "no status"}, 500, "server_error", "", "", "server_error"},
	}
	for _, tc := range tests {
		t.Run(tc.e.Message, func(t *testing.T) {
			rec := httptest.NewRecorder()
			responsesFormat{}.fail(rec, tc.e)
			var body struct {
				Error struct {
					Message     string
					Type        string
					Param, Code *string
				}
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatal(err)
			}
			deref := func(p *string) string {
				if p == nil {
					return ""
				}
				return *p
			}
			if rec.Code != tc.status || body.Error.Message != tc.e.Message || body.Error.Type != tc.typ ||
				deref(body.Error.Code) != tc.code || deref(body.Error.Param) != tc.param {
				t.Fatalf("status %d, body %s", rec.Code, rec.Body)
			}
			if f := newResponsesFailure(tc.e); f.Code != tc.streamCode || f.Message != tc.e.Message {
				t.Fatalf("stream failure %+v, want code %q", f, tc.streamCode)
			}
		})
	}
}

// checkResponsesSDK checks that the SDK sees r in resp.
func checkResponsesSDK(t *testing.T, resp *responses.Response, r *Reply) {
	t.Helper()
	if resp.ID != r.ID || resp.Model != r.Model || int64(resp.CreatedAt) != r.Created.Unix() {
		t.Errorf("id %q model %q created %v", resp.ID, resp.Model, resp.CreatedAt)
	}
	if want := map[bool]string{true: "incomplete", false: "completed"}[r.Finish == FinishLength]; string(resp.Status) != want {
		t.Errorf("status %q, want %q", resp.Status, want)
	}
	if resp.OutputText() != r.Content {
		t.Errorf("output text %q, want %q", resp.OutputText(), r.Content)
	}
	var reasoning string
	var calls []chat.ToolCall
	for _, item := range resp.Output {
		switch item.Type {
		case "reasoning":
			rs := item.AsReasoning()
			for _, s := range rs.Summary {
				reasoning += s.Text
			}
			if len(rs.Content) != 1 || rs.Content[0].Text != r.Reasoning || rs.Content[0].Type != "reasoning_text" {
				t.Errorf("reasoning content %+v", rs.Content)
			}
		case "function_call":
			fc := item.AsFunctionCall()
			calls = append(calls, chat.ToolCall{ID: fc.CallID, Name: fc.Name, Arguments: json.RawMessage(fc.Arguments)})
		case "message":
		default:
			t.Errorf("output item type %q", item.Type)
		}
	}
	if reasoning != r.Reasoning {
		t.Errorf("reasoning %q, want %q", reasoning, r.Reasoning)
	}
	checkWireCalls(t, calls, r.ToolCalls)
	u := resp.Usage
	if int(u.InputTokens) != r.Usage.PromptTokens || int(u.OutputTokens) != r.Usage.CompletionTokens ||
		int(u.InputTokensDetails.CachedTokens) != r.Usage.CachedTokens || int(u.TotalTokens) != r.Usage.PromptTokens+r.Usage.CompletionTokens {
		t.Errorf("usage %+v, want %+v", u, r.Usage)
	}
}

// checkWireCalls compares tool calls; arguments compare as JSON ({} for
// none).
func checkWireCalls(t *testing.T, got, want []chat.ToolCall) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d tool calls, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.ID != w.ID || g.Name != w.Name || !sameJSON(t, wireArguments(g), wireArguments(w)) {
			t.Errorf("tool call %d: %s %s %s, want %s %s %s", i, g.ID, g.Name, g.Arguments, w.ID, w.Name, w.Arguments)
		}
	}
}

// checkSecondTurn checks the Turn a client's second, streamed call decoded
// to: want's messages, tool calls compared as JSON.
func checkSecondTurn(t *testing.T, turn Turn, want []chat.Message) {
	t.Helper()
	if !turn.Stream || len(turn.Messages) != len(want) {
		t.Fatalf("second turn:\n%s", turnJSON(t, turn))
	}
	for i := range want {
		g, w := turn.Messages[i], want[i]
		if g.Role != w.Role || g.Content != w.Content || g.ReasoningContent != w.ReasoningContent ||
			g.ToolCallID != w.ToolCallID || g.Name != w.Name {
			t.Errorf("message %d: %+v, want %+v", i, g, w)
		}
		checkWireCalls(t, g.ToolCalls, w.ToolCalls)
	}
}

// outputAsInput appends resp's output items (reasoning, messages, function
// calls) to input, as a stateless client such as Codex sends them back.
func outputAsInput(input responses.ResponseInputParam, resp *responses.Response) responses.ResponseInputParam {
	for _, item := range resp.Output {
		switch item.Type {
		case "reasoning":
			p := item.AsReasoning().ToParam()
			input = append(input, responses.ResponseInputItemUnionParam{OfReasoning: &p})
		case "message":
			p := item.AsMessage().ToParam()
			input = append(input, responses.ResponseInputItemUnionParam{OfOutputMessage: &p})
		case "function_call":
			p := item.AsFunctionCall().ToParam()
			input = append(input, responses.ResponseInputItemUnionParam{OfFunctionCall: &p})
		}
	}
	return input
}

// sameJSON reports whether a and b hold the same JSON value.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y bytes.Buffer
	if json.Compact(&x, a) != nil || json.Compact(&y, b) != nil {
		t.Fatalf("not JSON: %s / %s", a, b)
	}
	return x.String() == y.String()
}

// TestResponsesSDK runs the official SDK against a server that speaks
// only responsesFormat, the way Codex calls it: a first call, then its
// output items sent back with the tool results, streamed.
func TestResponsesSDK(t *testing.T) {
	replies := wireTestReplies("resp_0123456789abcdef")
	for _, tc := range replies {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.r
			srv := newWireServer(t, responsesFormat{}, answerWith(responsesFormat{}, r))
			client := openai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey("test"), option.WithMaxRetries(0))
			ctx := context.Background()
			params := responses.ResponseNewParams{
				Model:        "qwen3-test",
				Instructions: openai.String("You are a coding agent."),
				Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
					responses.ResponseInputItemParamOfMessage("List the files.", responses.EasyInputMessageRoleUser),
				}},
				Tools: []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{
					Name: "shell", Description: openai.String("Run a command."), Strict: openai.Bool(false),
					Parameters: map[string]any{"type": "object", "properties": map[string]any{"command": map[string]any{"type": "array"}}},
				}}},
				Store:           openai.Bool(false),
				MaxOutputTokens: openai.Int(256),
				Reasoning:       shared.ReasoningParam{Effort: shared.ReasoningEffortMedium, Summary: shared.ReasoningSummaryAuto},
				Include:         []responses.ResponseIncludable{responses.ResponseIncludableReasoningEncryptedContent},
			}
			resp, err := client.Responses.New(ctx, params)
			if err != nil {
				t.Fatal(err)
			}
			checkResponsesSDK(t, resp, &r)
			turn := srv.last(t)
			if turn.Model != "qwen3-test" || turn.MaxTokens != 256 || turn.Stream || len(turn.Messages) != 2 ||
				turn.Messages[0].Role != chat.RoleSystem || turn.Messages[0].Content != "You are a coding agent." ||
				turn.Messages[1].Content != "List the files." || len(turn.Tools) != 1 || turn.Tools[0].Name != "shell" ||
				!sameJSON(t, turn.Tools[0].Parameters, []byte(`{"properties":{"command":{"type":"array"}},"type":"object"}`)) {
				t.Fatalf("first turn:\n%s", turnJSON(t, turn))
			}

			// The second call sends the output back, as Codex does, with a
			// result for every call, and streams.
			input := outputAsInput(params.Input.OfInputItemList, resp)
			for _, tc := range r.ToolCalls {
				out := responses.ResponseInputItemParamOfFunctionCallOutput("output of " + tc.Name)
				out.OfFunctionCallOutput.CallID = openai.String(tc.ID)
				input = append(input, out)
			}
			params.Input.OfInputItemList = input
			stream := client.Responses.NewStreaming(ctx, params)
			var text, reasoning string
			var final *responses.Response
			args := map[string]string{}
			var calls []chat.ToolCall
			seq := int64(0)
			for stream.Next() {
				ev := stream.Current()
				if ev.SequenceNumber != seq {
					t.Fatalf("event %s: sequence number %d, want %d", ev.Type, ev.SequenceNumber, seq)
				}
				seq++
				switch ev.Type {
				case "response.output_text.delta":
					text += ev.Delta
				case "response.reasoning_summary_text.delta":
					reasoning += ev.Delta
				case "response.function_call_arguments.delta":
					args[ev.ItemID] += ev.Delta
				case "response.output_item.done":
					if ev.Item.Type == "function_call" {
						fc := ev.Item.AsFunctionCall()
						if args[fc.ID] != fc.Arguments {
							t.Errorf("streamed arguments %q, done %q", args[fc.ID], fc.Arguments)
						}
						calls = append(calls, chat.ToolCall{ID: fc.CallID, Name: fc.Name, Arguments: json.RawMessage(fc.Arguments)})
					}
				case "response.completed", "response.incomplete":
					resp := ev.Response
					final = &resp
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			if final == nil {
				t.Fatal("no response.completed")
			}
			if text != r.Content || reasoning != r.Reasoning {
				t.Errorf("streamed text %q reasoning %q", text, reasoning)
			}
			checkWireCalls(t, calls, r.ToolCalls)
			checkResponsesSDK(t, final, &r)

			// The output sent back is the assistant turn of the Reply.
			turn = srv.last(t)
			want := []chat.Message{{Role: chat.RoleSystem, Content: "You are a coding agent."}, {Role: chat.RoleUser, Content: "List the files."}}
			if r.Reasoning != "" || r.Content != "" || len(r.ToolCalls) > 0 {
				want = append(want, chat.Message{Role: chat.RoleAssistant, ReasoningContent: r.Reasoning, Content: r.Content, ToolCalls: r.ToolCalls})
			}
			for _, tc := range r.ToolCalls {
				want = append(want, chat.Message{Role: chat.RoleTool, ToolCallID: tc.ID, Name: tc.Name, Content: "output of " + tc.Name})
			}
			checkSecondTurn(t, turn, want)
		})
	}
}

// TestResponsesSDKErrors checks errors as the SDK reads them: a 4xx
// before the stream, and a failure in the middle of one.
func TestResponsesSDKErrors(t *testing.T) {
	r := wireTestReplies("resp_1")[0].r
	srv := newWireServer(t, responsesFormat{}, func(w http.ResponseWriter, _ string, turn Turn) {
		sw := responsesFormat{}.stream(w, &r)
		_ = sw.text("partial")
		sw.fail(&apiError{Status: 400, Kind: KindContextLength, Message: "proxy: the prompt does not fit"})
	})
	client := openai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey("test"), option.WithMaxRetries(0))
	ctx := context.Background()
	_, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "m",
		Input:              responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")},
		PreviousResponseID: openai.String("resp_0")})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "previous_response_id" ||
		apiErr.Type != "invalid_request_error" || !strings.Contains(apiErr.Message, "stateless") {
		t.Fatalf("error %v", err)
	}

	stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "m",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
	var types []string
	var failed responses.Response
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		if ev.Type == "error" && (ev.Code != "context_length_exceeded" || ev.Message == "") {
			t.Errorf("error event %s", ev.RawJSON())
		}
		if ev.Type == "response.failed" {
			failed = ev.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(types[len(types)-2:], " "); got != "error response.failed" {
		t.Fatalf("events %v", types)
	}
	if failed.Status != "failed" || failed.Error.Code != "context_length_exceeded" || failed.Error.Message == "" {
		t.Fatalf("failed response %s", failed.RawJSON())
	}
}

// FuzzDecodeResponses checks that decode never panics and that every
// error is a 4xx invalid_request error; a decoded Turn always has a
// message.
func FuzzDecodeResponses(f *testing.F) {
	seeds := []string{
		`{"model":"m","input":"hi"}`,
		`{"model":"m","instructions":"x","input":[{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_image"}]},
			{"type":"reasoning","summary":[{"type":"summary_text","text":"r"}]},{"type":"message","role":"assistant","content":"b"},
			{"type":"function_call","call_id":"c","name":"f","arguments":"{\"a\":1}"},{"type":"function_call_output","call_id":"c","output":"o"}],
			"tools":[{"type":"function","name":"f","parameters":{"type":"object"}},{"type":"web_search"}],"tool_choice":{"type":"function","name":"f"},
			"reasoning":{"effort":"none"},"text":{"format":{"type":"text"}},"max_output_tokens":5,"stream":true}`,
		`{"model":"m","input":[{"type":"function_call","call_id":"c","name":"f","arguments":"{"}]}`,
		`{"model":"m","input":[],"previous_response_id":"x"}`,
		`{"model":null,"input":{"a":[1,2,{"b":null}]}}`,
		`[]`, `null`, ``, `{`, `{"model":"m","input":[null,1,"x",[]]}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		turn, e := responsesFormat{}.decode(body)
		if e != nil {
			if e.Status < 400 || e.Status > 499 || e.Kind != KindInvalidRequest || e.Message == "" {
				t.Fatalf("error %+v", *e)
			}
			return
		}
		if len(turn.Messages) == 0 || turn.Model == "" {
			t.Fatalf("turn %+v", turn)
		}
	})
}
