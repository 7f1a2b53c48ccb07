// Package engine is the policy's inference engine: it generates tokens
// from a model.Model for many concurrent requests, with a KV cache per
// session and prefix reuse inside a session, continuous batching of decode
// steps, seeded temperature/top-k/top-p sampling with the logprob of every
// token, MoE routing capture, and hot swaps of the weights.
//
// # Scheduling
//
// One goroutine owns the model, the sessions and the active sequences. Each
// iteration it admits new requests, drops cancelled ones, applies a pending
// swap, and runs one model.Step over every active sequence: one token for a
// decoding sequence, a chunk of its prompt for a prefilling one. Then it
// samples the next token of each sequence whose tokens are all in its cache.
// Requests join and leave between steps; emit callbacks run on the calling
// goroutine of Generate, so a slow consumer never holds up the batch.
//
// # Support
//
// The engine samples only ids below the model's Support (model.Model.Support:
// the size of the checkpoint's tokenizer, which released checkpoints pad
// the vocabulary past). The model computes no logit for the ids past it,
// which is masking them to -inf for every sampler setting (temperature,
// top-k, top-p, greedy), and every recorded logprob is over that support:
// the distribution the trainer recomputes with the same model.
//
// # Determinism
//
// The same seed, weights and prompt give the same tokens, logprobs and
// routing, whatever runs concurrently. model.Step is row-invariant (a
// token's logits and KV are bitwise the same alone, in a batch, in a
// prefill chunk or after prefix reuse), and the random number of the i-th
// token of a generation is a hash of (seed, i), not a draw from a shared
// stream.
//
// # Sessions
//
// A session keeps one KV cache: the tokens of its last request's prompt and
// completion. A request whose prompt starts with them prefills only the
// rest; when it diverges, the cache is truncated to the longest common
// prefix. Idle sessions beyond Options.MaxSessions are dropped, least
// recently used first, which loses reuse, never correctness. A request for
// a session that is busy with another request runs on a private cache.
//
// # Hot swap
//
// Swap replaces the weights between two steps. KV computed by the old
// weights is never mixed with the new: idle sessions drop their caches (the
// next request prefills its prompt again) and every active sequence
// re-prefills its prompt and completion so far with the new weights before
// it samples again. Each token records the version that sampled it, so a
// generation that spans a swap has both versions in Generation.Versions.
package engine

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/legorl/legorl/policy/model"
)

// Options configure an Engine.
type Options struct {
	// MaxSessions bounds the idle sessions whose KV caches are kept for
	// prefix reuse; beyond it the least recently used idle ones are
	// dropped. Defaults to 64.
	MaxSessions int
	// StepTokens is the token budget of one step: each decoding sequence
	// takes one token, prefill chunks share what is left but never less
	// than StepTokens/4, so a long prompt neither stalls the decoding
	// sequences nor starves. Chunking never changes a result. Defaults to
	// 512.
	StepTokens int
	// Metrics, when not nil, receives the engine's Prometheus metrics
	// (NewMetrics). Defaults to nil: no metrics.
	Metrics *Metrics
}

func (o Options) withDefaults() Options {
	if o.MaxSessions <= 0 {
		o.MaxSessions = 64
	}
	if o.StepTokens <= 0 {
		o.StepTokens = 512
	}
	return o
}

// Engine generates from a model for concurrent requests. Its methods are
// safe for concurrent use.
type Engine struct {
	opt  Options
	wake chan struct{} // capacity 1: work arrived for the loop
	done chan struct{} // closed when the loop has exited

	mu      sync.Mutex // guards the fields below, shared with the loop
	cfg     model.Config
	support int   // the model's Support
	version int64 // of the latest Swap (or New)
	inbox   []*request
	ends    []string
	swap    *model.Model // pending, with version
	closed  bool

	loop loopState // owned by the loop goroutine

	// widest is the most sequences one step has run together; the tests
	// read it to see that batching happened.
	widest atomic.Int64
}

// loopState is what only the scheduler goroutine touches.
type loopState struct {
	m        *model.Model
	version  int64
	sessions map[string]*session
	tick     uint64 // LRU clock
	active   []*seq
	maxPos   int  // the model's context, 0 for none
	moe      bool // the model has MoE layers: capture routing
	sampler  sampler
	gauges   gauges // what the metrics' gauges last heard from this engine
}

// New starts an engine generating from m, whose weights are policy version
// version. Close stops it. m must not be nil.
func New(m *model.Model, version int64, opt Options) *Engine {
	if m == nil {
		panic("engine: New with a nil model")
	}
	e := &Engine{
		opt:     opt.withDefaults(),
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
		cfg:     m.Config(),
		support: m.Support(),
		version: version,
	}
	e.loop = loopState{sessions: map[string]*session{}}
	e.loop.install(m, version)
	e.opt.Metrics.installed(version, false)
	go e.run()
	return e
}

// Version returns the policy version of the latest Swap (or of New): the
// version of every token sampled from the next step on.
func (e *Engine) Version() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.version
}

// Swap replaces the weights between two decode steps; see the package
// documentation for what happens to caches. m must have the vocabulary,
// support, context and MoE shape of the current model (a newer checkpoint
// of it).
func (e *Engine) Swap(m *model.Model, version int64) error {
	if m == nil {
		return fmt.Errorf("%w: swap to a nil model", ErrInput)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return fmt.Errorf("%w: swap", ErrClosed)
	}
	a, b := e.cfg, m.Config()
	if a.VocabSize != b.VocabSize || e.support != m.Support() || a.MaxPositionEmbeddings != b.MaxPositionEmbeddings ||
		a.MoELayers() != b.MoELayers() || a.NumExpertsPerTok != b.NumExpertsPerTok {
		return fmt.Errorf("%w: swap to a model of another shape (vocabulary %d, support %d, context %d, %d MoE layers of top-%d; want %d, %d, %d, %d, %d)",
			ErrInput, b.VocabSize, m.Support(), b.MaxPositionEmbeddings, b.MoELayers(), b.NumExpertsPerTok,
			a.VocabSize, e.support, a.MaxPositionEmbeddings, a.MoELayers(), a.NumExpertsPerTok)
	}
	e.cfg, e.version, e.swap = b, version, m
	e.poke()
	return nil
}

// EndSession drops a session's cache; a request still running in it
// finishes normally.
func (e *Engine) EndSession(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.closed {
		e.ends = append(e.ends, id)
		e.poke()
	}
}

// Close stops the engine: running and waiting requests fail with
// ErrClosed, later calls too. It returns once the scheduler has stopped.
func (e *Engine) Close() {
	e.mu.Lock()
	e.closed = true
	e.poke()
	e.mu.Unlock()
	<-e.done
}

// poke wakes the loop without blocking.
func (e *Engine) poke() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// request is one Generate call as the loop and the caller share it.
type request struct {
	req       Request
	sampling  Sampling  // normalized
	queued    time.Time // when Generate was called
	cancelled atomic.Bool

	mu    sync.Mutex
	toks  []Token       // produced, not yet passed to emit
	ready chan struct{} // capacity 1: toks grew
	done  chan struct{} // closed after res and err are set
	res   Generation
	err   error
}

// push hands a token to the caller (loop side).
func (r *request) push(t Token) {
	r.mu.Lock()
	r.toks = append(r.toks, t)
	r.mu.Unlock()
	select {
	case r.ready <- struct{}{}:
	default:
	}
}

// finish sets the result and releases the caller (loop side).
func (r *request) finish(g Generation, err error) {
	r.res, r.err = g, err
	close(r.done)
}

// deliver passes the tokens produced so far to emit (caller side).
func (r *request) deliver(emit func(Token)) {
	r.mu.Lock()
	toks := r.toks
	r.toks = nil
	r.mu.Unlock()
	if emit != nil {
		for _, t := range toks {
			emit(t)
		}
	}
}

// Generate runs one request to its end. emit, when not nil, is called on
// the calling goroutine with each token in order: as soon as it is sampled
// for a dense model, once its routing is known (the next step) for an MoE
// model. The Generation holds every token again. When ctx ends, Generate
// returns at once with ctx's error and the request leaves the batch before
// the next step. Errors wrap ErrInput, ErrOverlong, ErrBadOutput,
// ErrClosed, or ctx's error.
func (e *Engine) Generate(ctx context.Context, req Request, emit func(Token)) (Generation, error) {
	if err := ctx.Err(); err != nil {
		return Generation{}, fmt.Errorf("engine: generate: %w", err)
	}
	// The loop reads the slices after a cancelled Generate has returned:
	// it gets its own copies.
	req.Prompt, req.StopTokens = slices.Clone(req.Prompt), slices.Clone(req.StopTokens)
	r := &request{req: req, sampling: req.Sampling.Normalize(), queued: time.Now(), ready: make(chan struct{}, 1), done: make(chan struct{})}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return Generation{}, fmt.Errorf("%w: generate", ErrClosed)
	}
	if err := validate(req, r.sampling, &e.cfg); err != nil {
		e.mu.Unlock()
		return Generation{}, err
	}
	e.inbox = append(e.inbox, r)
	e.poke()
	e.mu.Unlock()
	for {
		select {
		case <-ctx.Done():
			r.cancelled.Store(true)
			e.poke()
			return Generation{}, fmt.Errorf("engine: generate: %w", ctx.Err())
		case <-r.ready:
			r.deliver(emit)
		case <-r.done:
			r.deliver(emit)
			return r.res, r.err
		}
	}
}

// validate checks a request against the model's config.
func validate(req Request, s Sampling, c *model.Config) error {
	if err := s.Validate(); err != nil {
		return err
	}
	if len(req.Prompt) == 0 {
		return fmt.Errorf("%w: Prompt is empty", ErrInput)
	}
	for i, id := range req.Prompt {
		if id < 0 || int(id) >= c.VocabSize {
			return fmt.Errorf("%w: Prompt token %d is id %d, outside the vocabulary of %d", ErrInput, i, id, c.VocabSize)
		}
	}
	for i, id := range req.StopTokens {
		if id < 0 || int(id) >= c.VocabSize {
			return fmt.Errorf("%w: StopTokens[%d] is id %d, outside the vocabulary of %d", ErrInput, i, id, c.VocabSize)
		}
	}
	if req.MaxTokens < 0 {
		return fmt.Errorf("%w: MaxTokens %d is negative", ErrInput, req.MaxTokens)
	}
	if n := c.MaxPositionEmbeddings; n > 0 && len(req.Prompt) >= n {
		return fmt.Errorf("%w: the prompt's %d tokens leave no room in the context of %d", ErrOverlong, len(req.Prompt), n)
	}
	if c.MaxPositionEmbeddings <= 0 && req.MaxTokens == 0 {
		return fmt.Errorf("%w: MaxTokens is 0 and the model has no context limit", ErrInput)
	}
	return nil
}

// session is a KV cache with the tokens it holds; a private one (id "")
// serves one request and is then dropped.
type session struct {
	id      string
	m       *model.Model // the model the cache belongs to
	cache   *model.Cache
	tokens  []int32     // the sequence; the cache holds tokens[:cache.Len()]
	routing [][][]int16 // per cached position, MoE only
	busy    bool
	used    uint64 // LRU stamp
}

// seq is an active request in the loop.
type seq struct {
	r        *request
	s        *session
	prompt   int // len(Prompt)
	cached   int // prompt tokens reused from the session
	logprobs []float32
	versions []int64
	emitted  int    // completion tokens pushed to the caller
	finish   string // set when the last token is sampled; it is still fed
}

// run is the scheduler loop.
func (e *Engine) run() {
	defer close(e.done)
	ls := &e.loop
	for {
		e.mu.Lock()
		inbox, ends, swap, closed := e.inbox, e.ends, e.swap, e.closed
		swapVersion := e.version
		e.inbox, e.ends, e.swap = nil, nil, nil
		e.mu.Unlock()
		if closed {
			for _, q := range ls.active {
				q.r.finish(Generation{}, fmt.Errorf("%w: generate", ErrClosed))
			}
			for _, r := range inbox {
				r.finish(Generation{}, fmt.Errorf("%w: generate", ErrClosed))
			}
			e.opt.Metrics.sync(&ls.gauges, 0, 0)
			return
		}
		// Cancelled requests leave first, so that their sessions are free
		// for a follow-up request admitted below.
		ls.active = slices.DeleteFunc(ls.active, func(q *seq) bool {
			if q.r.cancelled.Load() {
				e.release(q, false)
				q.r.finish(Generation{}, context.Canceled)
				return true
			}
			return false
		})
		for _, id := range ends {
			delete(ls.sessions, id)
		}
		if swap != nil {
			e.applySwap(swap, swapVersion)
		}
		for _, r := range inbox {
			if r.cancelled.Load() {
				r.finish(Generation{}, context.Canceled)
				continue
			}
			e.admit(r)
		}
		e.opt.Metrics.sync(&ls.gauges, len(ls.sessions), len(ls.active))
		if len(ls.active) == 0 {
			<-e.wake
			continue
		}
		e.step()
		e.opt.Metrics.sync(&ls.gauges, len(ls.sessions), len(ls.active))
	}
}

// applySwap installs new weights: idle sessions drop their caches, active
// sequences start a fresh cache and prefill all their tokens again.
func (e *Engine) applySwap(m *model.Model, version int64) {
	ls := &e.loop
	ls.install(m, version)
	e.opt.Metrics.installed(version, true)
	for _, s := range ls.sessions {
		if !s.busy {
			s.m, s.cache, s.tokens, s.routing = nil, nil, nil, nil
		}
	}
	for _, q := range ls.active {
		q.s.m, q.s.cache, q.s.routing = m, m.NewCache(), nil
	}
}

// install makes m the model of the next steps.
func (ls *loopState) install(m *model.Model, version int64) {
	c := m.Config()
	ls.m, ls.version, ls.maxPos, ls.moe = m, version, c.MaxPositionEmbeddings, c.MoELayers() > 0
}

// admit starts a request: it takes the session's cache when the session is
// idle and keeps the longest common prefix of its tokens and the prompt
// (at most len(prompt)-1 positions: the last prompt token must run to give
// the logits of the first completion token).
func (e *Engine) admit(r *request) {
	ls := &e.loop
	e.opt.Metrics.admitted(time.Since(r.queued))
	s := ls.sessions[r.req.Session]
	switch {
	case r.req.Session == "" || (s != nil && s.busy):
		s = &session{}
	case s == nil:
		s = &session{id: r.req.Session}
		ls.sessions[s.id] = s
	}
	s.busy = true
	prompt := r.req.Prompt
	n := 0
	if s.cache != nil && s.m == ls.m {
		n = commonPrefix(s.tokens[:s.cache.Len()], prompt[:len(prompt)-1])
	} else {
		s.m, s.cache, s.routing = ls.m, ls.m.NewCache(), nil
	}
	// Prefix caching across sessions: another cache of these weights may
	// hold a longer prefix of the prompt (every rollout of a harness starts
	// with the same system prompt and tools). Its keys and values are the
	// bits this prompt's prefill would compute (model.Step is
	// row-invariant), so a copy replaces the prefill.
	shared := 0
	if d, dn := ls.donor(s, prompt); dn-n >= max(minShare, dn/64) {
		if c, err := d.cache.Fork(dn); err == nil {
			s.cache, n, shared = c, dn, dn
			if d.routing != nil {
				s.routing = slices.Clone(d.routing[:dn])
			}
		}
	}
	if err := s.cache.Truncate(n); err != nil { // n <= Len: cannot fail
		s.cache, s.routing, n, shared = ls.m.NewCache(), nil, 0, 0
	}
	if s.routing != nil {
		s.routing = s.routing[:n]
	}
	s.tokens = append(make([]int32, 0, len(prompt)+64), prompt...)
	ls.active = append(ls.active, &seq{r: r, s: s, prompt: len(prompt), cached: n})
	e.opt.Metrics.prompt(len(prompt), n, shared)
	e.evict()
}

// minShare is the fewest positions worth copying from another session's
// cache rather than prefilling.
const minShare = 16

// commonPrefix returns the length of the longest common prefix of a and b.
func commonPrefix(a, b []int32) int {
	n := 0
	for n < min(len(a), len(b)) && a[n] == b[n] {
		n++
	}
	return n
}

// donor returns the session, other than s, whose cache holds the longest
// prefix of prompt (at most len(prompt)-1 positions: the last prompt token
// must run) computed by the current weights, idle or running, and that
// prefix's length.
func (ls *loopState) donor(s *session, prompt []int32) (*session, int) {
	var best *session
	bn := 0
	consider := func(d *session) {
		if d == s || d.cache == nil || d.m != ls.m || d.cache.Len() <= bn {
			return
		}
		if n := commonPrefix(d.tokens[:d.cache.Len()], prompt[:len(prompt)-1]); n > bn {
			best, bn = d, n
		}
	}
	for _, d := range ls.sessions {
		consider(d)
	}
	for _, q := range ls.active {
		consider(q.s)
	}
	return best, bn
}

// evict drops idle sessions, least recently used first, while there are
// more than MaxSessions.
func (e *Engine) evict() {
	ls := &e.loop
	for len(ls.sessions) > e.opt.MaxSessions {
		var old *session
		for _, s := range ls.sessions {
			if !s.busy && (old == nil || s.used < old.used) {
				old = s
			}
		}
		if old == nil {
			return // every session is busy
		}
		delete(ls.sessions, old.id)
	}
}

// release ends a sequence's hold on its session; a broken cache is dropped.
func (e *Engine) release(q *seq, broken bool) {
	ls := &e.loop
	ls.tick++
	q.s.busy, q.s.used = false, ls.tick
	if broken {
		q.s.m, q.s.cache, q.s.tokens, q.s.routing = nil, nil, nil, nil
	}
	e.evict()
}

// step runs one batched model step over every active sequence, then
// samples, emits and finishes.
func (e *Engine) step() {
	start := time.Now()
	ls := &e.loop
	decoding := 0
	for _, q := range ls.active {
		if len(q.s.tokens)-q.s.cache.Len() == 1 {
			decoding++
		}
	}
	budget := max(e.opt.StepTokens-decoding, e.opt.StepTokens/4, 1)
	var in []model.StepInput
	var batch []*seq
	prefill, generated := 0, 0
	for _, q := range ls.active {
		pending := q.s.tokens[q.s.cache.Len():]
		n := len(pending)
		if n > 1 {
			if budget == 0 {
				continue
			}
			n = min(n, budget)
			budget -= n
		}
		if n > 1 || q.s.cache.Len() < q.prompt { // not one sampled token being fed back
			prefill += n
		}
		in = append(in, model.StepInput{Cache: q.s.cache, IDs: pending[:n], SkipLogits: n < len(pending)})
		batch = append(batch, q)
	}
	if int64(len(in)) > e.widest.Load() {
		e.widest.Store(int64(len(in)))
	}
	outs, err := ls.m.Step(in)
	if err != nil {
		err = fmt.Errorf("%w: model step: %w", ErrBadOutput, err)
	}
	ended := map[*seq]bool{}
	for i, q := range batch {
		if err != nil {
			e.end(q, err)
			ended[q] = true
			continue
		}
		sampled := len(q.logprobs)
		done, qerr := q.advance(outs[i], ls)
		generated += len(q.logprobs) - sampled
		if done {
			e.end(q, qerr)
			ended[q] = true
		}
	}
	ls.active = slices.DeleteFunc(ls.active, func(q *seq) bool { return ended[q] })
	e.opt.Metrics.step(time.Since(start), prefill, generated)
}

// advance takes a step's output for q: it records the routing and, once
// every token is in the cache, either reports the sequence done or samples
// its next token.
func (q *seq) advance(out model.StepOutput, ls *loopState) (done bool, err error) {
	s := q.s
	s.routing = append(s.routing, out.Routing...)
	if s.cache.Len() < len(s.tokens) {
		return false, nil // more prompt to prefill
	}
	q.emit(ls.moe)
	if q.finish != "" {
		return true, nil // the last token is in the cache now
	}
	i := len(q.logprobs)
	id, lp, err := ls.sampler.sample(out.Logits, q.r.sampling, uniform(q.r.sampling.Seed, i))
	if err != nil {
		return true, fmt.Errorf("sampling completion token %d: %w", i, err)
	}
	s.tokens = append(s.tokens, id)
	q.logprobs = append(q.logprobs, float32(lp))
	q.versions = append(q.versions, ls.version)
	switch req := &q.r.req; {
	case slices.Contains(req.StopTokens, id):
		q.finish = FinishStop
	case req.MaxTokens > 0 && i+1 == req.MaxTokens:
		q.finish = FinishLength
	case ls.maxPos > 0 && len(s.tokens) >= ls.maxPos:
		q.finish = FinishContext
	}
	q.emit(ls.moe)
	return false, nil
}

// emit pushes the completion tokens that are ready: every sampled one for
// a dense model; for an MoE model those already in the cache, whose
// routing is known.
func (q *seq) emit(moe bool) {
	for ; q.emitted < len(q.logprobs); q.emitted++ {
		pos := q.prompt + q.emitted
		t := Token{ID: q.s.tokens[pos], Logprob: q.logprobs[q.emitted], Version: q.versions[q.emitted]}
		if moe {
			if pos >= len(q.s.routing) {
				return
			}
			t.Routing = q.s.routing[pos]
		}
		q.r.push(t)
	}
}

// end finishes a sequence with its Generation, or with err, and releases
// its session (dropping the cache after an error).
func (e *Engine) end(q *seq, err error) {
	var g Generation
	if err == nil {
		s := q.s
		g = Generation{Tokens: slices.Clone(s.tokens[q.prompt:]), Logprobs: q.logprobs, Versions: q.versions,
			Finish: q.finish, PromptTokens: q.prompt, CachedTokens: q.cached}
		if e.loop.moe {
			g.PromptRouting = slices.Clone(s.routing[:q.prompt])
			g.Routing = slices.Clone(s.routing[q.prompt:])
		}
	}
	e.release(q, err != nil)
	q.r.finish(g, err)
}
