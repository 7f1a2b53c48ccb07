package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/legorl/legorl/harness"
	"github.com/legorl/legorl/harness/harnesstest"
	"github.com/legorl/legorl/policy/chat"
	"github.com/legorl/legorl/policy/engine"
	"github.com/legorl/legorl/policy/infer"
	"github.com/legorl/legorl/policy/model"
	"github.com/legorl/legorl/proxy"
	"github.com/legorl/legorl/schemas"
)

// piTools are pi's tools, as the proxy parses calls against them.
var piTools = []chat.Tool{{Name: "read"}, {Name: "bash"}, {Name: "edit"}, {Name: "write"}}

// openCodeTools and qwenTools are OpenCode's and qwen-code's tools.
var (
	openCodeTools = toolList("bash", "edit", "glob", "grep", "read", "skill", "task", "todowrite", "write")
	qwenTools     = toolList("agent", "edit", "get_goal", "glob", "grep_search", "list_agents", "notebook_edit", "read_file",
		"run_shell_command", "skill", "tool_call", "tool_search", "update_goal", "write_file")
)

func toolList(names ...string) []chat.Tool {
	var out []chat.Tool
	for _, n := range names {
		out = append(out, chat.Tool{Name: n})
	}
	return out
}

// qwenCall writes a Qwen3 tool call with arbitrary JSON arguments.
func qwenCall(t *testing.T, name string, args map[string]any) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"name": name, "arguments": args})
	if err != nil {
		t.Fatal(err)
	}
	return "<tool_call>\n" + string(b) + "\n</tool_call>"
}

// TestHarnessScripted: a policy replaying a known-good action sequence in
// each npm harness's own tools takes it to reward 1 inside the local
// sandbox, through the proxy on its wire API: the whole path from the
// unmodified program to the grader.
func TestHarnessScripted(t *testing.T) {
	cache := harnesstest.Cache(t)
	setup(t)
	file, old, new := fix(t, fx.inst.Patch)
	apply := "git apply <<'EOF'\n" + fx.inst.Patch + "EOF\n"
	tests := []struct {
		h      harness.Harness
		script []string
		tools  []chat.Tool // to check the segments against the wire (Chat Completions only)
		side   string      // the reply to a request without tools (OpenCode's title)
	}{
		{harness.Pi{}, []string{
			qwenCall(t, "read", map[string]any{"path": file}),
			"Fixing it.\n" + qwenCall(t, "edit", map[string]any{"path": file, "edits": []map[string]string{{"oldText": old, "newText": new}}}),
			"The fix is in place.",
		}, piTools, ""},
		{harness.Codex{}, []string{
			qwenCall(t, "exec_command", map[string]any{"cmd": "cat " + file}),
			qwenCall(t, "exec_command", map[string]any{"cmd": apply}),
			"The fix is in place.",
		}, nil, ""},
		{harness.OpenCode{}, []string{
			qwenCall(t, "read", map[string]any{"filePath": file}),
			"Fixing it.\n" + qwenCall(t, "edit", map[string]any{"filePath": file, "oldString": old, "newString": new}),
			"The fix is in place.",
		}, nil, "Fix the bug"},
		{harness.ClaudeCode{}, []string{
			qwenCall(t, "Read", map[string]any{"file_path": "/workspace/" + file}),
			"Fixing it.\n" + qwenCall(t, "Edit", map[string]any{"file_path": "/workspace/" + file, "old_string": old, "new_string": new}),
			"The fix is in place.",
		}, nil, "Fix the bug"},
		{harness.QwenCode{}, []string{
			qwenCall(t, "read_file", map[string]any{"file_path": "/workspace/" + file}),
			"Fixing it.\n" + qwenCall(t, "edit", map[string]any{"file_path": "/workspace/" + file, "old_string": old, "new_string": new}),
			"The fix is in place.",
		}, nil, "Fix the bug"},
	}
	for _, tt := range tests {
		t.Run(tt.h.Name(), func(t *testing.T) {
			start := time.Now()
			var gen proxy.Generator = &scripted{tok: fx.tok, texts: tt.script}
			if tt.side != "" {
				gen = &sideScripted{main: gen, side: &scripted{tok: fx.tok, texts: []string{tt.side}}}
			}
			p := newTap(t, gen, 0)
			cfg := config(p, tt.h, "scripted-"+tt.h.Name())
			cfg.CacheDir = cache
			cfg.SetupTimeout = 10 * time.Minute
			cfg.AgentTimeout = 3 * time.Minute
			row, segs, steps := mustRun(t, cfg)
			t.Logf("%s: %d steps %+v, forks %v, side requests %d, took %s", tt.h.Name(), len(steps), steps, p.rec.Metrics.Forks,
				p.rec.Metrics.SideRequests, time.Since(start))
			if row.Termination != schemas.TerminationAgentCompleted || row.Reward != 1 || len(row.F2PFailed)+len(row.P2PFailed) != 0 {
				t.Fatalf("row %+v", row)
			}
			if row.NumTurns != 3 || row.NumToolCalls != 2 || row.DiffBytes == 0 || row.PolicyVersion != 1 {
				t.Errorf("counts %+v", row)
			}
			if len(steps) != 2 {
				t.Errorf("steps %+v", steps)
			}
			if tt.tools != nil {
				checkConsistent(t, p, segs, tt.tools)
			}
		})
	}
}

// sideScripted answers requests without tools (side requests such as
// OpenCode's title) from side, and the others from main.
type sideScripted struct{ main, side proxy.Generator }

func (s *sideScripted) Generate(ctx context.Context, req infer.Request, emit func(infer.Token)) (infer.Generation, error) {
	if text, err := fx.tok.Decode(req.Prompt); err == nil && !strings.Contains(string(text), "<tools>") {
		return s.side.Generate(ctx, req, emit)
	}
	return s.main.Generate(ctx, req, emit)
}

// TestHarnessRandom: each npm harness runs a whole rollout against a small
// random-weight model inside the local sandbox. The model writes nonsense;
// the rollout still ends with a typed termination, and the segments of
// the Chat Completions harnesses match what the harness received.
func TestHarnessRandom(t *testing.T) {
	cache := harnesstest.Cache(t)
	setup(t)
	eng := longRandomPolicy(t)
	for _, tt := range []struct {
		h     harness.Harness
		tools []chat.Tool
		// slow: the tiny CPU model prefills this harness's prompt (20-40k
		// tokens) in minutes on a loaded machine; a masked timeout is
		// then a fine end too, once the harness's first request reached
		// the engine through the proxy.
		slow bool
	}{
		{harness.Pi{}, piTools, false},
		{harness.Codex{}, nil, false},
		{harness.OpenCode{}, openCodeTools, false},
		{harness.ClaudeCode{}, nil, true},
		{harness.QwenCode{}, qwenTools, true},
	} {
		t.Run(tt.h.Name(), func(t *testing.T) {
			start := time.Now()
			gen := &capped{g: eng, n: 24}
			p := newTap(t, gen, 24)
			cfg := config(p, tt.h, "random-"+tt.h.Name())
			cfg.CacheDir = cache
			cfg.MaxTurns = 3
			cfg.SetupTimeout = 10 * time.Minute
			cfg.AgentTimeout = 5 * time.Minute
			if tt.slow {
				cfg.AgentTimeout = 3 * time.Minute
			}
			row, segs, _ := mustRun(t, cfg)
			t.Logf("%s: forks %v, side requests %d, took %s", tt.h.Name(), p.rec.Metrics.Forks, p.rec.Metrics.SideRequests, time.Since(start))
			if row.Termination == "" || row.Status == "" {
				t.Fatalf("no typed termination: %+v", row)
			}
			if row.Status == schemas.StatusCompleted && (row.GradeSeconds <= 0 || row.Reward != 0) {
				t.Errorf("not graded as expected: %+v", row)
			}
			// Claude Code asks for 32,000 output tokens; a reply cut at this
			// test's 24-token cap comes back with stop_reason max_tokens, which
			// Claude Code reports as its own API error and stops: a typed,
			// masked end of the test's making (a rollout's replies are capped
			// by the config's max_tokens, not at 24), once requests reached
			// the engine.
			claudeCut := tt.h.Name() == "claude" && row.Status == schemas.StatusMasked && strings.Contains(row.Error, "output token maximum") && gen.requests.Load() > 0
			if claudeCut {
				t.Logf("claude: ended on a reply cut at the test's cap (%d requests reached the engine): %s", gen.requests.Load(), row.Error)
				return
			}
			if row.Termination == schemas.TerminationHarnessError || row.Termination == schemas.TerminationSandboxCrash {
				t.Errorf("%s: %s", row.Termination, row.Error)
			}
			if tt.slow && row.Termination == schemas.TerminationTimeout {
				// A timeout is never a pass by itself: it must be masked
				// and come after the harness's request reached the engine
				// (the integration under test).
				if row.Status != schemas.StatusMasked {
					t.Fatalf("a timeout not masked: %+v", row)
				}
				if gen.requests.Load() == 0 {
					t.Fatalf("timed out before any request reached the engine (%d calls): nothing was checked", row.NumLLMCalls)
				}
				t.Logf("%s: timed out against the tiny CPU model (%d requests reached the engine, %d calls in %.0fs): its prompt is long",
					tt.h.Name(), gen.requests.Load(), row.NumLLMCalls, row.LLMSeconds)
				switch {
				case tt.tools == nil || len(segs) == 0:
				case slices.Contains(row.Flags, "stream_mismatch"): // as below: wire and segments differ by design
					t.Logf("%s: stream_mismatch: wire and segments not compared", tt.h.Name())
				default:
					checkConsistent(t, p, segs, tt.tools)
				}
				return
			}
			if row.NumLLMCalls < 1 || len(segs) == 0 {
				t.Fatalf("%d calls, %d segments", row.NumLLMCalls, len(segs))
			}
			// A row flagged stream_mismatch says the proxy streamed deltas
			// that are not a prefix of its final parse (a random model's
			// malformed markup, stream.go): its wire and its segments differ
			// by design. Seen with qwen-code once the engine got fast enough
			// for it to finish (issue 18); the proxy's stream tests cover the
			// mismatch itself.
			if tt.tools != nil && !slices.Contains(row.Flags, "stream_mismatch") {
				checkConsistent(t, p, segs, tt.tools)
			} else if tt.tools != nil {
				t.Logf("%s: stream_mismatch: wire and segments not compared", tt.h.Name())
			}
		})
	}
}

// longRandomPolicy is randomPolicy with room for the npm harnesses'
// prompts (their system prompts and tools run to 10-40k characters).
func longRandomPolicy(t *testing.T) *engine.Engine {
	t.Helper()
	cfg, err := model.ParseConfig([]byte(fmt.Sprintf(`{"model_type": "qwen3", "vocab_size": %d, "hidden_size": 64,
		"intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
		"max_position_embeddings": 65536, "tie_word_embeddings": true}`, fx.tok.VocabSize())))
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.New(cfg, 7)
	if err != nil {
		t.Fatal(err)
	}
	e := engine.New(m, 1, engine.Options{})
	t.Cleanup(e.Close)
	return e
}

// capped bounds every completion of g to n tokens: the harnesses ask for
// thousands, and a long random completion only costs time. It counts the
// requests that reached it.
type capped struct {
	g        proxy.Generator
	n        int
	requests atomic.Int64
}

func (c *capped) Generate(ctx context.Context, req infer.Request, emit func(infer.Token)) (infer.Generation, error) {
	c.requests.Add(1)
	if req.MaxTokens <= 0 || req.MaxTokens > c.n {
		req.MaxTokens = c.n
	}
	return c.g.Generate(ctx, req, emit)
}
