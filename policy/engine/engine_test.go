package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/legorl/legorl/policy/model"
)

// tinyModel returns a model of a config in policy/model/testdata with
// random weights; maxPos, when > 0, replaces the context length.
func tinyModel(t testing.TB, file string, seed uint64, maxPos int) *model.Model {
	t.Helper()
	c, err := model.LoadConfig("../model/testdata/" + file)
	if err != nil {
		t.Fatal(err)
	}
	if maxPos > 0 {
		c.MaxPositionEmbeddings = maxPos
	}
	m, err := model.New(c, seed)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

var configs = []string{"tiny.json", "tiny_moe.json"}

func randPrompt(seed uint64, n int) []int32 {
	r := rand.New(rand.NewPCG(seed, 99))
	p := make([]int32, n)
	for i := range p {
		p[i] = int32(r.IntN(4096))
	}
	return p
}

// sameGen reports how two generations differ in tokens, logprob bits,
// versions, finish or routing ("" when they do not).
func sameGen(a, b Generation) string {
	switch {
	case fmt.Sprint(a.Tokens) != fmt.Sprint(b.Tokens):
		return fmt.Sprintf("tokens %v vs %v", a.Tokens, b.Tokens)
	case a.Finish != b.Finish:
		return fmt.Sprintf("finish %q vs %q", a.Finish, b.Finish)
	case fmt.Sprint(a.Versions) != fmt.Sprint(b.Versions):
		return "versions differ"
	case fmt.Sprint(a.Routing) != fmt.Sprint(b.Routing) || fmt.Sprint(a.PromptRouting) != fmt.Sprint(b.PromptRouting):
		return "routing differs"
	}
	for i := range a.Logprobs {
		if math.Float32bits(a.Logprobs[i]) != math.Float32bits(b.Logprobs[i]) {
			return fmt.Sprintf("logprob %d: %g vs %g", i, a.Logprobs[i], b.Logprobs[i])
		}
	}
	return ""
}

func generate(t testing.TB, e *Engine, req Request) Generation {
	t.Helper()
	g, err := e.Generate(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// checkShape checks the per-token slices of a generation against each other
// and the streamed tokens.
func checkShape(t *testing.T, g Generation, streamed []Token, moe bool) {
	t.Helper()
	n := len(g.Tokens)
	if len(g.Logprobs) != n || len(g.Versions) != n {
		t.Fatalf("%d tokens, %d logprobs, %d versions", n, len(g.Logprobs), len(g.Versions))
	}
	if moe != (g.Routing != nil) || (moe && (len(g.Routing) != n || len(g.PromptRouting) != g.PromptTokens)) {
		t.Fatalf("routing of %d tokens and %d prompt tokens for %d and %d (MoE %v)", len(g.Routing), len(g.PromptRouting), n, g.PromptTokens, moe)
	}
	if streamed == nil {
		return
	}
	if len(streamed) != n {
		t.Fatalf("%d tokens streamed, %d generated", len(streamed), n)
	}
	// Across a swap the routing is recomputed, and the generation holds the
	// final one; otherwise the streamed routing is the generation's.
	swapped := n > 0 && g.Versions[0] != g.Versions[n-1]
	for i, tk := range streamed {
		if tk.ID != g.Tokens[i] || tk.Logprob != g.Logprobs[i] || tk.Version != g.Versions[i] ||
			(moe && !swapped && fmt.Sprint(tk.Routing) != fmt.Sprint(g.Routing[i])) {
			t.Fatalf("streamed token %d %+v differs from the generation", i, tk)
		}
	}
}

// TestDeterminism: the same request on fresh engines gives the same
// generation, bit for bit; another seed gives another.
func TestDeterminism(t *testing.T) {
	for _, cfg := range configs {
		t.Run(cfg, func(t *testing.T) {
			m := tinyModel(t, cfg, 1, 0)
			req := Request{Prompt: randPrompt(1, 20), MaxTokens: 24, Sampling: DefaultSampling(7)}
			var gens []Generation
			for range 2 {
				e := New(m, 1, Options{})
				var streamed []Token
				g, err := e.Generate(context.Background(), req, func(tk Token) { streamed = append(streamed, tk) })
				e.Close()
				if err != nil {
					t.Fatal(err)
				}
				checkShape(t, g, streamed, cfg == "tiny_moe.json")
				if g.Finish != FinishLength || len(g.Tokens) != 24 || g.PromptTokens != 20 || g.CachedTokens != 0 {
					t.Fatalf("finish %q, %d tokens, prompt %d cached %d", g.Finish, len(g.Tokens), g.PromptTokens, g.CachedTokens)
				}
				gens = append(gens, g)
			}
			if d := sameGen(gens[0], gens[1]); d != "" {
				t.Fatalf("two runs differ: %s", d)
			}
			e := New(m, 1, Options{})
			defer e.Close()
			req.Sampling.Seed = 8
			if other := generate(t, e, req); sameGen(other, gens[0]) == "" {
				t.Fatal("seeds 7 and 8 gave the same generation")
			}
		})
	}
}

// TestBatchingAndReuse runs 8 requests alone, then all at once on one
// engine (batched decode steps, prefill chunks of 16 mixed in), then as
// follow-ups in sessions that reuse and truncate the prefix: every
// generation must be identical to the one alone, bit for bit.
func TestBatchingAndReuse(t *testing.T) {
	for _, cfg := range configs {
		t.Run(cfg, func(t *testing.T) {
			m := tinyModel(t, cfg, 2, 0)
			const n = 8
			reqs := make([]Request, n)
			for i := range reqs {
				reqs[i] = Request{Prompt: randPrompt(uint64(i), 5+7*i), MaxTokens: 6 + i,
					Sampling: Sampling{Temperature: 0.8 + 0.1*float64(i%3), TopP: []float64{1, 0.9}[i%2], TopK: []int{0, 50}[i/4], Seed: uint64(100 + i)}}
			}
			alone := make([]Generation, n)
			for i, r := range reqs {
				e := New(m, 1, Options{})
				alone[i] = generate(t, e, r)
				e.Close()
			}
			e := New(m, 1, Options{StepTokens: 16})
			defer e.Close()
			batched := make([]Generation, n)
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range reqs {
				r := reqs[i]
				r.Session = fmt.Sprint("s", i)
				wg.Go(func() { batched[i], errs[i] = e.Generate(context.Background(), r, nil) })
			}
			wg.Wait()
			if w := e.widest.Load(); w < 4 {
				t.Errorf("at most %d sequences ran in one step", w)
			}
			for i := range reqs {
				if errs[i] != nil {
					t.Fatal(errs[i])
				}
				if d := sameGen(batched[i], alone[i]); d != "" {
					t.Errorf("request %d batched: %s", i, d)
				}
			}
			// Follow-ups: the prompt extends prompt + completion (reuse of all
			// of it), or keeps only part of the prompt (truncation).
			for i := range reqs {
				follow := reqs[i]
				follow.Session = fmt.Sprint("s", i)
				keep := len(follow.Prompt) + len(batched[i].Tokens)
				wantCached := keep
				if i%2 == 1 {
					keep, wantCached = 3+i, 3+i
				}
				full := append(append([]int32{}, follow.Prompt...), batched[i].Tokens...)
				follow.Prompt = append(full[:keep:keep], randPrompt(uint64(50+i), 4)...)
				g := generate(t, e, follow)
				if g.CachedTokens != wantCached {
					t.Errorf("follow-up %d: %d cached tokens, want %d", i, g.CachedTokens, wantCached)
				}
				fresh := New(m, 1, Options{})
				want := generate(t, fresh, Request{Prompt: follow.Prompt, MaxTokens: follow.MaxTokens, Sampling: follow.Sampling})
				fresh.Close()
				if d := sameGen(g, want); d != "" {
					t.Errorf("follow-up %d with reuse: %s", i, d)
				}
			}
		})
	}
}

// TestMatchesFullForward: logprobs of generated tokens equal the full
// forward pass's at the same temperature, routing equals its routing, and
// top-k 1 picks the argmax of the logits.
func TestMatchesFullForward(t *testing.T) {
	for _, cfg := range configs {
		t.Run(cfg, func(t *testing.T) {
			m := tinyModel(t, cfg, 3, 0)
			e := New(m, 1, Options{})
			defer e.Close()
			prompt := randPrompt(3, 30)
			for _, temp := range []float64{1, 0.7, 1.6} {
				g := generate(t, e, Request{Prompt: prompt, MaxTokens: 20, Sampling: Sampling{Temperature: temp, Seed: 5}})
				res, err := m.Logprobs([]model.Sequence{{Prompt: prompt, Completion: g.Tokens, Temperature: temp}})
				if err != nil {
					t.Fatal(err)
				}
				for i, lp := range g.Logprobs {
					if d := math.Abs(float64(lp - res[0].Logprobs[i])); d > 1e-4 {
						t.Errorf("T=%g token %d: logprob %g, full forward %g", temp, i, lp, res[0].Logprobs[i])
					}
				}
				if g.Routing != nil && fmt.Sprint(append(g.PromptRouting, g.Routing...)) != fmt.Sprint(res[0].Routing) {
					t.Errorf("T=%g: routing differs from the full forward pass", temp)
				}
			}
			// Greedy: each token is the argmax of the logits of an
			// incremental (Sgemm) forward over the same tokens.
			g := generate(t, e, Request{Prompt: prompt, MaxTokens: 15, Sampling: Sampling{TopK: 1}})
			c := m.NewCache()
			logits, _, err := c.Extend(prompt, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i, id := range g.Tokens {
				best := 0
				for j := range logits {
					if logits[j] > logits[best] {
						best = j
					}
				}
				if int(id) != best && logits[best]-logits[id] > 1e-5 {
					t.Fatalf("greedy token %d is %d, the argmax is %d", i, id, best)
				}
				if g.Logprobs[i] != 0 {
					t.Fatalf("greedy token %d has logprob %g, want 0", i, g.Logprobs[i])
				}
				if logits, _, err = c.Extend([]int32{id}, nil); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestStopAndContext: a stop token ends the generation and is part of it;
// the context limit ends it with FinishContext; a prompt that fills the
// context is ErrOverlong.
func TestStopAndContext(t *testing.T) {
	m := tinyModel(t, "tiny.json", 4, 32)
	e := New(m, 1, Options{})
	defer e.Close()
	prompt := randPrompt(4, 10)
	greedy := generate(t, e, Request{Prompt: prompt, MaxTokens: 8, Sampling: Sampling{TopK: 1}})
	stop := greedy.Tokens[4]
	first := 0
	for greedy.Tokens[first] != stop {
		first++
	}
	g := generate(t, e, Request{Prompt: prompt, MaxTokens: 8, StopTokens: []int32{stop}, Sampling: Sampling{TopK: 1}})
	if g.Finish != FinishStop || len(g.Tokens) != first+1 || g.Tokens[first] != stop {
		t.Errorf("stop token %d: finish %q, tokens %v", stop, g.Finish, g.Tokens)
	}
	for _, tc := range []struct{ prompt, max, want int }{{20, 0, 12}, {31, 0, 1}, {20, 50, 12}, {20, 12, 12}} {
		g := generate(t, e, Request{Prompt: randPrompt(5, tc.prompt), MaxTokens: tc.max, Sampling: DefaultSampling(1)})
		wantFinish := FinishContext
		if tc.max == tc.want {
			wantFinish = FinishLength // MaxTokens reached first
		}
		if len(g.Tokens) != tc.want || g.Finish != wantFinish {
			t.Errorf("prompt %d max %d: %d tokens, finish %q; want %d, %q", tc.prompt, tc.max, len(g.Tokens), g.Finish, tc.want, wantFinish)
		}
	}
	for _, n := range []int{32, 40} {
		if _, err := e.Generate(context.Background(), Request{Prompt: randPrompt(6, n)}, nil); !errors.Is(err, ErrOverlong) {
			t.Errorf("prompt of %d tokens in a context of 32: %v, want ErrOverlong", n, err)
		}
	}
}

func TestInputErrors(t *testing.T) {
	m := tinyModel(t, "tiny.json", 5, 0)
	e := New(m, 1, Options{})
	defer e.Close()
	ok := []int32{1, 2, 3}
	tests := []struct {
		name, field string
		req         Request
	}{
		{"empty prompt", "Prompt", Request{}},
		{"prompt id", "Prompt token 1", Request{Prompt: []int32{1, 4096}}},
		{"negative id", "Prompt token 0", Request{Prompt: []int32{-1}}},
		{"stop id", "StopTokens[0]", Request{Prompt: ok, StopTokens: []int32{5000}}},
		{"max tokens", "MaxTokens", Request{Prompt: ok, MaxTokens: -1}},
		{"temperature", "Sampling.Temperature", Request{Prompt: ok, Sampling: Sampling{Temperature: -1}}},
		{"temperature NaN", "Sampling.Temperature", Request{Prompt: ok, Sampling: Sampling{Temperature: math.NaN()}}},
		{"temperature Inf", "Sampling.Temperature", Request{Prompt: ok, Sampling: Sampling{Temperature: math.Inf(1)}}},
		{"top-p", "Sampling.TopP", Request{Prompt: ok, Sampling: Sampling{TopP: 1.5}}},
		{"top-p negative", "Sampling.TopP", Request{Prompt: ok, Sampling: Sampling{TopP: -0.1}}},
		{"top-k", "Sampling.TopK", Request{Prompt: ok, Sampling: Sampling{TopK: -1}}},
	}
	for _, tc := range tests {
		_, err := e.Generate(context.Background(), tc.req, nil)
		if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: error %v, want ErrInput naming %s", tc.name, err, tc.field)
		}
	}
	if err := e.Swap(nil, 2); !errors.Is(err, ErrInput) {
		t.Errorf("swap to nil: %v", err)
	}
	if err := e.Swap(tinyModel(t, "tiny.json", 5, 64), 2); !errors.Is(err, ErrInput) {
		t.Errorf("swap to another context length: %v", err)
	}
	// A zero Sampling means temperature 1, top-p 1.
	if _, err := e.Generate(context.Background(), Request{Prompt: ok, MaxTokens: 2}, nil); err != nil {
		t.Errorf("default sampling: %v", err)
	}
}

// TestHotSwap swaps the weights in the middle of a generation: tokens
// record both versions, every token's logprob is that of its version's
// weights over the whole sequence (the cache was recomputed, not mixed),
// and an idle session's cache is dropped.
func TestHotSwap(t *testing.T) {
	for _, cfg := range configs {
		t.Run(cfg, func(t *testing.T) {
			m1, m2 := tinyModel(t, cfg, 6, 0), tinyModel(t, cfg, 7, 0)
			e := New(m1, 1, Options{})
			defer e.Close()
			prompt := randPrompt(6, 12)
			first := generate(t, e, Request{Session: "idle", Prompt: prompt, MaxTokens: 4, Sampling: DefaultSampling(1)})
			var once sync.Once
			var streamed []Token
			g, err := e.Generate(context.Background(), Request{Prompt: prompt, MaxTokens: 150, Sampling: DefaultSampling(2)}, func(tk Token) {
				streamed = append(streamed, tk)
				if len(streamed) == 3 {
					once.Do(func() {
						if err := e.Swap(m2, 2); err != nil {
							t.Error(err)
						}
					})
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			checkShape(t, g, streamed, cfg == "tiny_moe.json")
			if e.Version() != 2 {
				t.Errorf("Version() = %d after the swap", e.Version())
			}
			cut := 0
			for cut < len(g.Versions) && g.Versions[cut] == 1 {
				cut++
			}
			if cut < 3 || cut == len(g.Versions) {
				t.Fatalf("versions %v: want 1s for at least 3 tokens, then 2s", g.Versions)
			}
			for i, v := range g.Versions[cut:] {
				if v != 2 {
					t.Fatalf("token %d has version %d after version 2", cut+i, v)
				}
			}
			for _, w := range []struct {
				m      *model.Model
				lo, hi int
			}{{m1, 0, cut}, {m2, cut, len(g.Tokens)}} {
				res, err := w.m.Logprobs([]model.Sequence{{Prompt: prompt, Completion: g.Tokens}})
				if err != nil {
					t.Fatal(err)
				}
				for i := w.lo; i < w.hi; i++ {
					if d := math.Abs(float64(g.Logprobs[i] - res[0].Logprobs[i])); d > 1e-4 {
						t.Fatalf("token %d (version %d): logprob %g, that version's full forward %g", i, g.Versions[i], g.Logprobs[i], res[0].Logprobs[i])
					}
				}
			}
			// The idle session's cache was computed by m1: dropped.
			follow := Request{Session: "idle", Prompt: append(append(prompt, first.Tokens...), 5), MaxTokens: 4, Sampling: DefaultSampling(3)}
			g2 := generate(t, e, follow)
			fresh := New(m2, 2, Options{})
			defer fresh.Close()
			follow.Session = ""
			if want := generate(t, fresh, follow); g2.CachedTokens != 0 || sameGen(g2, want) != "" {
				t.Errorf("after the swap: %d cached tokens, same as a fresh engine: %q", g2.CachedTokens, sameGen(g2, want))
			}
		})
	}
}

// TestCancel: a cancelled request returns at once with the context's
// error, and the engine goes on serving its session correctly.
func TestCancel(t *testing.T) {
	m := tinyModel(t, "tiny_moe.json", 8, 0)
	e := New(m, 1, Options{})
	defer e.Close()
	ctx, cancel := context.WithCancel(context.Background())
	prompt := randPrompt(8, 10)
	n := 0
	start := time.Now()
	_, err := e.Generate(ctx, Request{Session: "s", Prompt: prompt, MaxTokens: 3000, Sampling: DefaultSampling(1)}, func(Token) {
		if n++; n == 3 {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled generation: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("cancellation took %v", d)
	}
	if _, err := e.Generate(ctx, Request{Prompt: prompt}, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("already cancelled context: %v", err)
	}
	req := Request{Session: "s", Prompt: append(prompt, 7), MaxTokens: 5, Sampling: DefaultSampling(2)}
	g := generate(t, e, req)
	fresh := New(m, 1, Options{})
	defer fresh.Close()
	req.Session = ""
	if d := sameGen(g, generate(t, fresh, req)); d != "" {
		t.Errorf("session after a cancellation: %s", d)
	}
}

// TestSessions: LRU eviction and EndSession only lose reuse; a request
// for a busy session runs on a private cache.
func TestSessions(t *testing.T) {
	m := tinyModel(t, "tiny.json", 9, 0)
	e := New(m, 1, Options{MaxSessions: 2})
	defer e.Close()
	prompts := map[string][]int32{}
	for _, id := range []string{"a", "b", "c"} {
		prompts[id] = randPrompt(uint64(len(prompts)), 8)
		g := generate(t, e, Request{Session: id, Prompt: prompts[id], MaxTokens: 2, Sampling: DefaultSampling(1)})
		prompts[id] = append(prompts[id], g.Tokens...)
	}
	e.EndSession("c")
	for _, tc := range []struct {
		id   string
		want int
	}{{"b", 10}, {"a", 0}, {"c", 0}} { // a was evicted (least recently used), c ended
		id, want := tc.id, tc.want
		g := generate(t, e, Request{Session: id, Prompt: append(prompts[id], 1), MaxTokens: 1, Sampling: DefaultSampling(1)})
		if g.CachedTokens != want {
			t.Errorf("session %s: %d cached tokens, want %d", id, g.CachedTokens, want)
		}
	}
	// Two concurrent requests in one session both complete.
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			if _, err := e.Generate(context.Background(), Request{Session: "b", Prompt: prompts["b"], MaxTokens: 3, Sampling: DefaultSampling(uint64(i))}, nil); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}

func TestClose(t *testing.T) {
	m := tinyModel(t, "tiny.json", 10, 0)
	e := New(m, 1, Options{})
	errc := make(chan error, 1)
	started := make(chan struct{})
	go func() {
		var once sync.Once
		_, err := e.Generate(context.Background(), Request{Prompt: []int32{1, 2}, MaxTokens: 4000, Sampling: DefaultSampling(1)},
			func(Token) { once.Do(func() { close(started) }) })
		errc <- err
	}()
	<-started
	e.Close()
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Errorf("generation running at Close: %v", err)
	}
	if _, err := e.Generate(context.Background(), Request{Prompt: []int32{1}}, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Generate after Close: %v", err)
	}
	if err := e.Swap(m, 3); !errors.Is(err, ErrClosed) {
		t.Errorf("Swap after Close: %v", err)
	}
	e.Close() // idempotent
}

// TestPaddedVocabulary generates from a model whose vocabulary (4096 ids,
// initialised at random) pads past its tokenizer (Support 1024, as a
// checkpoint with a 1024-id tokenizer.json loads): under every sampler
// setting no sampled id reaches the padding, and the recorded logprobs are
// those the trainer recomputes with the same model, over the same
// support. The same weights without the support sample the padding most
// of the time, so the test can fail; a swap to a model of another support
// is refused.
func TestPaddedVocabulary(t *testing.T) {
	const support = 1024
	for _, cfg := range configs {
		t.Run(cfg, func(t *testing.T) {
			m := tinyModel(t, cfg, 11, 0)
			unmasked := New(m, 1, Options{})
			prompt := randPrompt(11, 16)
			for i := range prompt {
				prompt[i] %= support
			}
			g := generate(t, unmasked, Request{Prompt: prompt, MaxTokens: 24, Sampling: DefaultSampling(1)})
			unmasked.Close()
			padded := 0
			for _, id := range g.Tokens {
				if id >= support {
					padded++
				}
			}
			if padded < len(g.Tokens)/2 {
				t.Fatalf("without the support only %d of %d tokens are padding ids: the test would not tell", padded, len(g.Tokens))
			}

			m = tinyModel(t, cfg, 11, 0)
			if err := m.SetSupport(support); err != nil {
				t.Fatal(err)
			}
			e := New(m, 1, Options{})
			defer e.Close()
			tests := []struct {
				name string
				s    Sampling
			}{
				{"training default", DefaultSampling(1)},
				{"temperature 0.6", Sampling{Temperature: 0.6, Seed: 2}},
				{"temperature 1.8", Sampling{Temperature: 1.8, Seed: 3}},
				{"top-p 0.9", Sampling{TopP: 0.9, Seed: 4}},
				{"top-k 50", Sampling{TopK: 50, Seed: 5}},
				{"top-k 5000 (past the support)", Sampling{TopK: 5000, Seed: 6}},
				{"greedy", Sampling{TopK: 1}},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					g := generate(t, e, Request{Prompt: prompt, MaxTokens: 24, Sampling: tt.s})
					for i, id := range g.Tokens {
						if id < 0 || id >= support {
							t.Fatalf("token %d is id %d, outside the support of %d", i, id, support)
						}
					}
					if tt.s.TopK != 0 || tt.s.TopP != 0 {
						return // a cut distribution: the recompute is of the full one
					}
					res, err := m.Logprobs([]model.Sequence{{Prompt: prompt, Completion: g.Tokens, Temperature: tt.s.Temperature}})
					if err != nil {
						t.Fatal(err)
					}
					for i, lp := range g.Logprobs {
						if d := math.Abs(float64(lp - res[0].Logprobs[i])); d > 1e-4 {
							t.Errorf("token %d: logprob %g, the model's recompute %g", i, lp, res[0].Logprobs[i])
						}
					}
				})
			}
			if err := e.Swap(tinyModel(t, cfg, 12, 0), 2); !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "support 4096") {
				t.Errorf("swap to a model of another support: err = %v", err)
			}
		})
	}
}

// TestSharedPrefix: a request in a new session whose prompt starts like
// another session's cache (idle, or still running) starts from a copy of
// it, and generates exactly what a fresh engine generates; a prefix shorter
// than minShare is prefilled; the donor's own follow-up is unaffected.
func TestSharedPrefix(t *testing.T) {
	for _, cfg := range configs {
		t.Run(cfg, func(t *testing.T) {
			m := tinyModel(t, cfg, 12, 0)
			e := New(m, 1, Options{})
			defer e.Close()
			system := randPrompt(12, 40) // the harness's system prompt
			ask := func(session string, seed uint64, tail int) Request {
				p := append(slices.Clone(system), randPrompt(seed, tail)...)
				return Request{Session: session, Prompt: p, MaxTokens: 5, Sampling: DefaultSampling(seed)}
			}
			fresh := func(r Request) Generation {
				f := New(m, 1, Options{})
				defer f.Close()
				r.Session = ""
				return generate(t, f, r)
			}
			a := generate(t, e, ask("a", 1, 6))
			if a.CachedTokens != 0 {
				t.Fatalf("first request: %d cached tokens", a.CachedTokens)
			}
			for i, r := range []Request{ask("b", 2, 3), ask("c", 3, 1), ask("", 4, 9)} {
				g := generate(t, e, r)
				if g.CachedTokens != len(system) {
					t.Errorf("request %d: %d cached tokens, want the %d of the shared system prompt", i, g.CachedTokens, len(system))
				}
				if d := sameGen(g, fresh(r)); d != "" {
					t.Errorf("request %d from a shared prefix differs from a fresh engine: %s", i, d)
				}
			}
			short := Request{Session: "d", Prompt: append(slices.Clone(system[:minShare-1]), 1, 2), MaxTokens: 3, Sampling: DefaultSampling(5)}
			if g := generate(t, e, short); g.CachedTokens != 0 || sameGen(g, fresh(short)) != "" {
				t.Errorf("a %d-token shared prefix: %d cached tokens", minShare-1, g.CachedTokens)
			}
			// The donor's follow-up still extends its own cache.
			follow := Request{Session: "a", Prompt: append(append(ask("a", 1, 6).Prompt, a.Tokens...), 9), MaxTokens: 3, Sampling: DefaultSampling(6)}
			if g := generate(t, e, follow); g.CachedTokens != len(follow.Prompt)-1 || sameGen(g, fresh(follow)) != "" {
				t.Errorf("donor follow-up: %d cached tokens, want %d", g.CachedTokens, len(follow.Prompt)-1)
			}
		})
	}
}
