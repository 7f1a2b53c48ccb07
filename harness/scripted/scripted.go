// Package scripted is the scripted solver of the built-in suite: for a
// training task it runs one of the built-in agents (harness/agent) against
// an in-process model server that replies with a fixed, short solution
// derived from the gold patch (read the file, apply the fix, submit), and
// records the conversation the agent built. The prompts, observations and
// reply formats are therefore exactly the agent's own: the demonstration is
// what the agent would have sent to the proxy had a model produced those
// replies. Demonstrations are the input of SFT (trainer.SFT), so a tiny
// model starts with a non-zero solve rate.
//
// The formats of pi, Codex and OpenCode come the same way from the real
// programs (harness.Pi, harness.Codex, harness.OpenCode: npm packages,
// fully offline): Solve installs the program (or finds it installed, as
// `make test-harnesses` leaves tools/harnesses), launches it as a rollout
// does with its base URL on the scripted server, which answers its
// streamed requests on its wire API (Chat Completions for pi and OpenCode,
// Responses for Codex), and records the program's own system prompt,
// tools and messages as the proxy decodes them (see program.run). Codex
// edits with its own apply_patch, OpenCode and pi with their edit tools.
// What a program writes at random or from the clock is pinned: pi's and
// OpenCode's wall clocks start at harness.ClockEpoch, Codex's day is left
// out of its prompt, and its command outputs' chunk ids and wall times are
// made canonical (codexCanon).
//
// Held-out instances and held-out families are refused (ErrHeldout): they
// are never used for SFT or RL.
package scripted

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/legorl/legorl/harness/agent"
	"github.com/legorl/legorl/sandbox/grade"
	"github.com/legorl/legorl/tasks"
	"github.com/legorl/legorl/tasks/builtin"
)

// Sentinel errors of the package.
var (
	// ErrHeldout: the task is a held-out instance or of a held-out family.
	ErrHeldout = errors.New("scripted: held-out task (never used for SFT or RL)")
	// ErrUnsupported: the gold patch or the agent is outside what the
	// solver scripts.
	ErrUnsupported = errors.New("scripted: unsupported")
	// ErrFailed: the agent did not end as scripted.
	ErrFailed = errors.New("scripted: the scripted run failed")
	// ErrNotInstalled: an npm harness's program (pi) or Node.js is
	// missing and could not be installed.
	ErrNotInstalled = errors.New("scripted: harness program not installed")
)

// DefaultWorkdir is where rollouts show the task's repository to the agent
// (rollout.WorkspaceDir); demonstrations name it in place of
// the temporary folder the solver ran in, so their prompts are the ones a
// rollout sends.
const DefaultWorkdir = "/workspace"

// ProgramDir is where rollouts show an npm harness's installed program
// (rollout.ProgramDir); pi's system prompt names its own
// documentation there, so demonstrations name it in place of the host's
// install folder.
const ProgramDir = "/legorl/program"

// sandboxTmp is TMPDIR inside a rollout's sandbox, where the solver's
// programs run with their own temporary folder as TMPDIR.
const sandboxTmp = "/tmp"

// Demo is one demonstration: a conversation in the layout of
// policy/chat.Message and chat.Tool (the JSON field names are the same), one
// JSON object per line of a demonstrations file.
type Demo struct {
	InstanceID string    `json:"instance_id"`
	Agent      string    `json:"agent"` // "bash", "tools" or "pi"
	Messages   []Message `json:"messages"`
	Tools      []Tool    `json:"tools,omitempty"`
	// Diff is the change the run left in the repository, taken as a
	// rollout takes it (grade.TakeDiff).
	Diff string `json:"diff"`
}

// Message is one turn, in chat.Message's JSON layout.
type Message struct {
	Role             string     `json:"role"`
	Content          string     `json:"content"`
	ReasoningContent string     `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID       string     `json:"tool_call_id,omitempty"`
	Name             string     `json:"name,omitempty"` // a tool message's tool, when the agent sends it
}

// ToolCall is one function call, in chat.ToolCall's JSON layout.
type ToolCall struct {
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// Tool is a function offered to the model, in chat.Tool's JSON layout.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// Options of Solve.
type Options struct {
	// Workdir is the repository path the demonstration names. Defaults to
	// DefaultWorkdir.
	Workdir string
	// HarnessCache is where npm harnesses (pi) are installed, or found
	// installed: a folder where `make test-harnesses` installed the
	// pinned set (tools/harnesses) is used as it is; otherwise pi is
	// installed there with npm, as rollouts do (harness.Pi.Install).
	// Defaults to $TMPDIR/legorl-harness, the rollouts' default
	// (rollout.Config.CacheDir).
	HarnessCache string
	// SedInserts makes the bash demonstration of an edit whose old text is
	// one line and whose new text spans several (a case inserted after a
	// line) a sed whose replacement holds "\n" (GNU sed), where it is
	// otherwise a git apply of the gold patch: the line to match is then
	// copied from the file as in a one-line fix, and no hunk header's line
	// numbers have to be computed.
	SedInserts bool
}

// Formats lists the agents Solve writes demonstrations for: the built-in
// agents and the npm harnesses pi, Codex and OpenCode.
func Formats() []string { return []string{"bash", "tools", "pi", "codex", "opencode"} }

// CheckTrain returns ErrHeldout (wrapped, naming the task) unless the
// instance is in a training pool (sft or train): its own split and the
// built-in split of its id and family must both say so (an empty split
// takes the built-in one).
func CheckTrain(in *tasks.Instance) error {
	split := in.Split
	if split == "" {
		split = builtin.Split(in.InstanceID, in.Family)
	}
	training := func(s string) bool { return s == tasks.SplitTrain || s == tasks.SplitSFT }
	if !training(split) || builtin.HeldoutFamilies[in.Family] || !training(builtin.Split(in.InstanceID, in.Family)) {
		return fmt.Errorf("%w: %s (split %q, family %q)", ErrHeldout, in.InstanceID, split, in.Family)
	}
	return nil
}

// Solve runs the named agent ("bash", "tools" or "pi") on in with
// scripted replies and returns the demonstration. suiteDir resolves the
// instance's snapshot. The repository is prepared in a temporary folder,
// removed at the end. pi needs Node.js and its npm package
// (Options.HarnessCache).
func Solve(ctx context.Context, suiteDir string, in *tasks.Instance, agentName string, opt Options) (*Demo, error) {
	if err := CheckTrain(in); err != nil {
		return nil, err
	}
	if opt.Workdir == "" {
		opt.Workdir = DefaultWorkdir
	}
	if opt.HarnessCache == "" {
		opt.HarnessCache = filepath.Join(os.TempDir(), "legorl-harness")
	}
	if !slices.Contains(Formats(), agentName) {
		return nil, fmt.Errorf("%w: agent %q (want %s)", ErrUnsupported, agentName, strings.Join(Formats(), ", "))
	}
	p, npm := programs[agentName]
	prog := ""
	if npm { // first: a missing program fails fast
		var err error
		if prog, err = p.install(ctx, opt.HarnessCache); err != nil {
			return nil, err
		}
	}
	tmp, err := os.MkdirTemp("", "legorl-scripted-*")
	if err != nil {
		return nil, fmt.Errorf("scripted: %w", err)
	}
	defer os.RemoveAll(tmp)
	if tmp, err = filepath.EvalSymlinks(tmp); err != nil { // the path the agent sees as its working directory
		return nil, fmt.Errorf("scripted: %w", err)
	}
	ws, edits, pristine, err := prepare(ctx, suiteDir, in, tmp)
	if err != nil {
		return nil, fmt.Errorf("scripted: %s: %w", in.InstanceID, err)
	}
	var replies []reply
	switch agentName {
	case "bash":
		replies = bashScript(edits, in.Patch, opt.SedInserts)
	case "tools":
		replies = toolsScript(edits)
	default:
		replies = p.script(edits)
	}

	srv := &server{replies: replies, titles: p.titles}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	renames := []string{ws, opt.Workdir}
	if npm {
		if err := p.run(ctx, prog, hs.URL+"/v1", in.ProblemStatement, ws, tmp, replies); err != nil {
			return nil, fmt.Errorf("%w (task %s)", err, in.InstanceID)
		}
		// Last: the solver's folder is the sandbox's TMPDIR (OpenCode's
		// bash tool names it), after the folders inside it.
		renames = append(renames, prog, ProgramDir, p.stateDir(tmp), p.state, tmp, sandboxTmp)
	} else if err := runAgent(ctx, agentName, hs.URL+"/v1", in.ProblemStatement, ws, len(replies)); err != nil {
		return nil, fmt.Errorf("%w (task %s)", err, in.InstanceID)
	}
	if n := srv.calls(); n != len(replies) {
		return nil, fmt.Errorf("%w: %s: agent %s made %d model calls, the script has %d", ErrFailed, in.InstanceID, agentName, n, len(replies))
	}
	diff, err := grade.TakeDiff(pristine, ws, grade.DiffLimits{})
	if err != nil {
		return nil, fmt.Errorf("scripted: %s: %w", in.InstanceID, err)
	}
	d, err := srv.demo(strings.NewReplacer(renames...))
	if err != nil {
		return nil, fmt.Errorf("scripted: %s: %w", in.InstanceID, err)
	}
	d.InstanceID, d.Agent, d.Diff = in.InstanceID, agentName, diff
	if npm {
		p.canonical(d, in.InstanceID)
	}
	return d, nil
}

// prepare checks the task's repository out in tmp/repo (where the agent
// works) and tmp/fixed (with the gold patch applied), and returns the
// former, the gold patch's edits and the pristine tree the diff is taken
// against.
func prepare(ctx context.Context, suiteDir string, in *tasks.Instance, tmp string) (string, []edit, tasks.Tree, error) {
	snap := in.SnapshotDir(suiteDir)
	ws, fixed := filepath.Join(tmp, "repo"), filepath.Join(tmp, "fixed")
	for _, d := range []string{ws, fixed} {
		if err := tasks.PrepareWorkspace(ctx, snap, in.BaseCommit, d); err != nil {
			return "", nil, nil, err
		}
	}
	if _, err := tasks.Git(ctx, fixed, strings.NewReader(in.Patch), "apply", "-"); err != nil {
		return "", nil, nil, fmt.Errorf("gold patch: %w", err)
	}
	edits, err := goldEdits(in.Patch, ws, fixed)
	if err != nil {
		return "", nil, nil, err
	}
	pristine, err := tasks.ReadTree(ctx, snap, in.BaseCommit)
	if err != nil {
		return "", nil, nil, err
	}
	return ws, edits, pristine, nil
}

// runAgent runs a built-in agent in ws against baseURL for turns turns and
// checks that it submitted with every step succeeding.
func runAgent(ctx context.Context, agentName, baseURL, task, ws string, turns int) error {
	res, err := agent.Run(ctx, agentName, agent.Config{BaseURL: baseURL, Task: task, Workdir: ws, MaxTurns: turns, MaxIdleTurns: 1})
	if err != nil {
		return fmt.Errorf("scripted: %w", err)
	}
	if res.Stop != agent.StopSubmitted || res.ParseFailures > 0 {
		return fmt.Errorf("%w: agent %s stopped with %q (%d parse failures) %s", ErrFailed, agentName, res.Stop, res.ParseFailures, res.Error)
	}
	for _, s := range res.Steps {
		if s.ExitCode != 0 {
			return fmt.Errorf("%w: %s step of turn %d exited %d", ErrFailed, s.Tool, s.Turn, s.ExitCode)
		}
	}
	return nil
}

// edit replaces Old by New (each a run of whole lines, Old unique in the
// file) in Path.
type edit struct {
	Path     string
	Old, New string
	Line     int // 1-based line of Old's start
}

// goldEdits turns the gold patch into one edit per changed file: the
// smallest run of lines that differs between the base and fixed file,
// widened by context until it occurs once.
func goldEdits(patch, base, fixed string) ([]edit, error) {
	fps, err := tasks.ParsePatch(patch, tasks.PatchLimits{})
	if err != nil {
		return nil, err
	}
	var out []edit
	for _, fp := range fps {
		if fp.OldPath == "" || fp.NewPath == "" || fp.OldPath != fp.NewPath {
			return nil, fmt.Errorf("%w: the gold patch creates, deletes or renames %s", ErrUnsupported, fp.Path())
		}
		a, err := os.ReadFile(filepath.Join(base, fp.Path()))
		if err != nil {
			return nil, fmt.Errorf("scripted: %w", err)
		}
		b, err := os.ReadFile(filepath.Join(fixed, fp.Path()))
		if err != nil {
			return nil, fmt.Errorf("scripted: %w", err)
		}
		e, ok := lineEdit(string(a), string(b))
		if !ok {
			return nil, fmt.Errorf("%w: no unique edit of %s", ErrUnsupported, fp.Path())
		}
		e.Path = fp.Path()
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// lineEdit finds the smallest unique run of whole lines of a that, replaced,
// gives b.
func lineEdit(a, b string) (edit, bool) {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	p := 0
	for p < len(al) && p < len(bl) && al[p] == bl[p] {
		p++
	}
	s := 0
	for s < len(al)-p && s < len(bl)-p && al[len(al)-1-s] == bl[len(bl)-1-s] {
		s++
	}
	if p == len(al) && p == len(bl) {
		return edit{}, false // no change
	}
	for {
		old := strings.Join(al[p:len(al)-s], "\n")
		if strings.TrimSpace(old) != "" && strings.Count(a, old) == 1 {
			return edit{Old: old, New: strings.Join(bl[p:len(bl)-s], "\n"), Line: p + 1}, true
		}
		switch {
		case p > 0:
			p--
		case s > 0:
			s--
		default:
			return edit{}, false
		}
	}
}

// reply is one scripted model turn.
type reply struct {
	Content string
	Tool    string // tools agent: the call's name
	Args    string // its arguments, a JSON object with keys in the schema's order
}

// object encodes key, value pairs as a JSON object in their order (the
// order of the tool's schema, as a model writes them).
func object(kv ...string) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := 0; i+1 < len(kv); i += 2 {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(jsonString(kv[i]) + ": " + jsonString(kv[i+1]))
	}
	b.WriteByte('}')
	return b.String()
}

// bashScript: cat the file, fix it (sed for a one-line change, and with
// inserts for a one-line match replaced by several lines; else git apply
// of the gold patch), submit.
func bashScript(edits []edit, patch string, inserts bool) []reply {
	var paths []string
	for _, e := range edits {
		paths = append(paths, e.Path)
	}
	// The replies are short, and what they copy (the file's name, the
	// buggy line) appears in them as in the text it is copied from (after
	// a space, with the line's indentation): a small model copies tokens.
	out := []reply{{Content: fmt.Sprintf("Let me read the file the issue names.\n\n```bash\ncat %s\n```", strings.Join(paths, " "))}}
	if len(edits) == 1 {
		if cmd, ok := sedCommand(edits[0], inserts); ok {
			out = append(out, reply{Content: fmt.Sprintf("The bug is on line %d. I'll fix it with sed.\n\n```bash\n%s\n```", edits[0].Line, cmd)})
		}
	}
	if len(out) == 1 {
		out = append(out, reply{Content: fmt.Sprintf("I'll apply the fix as a patch.\n\n```bash\ngit apply <<'EOF'\n%sEOF\n```", patch)})
	}
	return append(out, reply{Content: "The fix is in place. Submitting.\n\n```bash\necho " + agent.SubmitMarker + "\n```"})
}

// sedCommand returns `sed -i 's/OLD/NEW/' PATH` for a one-line edit whose
// old line occurs once in the file and keeps its indentation. OLD and NEW
// are whole lines, indentation included, so that each word is the token
// it is in the file (BPE joins a word with the space before it). With
// inserts, NEW may span lines, written with GNU sed's "\n".
func sedCommand(e edit, inserts bool) (string, bool) {
	if strings.Contains(e.Old, "\n") || !inserts && strings.Contains(e.New, "\n") {
		return "", false
	}
	oldT, newT := strings.TrimLeft(e.Old, " \t"), strings.TrimLeft(e.New, " \t")
	if oldT == "" || newT == "" || e.Old[:len(e.Old)-len(oldT)] != e.New[:len(e.New)-len(newT)] {
		return "", false
	}
	if strings.ContainsAny(e.Old+e.New+e.Path, "'\t") {
		return "", false
	}
	pat := strings.NewReplacer(`\`, `\\`, `/`, `\/`, `.`, `\.`, `*`, `\*`, `[`, `\[`, `^`, `\^`, `$`, `\$`).Replace(e.Old)
	rep := strings.NewReplacer(`\`, `\\`, `/`, `\/`, `&`, `\&`, "\n", `\n`).Replace(e.New)
	return fmt.Sprintf("sed -i 's/%s/%s/' %s", pat, rep, e.Path), true
}

// toolsScript: view_file, str_replace per edit, submit.
func toolsScript(edits []edit) []reply {
	out := []reply{{Content: fmt.Sprintf("Let me look at `%s`, where the issue points.", edits[0].Path), Tool: "view_file", Args: object("path", edits[0].Path)}}
	for _, e := range edits {
		out = append(out, reply{Content: fmt.Sprintf("The bug is at line %d of `%s`. I'll fix it.", e.Line, e.Path), Tool: "str_replace",
			Args: object("path", e.Path, "old_str", e.Old, "new_str", e.New)})
	}
	return append(out, reply{Content: "The fix is in place. Submitting.", Tool: "submit", Args: "{}"})
}

// jsonString encodes s as a JSON string without HTML escapes.
func jsonString(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}

// server is the scripted model: it answers the n-th model call with the
// n-th reply, on the wire API of the request's path: Chat Completions
// (one JSON body, or chunks when the request asks for a stream, as pi and
// OpenCode do) or Responses (a stream of events: Codex). With titles, a
// request without tools is a side request (OpenCode's title) and is
// answered with sideReply, outside the script (the built-in bash agent's
// requests have no tools). It keeps the last scripted request.
type server struct {
	mu        sync.Mutex
	replies   []reply
	titles    bool
	n         int
	last      []byte
	responses bool // the last request was a Responses one
	side      int  // side requests answered
}

// sideReply answers a side request (a title).
const sideReply = "Fix the bug"

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	responses := strings.HasSuffix(r.URL.Path, "/responses")
	if err != nil || !responses && !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		http.Error(w, `{"error": {"message": "bad request"}}`, http.StatusBadRequest)
		return
	}
	var req struct {
		Stream bool              `json:"stream"`
		Tools  []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, `{"error": {"message": "the body is not JSON"}}`, http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var rp reply
	var id string
	switch {
	case s.titles && len(req.Tools) == 0:
		s.side++
		rp, id = reply{Content: sideReply}, fmt.Sprintf("side_%d", s.side)
	case s.n >= len(s.replies):
		http.Error(w, `{"error": {"message": "script exhausted"}}`, http.StatusBadRequest)
		return
	default:
		rp = s.replies[s.n]
		s.n++
		s.last, s.responses = body, responses
		id = fmt.Sprintf("call_%d", s.n)
	}
	switch {
	case responses:
		writeResponsesStream(w, rp, id)
	case req.Stream:
		writeStream(w, rp, id)
	default:
		msg := map[string]any{"role": "assistant", "content": rp.Content}
		if rp.Tool != "" {
			msg["tool_calls"] = []any{map[string]any{"id": id, "type": "function",
				"function": map[string]any{"name": rp.Tool, "arguments": rp.Args}}}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": rp.finish()}}})
	}
}

// finish is the reply's finish_reason.
func (rp reply) finish() string {
	if rp.Tool != "" {
		return "tool_calls"
	}
	return "stop"
}

// writeStream sends rp as Chat Completions stream chunks, in the order the
// proxy sends them (proxy's chatStream): the role, the text, the tool call
// whole with its index, the finish reason, then [DONE].
func writeStream(w http.ResponseWriter, rp reply, id string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	chunk := func(delta map[string]any, finish any) {
		b, _ := json.Marshal(map[string]any{"id": "chatcmpl-" + id, "object": "chat.completion.chunk", "model": "legorl",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}) // maps of strings always encode
		fmt.Fprintf(w, "data: %s\n\n", b)
	}
	chunk(map[string]any{"role": "assistant", "content": ""}, nil)
	if rp.Content != "" {
		chunk(map[string]any{"content": rp.Content}, nil)
	}
	if rp.Tool != "" {
		chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": id, "type": "function",
			"function": map[string]any{"name": rp.Tool, "arguments": rp.Args}}}}, nil)
	}
	chunk(map[string]any{}, rp.finish())
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// calls is the number of scripted model calls answered.
func (s *server) calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// wire is the Chat Completions request the agents send. Content is a
// string, null, or an array of text parts (pi sends its user message so).
type wire struct {
	Messages []struct {
		Role             string          `json:"role"`
		Content          json.RawMessage `json:"content"`
		ReasoningContent *string         `json:"reasoning_content"`
		Reasoning        *string         `json:"reasoning"`
		ToolCalls        []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
		ToolCallID string `json:"tool_call_id"`
		Name       string `json:"name"`
	} `json:"messages"`
	Tools []struct {
		Function Tool `json:"function"`
	} `json:"tools"`
}

// decodeChat reads a Chat Completions request as the proxy does (proxy's
// chatMessage: developer is system, content parts joined by newlines,
// reasoning_content or reasoning, empty arguments none).
func decodeChat(body []byte) ([]Message, []Tool, error) {
	var req wire
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, nil, fmt.Errorf("scripted: the agent's request: %w", err)
	}
	var msgs []Message
	for i, m := range req.Messages {
		content, err := wireContent(m.Content)
		if err != nil {
			return nil, nil, fmt.Errorf("scripted: the agent's request: message %d: %w", i, err)
		}
		o := Message{Role: m.Role, Content: content, ToolCallID: m.ToolCallID}
		switch m.Role {
		case "developer":
			o.Role = "system"
		case "tool":
			o.Name = m.Name
		case "assistant":
			if m.ReasoningContent != nil {
				o.ReasoningContent = *m.ReasoningContent
			} else if m.Reasoning != nil {
				o.ReasoningContent = *m.Reasoning
			}
		}
		for _, tc := range m.ToolCalls {
			c := ToolCall{ID: tc.ID, Name: tc.Function.Name}
			if strings.TrimSpace(tc.Function.Arguments) != "" {
				c.Arguments = json.RawMessage(tc.Function.Arguments)
			}
			o.ToolCalls = append(o.ToolCalls, c)
		}
		msgs = append(msgs, o)
	}
	var tools []Tool
	for _, t := range req.Tools {
		tools = append(tools, t.Function)
	}
	return msgs, tools, nil
}

// demo is the last scripted request's conversation plus the last reply,
// decoded as the proxy decodes its wire API, with rename applied to the
// text, arguments and tools (the run's folders become the rollout's).
func (s *server) demo(rename *strings.Replacer) (*Demo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	decode := decodeChat
	if s.responses {
		decode = decodeResponses
	}
	msgs, tools, err := decode(s.last)
	if err != nil {
		return nil, err
	}
	last := s.replies[s.n-1]
	m := Message{Role: "assistant", Content: last.Content}
	if last.Tool != "" {
		m.ToolCalls = []ToolCall{{ID: fmt.Sprintf("call_%d", s.n), Name: last.Tool, Arguments: json.RawMessage(last.Args)}}
	}
	msgs = append(msgs, m)
	for i := range msgs {
		msgs[i].Content = rename.Replace(msgs[i].Content)
		for j, tc := range msgs[i].ToolCalls {
			if len(tc.Arguments) > 0 {
				msgs[i].ToolCalls[j].Arguments = json.RawMessage(rename.Replace(string(tc.Arguments)))
			}
		}
	}
	for i := range tools { // OpenCode's bash tool names its TMPDIR
		tools[i].Description = rename.Replace(tools[i].Description)
		if len(tools[i].Parameters) > 0 {
			tools[i].Parameters = json.RawMessage(rename.Replace(string(tools[i].Parameters)))
		}
	}
	return &Demo{Messages: msgs, Tools: tools}, nil
}

// wireContent flattens a message's content: a string, null, or an array
// of text parts, joined by newlines.
func wireContent(raw json.RawMessage) (string, error) {
	if len(raw) == 0 {
		return "", nil
	}
	var s *string
	if err := json.Unmarshal(raw, &s); err == nil {
		if s == nil {
			return "", nil
		}
		return *s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("content is neither a string nor text parts: %w", err)
	}
	texts := make([]string, 0, len(parts))
	for _, p := range parts {
		if p.Type != "text" {
			return "", fmt.Errorf("content part of type %q (text only)", p.Type)
		}
		texts = append(texts, p.Text)
	}
	return strings.Join(texts, "\n"), nil
}

// WriteJSONL writes demonstrations, one per line.
func WriteJSONL(w io.Writer, demos []*Demo) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, d := range demos {
		if err := enc.Encode(d); err != nil {
			return fmt.Errorf("scripted: %w", err)
		}
	}
	return nil
}
