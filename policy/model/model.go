package model

import (
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/legorl/legorl/policy/backend"
)

// Model is a float32 Qwen3-architecture model. Its methods may be called
// concurrently except Load-time setup and optimizer steps, which change the
// weights.
type Model struct {
	cfg Config
	p   *params[float32]
	be  backend.Backend
	// support is the number of ids the model's distribution covers
	// (Support); at most cfg.VocabSize.
	support int
	// rope is the rotary table its caches share (sharedRope).
	rope sharedRope
	// scratch holds the arenas of finished Steps, for the next ones.
	scratch sync.Pool
}

// sharedRope is a model's rotary table for its caches, grown by doubling
// as longer sequences come: every position's angles are computed alone, so
// a cache that takes the longer table sees the same values, and a new cache
// (a new session of the engine) computes none. A table is never written
// after it is made.
type sharedRope struct {
	mu sync.Mutex
	t  ropeTable[float32]
}

// ropeTable returns the model's rotary table, grown to cover at least n
// positions.
func (m *Model) ropeTable(n int) ropeTable[float32] {
	half := m.cfg.HeadDim / 2
	m.rope.mu.Lock()
	defer m.rope.mu.Unlock()
	if len(m.rope.t.cos) < n*half {
		m.rope.t = newRope[float32](max(n, 2*len(m.rope.t.cos)/max(1, half), 64), m.cfg.HeadDim, m.cfg.RopeTheta)
	}
	return m.rope.t
}

// InitStd is the standard deviation of the normal initialisation of every
// weight matrix (norm weights start at 1), as in the HF configs.
const InitStd = 0.02

// New returns a model with random weights drawn deterministically from seed.
func New(cfg Config, seed uint64) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := newParams[float32](cfg)
	p.initRandom(seed, InitStd)
	return &Model{cfg: cfg, p: p, be: backend.NewCPU(), support: cfg.VocabSize}, nil
}

// SetBackend makes the model's passes, steps and optimizer updates run on
// b (nil restores the CPU backend). The weights stay where they are (host
// memory), so a model can move between backends at any time; it must not
// be called while other methods run. The model does not close b.
func (m *Model) SetBackend(b backend.Backend) {
	if b == nil {
		b = backend.NewCPU()
	}
	m.be = b
}

// Backend returns the backend the model runs on.
func (m *Model) Backend() backend.Backend { return m.be }

// backendErr wraps the backend's sticky error, if any, for a caller that
// must discard what the failed operations produced.
func (m *Model) backendErr() error {
	if err := m.be.Err(); err != nil {
		return fmt.Errorf("model: backend %s: %w", m.be.Name(), err)
	}
	return nil
}

// Config returns the model's configuration.
func (m *Model) Config() Config { return m.cfg }

// Support returns the number of token ids the model's distribution covers:
// ids 0 to Support()-1. Logprobs, Backward, Step and Cache.Extend compute
// the logits of these ids only, which is the same as setting the logits of
// the ids past them to -inf, so the model never scores, trains or (through
// the engine) samples an id its tokenizer cannot decode. Released
// checkpoints pad the embedding and LM head past the tokenizer (every
// Qwen3: vocab_size 151936 for 151,669 ids); Load sets the support to the
// size of the checkpoint's tokenizer.json, so the engine, the trainer and
// the audit, which all load checkpoints with Load, use the same one. It is
// Config().VocabSize for a model made by New or loaded from a folder
// without a tokenizer.json.
func (m *Model) Support() int { return m.support }

// SetSupport sets Support to n, between 1 and Config().VocabSize: the size
// of the tokenizer, for a model made by New. It must not be called while
// other methods run.
func (m *Model) SetSupport(n int) error {
	if n < 1 || n > m.cfg.VocabSize {
		return fmt.Errorf("%w: support of %d ids for vocab_size %d", ErrInput, n, m.cfg.VocabSize)
	}
	m.support = n
	return nil
}

// NumParams returns the number of scalar parameters (a tied LM head counts
// once).
func (m *Model) NumParams() int { return len(m.p.flat) }

// Sequence is one input: a prompt and the completion whose tokens are scored.
type Sequence struct {
	Prompt     []int32 // at least one token
	Completion []int32
	// Routing, when not nil, is replayed instead of the router's top-k: the
	// expert ids of every token (prompt then completion) in every MoE layer,
	// [tokens][MoE layers][num_experts_per_tok]. The router softmax is still
	// computed and the combine weights gathered from it, so the router
	// keeps its gradient.
	Routing [][][]int16
	// Temperature divides the logits before log_softmax; 0 means 1.
	Temperature float64
}

// Result is the output for one Sequence.
type Result struct {
	// Logprobs holds log p(completion[i] | prompt, completion[:i]) at the
	// sequence's temperature.
	Logprobs []float32
	// Routing holds the experts used for every token in every MoE layer,
	// [tokens][MoE layers][k], in descending router probability (or as
	// replayed); nil for a dense model.
	Routing [][][]int16
}

// check validates a sequence against the config; every completion token
// must be below support (Model.Support), every prompt token below the
// vocabulary.
func (c *Config) check(i int, s Sequence, support int) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: sequence %d: "+format, append([]any{ErrInput, i}, a...)...)
	}
	if len(s.Prompt) == 0 {
		return bad("empty prompt (the first completion token needs a position before it)")
	}
	S := len(s.Prompt) + len(s.Completion)
	if c.MaxPositionEmbeddings > 0 && S > c.MaxPositionEmbeddings {
		return bad("%d tokens exceed max_position_embeddings %d", S, c.MaxPositionEmbeddings)
	}
	for j, ids := range [][]int32{s.Prompt, s.Completion} {
		for k, id := range ids {
			if id < 0 || int(id) >= c.VocabSize {
				return bad("%s token %d is id %d, outside the vocabulary of %d", [2]string{"prompt", "completion"}[j], k, id, c.VocabSize)
			}
		}
	}
	for k, id := range s.Completion {
		if int(id) >= support {
			return bad("completion token %d is id %d, outside the model's support of %d ids (its tokenizer's size; vocab_size %d)", k, id, support, c.VocabSize)
		}
	}
	if t := s.Temperature; t != 0 && (!(t > 0) || math.IsInf(t, 0)) {
		return bad("temperature %g is not positive", t)
	}
	if s.Routing == nil {
		return nil
	}
	L, K := c.MoELayers(), c.NumExpertsPerTok
	if L == 0 {
		return bad("routing given for a dense model")
	}
	if len(s.Routing) != S {
		return bad("routing has %d tokens, the sequence %d", len(s.Routing), S)
	}
	for t, layers := range s.Routing {
		if len(layers) != L {
			return bad("routing of token %d has %d layers, the model %d MoE layers", t, len(layers), L)
		}
		for l, ids := range layers {
			if len(ids) != K {
				return bad("routing of token %d layer %d has %d experts, want %d", t, l, len(ids), K)
			}
			for j, e := range ids {
				if e < 0 || int(e) >= c.NumExperts {
					return bad("routing of token %d layer %d names expert %d of %d", t, l, e, c.NumExperts)
				}
				for _, f := range ids[:j] {
					if f == e {
						return bad("routing of token %d layer %d repeats expert %d", t, l, e)
					}
				}
			}
		}
	}
	return nil
}

// newPass prepares the forward pass of s whose head scores the first
// support ids (Model.Support).
func newPass[T Float](o backend.Ops[T], c *Config, p *params[T], support int, s Sequence) *pass[T] {
	ids := make([]int32, 0, len(s.Prompt)+len(s.Completion))
	ids = append(append(ids, s.Prompt...), s.Completion...)
	temp := s.Temperature
	if temp == 0 {
		temp = 1
	}
	return &pass[T]{c: c, ops: o, p: p, V: support, ids: ids, block: attnBlock, S: len(ids), P: len(s.Prompt), temp: temp, replay: s.Routing,
		rope: newRope[T](len(ids), c.HeadDim, c.RopeTheta)}
}

func toResult[T Float](ps *pass[T]) Result {
	r := Result{Logprobs: make([]float32, len(ps.logprobs)), Routing: ps.routes}
	for i, v := range ps.logprobs {
		r.Logprobs[i] = float32(v)
	}
	return r
}

// Logprobs runs the forward pass of each sequence, in parallel across
// sequences, and returns the logprob of every completion token, under the
// softmax over the model's Support, and the routing.
func (m *Model) Logprobs(seqs []Sequence) ([]Result, error) {
	for i, s := range seqs {
		if err := m.cfg.check(i, s, m.support); err != nil {
			return nil, err
		}
	}
	out := make([]Result, len(seqs))
	backend.ParallelFor(len(seqs), func(i int) {
		ps := newPass(m.be, &m.cfg, m.p, m.support, seqs[i])
		ps.forward()
		out[i] = toResult(ps)
	})
	if err := m.backendErr(); err != nil {
		return nil, err
	}
	return out, nil
}

// Grads holds a gradient for every parameter of a model, in its layout.
type Grads struct {
	cfg     Config
	p       *params[float32]
	mu      sync.Mutex
	scratch []*params[float32] // per-worker buffers, reused across calls
}

// NewGrads returns zeroed gradients for m.
func (m *Model) NewGrads() *Grads { return &Grads{cfg: m.cfg, p: newParams[float32](m.cfg)} }

// Zero resets the gradients to 0.
func (g *Grads) Zero() { g.p.zero() }

// Norm returns the global L2 norm of the gradients.
func (g *Grads) Norm() float64 { return math.Sqrt(g.p.sumSquares()) }

// Backward runs the forward and backward pass of each sequence and adds to
// g the gradient of L = sum over sequences s and completion tokens t of
// weights[s][t] * logprob[s][t]. An optimizer step moves against g, so L
// must be the quantity to minimise: for a policy-gradient loss pass
// weights = -advantage (times importance weights, masks, 1/tokens ...).
// Sequences run in parallel, each worker into a private buffer that is
// added to g at the end. It returns the same results as Logprobs.
func (m *Model) Backward(seqs []Sequence, weights [][]float32, g *Grads) ([]Result, error) {
	if len(weights) != len(seqs) {
		return nil, fmt.Errorf("%w: %d weight rows for %d sequences", ErrInput, len(weights), len(seqs))
	}
	return m.BackwardFunc(seqs, func(i int, _ []float32) []float32 { return weights[i] }, g)
}

// WeightFunc returns the loss weights of sequence i's completion tokens,
// given their logprobs under the current weights (computed by the same
// forward pass): the derivative of the loss with respect to each logprob.
// It is called once per sequence, concurrently for different i.
type WeightFunc func(i int, logprobs []float32) []float32

// BackwardFunc is Backward with weights computed from the forward pass's own
// logprobs, for losses whose per-token weight depends on them (PPO-clip:
// -A * ratio inside the clip range, 0 outside; GSPO: the sequence ratio
// over the length) without a second forward pass. On error g is unchanged.
func (m *Model) BackwardFunc(seqs []Sequence, weights WeightFunc, g *Grads) ([]Result, error) {
	for i, s := range seqs {
		if err := m.cfg.check(i, s, m.support); err != nil {
			return nil, err
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	workers := min(runtime.GOMAXPROCS(0), len(seqs))
	for len(g.scratch) < workers {
		g.scratch = append(g.scratch, newParams[float32](m.cfg))
	}
	out := make([]Result, len(seqs))
	errs := make([]error, len(seqs))
	var wg sync.WaitGroup
	// Sequence i goes to worker i mod workers, so each buffer sums the same
	// sequences in the same order every time: the gradient is deterministic.
	for w := 0; w < workers; w++ {
		buf := g.scratch[w]
		buf.zero()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(seqs); i += workers {
				ps := newPass(m.be, &m.cfg, m.p, m.support, seqs[i])
				ps.train = true
				ps.forward()
				out[i] = toResult(ps)
				ps.w = weights(i, out[i].Logprobs)
				if len(ps.w) != len(seqs[i].Completion) {
					errs[i] = fmt.Errorf("%w: sequence %d has %d weights for %d completion tokens", ErrInput, i, len(ps.w), len(seqs[i].Completion))
					continue
				}
				ps.backward(buf)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	if err := m.backendErr(); err != nil {
		return nil, err
	}
	for _, buf := range g.scratch[:workers] {
		g.p.addFrom(buf)
	}
	return out, nil
}
