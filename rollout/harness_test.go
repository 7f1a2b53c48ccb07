package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/legorl/legorl/harness"
	"github.com/legorl/legorl/harness/harnesstest"
	"github.com/legorl/legorl/policy/chat"
	"github.com/legorl/legorl/policy/engine"
	"github.com/legorl/legorl/policy/infer"
	"github.com/legorl/legorl/policy/model"
	"github.com/legorl/legorl/policy/safetensors"
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
// random-weight model inside the local sandbox. The model writes short
// nonsense replies; each harness still reaches its own end within the
// agent timeout (completed, graded: a timeout fails), and the segments of
// the Chat Completions harnesses match what the harness received.
func TestHarnessRandom(t *testing.T) {
	cache := harnesstest.Cache(t)
	setup(t)
	eng := longRandomPolicy(t)
	for _, tt := range []struct {
		h     harness.Harness
		tools []chat.Tool
	}{
		{harness.Pi{}, piTools},
		{harness.Codex{}, nil},
		{harness.OpenCode{}, openCodeTools},
		{harness.ClaudeCode{}, nil},
		{harness.QwenCode{}, qwenTools},
	} {
		t.Run(tt.h.Name(), func(t *testing.T) {
			start := time.Now()
			cpu0 := cpuTime()
			gen := &capped{g: eng, n: replyCap}
			p := newTap(t, gen, replyCap)
			cfg := config(p, tt.h, "random-"+tt.h.Name())
			cfg.CacheDir = cache
			cfg.MaxTurns = 3
			cfg.SetupTimeout = 10 * time.Minute
			// Claude Code's and qwen-code's rollouts take 20-25 CPU-seconds
			// of the engine, nearly all the prefill of their first prompt
			// (50-60k tokens of the test tokenizer, no earlier session to
			// share a prefix with; docs/PERFORMANCE.md), and 75 s of wall
			// time at a load average of 15-18 on 2 cores: 5 minutes leave
			// room for a loaded CI machine, and a timeout fails.
			cfg.AgentTimeout = 5 * time.Minute
			row, segs, _ := mustRun(t, cfg)
			gen.log(t)
			t.Logf("%s: forks %v, side requests %d, retries %d, took %s (engine and proxy: %.1f CPU-seconds)", tt.h.Name(),
				p.rec.Metrics.Forks, p.rec.Metrics.SideRequests, p.rec.Metrics.Retries, time.Since(start), (cpuTime() - cpu0).Seconds())
			if row.Termination == "" || row.Status == "" {
				t.Fatalf("no typed termination: %+v", row)
			}
			if row.Termination == schemas.TerminationTimeout {
				t.Fatalf("timed out after %d calls (%.0fs of model time, %d requests reached the engine)", row.NumLLMCalls, row.LLMSeconds,
					gen.requests.Load())
			}
			if row.Status == schemas.StatusCompleted && (row.GradeSeconds <= 0 || row.Reward != 0) {
				t.Errorf("not graded as expected: %+v", row)
			}
			if row.Termination == schemas.TerminationHarnessError || row.Termination == schemas.TerminationSandboxCrash {
				t.Errorf("%s: %s", row.Termination, row.Error)
			}
			if row.Status != schemas.StatusCompleted {
				t.Errorf("the harness did not reach its own end: %s/%s %s", row.Status, row.Termination, row.Error)
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

// longRandomPolicy is a random-weight model with room for the npm
// harnesses' prompts (their system prompts and tools run to 20-40k tokens
// of a real tokenizer, 50-60k of the test's) that ends its replies. The
// test is about the harnesses' plumbing, not the model, so the model is as
// cheap as the engine allows where their prompts cost: prefill attention
// grows with the square of the prompt times layers x heads, hence one
// layer with one head (its head_dim hardly matters: each score's
// exponential dominates). And its replies end: a random model almost
// never samples <|im_end|> (about one token in the vocabulary's 1000), so
// every reply would run to the cap, which Claude Code takes for its own
// API error ("exceeded the output token maximum") and stops after three
// retries; stopBias makes <|im_end|> about one token in replyStop.
func longRandomPolicy(t *testing.T) *engine.Engine {
	t.Helper()
	cfg, err := model.ParseConfig([]byte(fmt.Sprintf(`{"model_type": "qwen3", "vocab_size": %d, "hidden_size": 32,
		"intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 1, "num_key_value_heads": 1, "head_dim": 8,
		"max_position_embeddings": 65536, "tie_word_embeddings": false}`, fx.tok.VocabSize())))
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.New(cfg, 7)
	if err != nil {
		t.Fatal(err)
	}
	end, ok := fx.tok.TokenID("<|im_end|>")
	if !ok {
		t.Fatal("the test tokenizer has no <|im_end|>")
	}
	e := engine.New(stopBias(t, m, end, 1.0/replyStop), 1, engine.Options{})
	t.Cleanup(e.Close)
	return e
}

// replyStop is the mean length of a reply of longRandomPolicy, in tokens:
// one reply in replyStop is empty (qwen-code asks again after one), and a
// reply reaches replyCap about once in 4,000.
const replyStop = 16

// replyCap bounds every reply in TestHarnessRandom (the harnesses ask for
// thousands of tokens).
const replyCap = 128

// stopBias returns m with its weights changed so that token end has
// probability about p at every position, whatever the context: hidden
// dimension 0 of the residual stream is 1 for every token (its embeddings'
// column 0) and no layer writes to it (row 0 of every o_proj and
// down_proj is zero), so after the final RMS norm it is about
// sqrt(hidden_size) wherever the rest is small (the random weights'
// InitStd); column 0 of the LM head is zero but for end, whose logit it
// raises by the log-odds that make p. The model has untied embeddings.
func stopBias(t *testing.T, m *model.Model, end int32, p float64) *model.Model {
	t.Helper()
	c := m.Config()
	d, V := c.HiddenSize, c.VocabSize
	dir := t.TempDir()
	if err := m.Save(dir, model.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	set, err := safetensors.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var ts []safetensors.Tensor
	for _, name := range set.Names() {
		info, _ := set.Info(name)
		w, err := set.Float32(name, info.Shape)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case name == "model.embed_tokens.weight":
			for r := range V {
				w[r*d] = 1
			}
		case strings.HasSuffix(name, ".o_proj.weight") || strings.HasSuffix(name, ".down_proj.weight"):
			clear(w[:info.Shape[1]]) // row 0: output dimension 0
		case name == "lm_head.weight":
			for r := range V {
				w[r*d] = 0
			}
			w[int(end)*d] = float32(math.Log(p/(1-p)*float64(V-1)) / math.Sqrt(float64(d)))
		}
		ts = append(ts, safetensors.Tensor{Name: name, Shape: info.Shape, Data: w})
	}
	if err := safetensors.WriteFile(filepath.Join(dir, safetensors.SingleFile), ts, safetensors.F32, nil); err != nil {
		t.Fatal(err)
	}
	b, err := model.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// capped bounds every completion of g to n tokens: the harnesses ask for
// thousands, and a long random completion only costs time. It counts the
// requests that reached it and notes each call's prompt, cache reuse and
// time.
type capped struct {
	g        proxy.Generator
	n        int
	requests atomic.Int64
	mu       sync.Mutex
	calls    []callNote
}

// callNote is one call as the generator saw it.
type callNote struct {
	session                string
	prompt, cached, tokens int
	finish                 string
	took                   time.Duration
}

func (c *capped) Generate(ctx context.Context, req infer.Request, emit func(infer.Token)) (infer.Generation, error) {
	c.requests.Add(1)
	if req.MaxTokens <= 0 || req.MaxTokens > c.n {
		req.MaxTokens = c.n
	}
	start := time.Now()
	g, err := c.g.Generate(ctx, req, emit)
	c.mu.Lock()
	c.calls = append(c.calls, callNote{session: req.Session, prompt: len(req.Prompt), cached: g.CachedTokens, tokens: len(g.Tokens),
		finish: g.Finish, took: time.Since(start)})
	c.mu.Unlock()
	return g, err
}

// log writes each call's note.
func (c *capped) log(t *testing.T) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, n := range c.calls {
		t.Logf("call %d (%s): prompt %d tokens, %d cached, %d generated (%s), %.1fs", i, n.session, n.prompt, n.cached, n.tokens, n.finish, n.took.Seconds())
	}
}

// TestStopBias: longRandomPolicy's replies end on <|im_end|>, after about
// replyStop tokens, whatever the prompt: what lets every harness in
// TestHarnessRandom reach its own end.
func TestStopBias(t *testing.T) {
	setup(t)
	eng := longRandomPolicy(t)
	end, _ := fx.tok.TokenID("<|im_end|>")
	const n, limit = 64, replyCap
	stopped, total := 0, 0
	for i := range n {
		prompt := fx.tok.EncodeSpecial(fmt.Sprintf("<|im_start|>user\nrequest %d: %s<|im_end|>\n<|im_start|>assistant\n", i, strings.Repeat("fix the bug ", i*8)))
		g, err := eng.Generate(context.Background(), infer.Request{Prompt: prompt, MaxTokens: limit, StopTokens: []int32{end},
			Sampling: infer.DefaultSampling(uint64(i))}, nil)
		if err != nil {
			t.Fatal(err)
		}
		total += len(g.Tokens)
		if g.Finish == infer.FinishStop {
			stopped++
		}
	}
	mean := float64(total) / n
	t.Logf("%d of %d replies stopped, %.1f tokens on average", stopped, n, mean)
	if stopped < n-1 || mean < replyStop/3 || mean > replyStop*3 {
		t.Errorf("%d of %d replies stopped, %.1f tokens on average: want all but at most one, about %d", stopped, n, mean, replyStop)
	}
}
