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
// Held-out instances and held-out families are refused (ErrHeldout): they
// are never used for SFT or RL.
//
// pi's format is not produced here: pi is an npm harness whose prompt
// cannot be reproduced offline; it is left for the npm-harness work.
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
)

// DefaultWorkdir is where rollouts show the task's repository to the agent
// (transforms/rollout.WorkspaceDir); demonstrations name it in place of
// the temporary folder the solver ran in, so their prompts are the ones a
// rollout sends.
const DefaultWorkdir = "/workspace"

// Demo is one demonstration: a conversation in the layout of
// policy/chat.Message and chat.Tool (the JSON field names are the same), one
// JSON object per line of a demonstrations file.
type Demo struct {
	InstanceID string    `json:"instance_id"`
	Agent      string    `json:"agent"` // "bash" or "tools"
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
}

// Formats lists the agents Solve writes demonstrations for.
func Formats() []string { return []string{"bash", "tools"} }

// CheckTrain returns ErrHeldout (wrapped, naming the task) unless the
// instance is in the train split: its own split and the built-in split of
// its id and family must both say train (an empty split takes the
// built-in one).
func CheckTrain(in *tasks.Instance) error {
	split := in.Split
	if split == "" {
		split = builtin.Split(in.InstanceID, in.Family)
	}
	if split != tasks.SplitTrain || builtin.HeldoutFamilies[in.Family] || builtin.Split(in.InstanceID, in.Family) != tasks.SplitTrain {
		return fmt.Errorf("%w: %s (split %q, family %q)", ErrHeldout, in.InstanceID, split, in.Family)
	}
	return nil
}

// Solve runs the named agent ("bash" or "tools") on in with scripted
// replies and returns the demonstration. suiteDir resolves the instance's
// snapshot. The repository is prepared in a temporary folder, removed at
// the end.
func Solve(ctx context.Context, suiteDir string, in *tasks.Instance, agentName string, opt Options) (*Demo, error) {
	if err := CheckTrain(in); err != nil {
		return nil, err
	}
	if opt.Workdir == "" {
		opt.Workdir = DefaultWorkdir
	}
	if agentName != "bash" && agentName != "tools" {
		return nil, fmt.Errorf("%w: agent %q (want bash or tools)", ErrUnsupported, agentName)
	}
	tmp, err := os.MkdirTemp("", "legorl-scripted-*")
	if err != nil {
		return nil, fmt.Errorf("scripted: %w", err)
	}
	defer os.RemoveAll(tmp)
	snap := in.SnapshotDir(suiteDir)
	ws, fixed := filepath.Join(tmp, "repo"), filepath.Join(tmp, "fixed")
	for _, d := range []string{ws, fixed} {
		if err := tasks.PrepareWorkspace(ctx, snap, in.BaseCommit, d); err != nil {
			return nil, fmt.Errorf("scripted: %s: %w", in.InstanceID, err)
		}
	}
	if _, err := tasks.Git(ctx, fixed, strings.NewReader(in.Patch), "apply", "-"); err != nil {
		return nil, fmt.Errorf("scripted: %s: gold patch: %w", in.InstanceID, err)
	}
	edits, err := goldEdits(in.Patch, ws, fixed)
	if err != nil {
		return nil, fmt.Errorf("scripted: %s: %w", in.InstanceID, err)
	}
	var replies []reply
	if agentName == "bash" {
		replies = bashScript(edits, in.Patch)
	} else {
		replies = toolsScript(edits)
	}
	pristine, err := tasks.ReadTree(ctx, snap, in.BaseCommit)
	if err != nil {
		return nil, fmt.Errorf("scripted: %s: %w", in.InstanceID, err)
	}

	srv := &server{replies: replies}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	res, err := agent.Run(ctx, agentName, agent.Config{BaseURL: hs.URL + "/v1", Task: in.ProblemStatement, Workdir: ws,
		MaxTurns: len(replies), MaxIdleTurns: 1})
	if err != nil {
		return nil, fmt.Errorf("scripted: %s: %w", in.InstanceID, err)
	}
	if res.Stop != agent.StopSubmitted || res.ParseFailures > 0 {
		return nil, fmt.Errorf("%w: %s: agent %s stopped with %q (%d parse failures) %s", ErrFailed, in.InstanceID, agentName, res.Stop, res.ParseFailures, res.Error)
	}
	for _, s := range res.Steps {
		if s.ExitCode != 0 {
			return nil, fmt.Errorf("%w: %s: %s step of turn %d exited %d", ErrFailed, in.InstanceID, s.Tool, s.Turn, s.ExitCode)
		}
	}
	diff, err := grade.TakeDiff(pristine, ws, grade.DiffLimits{})
	if err != nil {
		return nil, fmt.Errorf("scripted: %s: %w", in.InstanceID, err)
	}
	d, err := srv.demo(ws, opt.Workdir)
	if err != nil {
		return nil, fmt.Errorf("scripted: %s: %w", in.InstanceID, err)
	}
	d.InstanceID, d.Agent, d.Diff = in.InstanceID, agentName, diff
	return d, nil
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

// bashScript: cat the file, fix it (sed for a one-line change, else git
// apply of the gold patch), submit.
func bashScript(edits []edit, patch string) []reply {
	var paths []string
	for _, e := range edits {
		paths = append(paths, e.Path)
	}
	out := []reply{{Content: fmt.Sprintf("Let me read `%s`, where the issue points.\n\n```bash\ncat %s\n```", strings.Join(paths, "`, `"), strings.Join(paths, " "))}}
	if len(edits) == 1 {
		if cmd, ok := sedCommand(edits[0]); ok {
			e := edits[0]
			out = append(out, reply{Content: fmt.Sprintf("The bug is on line %d:\n`%s`\nIt should read:\n`%s`\nI'll fix it with sed.\n\n```bash\n%s\n```",
				e.Line, strings.TrimSpace(e.Old), strings.TrimSpace(e.New), cmd)})
		}
	}
	if len(out) == 1 {
		out = append(out, reply{Content: fmt.Sprintf("I'll apply the fix as a patch.\n\n```bash\ngit apply <<'EOF'\n%sEOF\n```", patch)})
	}
	return append(out, reply{Content: "The fix is in place. Submitting.\n\n```bash\necho " + agent.SubmitMarker + "\n```"})
}

// sedCommand returns `sed -i 's/OLD/NEW/' PATH` for a one-line edit whose
// trimmed old line occurs once in the file and keeps its indentation.
func sedCommand(e edit) (string, bool) {
	if strings.Contains(e.Old, "\n") || strings.Contains(e.New, "\n") {
		return "", false
	}
	oldT, newT := strings.TrimLeft(e.Old, " \t"), strings.TrimLeft(e.New, " \t")
	if oldT == "" || newT == "" || e.Old[:len(e.Old)-len(oldT)] != e.New[:len(e.New)-len(newT)] {
		return "", false
	}
	if strings.ContainsAny(oldT+newT+e.Path, "'\t") {
		return "", false
	}
	pat := strings.NewReplacer(`\`, `\\`, `/`, `\/`, `.`, `\.`, `*`, `\*`, `[`, `\[`, `^`, `\^`, `$`, `\$`).Replace(oldT)
	rep := strings.NewReplacer(`\`, `\\`, `/`, `\/`, `&`, `\&`).Replace(newT)
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

// server is the scripted model: it answers the n-th chat call with the
// n-th reply and keeps the last request.
type server struct {
	mu      sync.Mutex
	replies []reply
	n       int
	last    []byte
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		http.Error(w, `{"error": {"message": "bad request"}}`, http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n >= len(s.replies) {
		http.Error(w, `{"error": {"message": "script exhausted"}}`, http.StatusBadRequest)
		return
	}
	rp := s.replies[s.n]
	s.n++
	s.last = body
	msg := map[string]any{"role": "assistant", "content": rp.Content}
	if rp.Tool != "" {
		msg["tool_calls"] = []any{map[string]any{"id": fmt.Sprintf("call_%d", s.n), "type": "function",
			"function": map[string]any{"name": rp.Tool, "arguments": rp.Args}}}
	}
	finish := "stop"
	if rp.Tool != "" {
		finish = "tool_calls"
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}})
}

// wire is the Chat Completions request the agents send.
type wire struct {
	Messages []struct {
		Role             string `json:"role"`
		Content          string `json:"content"`
		ReasoningContent string `json:"reasoning_content"`
		ToolCalls        []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
		ToolCallID string `json:"tool_call_id"`
	} `json:"messages"`
	Tools []struct {
		Function Tool `json:"function"`
	} `json:"tools"`
}

// demo is the last request's conversation plus the last reply (the
// submit), with the run's folder renamed to workdir.
func (s *server) demo(ran, workdir string) (*Demo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var req wire
	if err := json.Unmarshal(s.last, &req); err != nil {
		return nil, fmt.Errorf("scripted: the agent's request: %w", err)
	}
	rename := strings.NewReplacer(ran, workdir)
	d := &Demo{}
	for _, m := range req.Messages {
		o := Message{Role: m.Role, Content: rename.Replace(m.Content), ReasoningContent: m.ReasoningContent, ToolCallID: m.ToolCallID}
		for _, tc := range m.ToolCalls {
			o.ToolCalls = append(o.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: json.RawMessage(rename.Replace(tc.Function.Arguments))})
		}
		d.Messages = append(d.Messages, o)
	}
	for _, t := range req.Tools {
		d.Tools = append(d.Tools, t.Function)
	}
	last := s.replies[s.n-1]
	m := Message{Role: "assistant", Content: last.Content}
	if last.Tool != "" {
		m.ToolCalls = []ToolCall{{ID: fmt.Sprintf("call_%d", s.n), Name: last.Tool, Arguments: json.RawMessage(rename.Replace(last.Args))}}
	}
	d.Messages = append(d.Messages, m)
	return d, nil
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
