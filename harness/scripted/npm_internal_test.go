package scripted

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// TestPiScript: one read, one edit per file with pi's argument names, and
// a closing turn without a call.
func TestPiScript(t *testing.T) {
	tests := []struct {
		name  string
		edits []edit
	}{
		{"one file", []edit{{Path: "a.py", Old: "    x -= 1", New: "    x += 1", Line: 3}}},
		{"two files", []edit{{Path: "a.go", Old: "\treturn a - b", New: "\treturn a + b", Line: 9},
			{Path: "b/c.go", Old: "if n < 0 {\n\treturn \"<&>\"", New: "if n <= 0 {\n\treturn \"<&>\"", Line: 2}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := piScript(tt.edits)
			if len(rs) != len(tt.edits)+2 || rs[0].Tool != "read" || rs[len(rs)-1].Tool != "" || rs[len(rs)-1].Content == "" {
				t.Fatalf("replies %+v", rs)
			}
			if rs[0].Args != `{"path": "`+tt.edits[0].Path+`"}` {
				t.Errorf("read arguments %s", rs[0].Args)
			}
			for i, e := range tt.edits {
				r := rs[i+1]
				var args struct {
					Path  string                              `json:"path"`
					Edits []struct{ OldText, NewText string } `json:"edits"`
				}
				if err := json.Unmarshal([]byte(r.Args), &args); err != nil {
					t.Fatalf("edit arguments %s: %v", r.Args, err)
				}
				if r.Tool != "edit" || args.Path != e.Path || len(args.Edits) != 1 || args.Edits[0].OldText != e.Old || args.Edits[0].NewText != e.New {
					t.Errorf("edit %d: %s %s", i, r.Tool, r.Args)
				}
				if !strings.HasPrefix(r.Args, `{"path": `) || !strings.Contains(r.Args, `"oldText": `) {
					t.Errorf("edit %d: arguments not in the schema's order: %s", i, r.Args)
				}
			}
		})
	}
}

// TestWireContent: content as the proxy reads it.
func TestWireContent(t *testing.T) {
	tests := []struct {
		name, raw, want string
		err             bool
	}{
		{"string", `"hi"`, "hi", false},
		{"null", `null`, "", false},
		{"absent", ``, "", false},
		{"parts", `[{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]`, "a\nb", false},
		{"image", `[{"type": "image_url", "image_url": {"url": "data:"}}]`, "", true},
		{"number", `3`, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := wireContent(json.RawMessage(tt.raw))
			if (err != nil) != tt.err || got != tt.want {
				t.Errorf("wireContent(%s) = %q, %v", tt.raw, got, err)
			}
		})
	}
}

// TestServerStream: a streamed request is answered with chunks that add
// up to the reply (text, one whole tool call with its index, the finish
// reason) and end with [DONE]; a plain one with one body.
func TestServerStream(t *testing.T) {
	tests := []struct {
		name   string
		rp     reply
		finish string
	}{
		{"call", reply{Content: "Reading.", Tool: "read", Args: `{"path": "a.py"}`}, "tool_calls"},
		{"text", reply{Content: "Done <&>."}, "stop"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &server{replies: []reply{tt.rp, tt.rp}}
			w := httptest.NewRecorder()
			s.ServeHTTP(w, httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(`{"stream": true, "messages": []}`)))
			if ct := w.Header().Get("Content-Type"); ct != "text/event-stream" {
				t.Errorf("content type %q", ct)
			}
			var content, name, args, finish string
			var events []string
			sc := bufio.NewScanner(w.Body)
			for sc.Scan() {
				data, ok := strings.CutPrefix(sc.Text(), "data: ")
				if !ok {
					continue
				}
				events = append(events, data)
				if data == "[DONE]" {
					continue
				}
				var c struct {
					Choices []struct {
						Delta struct {
							Content   string `json:"content"`
							ToolCalls []struct {
								Index    *int   `json:"index"`
								ID       string `json:"id"`
								Function struct{ Name, Arguments string }
							} `json:"tool_calls"`
						} `json:"delta"`
						FinishReason *string `json:"finish_reason"`
					} `json:"choices"`
				}
				if err := json.Unmarshal([]byte(data), &c); err != nil || len(c.Choices) != 1 {
					t.Fatalf("chunk %s: %v", data, err)
				}
				ch := c.Choices[0]
				content += ch.Delta.Content
				for _, tc := range ch.Delta.ToolCalls {
					if tc.Index == nil || *tc.Index != 0 || tc.ID != "call_1" {
						t.Errorf("tool call delta %+v", tc)
					}
					name, args = name+tc.Function.Name, args+tc.Function.Arguments
				}
				if ch.FinishReason != nil {
					finish = *ch.FinishReason
				}
			}
			if content != tt.rp.Content || name != tt.rp.Tool || args != tt.rp.Args || finish != tt.finish || events[len(events)-1] != "[DONE]" {
				t.Errorf("stream adds up to %q %q %q %q, events %q", content, name, args, finish, events)
			}

			w = httptest.NewRecorder()
			s.ServeHTTP(w, httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(`{"messages": []}`)))
			var body struct {
				Choices []struct {
					Message struct {
						Content string `json:"content"`
					} `json:"message"`
					FinishReason string `json:"finish_reason"`
				} `json:"choices"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || len(body.Choices) != 1 || body.Choices[0].Message.Content != tt.rp.Content || body.Choices[0].FinishReason != tt.finish {
				t.Errorf("plain reply %s: %v", w.Body, err)
			}
		})
	}
}

// TestProgramEnv: every variable naming the program's sandbox state
// folder moves into the solver's folder; a launch whose LEGORL_STATE is no
// longer there is refused.
func TestProgramEnv(t *testing.T) {
	tests := []struct {
		name, state string
		launch      []string
		moved       []string
		err         bool
	}{
		{"pi", "/tmp/pi-agent", []string{"LEGORL_CONFIG=/c/pi", "LEGORL_STATE=/tmp/pi-agent", "PI_CODING_AGENT_DIR=/tmp/pi-agent", "PI_OFFLINE=1"},
			[]string{"LEGORL_STATE={S}", "PI_CODING_AGENT_DIR={S}", "PI_OFFLINE=1", "LEGORL_CONFIG=/c/pi"}, false},
		{"opencode", "/tmp/opencode-home", []string{"LEGORL_STATE=/tmp/opencode-home/config", "HOME=/tmp/opencode-home",
			"OPENCODE_CONFIG=/tmp/opencode-home/config/opencode.json", "XDG_CACHE_HOME=/tmp/opencode-home-x"},
			[]string{"LEGORL_STATE={S}/config", "HOME={S}", "OPENCODE_CONFIG={S}/config/opencode.json", "XDG_CACHE_HOME=/tmp/opencode-home-x"}, false},
		{"no state", "/tmp/pi-agent", []string{"PI_CODING_AGENT_DIR=/tmp/pi-agent", "PI_OFFLINE=1"}, nil, true},
		{"state elsewhere", "/tmp/codex-home", []string{"LEGORL_STATE=/tmp/codex-home2", "CODEX_HOME=/tmp/codex-home"}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmp := t.TempDir()
			moved := tmp + "/state"
			env, err := programEnv(tt.launch, tmp, tt.state, moved)
			if tt.err {
				if !errors.Is(err, ErrUnsupported) {
					t.Errorf("err %v, want ErrUnsupported", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(env, "TMPDIR="+tmp) {
				t.Errorf("env %q lacks TMPDIR", env)
			}
			for _, want := range tt.moved {
				if !slices.Contains(env, strings.ReplaceAll(want, "{S}", moved)) {
					t.Errorf("env %q lacks %q", env, want)
				}
			}
			if slices.ContainsFunc(env, func(kv string) bool {
				_, v, _ := strings.Cut(kv, "=")
				return strings.HasPrefix(v, tt.state+"/") || v == tt.state
			}) {
				t.Errorf("env %q still names the sandbox's state folder", env)
			}
		})
	}
}

// TestRunLaunch: a missing program (Node.js) is ErrNotInstalled on one
// line, another failure ErrFailed, success returns stdout.
func TestRunLaunch(t *testing.T) {
	tests := []struct {
		name   string
		script string
		want   error
		stdout string
	}{
		{"ok", "echo '{}'", nil, "{}\n"},
		{"no node", "exec /nonexistent/bin/node cli.js", ErrNotInstalled, ""},
		{"fails", "echo boom >&2; exit 3", ErrFailed, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := runLaunch(context.Background(), "pi", []string{"/bin/sh", "-c", tt.script}, t.TempDir(), []string{"PATH=/usr/bin:/bin"})
			if !errors.Is(err, tt.want) || string(out) != tt.stdout {
				t.Fatalf("runLaunch = %q, %v; want %q, %v", out, err, tt.stdout, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), "\n") {
				t.Errorf("the error is not one line: %q", err)
			}
			if tt.name == "no node" && !strings.Contains(err.Error(), "Node.js") {
				t.Errorf("the error does not say Node.js is missing: %v", err)
			}
		})
	}
}

// TestCheck: pi must end by itself having run every scripted call
// without error.
func TestCheck(t *testing.T) {
	script := []reply{{Tool: "read"}, {Tool: "edit"}, {Content: "Done."}}
	const read = `{"type":"tool_execution_start","toolName":"read","args":{"path":"a.py"}}
{"type":"tool_execution_end","toolName":"read","result":{"content":[{"type":"text","text":"x"}]},"isError":false}
{"type":"turn_end"}
`
	const edit = `{"type":"tool_execution_start","toolName":"edit","args":{"path":"a.py"}}
{"type":"tool_execution_end","toolName":"edit","result":{"content":[{"type":"text","text":"ok"}]},"isError":%s}
{"type":"turn_end"}
`
	const end = `{"type":"agent_end","messages":[{"role":"assistant","stopReason":"%s","errorMessage":"400 script exhausted"}]}`
	tests := []struct {
		name, out string
		ok        bool
	}{
		{"done", read + strings.Replace(edit, "%s", "false", 1) + strings.Replace(end, "%s", "stop", 1), true},
		{"failed edit", read + strings.Replace(edit, "%s", "true", 1) + strings.Replace(end, "%s", "stop", 1), false},
		{"missing call", read + strings.Replace(end, "%s", "stop", 1), false},
		{"model error", read + strings.Replace(edit, "%s", "false", 1) + strings.Replace(end, "%s", "error", 1), false},
		{"no end", read, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := programs["pi"].check([]byte(tt.out), script)
			if tt.ok != (err == nil) || (err != nil && !errors.Is(err, ErrFailed)) {
				t.Errorf("check: %v", err)
			}
		})
	}
}

// TestCodexCanon: two runs' outputs that differ only in Codex's random
// chunk ids and wall times become the same bytes, of the same shape;
// another task or call gets other ids; the rest of the text is kept.
func TestCodexCanon(t *testing.T) {
	run1 := "Chunk ID: e99f9a\nWall time: 0.0012 seconds\nProcess exited with code 0\nOutput:\nx -= 1\n"
	run2 := "Chunk ID: 0b71c3\nWall time: 0.0000 seconds\nProcess exited with code 0\nOutput:\nx -= 1\n"
	a, b := codexCanon("task-1", 0, run1), codexCanon("task-1", 0, run2)
	if a != b {
		t.Errorf("two runs canonicalize differently:\n%q\n%q", a, b)
	}
	if !codexChunkID.MatchString(a) || len(a) != len(run1) || !strings.Contains(a, "Wall time: 0.0000 seconds\nProcess exited with code 0\nOutput:\nx -= 1\n") {
		t.Errorf("canonical output %q lost its shape", a)
	}
	if c, d := codexCanon("task-2", 0, run1), codexCanon("task-1", 1, run1); c == a || d == a || c == d {
		t.Errorf("ids do not depend on the task and call: %q %q %q", a, c, d)
	}
	if plain := "Exit code: 0\nWall time: 3 seconds\nOutput:\nok\n"; codexCanon("t", 0, plain) != "Exit code: 0\nWall time: 0 seconds\nOutput:\nok\n" {
		t.Errorf("whole-second wall time: %q", codexCanon("t", 0, plain))
	}
}

// TestNPMScripts: Codex's and OpenCode's scripts read the first file, make
// one edit call per file with their own argument names (Codex: an
// apply_patch of its own format run by exec_command), and end with text.
func TestNPMScripts(t *testing.T) {
	edits := []edit{{Path: "a.py", Old: "    x -= 1", New: "    x += 1", Line: 3},
		{Path: "b/c.go", Old: "if n < 0 {\n\treturn \"<&>\"", New: "if n <= 0 {\n\treturn \"<&>\"", Line: 2}}
	codex := codexScript(edits)
	if len(codex) != 4 || codex[0].Args != `{"cmd": "cat a.py"}` || codex[3].Tool != "" || codex[3].Content == "" {
		t.Fatalf("codex replies %+v", codex)
	}
	var args struct{ Cmd string }
	if err := json.Unmarshal([]byte(codex[2].Args), &args); err != nil {
		t.Fatal(err)
	}
	want := "apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: b/c.go\n@@\n-if n < 0 {\n-\treturn \"<&>\"\n+if n <= 0 {\n+\treturn \"<&>\"\n*** End Patch\nEOF\n"
	if codex[2].Tool != "exec_command" || args.Cmd != want {
		t.Errorf("codex patch %s %q, want %q", codex[2].Tool, args.Cmd, want)
	}
	oc := openCodeScript(edits)
	if len(oc) != 4 || oc[0].Tool != "read" || oc[0].Args != `{"filePath": "a.py"}` || oc[3].Tool != "" {
		t.Fatalf("opencode replies %+v", oc)
	}
	if oc[1].Tool != "edit" || oc[1].Args != `{"filePath": "a.py", "oldString": "    x -= 1", "newString": "    x += 1"}` {
		t.Errorf("opencode edit %s %s", oc[1].Tool, oc[1].Args)
	}
}

// TestDecodeResponses: a Responses request becomes the messages the proxy
// renders: instructions and developer messages are system, an assistant's
// text and its call one message, a call's output a tool message named
// after it; a custom tool or an unknown item is refused.
func TestDecodeResponses(t *testing.T) {
	body := `{"instructions": "Be brief.", "tools": [{"type": "function", "name": "exec_command", "parameters": {"type": "object"}},
		{"type": "web_search"}],
	"input": [{"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}]},
		{"type": "message", "role": "user", "content": "fix it"},
		{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Reading."}]},
		{"type": "function_call", "call_id": "c1", "name": "exec_command", "arguments": "{\"cmd\": \"cat a.py\"}"},
		{"type": "function_call_output", "call_id": "c1", "output": "x = 1"}]}`
	msgs, tools, err := decodeResponses([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	want := []Message{{Role: "system", Content: "Be brief."}, {Role: "system", Content: "a\nb"}, {Role: "user", Content: "fix it"},
		{Role: "assistant", Content: "Reading.", ToolCalls: []ToolCall{{ID: "c1", Name: "exec_command", Arguments: json.RawMessage(`{"cmd": "cat a.py"}`)}}},
		{Role: "tool", Content: "x = 1", ToolCallID: "c1", Name: "exec_command"}}
	gotJSON, _ := json.Marshal(msgs)
	wantJSON, _ := json.Marshal(want)
	if string(gotJSON) != string(wantJSON) {
		t.Errorf("messages\n%s\nwant\n%s", gotJSON, wantJSON)
	}
	if len(tools) != 1 || tools[0].Name != "exec_command" {
		t.Errorf("tools %+v, want exec_command alone (web_search is hosted)", tools)
	}
	for _, bad := range []string{
		`{"input": [{"type": "message", "role": "user", "content": "x"}], "tools": [{"type": "custom", "name": "apply_patch"}]}`,
		`{"input": [{"type": "reasoning", "summary": []}]}`,
		`{"input": 3}`,
	} {
		if _, _, err := decodeResponses([]byte(bad)); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: err %v, want one line", bad, err)
		}
	}
}
