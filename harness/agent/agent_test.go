package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeModel is a Chat Completions server that answers each call with the
// next scripted reply (the last one repeats) and records the requests.
type fakeModel struct {
	t       *testing.T
	mu      sync.Mutex
	replies []reply
	reqs    []chatRequest
	status  int // non-zero: answer every call with this HTTP status
}

func (f *fakeModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer legorl" {
		http.Error(w, "bad path or key "+r.URL.Path, http.StatusNotFound)
		return
	}
	var req chatRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		f.t.Errorf("request: %v", err)
	}
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	n := len(f.reqs)
	rep := f.replies[min(n-1, len(f.replies)-1)]
	f.mu.Unlock()
	if f.status != 0 {
		w.WriteHeader(f.status)
		fmt.Fprint(w, `{"error":{"message":"the context is too long","type":"invalid_request_error"}}`)
		return
	}
	finish := "stop"
	if len(rep.ToolCalls) > 0 {
		finish = "tool_calls"
	}
	if !req.Stream {
		msg := map[string]any{"role": "assistant", "content": rep.Content}
		if len(rep.ToolCalls) > 0 {
			msg["tool_calls"] = rep.ToolCalls
		}
		json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	event := func(delta map[string]any, finish any) {
		b, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
		fmt.Fprintf(w, "data: %s\n\n", b)
	}
	event(map[string]any{"role": "assistant", "content": ""}, nil)
	for _, piece := range strings.SplitAfter(rep.Content, " ") {
		event(map[string]any{"content": piece}, nil)
	}
	for i, tc := range rep.ToolCalls {
		// The name first, then the arguments in two pieces.
		half := len(tc.Function.Arguments) / 2
		event(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": tc.ID, "type": "function",
			"function": map[string]any{"name": tc.Function.Name, "arguments": tc.Function.Arguments[:half]}}}}, nil)
		event(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": tc.Function.Arguments[half:]}}}}, nil)
	}
	event(map[string]any{}, finish)
	fmt.Fprint(w, "data: [DONE]\n\n")
}

func (f *fakeModel) requests() []chatRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]chatRequest(nil), f.reqs...)
}

func serve(t *testing.T, replies ...reply) (*fakeModel, string) {
	t.Helper()
	f := &fakeModel{t: t, replies: replies}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv.URL + "/v1"
}

func call(id, name, args string) toolCall {
	tc := toolCall{ID: id, Type: "function"}
	tc.Function.Name, tc.Function.Arguments = name, args
	return tc
}

func TestBashAgent(t *testing.T) {
	dir := t.TempDir()
	f, url := serve(t,
		reply{Content: "Let me look."},                                                        // no block: a format error
		reply{Content: "Two blocks:\n```bash\nls\n```\n```bash\npwd\n```"},                    // a format error
		reply{Content: "Write it.\n```bash\nprintf 'fixed\\n' > out.txt && cat out.txt\n```"}, // an action
		reply{Content: "```bash\nexit 3\n```"},
		reply{Content: "Done.\n\n```bash\necho COMPLETE_TASK_AND_SUBMIT\n```"},
	)
	res, err := Run(context.Background(), "bash", Config{BaseURL: url, Task: "Fix it.", Workdir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stop != StopSubmitted || !res.Submitted || res.Turns != 5 || res.ToolCalls != 3 || res.ParseFailures != 2 {
		t.Fatalf("result %+v", res)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "out.txt")); string(b) != "fixed\n" {
		t.Errorf("out.txt = %q", b)
	}
	reqs := f.requests()
	last := reqs[len(reqs)-1].Messages
	// system, task, then (assistant, observation) per earlier turn.
	if len(last) != 2+2*4 || last[0].Role != "system" || !strings.Contains(last[1].Content, "Fix it.") {
		t.Fatalf("messages %+v", last)
	}
	if !strings.Contains(last[3].Content, "Format error") || !strings.Contains(last[5].Content, "contained 2") {
		t.Errorf("format errors: %q %q", last[3].Content, last[5].Content)
	}
	if want := "<returncode>0</returncode>\n<output>\nfixed\n</output>"; last[7].Content != want {
		t.Errorf("observation %q, want %q", last[7].Content, want)
	}
	if !strings.HasPrefix(last[9].Content, "<returncode>3</returncode>") {
		t.Errorf("observation %q", last[9].Content)
	}
	// Every earlier request is a prefix of the next: history is only appended.
	for i := 1; i < len(reqs); i++ {
		prev, cur := reqs[i-1].Messages, reqs[i].Messages
		for j := range prev {
			if prev[j].Content != cur[j].Content || prev[j].Role != cur[j].Role {
				t.Fatalf("request %d rewrote message %d", i, j)
			}
		}
	}
	if len(res.Steps) != 5 || res.Steps[2].Tool != "bash" || res.Steps[3].ExitCode != 3 || !res.Steps[0].ParseFailure {
		t.Errorf("steps %+v", res.Steps)
	}
}

func TestStops(t *testing.T) {
	tests := []struct {
		name    string
		agent   string
		replies []reply
		cfg     Config
		stop    string
		turns   int
	}{
		{"bash idle", "bash", []reply{{Content: "hmm"}}, Config{MaxIdleTurns: 2}, StopNoToolCalls, 2},
		{"tools idle", "tools", []reply{{Content: "hmm"}}, Config{MaxIdleTurns: 3}, StopNoToolCalls, 3},
		{"bash max turns", "bash", []reply{{Content: "```bash\ntrue\n```"}}, Config{MaxTurns: 4}, StopMaxTurns, 4},
		{"tools max turns", "tools", []reply{{ToolCalls: []toolCall{call("c1", "bash", `{"command": "true"}`)}}}, Config{MaxTurns: 3}, StopMaxTurns, 3},
		{"tools bad calls count as idle", "tools", []reply{{ToolCalls: []toolCall{call("c1", "nope", `{}`)}}}, Config{MaxIdleTurns: 2}, StopNoToolCalls, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, url := serve(t, tt.replies...)
			cfg := tt.cfg
			cfg.BaseURL, cfg.Task, cfg.Workdir = url, "task", t.TempDir()
			res, err := Run(context.Background(), tt.agent, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if res.Stop != tt.stop || res.Turns != tt.turns || res.Submitted {
				t.Errorf("stop %s after %d turns, want %s after %d: %+v", res.Stop, res.Turns, tt.stop, tt.turns, res)
			}
		})
	}
}

func TestErrorReply(t *testing.T) {
	f, url := serve(t, reply{Content: "x"})
	f.status = http.StatusBadRequest
	var out, errOut bytes.Buffer
	task := filepath.Join(t.TempDir(), "task.md")
	os.WriteFile(task, []byte("task"), 0o644)
	code := Main(context.Background(), []string{"tools", "--base-url", url, "--task-file", task, "--workdir", t.TempDir()}, &out, &errOut)
	if code != 1 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	res, err := ParseResult(out.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if res.Stop != StopError || !strings.Contains(res.Error, "HTTP 400: the context is too long") || len(f.requests()) != 1 {
		t.Errorf("result %+v after %d requests", res, len(f.requests()))
	}
}

func TestToolsAgentStreams(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "calc.py"), []byte("def add(a, b):\n    return a - b\n"), 0o644)
	f, url := serve(t,
		reply{Content: "Look first.", ToolCalls: []toolCall{call("c1", "view_file", `{"path": "calc.py"}`)}},
		reply{ToolCalls: []toolCall{
			call("c2", "str_replace", `{"path": "calc.py", "old_str": "a - b", "new_str": "a + b"}`),
			call("c3", "create_file", `{"path": "notes/n.txt", "content": "hi"}`),
			call("c4", "view_file", `{"path": "missing.py"}`),
			call("c5", "str_replace", `{"path": "calc.py"}`), // a parse failure
		}},
		reply{ToolCalls: []toolCall{call("c6", "bash", `{"command": "python3 -c 'import calc; print(calc.add(2, 3))'"}`)}},
		reply{Content: "thinking"}, // no tool call
		reply{ToolCalls: []toolCall{call("c7", "submit", `{}`)}},
	)
	var log bytes.Buffer
	res, err := Run(context.Background(), "tools", Config{BaseURL: url, Task: "Fix add.", Workdir: dir, Stream: true, Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stop != StopSubmitted || res.Turns != 5 || res.ToolCalls != 6 || res.ParseFailures != 1 {
		t.Fatalf("result %+v\n%s", res, log.String())
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "calc.py")); !strings.Contains(string(b), "a + b") {
		t.Errorf("calc.py = %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "notes/n.txt")); string(b) != "hi" {
		t.Errorf("n.txt = %q", b)
	}
	reqs := f.requests()
	if !reqs[0].Stream || len(reqs[0].Tools) != 5 {
		t.Fatalf("first request: stream %v, %d tools", reqs[0].Stream, len(reqs[0].Tools))
	}
	msgs := reqs[len(reqs)-1].Messages
	byID := map[string]string{}
	for _, m := range msgs {
		if m.Role == "tool" {
			byID[m.ToolCallID] = m.Content
		}
	}
	for id, want := range map[string]string{
		"c1": "     1\tdef add(a, b):\n     2\t    return a - b\n",
		"c2": "Edited " + filepath.Join(dir, "calc.py") + ": replaced one occurrence.",
		"c4": "Error: stat " + filepath.Join(dir, "missing.py") + ": no such file or directory",
		"c5": `Error: bad tool call: str_replace needs the string argument "old_str"`,
		"c6": "exit code: 0\n5\n",
	} {
		if byID[id] != want {
			t.Errorf("observation of %s = %q, want %q", id, byID[id], want)
		}
	}
	// The streamed assistant turn came back whole: content and the calls
	// with their arguments reassembled.
	a := msgs[2]
	if a.Role != "assistant" || a.Content != "Look first." || len(a.ToolCalls) != 1 || a.ToolCalls[0].Function.Arguments != `{"path": "calc.py"}` || a.ToolCalls[0].ID != "c1" {
		t.Errorf("assistant turn %+v", a)
	}
	if msgs[len(msgs)-1].Content != noToolCall {
		t.Errorf("last message %+v", msgs[len(msgs)-1])
	}
}

// TestCondense: past the budget, old turns become one note after the task;
// the last turns are kept whole, and a later condensation extends the note.
func TestCondense(t *testing.T) {
	big := strings.Repeat("x", 400)
	msgs := []message{{Role: "system", Content: "s"}, {Role: "user", Content: "task"}}
	for i := range 5 {
		msgs = append(msgs,
			message{Role: "assistant", ToolCalls: []toolCall{call(fmt.Sprint(i), "bash", fmt.Sprintf(`{"command": "echo %d"}`, i))}},
			message{Role: "tool", ToolCallID: fmt.Sprint(i), Content: big})
	}
	var note []string
	if _, ok := condense(msgs, &note, 1<<20, 2); ok {
		t.Fatal("condensed under the budget")
	}
	out, ok := condense(msgs, &note, 1000, 2)
	if !ok || len(out) != 3+4 {
		t.Fatalf("condensed to %d messages (%v)", len(out), ok)
	}
	if out[2].Role != "user" || !strings.HasPrefix(out[2].Content, condensedHead) || !strings.Contains(out[2].Content, `- called bash {"command": "echo 2"}`) ||
		strings.Contains(out[2].Content, "echo 3") {
		t.Errorf("note %q", out[2].Content)
	}
	if out[3].ToolCalls[0].ID != "3" || out[6].ToolCallID != "4" {
		t.Errorf("kept %+v", out[3:])
	}
	out = append(out, message{Role: "assistant", Content: big}, message{Role: "user", Content: noToolCall})
	out2, ok := condense(out, &note, 1000, 1)
	if !ok || len(out2) != 3+2 || !strings.Contains(out2[2].Content, "echo 0") || !strings.Contains(out2[2].Content, "echo 4") ||
		strings.Count(out2[2].Content, condensedHead) != 1 {
		t.Fatalf("second condensation: %d messages, note %q", len(out2), out2[2].Content)
	}
}

// TestToolsAgentCondenses: a run past the budget sends a rewritten history.
func TestToolsAgentCondenses(t *testing.T) {
	dir := t.TempDir()
	f, url := serve(t, reply{ToolCalls: []toolCall{call("c", "bash", `{"command": "head -c 3000 /dev/zero | tr '\\0' y"}`)}})
	res, err := Run(context.Background(), "tools", Config{BaseURL: url, Task: "t", Workdir: dir, MaxTurns: 6, ContextChars: 5000, KeepTurns: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stop != StopMaxTurns || res.Condensations == 0 {
		t.Fatalf("result %+v", res)
	}
	reqs := f.requests()
	rewritten := false
	for _, r := range reqs {
		if len(r.Messages) > 2 && strings.HasPrefix(r.Messages[2].Content, condensedHead) {
			rewritten = true
		}
	}
	if !rewritten {
		t.Error("no request carried the condensation note")
	}
}

// TestCommandTimeout: a command past its timeout is killed with its
// children, promptly, even when a background child holds the output open.
func TestCommandTimeout(t *testing.T) {
	start := time.Now()
	r := runCommand(context.Background(), t.TempDir(), "sleep 30 & echo started; sleep 30", 300*time.Millisecond, 1000)
	if !r.TimedOut || r.ExitCode != -1 || !strings.Contains(r.Output, "started") {
		t.Errorf("result %+v", r)
	}
	// A command that ends at once but leaves a child holding stdout.
	r = runCommand(context.Background(), t.TempDir(), "sleep 30 & echo bg", 10*time.Second, 1000)
	if r.TimedOut || r.ExitCode != 0 || r.Output != "bg\n" {
		t.Errorf("result %+v", r)
	}
	if d := time.Since(start); d > 8*time.Second {
		t.Errorf("took %s", d)
	}
}

func TestCapWriter(t *testing.T) {
	w := &capWriter{max: 10}
	for _, p := range []string{"0123", "4567", "89abcdefghij", "klmno"} {
		w.Write([]byte(p))
	}
	if got, want := w.String(), "01234\n[... 15 bytes of output elided ...]\nklmno"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := capText("short", 10); got != "short" {
		t.Errorf("got %q", got)
	}
}

func TestMainUsage(t *testing.T) {
	var out, errOut bytes.Buffer
	for _, args := range [][]string{nil, {"python"}, {"bash"}, {"bash", "--bogus"}, {"bash", "--base-url", "http://x", "--task-file", "/nonexistent/t"}} {
		out.Reset()
		if code := Main(context.Background(), args, &out, &errOut); code != 2 || out.Len() != 0 {
			t.Errorf("%v: exit %d, stdout %q", args, code, out.String())
		}
	}
	if _, err := ParseResult([]byte("noise\n{\"x\":1}\n")); err == nil {
		t.Error("ParseResult accepted a line without a result")
	}
}
