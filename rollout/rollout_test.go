package rollout

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/legorl/legorl/harness"
	"github.com/legorl/legorl/harness/agent"
	"github.com/legorl/legorl/policy/chat"
	"github.com/legorl/legorl/policy/engine"
	"github.com/legorl/legorl/policy/infer"
	"github.com/legorl/legorl/policy/model"
	"github.com/legorl/legorl/policy/tokenizer"
	"github.com/legorl/legorl/proxy"
	"github.com/legorl/legorl/sandbox"
	"github.com/legorl/legorl/sandbox/grade"
	"github.com/legorl/legorl/sandbox/local"
	"github.com/legorl/legorl/sandbox/local/localtest"
	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/tasks"
	"github.com/legorl/legorl/tasks/builtin"
)

// The test binary is also the agent program: the runner shows it inside
// the sandbox as legorl-agent, and it runs as one when called that way.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && slices.Contains(agent.Names(), os.Args[1]) {
		os.Exit(agent.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	localtest.MustInstall() // the sandbox init make build ships, beside this binary
	code := m.Run()
	if fx.backend != nil {
		fx.backend.Close()
	}
	if fx.suiteDir != "" {
		os.RemoveAll(fx.suiteDir)
	}
	os.Exit(code)
}

// fixture is what the tests share, made once.
var fx struct {
	once     sync.Once
	err      error
	suiteDir string
	inst     *tasks.Instance
	backend  *local.Backend
	grader   *grade.Grader
	tok      *tokenizer.Tokenizer
	self     string
}

func setup(t *testing.T) {
	t.Helper()
	fx.once.Do(func() {
		fx.suiteDir, fx.err = os.MkdirTemp("", "legorl-rollout-suite-")
		if fx.err != nil {
			return
		}
		var ins []tasks.Instance
		ins, fx.err = builtin.Generate(context.Background(), fx.suiteDir, builtin.Options{N: 1, Seed: 1, Languages: []string{"python"}})
		if fx.err != nil {
			return
		}
		fx.inst = &ins[0]
		fx.backend = local.New(local.Options{})
		fx.grader = grade.New(fx.backend, grade.Options{})
		fx.tok, fx.err = tokenizer.Load("../policy/tokenizer/testdata/small/tokenizer.json")
		if fx.err != nil {
			return
		}
		fx.self, fx.err = os.Executable()
	})
	if fx.err != nil {
		t.Fatal(fx.err)
	}
}

// tap is the proxy with a recording of what the harness received over
// the wire (each Chat Completions reply, in order) and of the Record.
type tap struct {
	*proxy.Proxy
	mu      sync.Mutex
	replies []wireReply
	rec     proxy.Record
}

// wireReply is one reply as the harness got it.
type wireReply struct {
	status    int
	stream    bool
	content   string
	reasoning string
	calls     [][2]string // name, arguments
}

func (p *tap) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tw := &teeWriter{ResponseWriter: w, status: http.StatusOK}
	p.Proxy.ServeHTTP(tw, r)
	if strings.HasSuffix(r.URL.Path, "/chat/completions") {
		p.mu.Lock()
		p.replies = append(p.replies, readReply(tw.status, tw.buf.Bytes()))
		p.mu.Unlock()
	}
}

func (p *tap) Finish(id string) (proxy.Record, error) {
	rec, err := p.Proxy.Finish(id)
	p.mu.Lock()
	p.rec = rec
	p.mu.Unlock()
	return rec, err
}

type teeWriter struct {
	http.ResponseWriter
	status int
	buf    bytes.Buffer
}

func (w *teeWriter) WriteHeader(code int) { w.status = code; w.ResponseWriter.WriteHeader(code) }
func (w *teeWriter) Write(b []byte) (int, error) {
	w.buf.Write(b)
	return w.ResponseWriter.Write(b)
}
func (w *teeWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

type wireMsg struct {
	Content          *string `json:"content"`
	ReasoningContent string  `json:"reasoning_content"`
	ToolCalls        []struct {
		Function struct{ Name, Arguments string } `json:"function"`
	} `json:"tool_calls"`
}

type wireBody struct {
	Choices []struct {
		Message *wireMsg `json:"message"`
		Delta   *wireMsg `json:"delta"`
	} `json:"choices"`
}

// readReply reads a reply body, whole or streamed.
func readReply(status int, body []byte) wireReply {
	out := wireReply{status: status}
	add := func(m *wireMsg) {
		if m == nil {
			return
		}
		if m.Content != nil {
			out.content += *m.Content
		}
		out.reasoning += m.ReasoningContent
		for _, c := range m.ToolCalls {
			out.calls = append(out.calls, [2]string{c.Function.Name, c.Function.Arguments})
		}
	}
	if !bytes.HasPrefix(body, []byte("data:")) {
		var b wireBody
		json.Unmarshal(body, &b)
		for _, c := range b.Choices {
			add(c.Message)
		}
		return out
	}
	out.stream = true
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var b wireBody
		json.Unmarshal([]byte(data), &b)
		for _, c := range b.Choices {
			add(c.Delta)
		}
	}
	return out
}

// scripted is a Generator that replays known completions per session
// (rollout): each call's text, ending with <|im_end|>, tokenized, every
// token with logprob -0.1 and policy version 1. hook may fail a call.
type scripted struct {
	tok   *tokenizer.Tokenizer
	texts []string
	hook  func(call int) error
	mu    sync.Mutex
	calls map[string]int
}

func (s *scripted) Generate(ctx context.Context, req infer.Request, emit func(infer.Token)) (infer.Generation, error) {
	s.mu.Lock()
	if s.calls == nil {
		s.calls = map[string]int{}
	}
	call := s.calls[req.Session]
	s.calls[req.Session]++
	s.mu.Unlock()
	if s.hook != nil {
		if err := s.hook(call); err != nil {
			return infer.Generation{}, err
		}
	}
	text := s.texts[min(call, len(s.texts)-1)] + "<|im_end|>"
	g := infer.Generation{Finish: infer.FinishStop, PromptTokens: len(req.Prompt)}
	for _, id := range s.tok.EncodeSpecial(text) {
		if err := ctx.Err(); err != nil {
			return infer.Generation{}, err
		}
		t := infer.Token{ID: id, Logprob: -0.1, Version: 1}
		emit(t)
		g.Tokens = append(g.Tokens, t.ID)
		g.Logprobs = append(g.Logprobs, t.Logprob)
		g.Versions = append(g.Versions, t.Version)
	}
	return g, nil
}

func newTap(t *testing.T, gen proxy.Generator, maxTokens int) *tap {
	t.Helper()
	p, err := proxy.New(proxy.Options{Generator: gen, Tokenizer: fx.tok, Template: chat.Qwen3{}, MaxTokens: maxTokens,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return &tap{Proxy: p}
}

// randomPolicy is a small random-weight Qwen3 whose vocabulary is the test
// tokenizer's (a sampled id past the tokenizer's would not decode).
func randomPolicy(t *testing.T) *engine.Engine {
	t.Helper()
	e := engine.New(randomModel(t), 1, engine.Options{})
	t.Cleanup(e.Close)
	return e
}

// randomModel is randomPolicy's model.
func randomModel(t *testing.T) *model.Model {
	t.Helper()
	cfg, err := model.ParseConfig([]byte(fmt.Sprintf(`{"model_type": "qwen3", "vocab_size": %d, "hidden_size": 64,
		"intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
		"max_position_embeddings": 4096, "tie_word_embeddings": true}`, fx.tok.VocabSize())))
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.New(cfg, 7)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func config(p Proxy, h harness.Harness, id string) Config {
	return Config{Backend: fx.backend, Grader: fx.grader, Proxy: p, VocabSize: fx.tok.VocabSize(), Harness: h,
		AgentBinary: fx.self, SuiteDir: fx.suiteDir, Instance: fx.inst, RunID: "test-run", Iteration: 3, RolloutID: id, Seed: 11,
		MaxTurns: 6, SetupTimeout: time.Minute, AgentTimeout: 2 * time.Minute, GradeTimeout: 2 * time.Minute}
}

func mustRun(t *testing.T, cfg Config) (schemas.Rollout, []schemas.Segment, []schemas.Step) {
	t.Helper()
	row, segs, steps, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Run: %v (row %+v)", err, row)
	}
	t.Logf("%s: %s/%s reward %v turns %d calls %d tools %d parse failures %d segments %d flags %v (setup %.2fs agent %.2fs llm %.2fs grade %.2fs) %s",
		cfg.Harness.Name(), row.Status, row.Termination, row.Reward, row.NumTurns, row.NumLLMCalls, row.NumToolCalls,
		row.ToolParseFailures, len(segs), row.Flags, row.SetupSeconds, row.AgentSeconds, row.LLMSeconds, row.GradeSeconds, row.Error)
	return row, segs, steps
}

// toolNames are the built-in tools agent's tools, as the proxy parses
// calls against them.
var toolNames = []chat.Tool{{Name: "bash"}, {Name: "view_file"}, {Name: "str_replace"}, {Name: "create_file"}, {Name: "submit"}}

// checkConsistent checks the recorded segments against what the harness
// received: the sampled tokens of each call, decoded and parsed as the
// proxy parses them, give exactly the reply on the wire; masks, logprobs
// and versions agree.
func checkConsistent(t *testing.T, p *tap, segs []schemas.Segment, tools []chat.Tool) {
	t.Helper()
	var runs [][]int32
	for _, s := range segs {
		in := false
		for i, m := range s.LossMask {
			switch {
			case m == 1 && !in:
				runs = append(runs, nil)
				in = true
			case m == 0:
				in = false
				if s.Logprobs[i] != 0 || s.PolicyVersions[i] != 0 {
					t.Errorf("segment %d token %d: mask 0 with logprob %v version %d", s.SegmentIndex, i, s.Logprobs[i], s.PolicyVersions[i])
				}
			}
			if m == 1 {
				runs[len(runs)-1] = append(runs[len(runs)-1], s.CompletionTokenIDs[i])
				if s.PolicyVersions[i] < 1 {
					t.Errorf("segment %d token %d: version %d", s.SegmentIndex, i, s.PolicyVersions[i])
				}
			}
		}
	}
	// A call the harness repeated (the same prompt again: qwen-code after
	// an empty reply) rolled its generation back (proxy.Retry): its reply
	// went over the wire, its tokens are in no segment. The i-th call is
	// the i-th reply with status 200 when no generation failed.
	rolled := map[int]bool{}
	for _, r := range p.rec.Retries {
		rolled[r.Call] = true
	}
	if len(rolled) > 0 && p.rec.Metrics.Failed > 0 {
		t.Fatalf("%d calls retried and %d failed: the wire replies cannot be matched to calls", len(rolled), p.rec.Metrics.Failed)
	}
	var ok []wireReply
	call := 0
	for _, r := range p.replies {
		if r.status != http.StatusOK {
			continue
		}
		if !rolled[call] {
			ok = append(ok, r)
		}
		call++
	}
	if len(runs) != len(ok) || len(ok) == 0 {
		t.Fatalf("%d sampled runs in the segments, %d replies on the wire (%d rolled back by retries)", len(runs), len(ok), len(rolled))
	}
	norm := func(s string) string { // what JSON makes of invalid UTF-8
		b, _ := json.Marshal(s)
		var out string
		json.Unmarshal(b, &out)
		return out
	}
	for i, run := range runs {
		text, err := fx.tok.Decode(run)
		if err != nil {
			t.Fatal(err)
		}
		parsed := chat.Qwen3{}.Parse(string(text), tools)
		got := ok[i]
		if norm(parsed.Content) != got.content || norm(parsed.Reasoning) != got.reasoning || len(parsed.ToolCalls) != len(got.calls) {
			t.Errorf("call %d: the tokens say content %q reasoning %q %d calls; the harness got %q %q %d calls",
				i, parsed.Content, parsed.Reasoning, len(parsed.ToolCalls), got.content, got.reasoning, len(got.calls))
			continue
		}
		for j, c := range parsed.ToolCalls {
			if c.Name != got.calls[j][0] || string(c.Arguments) != got.calls[j][1] {
				t.Errorf("call %d tool call %d: tokens say %s %s, the harness got %v", i, j, c.Name, c.Arguments, got.calls[j])
			}
		}
	}
}

// TestRandomPolicy: each built-in agent runs a whole rollout against a
// small random-weight model. The model writes nonsense; the rollout still
// ends with a typed termination, is graded, and its segments match what
// the harness received.
func TestRandomPolicy(t *testing.T) {
	setup(t)
	eng := randomPolicy(t)
	for _, h := range []harness.Builtin{
		{Agent: "bash", Args: []string{"--max-idle-turns", "2"}},
		{Agent: "tools", Args: []string{"--max-idle-turns", "2"}},
	} {
		t.Run(h.Agent, func(t *testing.T) {
			p := newTap(t, eng, 24)
			cfg := config(p, h, "random-"+h.Agent)
			cfg.MaxTurns = 3
			row, segs, steps := mustRun(t, cfg)
			if row.Status != schemas.StatusCompleted || (row.Termination != schemas.TerminationAgentCompleted && row.Termination != schemas.TerminationMaxTurns) {
				t.Fatalf("status %s termination %s: %s", row.Status, row.Termination, row.Error)
			}
			if row.Reward != 0 || len(row.P2PPassed) == 0 || row.GradeSeconds <= 0 || row.PolicyVersion != 1 {
				t.Errorf("not graded as expected: %+v", row)
			}
			if row.NumLLMCalls < 2 || row.NumTurns != row.NumLLMCalls || len(steps) == 0 || row.LLMSeconds <= 0 {
				t.Errorf("counts %+v, %d steps", row, len(steps))
			}
			var tools []chat.Tool
			if h.Agent == "tools" {
				tools = toolNames
			}
			t.Logf("forks %v (a completion cut at max_tokens comes back with its end token: completion_rerendered)", p.rec.Metrics.Forks)
			checkConsistent(t, p, segs, tools)
			if h.Agent == "tools" && !p.replies[0].stream {
				t.Error("the tools agent did not stream")
			}
		})
	}
}

// fix is the gold patch's first hunk as a str_replace: the old and new
// lines with their context, and the file.
func fix(t *testing.T, patch string) (file, old, new string) {
	t.Helper()
	fps, err := tasks.ParsePatch(patch, tasks.PatchLimits{})
	if err != nil || len(fps) != 1 {
		t.Fatalf("gold patch: %v (%d files)", err, len(fps))
	}
	file = fps[0].Path()
	var o, n []string
	in := false
	for _, l := range strings.Split(patch, "\n") {
		switch {
		case strings.HasPrefix(l, "@@"):
			if in {
				break
			}
			in = true
		case !in || l == "":
		case l[0] == ' ':
			o, n = append(o, l[1:]), append(n, l[1:])
		case l[0] == '-':
			o = append(o, l[1:])
		case l[0] == '+':
			n = append(n, l[1:])
		}
	}
	return file, strings.Join(o, "\n"), strings.Join(n, "\n")
}

// toolCall writes a Qwen3 tool call the way the template renders one.
func toolCall(t *testing.T, name string, kv ...string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(`<tool_call>` + "\n" + `{"name": "` + name + `", "arguments": {`)
	for i := 0; i < len(kv); i += 2 {
		if i > 0 {
			b.WriteString(", ")
		}
		var v bytes.Buffer
		enc := json.NewEncoder(&v)
		enc.SetEscapeHTML(false)
		enc.Encode(kv[i+1])
		fmt.Fprintf(&b, "%q: %s", kv[i], strings.TrimSpace(v.String()))
	}
	b.WriteString("}}\n</tool_call>")
	return b.String()
}

// TestScriptedPolicy: a policy that replays a known-good action sequence
// takes each built-in agent to reward 1: the whole path from harness to
// grader, with one growing segment per rollout.
func TestScriptedPolicy(t *testing.T) {
	setup(t)
	file, old, new := fix(t, fx.inst.Patch)
	scripts := map[string][]string{
		"bash": {
			"I will apply the fix.\n\n```bash\ngit apply <<'EOF'\n" + fx.inst.Patch + "EOF\n```",
			"```bash\ngit diff --stat\n```",
			"Done.\n\n```bash\necho COMPLETE_TASK_AND_SUBMIT\n```",
		},
		"tools": {
			toolCall(t, "view_file", "path", file),
			"Fixing it.\n" + toolCall(t, "str_replace", "path", file, "old_str", old, "new_str", new),
			toolCall(t, "submit"),
		},
	}
	hashes := map[string]string{}
	for _, name := range []string{"bash", "tools"} {
		t.Run(name, func(t *testing.T) {
			p := newTap(t, &scripted{tok: fx.tok, texts: scripts[name]}, 0)
			h, err := harness.Lookup(name)
			if err != nil {
				t.Fatal(err)
			}
			row, segs, steps := mustRun(t, config(p, h, "scripted-"+name))
			if row.Termination != schemas.TerminationAgentCompleted || row.Reward != 1 || len(row.F2PFailed)+len(row.P2PFailed) != 0 {
				t.Fatalf("row %+v", row)
			}
			if row.NumTurns != 3 || row.NumLLMCalls != 3 || row.NumToolCalls != 3 || row.ToolParseFailures != 0 || row.DiffBytes == 0 || row.PolicyVersion != 1 {
				t.Errorf("counts %+v", row)
			}
			// The same fix by either agent: the same diff, and its hash in
			// the flags (what a replay compares).
			if hashes[name] = DiffHash(row.Flags); len(hashes[name]) != 64 || (hashes["bash"] != "" && hashes[name] != hashes["bash"]) {
				t.Errorf("diff hashes %v, flags %v", hashes, row.Flags)
			}
			if len(segs) != 1 || segs[0].FirstCall != 0 || segs[0].LastCall != 2 || len(p.rec.Metrics.Forks) != 0 {
				t.Errorf("%d segments, forks %v: the history did not only grow", len(segs), p.rec.Metrics.Forks)
			}
			if len(steps) != 3 || steps[0].RolloutID != row.RolloutID || steps[0].ExitCode != 0 {
				t.Errorf("steps %+v", steps)
			}
			var tools []chat.Tool
			if name == "tools" {
				tools = toolNames
			}
			checkConsistent(t, p, segs, tools)
		})
	}
}

// A rollout given its task's prepared workspace (Config.Workspace, what a
// group's rollouts share) reaches the same reward and diff as one that
// prepares its own, and its agent's edits stay in its own copy.
func TestPreparedWorkspace(t *testing.T) {
	setup(t)
	ctx := context.Background()
	w, err := tasks.NewWorkspace(ctx, fx.inst.SnapshotDir(fx.suiteDir), fx.inst.BaseCommit, filepath.Join(t.TempDir(), "ws"))
	if err != nil {
		t.Fatal(err)
	}
	before, err := grade.ReadWorkspace(w.Dir, grade.DiffLimits{})
	if err != nil {
		t.Fatal(err)
	}
	script := []string{
		"I will apply the fix.\n\n```bash\ngit apply <<'EOF'\n" + fx.inst.Patch + "EOF\n```",
		"Done.\n\n```bash\necho COMPLETE_TASK_AND_SUBMIT\n```",
	}
	h, err := harness.Lookup("bash")
	if err != nil {
		t.Fatal(err)
	}
	// The two that share the workspace share a grade.Memo too, as a
	// group's rollouts do: the same diff is graded once.
	memo := grade.NewMemo(fx.grader)
	var rows []schemas.Rollout
	for _, prepared := range []*tasks.Workspace{nil, w, w} {
		p := newTap(t, &scripted{tok: fx.tok, texts: script}, 0)
		cfg := config(p, h, fmt.Sprintf("prepared-%d", len(rows)))
		if prepared != nil {
			cfg.Workspace, cfg.Grader = prepared, memo
		}
		row, _, _ := mustRun(t, cfg)
		rows = append(rows, row)
	}
	for i, row := range rows {
		if row.Termination != schemas.TerminationAgentCompleted || row.Reward != 1 || row.DiffBytes != rows[0].DiffBytes {
			t.Errorf("rollout %d (prepared %v): %s, reward %v, diff %d bytes; the first: %d bytes", i, i > 0, row.Termination, row.Reward, row.DiffBytes, rows[0].DiffBytes)
		}
	}
	if memo.Reused() != 1 {
		t.Errorf("%d grades reused; want 1, the last rollout's repeat of the second's diff", memo.Reused())
	}
	if rows[2].F2PPassed == nil || !reflect.DeepEqual(rows[2].F2PPassed, rows[1].F2PPassed) || !reflect.DeepEqual(rows[2].Flags, rows[1].Flags) {
		t.Errorf("the reused grade's tests %v and flags %v, the graded one's %v and %v", rows[2].F2PPassed, rows[2].Flags, rows[1].F2PPassed, rows[1].Flags)
	}
	after, err := grade.ReadWorkspace(w.Dir, grade.DiffLimits{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(before, after) {
		t.Error("a rollout's edits reached the shared prepared workspace")
	}
}

// TestCondensationForks: the tools agent condenses its history past a
// small budget; the rewritten history starts a new segment (a fork), and
// the rollout still reaches reward 1.
func TestCondensationForks(t *testing.T) {
	setup(t)
	file, old, new := fix(t, fx.inst.Patch)
	p := newTap(t, &scripted{tok: fx.tok, texts: []string{
		toolCall(t, "view_file", "path", file),
		toolCall(t, "bash", "command", "ls -la && cat "+file),
		toolCall(t, "view_file", "path", file),
		toolCall(t, "str_replace", "path", file, "old_str", old, "new_str", new),
		toolCall(t, "submit"),
	}}, 0)
	h := harness.Builtin{Agent: "tools", Args: []string{"--context-chars", "1500", "--keep-turns", "1"}}
	row, segs, _ := mustRun(t, config(p, h, "condense"))
	if row.Termination != schemas.TerminationAgentCompleted || row.Reward != 1 {
		t.Fatalf("row %+v", row)
	}
	if !slices.Contains(row.Flags, "condensed") || !slices.Contains(row.Flags, "forked") {
		t.Errorf("flags %v", row.Flags)
	}
	if len(segs) < 2 || p.rec.Metrics.Forks[proxy.ReasonRewrite] == 0 {
		t.Fatalf("%d segments, forks %v", len(segs), p.rec.Metrics.Forks)
	}
	for i, info := range p.rec.Info {
		if info.Side || (i > 0 && info.Reason != proxy.ReasonRewrite) {
			t.Errorf("segment %d: %+v", i, info)
		}
	}
	// The new segment's prompt holds the note, and the segments cover
	// every call once.
	text, _ := fx.tok.Decode(segs[1].PromptTokenIDs)
	if !strings.Contains(string(text), "[Condensed history]") {
		t.Errorf("the forked segment's prompt has no note:\n%s", text)
	}
	if segs[0].FirstCall != 0 || segs[1].FirstCall != segs[0].LastCall+1 || segs[len(segs)-1].LastCall != 4 {
		t.Errorf("calls %d-%d, %d-%d", segs[0].FirstCall, segs[0].LastCall, segs[1].FirstCall, segs[1].LastCall)
	}
	checkConsistent(t, p, segs, toolNames)
}

// fakeHarness runs a fixed command and never has a result.
type fakeHarness struct{ args []string }

func (fakeHarness) Name() string                                    { return "fake" }
func (fakeHarness) WireAPI() string                                 { return harness.WireChat }
func (fakeHarness) Install(context.Context, string) (string, error) { return "", nil }
func (f fakeHarness) Command(harness.Env) (harness.Launch, error) {
	return harness.Launch{Cmd: sandbox.Cmd{Args: f.args}, Files: map[string][]byte{"conf/x.json": []byte("{}")}}, nil
}
func (fakeHarness) Result([]byte) (harness.Result, error) {
	return harness.Result{}, fmt.Errorf("fake: no result")
}

// TestMaskedEnds: infrastructure ends are masked with their typed
// termination, promptly, and never graded.
func TestMaskedEnds(t *testing.T) {
	setup(t)
	bad := *fx.inst
	bad.Snapshot = "/nonexistent/repo"
	overlong := &scripted{tok: fx.tok, texts: []string{"```bash\nls\n```"}, hook: func(call int) error {
		if call == 1 {
			return fmt.Errorf("%w: 5000 tokens", infer.ErrOverlong)
		}
		return nil
	}}
	tests := []struct {
		name   string
		h      harness.Harness
		gen    proxy.Generator
		inst   *tasks.Instance
		term   schemas.Termination
		detail string
	}{
		{"crash", fakeHarness{[]string{"sh", "-c", "cat /legorl/harness/conf/x.json; echo 'panic: boom' >&2; exit 2"}}, nil, nil, schemas.TerminationHarnessError, "boom"},
		{"hang", fakeHarness{[]string{"sh", "-c", "sleep 600 & sleep 600"}}, nil, nil, schemas.TerminationTimeout, "no end within"},
		{"overlong", harness.Bash(), overlong, nil, schemas.TerminationOverlong, "context"},
		{"setup", harness.Bash(), nil, &bad, schemas.TerminationEnvSetupFailed, "workspace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gen := tt.gen
			if gen == nil {
				gen = &scripted{tok: fx.tok, texts: []string{"nothing"}}
			}
			p := newTap(t, gen, 0)
			cfg := config(p, tt.h, "masked-"+tt.name)
			cfg.AgentTimeout = time.Second
			if tt.inst != nil {
				cfg.Instance = tt.inst
			}
			start := time.Now()
			row, segs, _ := mustRun(t, cfg)
			if row.Status != schemas.StatusMasked || row.Termination != tt.term || row.Reward != 0 || !strings.Contains(row.Error, tt.detail) {
				t.Errorf("row %s/%s reward %v error %q, want masked %s with %q", row.Status, row.Termination, row.Reward, row.Error, tt.term, tt.detail)
			}
			if row.GradeSeconds != 0 {
				t.Errorf("a masked rollout was graded")
			}
			if d := time.Since(start); d > 20*time.Second {
				t.Errorf("took %s", d)
			}
			if tt.name == "overlong" && (len(segs) != 1 || !p.rec.Metrics.Overlong) {
				t.Errorf("%d segments, metrics %+v", len(segs), p.rec.Metrics)
			}
		})
	}
}

// TestGate: the sandbox reaches only its own rollout's routes.
func TestGate(t *testing.T) {
	var served []string
	g := &gate{prefix: "/rollout/r1/", next: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { served = append(served, r.URL.Path) })}
	for path, ok := range map[string]bool{
		"/rollout/r1/v1/chat/completions":           true,
		"/rollout/r1/v1/models":                     true,
		"/rollout/r2/v1/chat/completions":           false,
		"/v1/chat/completions":                      false,
		"/rollout/r1/../r2/v1/chat/completions":     false,
		"/rollout/r1/%2e%2e/r2/v1/chat/completions": false,
		"/rollout/r1":                               false,
	} {
		req, err := http.NewRequest(http.MethodPost, "http://x"+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		rec := &teeWriter{ResponseWriter: discardWriter{}, status: http.StatusOK}
		served = nil
		g.ServeHTTP(rec, req)
		if (len(served) == 1) != ok || (!ok && rec.status != http.StatusNotFound) {
			t.Errorf("%s: served %v status %d", path, served, rec.status)
		}
	}
}

type discardWriter struct{}

func (discardWriter) Header() http.Header         { return http.Header{} }
func (discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (discardWriter) WriteHeader(int)             {}

func TestBadConfig(t *testing.T) {
	setup(t)
	p := newTap(t, &scripted{tok: fx.tok, texts: []string{"x"}}, 0)
	for _, mod := range []func(*Config){
		func(c *Config) { c.Proxy = nil },
		func(c *Config) { c.VocabSize = 0 },
		func(c *Config) { c.RolloutID = "../x" },
		func(c *Config) { c.RunID = "" },
	} {
		cfg := config(p, harness.Bash(), "bad")
		mod(&cfg)
		if _, _, _, err := Run(context.Background(), cfg); err == nil {
			t.Errorf("Run accepted a bad config")
		}
	}
	if err := p.Open("dup", proxy.RolloutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := Run(context.Background(), config(p, harness.Bash(), "dup")); !errors.Is(err, proxy.ErrRolloutExists) {
		t.Errorf("a rollout id already open: %v", err)
	}
	if a, b := ID("r", 1, "t", 0), ID("r", 1, "t", 1); a == b || a != ID("r", 1, "t", 0) || !idRE.MatchString(a) {
		t.Errorf("ids %s %s", a, b)
	}
}
