package proxy

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/legorl/legorl/policy/chat"
	"github.com/legorl/legorl/policy/infer"
	"github.com/legorl/legorl/policy/tokenizer"
)

// testTokenizer is the small test tokenizer with Qwen's special tokens.
func testTokenizer(t testing.TB) *tokenizer.Tokenizer {
	t.Helper()
	tok, err := tokenizer.Load("../policy/tokenizer/testdata/small/tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// scripted is a Generator that answers each call with the next scripted
// completion text (the last one repeats), tokenized, each token with a
// logprob that depends on its position and policy version 3. It records
// every request and fails the test if two calls of one session overlap.
type scripted struct {
	tok     *tokenizer.Tokenizer
	t       testing.TB
	mu      sync.Mutex
	texts   []string
	calls   int
	reqs    []infer.Request
	running map[string]bool
	// hook, when set, runs before the generation; an error from it is
	// returned as the generation's.
	hook func(ctx context.Context, call int, req infer.Request) error
	// edit, when set, changes each generation before it is returned.
	edit func(g *infer.Generation)
	// routing makes a fake MoE: every token routed to experts {id%4, 7}
	// in 2 layers.
	routing bool
}

func newScripted(t testing.TB, tok *tokenizer.Tokenizer, texts ...string) *scripted {
	return &scripted{tok: tok, t: t, texts: texts, running: map[string]bool{}}
}

func fakeRoute(id int32) [][]int16 { return [][]int16{{int16(id % 4), 7}, {int16(id % 3), 5}} }

func (s *scripted) Generate(ctx context.Context, req infer.Request, emit func(infer.Token)) (infer.Generation, error) {
	s.mu.Lock()
	call := s.calls
	s.calls++
	s.reqs = append(s.reqs, req)
	if s.running[req.Session] {
		s.t.Errorf("two calls of session %s run at once", req.Session)
	}
	s.running[req.Session] = true
	text := ""
	if len(s.texts) > 0 {
		text = s.texts[min(call, len(s.texts)-1)]
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.running[req.Session] = false
		s.mu.Unlock()
	}()
	if s.hook != nil {
		if err := s.hook(ctx, call, req); err != nil {
			return infer.Generation{}, err
		}
	}
	ids := s.tok.EncodeSpecial(text)
	g := infer.Generation{Finish: infer.FinishStop, PromptTokens: len(req.Prompt), CachedTokens: len(req.Prompt) / 2}
	for i, id := range ids {
		if req.MaxTokens > 0 && i == req.MaxTokens {
			g.Finish = infer.FinishLength
			break
		}
		if err := ctx.Err(); err != nil {
			return infer.Generation{}, err
		}
		tk := infer.Token{ID: id, Logprob: -0.25 * float32(i%5+1), Version: 3}
		if s.routing {
			tk.Routing = fakeRoute(id)
		}
		emit(tk)
		g.Tokens = append(g.Tokens, tk.ID)
		g.Logprobs = append(g.Logprobs, tk.Logprob)
		g.Versions = append(g.Versions, tk.Version)
		if s.routing {
			g.Routing = append(g.Routing, tk.Routing)
		}
	}
	if s.routing {
		for _, id := range req.Prompt {
			g.PromptRouting = append(g.PromptRouting, fakeRoute(id))
		}
	}
	if s.edit != nil {
		s.edit(&g)
	}
	return g, nil
}

// requests returns a copy of the recorded requests.
func (s *scripted) requests() []infer.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]infer.Request(nil), s.reqs...)
}

// testProxy serves a proxy over gen on an httptest server, with rollout
// "r1" open (seed 42).
func testProxy(t testing.TB, gen Generator, mod ...func(*Options)) (*Proxy, *httptest.Server) {
	t.Helper()
	opt := Options{Generator: gen, Tokenizer: testTokenizer(t), Template: chat.Qwen3{}, ModelName: "tiny",
		Clock:  func() time.Time { return time.Unix(1700000000, 0) },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, m := range mod {
		m(&opt)
	}
	p, err := New(opt)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Open("r1", RolloutOptions{RunID: "run", Iteration: 2, Seed: 42}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return p, srv
}

// finish ends rollout id and checks every segment row is valid.
func finish(t testing.TB, p *Proxy, id string) Record {
	t.Helper()
	rec, err := p.Finish(id)
	if err != nil {
		t.Fatal(err)
	}
	for i := range rec.Segments {
		if err := rec.Segments[i].Validate(p.tok.VocabSize()); err != nil {
			t.Errorf("segment %d: %v", i, err)
		}
	}
	return rec
}

// decode is the text of ids.
func decode(t testing.TB, tok *tokenizer.Tokenizer, ids []int32) string {
	t.Helper()
	b, err := tok.Decode(ids)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sampledText returns the text of a segment's sampled tokens of one call:
// the run of mask-1 tokens number k (0-based).
func sampledRuns(ids []int32, mask []int8) [][]int32 {
	var runs [][]int32
	in := false
	for i, m := range mask {
		switch {
		case m == 1 && !in:
			runs = append(runs, []int32{ids[i]})
			in = true
		case m == 1:
			runs[len(runs)-1] = append(runs[len(runs)-1], ids[i])
		default:
			in = false
		}
	}
	return runs
}

// assistantTurn renders the assistant turn the way the template renders it
// as the last message after the given history: what the model's completion
// must have been for the history to extend it.
func assistantTurn(t testing.TB, history []chat.Message, tools []chat.Tool, m chat.Message) string {
	t.Helper()
	before, err := chat.Qwen3{}.Render(history, tools, chat.Options{AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	after, err := chat.Qwen3{}.Render(append(append([]chat.Message(nil), history...), m), tools, chat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(after) < len(before) || after[:len(before)] != before {
		t.Fatalf("rendering with the assistant turn does not extend the prompt:\n%q\n%q", before, after)
	}
	turn := after[len(before):]
	return turn[:len(turn)-1] // without the newline after <|im_end|>
}
