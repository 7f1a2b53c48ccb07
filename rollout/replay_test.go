package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/legorl/legorl/harness"
	"github.com/legorl/legorl/harness/harnesstest"
	solver "github.com/legorl/legorl/harness/scripted"
	"github.com/legorl/legorl/policy/chat"
	"github.com/legorl/legorl/policy/infer"
	"github.com/legorl/legorl/proxy"
	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/tasks"
	"github.com/legorl/legorl/tasks/builtin"
)

// TestHarnessDemoReplay: a demonstration made through a real npm harness
// by the scripted solver is what that harness sends in a rollout, token
// for token. The policy replays the demonstration's assistant turns
// through the proxy to the same program inside the local sandbox; every
// prompt the proxy renders must be the tokens SFT trains on
// (trainer.DemoSequences: the chat template over the demonstration's
// messages up to that turn), and the rollout earns reward 1. Codex's
// command outputs hold a random chunk id and a wall time, which the
// demonstration makes canonical (scripted's codexCanon): those spans are
// compared by shape, the rest token for token.
func TestHarnessDemoReplay(t *testing.T) {
	cache := harnesstest.Cache(t)
	setup(t)
	dir := t.TempDir()
	ins, err := builtin.Generate(context.Background(), dir, builtin.Options{N: 6, Seed: 5, Languages: []string{"python"}})
	if err != nil {
		t.Fatal(err)
	}
	var in *tasks.Instance
	for i := range ins {
		if solver.CheckTrain(&ins[i]) == nil {
			in = &ins[i]
			break
		}
	}
	if in == nil {
		t.Fatal("no training instance")
	}
	for _, h := range []harness.Harness{harness.Pi{}, harness.Codex{}, harness.OpenCode{}} {
		t.Run(h.Name(), func(t *testing.T) {
			d, err := solver.Solve(context.Background(), dir, in, h.Name(), solver.Options{HarnessCache: cache})
			if err != nil {
				t.Fatal(err)
			}
			var prompts, texts []string
			for i, m := range d.Messages {
				if m.Role != "assistant" {
					continue
				}
				prompt, completion := demoTurn(t, d, i)
				prompts, texts = append(prompts, prompt), append(texts, strings.TrimSuffix(completion, "<|im_end|>"))
			}
			rec := &promptTap{g: &scripted{tok: fx.tok, texts: texts}}
			var gen proxy.Generator = rec
			if h.Name() == "opencode" {
				gen = &sideScripted{main: rec, side: &scripted{tok: fx.tok, texts: []string{"Fix the bug"}}}
			}
			p := newTap(t, gen, 0)
			cfg := config(p, h, "replay-"+h.Name())
			cfg.CacheDir, cfg.SuiteDir, cfg.Instance = cache, dir, in
			cfg.SetupTimeout, cfg.AgentTimeout = 10*time.Minute, 3*time.Minute
			row, _, _ := mustRun(t, cfg)
			if row.Termination != schemas.TerminationAgentCompleted || row.Reward != 1 {
				t.Errorf("the replay ended %s with reward %v: %s", row.Termination, row.Reward, row.Error)
			}
			if len(rec.prompts) != len(prompts) {
				t.Fatalf("%d model calls, the demonstration has %d turns", len(rec.prompts), len(prompts))
			}
			for i, want := range prompts {
				b, err := fx.tok.Decode(rec.prompts[i])
				if err != nil {
					t.Fatal(err)
				}
				got := string(b)
				if h.Name() == "codex" {
					want, got = codexVolatile(want), codexVolatile(got)
				} else if ids := fx.tok.EncodeSpecial(want); fmt.Sprint(ids) != fmt.Sprint(rec.prompts[i]) {
					t.Errorf("turn %d: the rollout's prompt is %d tokens, the demonstration's %d, and they differ", i, len(rec.prompts[i]), len(ids))
				}
				if got != want {
					at := firstDiff(got, want)
					t.Errorf("turn %d: the rollout's prompt and the demonstration's differ at byte %d:\nrollout: %.300q\ndemo:    %.300q", i, at, got[at:], want[at:])
				}
			}
		})
	}
}

// demoTurn renders the demonstration's assistant message i as SFT does
// (trainer.DemoSequences): the prompt with the generation prompt, and the
// completion up to its end token.
func demoTurn(t *testing.T, d *solver.Demo, i int) (prompt, completion string) {
	t.Helper()
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Messages []chat.Message `json:"messages"`
		Tools    []chat.Tool    `json:"tools"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	prompt, err = chat.Qwen3{}.Render(c.Messages[:i], c.Tools, chat.Options{AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	full, err := chat.Qwen3{}.Render(c.Messages[:i+1], c.Tools, chat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(full, prompt) {
		t.Fatalf("turn %d does not extend its prompt", i)
	}
	return prompt, strings.TrimSuffix(full[len(prompt):], "\n")
}

var (
	codexChunk = regexp.MustCompile(`Chunk ID: [0-9a-f]{6}\b`)
	codexWall  = regexp.MustCompile(`Wall time: [0-9]+(\.[0-9]{4})? seconds`)
)

// codexVolatile replaces what changes between two runs of Codex (its
// random chunk ids, its wall times) by a placeholder of the same shape.
func codexVolatile(s string) string {
	s = codexChunk.ReplaceAllString(s, "Chunk ID: XXXXXX")
	return codexWall.ReplaceAllString(s, "Wall time: X$1 seconds")
}

// firstDiff is the first byte at which a and b differ.
func firstDiff(a, b string) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// promptTap records the prompt of each call it passes on to g.
type promptTap struct {
	g       proxy.Generator
	mu      sync.Mutex
	prompts [][]int32
}

func (p *promptTap) Generate(ctx context.Context, req infer.Request, emit func(infer.Token)) (infer.Generation, error) {
	p.mu.Lock()
	p.prompts = append(p.prompts, append([]int32(nil), req.Prompt...))
	p.mu.Unlock()
	return p.g.Generate(ctx, req, emit)
}
