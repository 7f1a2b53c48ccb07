package model

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"

	"github.com/legorl/legorl/policy/backend"
)

// BackwardSharedPrefix is BackwardFunc for a batch whose sequences start
// with the same tokens, such as the SFT turns of conversations under one
// system prompt and one set of tool schemas: it computes those tokens'
// layers once. One pass runs the shared prefix forward; every sequence's
// pass then runs its own tokens after it, attending to the prefix's keys
// and values, forward and backward; the gradients that reach the prefix's
// keys and values from all sequences are summed and the prefix's pass runs
// backward once.
//
// The shared prefix is found, not given: the longest run of leading
// tokens (and replayed routing, if any) that all prompts have in common,
// ending at least one token before the shortest prompt. A caller could not
// say where a rendered system prompt ends in token ids (the tokenizer may
// merge across the boundary); comparing ids costs nothing next to a pass
// and is right by construction. Stopping before the last prompt token
// keeps every scored position, and so every loss weight, in a sequence's
// own pass: the prefix carries no weight. Without a shared token it is
// BackwardFunc.
//
// Results and gradients are those of BackwardFunc up to float32 rounding,
// not bitwise: the prefix's products run over fewer rows and its
// gradients are summed in another order. Like BackwardFunc's, they are
// deterministic for a given GOMAXPROCS: sequence i runs on worker i mod
// workers, every worker sums into private buffers, and the buffers are
// added in worker order. The Routing of every Result holds its prefix
// tokens too (copies: results share nothing).
func (m *Model) BackwardSharedPrefix(seqs []Sequence, weights WeightFunc, g *Grads) ([]Result, error) {
	for i, s := range seqs {
		if err := m.cfg.check(i, s, m.support); err != nil {
			return nil, err
		}
	}
	n := sharedPrefix(seqs)
	if n == 0 {
		return m.BackwardFunc(seqs, weights, g)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	workers := min(runtime.GOMAXPROCS(0), len(seqs))
	for len(g.scratch) < workers {
		g.scratch = append(g.scratch, newParams[float32](m.cfg))
	}
	bufs := g.scratch[:workers]
	for _, buf := range bufs {
		buf.zero()
	}
	out, err := sharedBackward(m.be, &m.cfg, m.p, m.support, seqs, n, attnBlock, weights, bufs)
	if err != nil {
		return nil, err
	}
	if err := m.backendErr(); err != nil {
		return nil, err
	}
	for _, buf := range bufs {
		g.p.addFrom(buf)
	}
	return out, nil
}

// sharedPrefix returns the number of leading tokens all of seqs have in
// common (with the same replayed routing, or none), at most the shortest
// prompt's length less one.
func sharedPrefix(seqs []Sequence) int {
	if len(seqs) == 0 {
		return 0
	}
	first := seqs[0]
	n := len(first.Prompt) - 1
	for _, s := range seqs[1:] {
		n = min(n, len(s.Prompt)-1)
		if (s.Routing == nil) != (first.Routing == nil) {
			return 0
		}
		for j := 0; j < n; j++ {
			if s.Prompt[j] != first.Prompt[j] || s.Routing != nil && !sameRouting(s.Routing[j], first.Routing[j]) {
				n = j
				break
			}
		}
	}
	return max(n, 0)
}

// sameRouting reports whether two tokens replay the same experts.
func sameRouting(a, b [][]int16) bool {
	return slices.EqualFunc(a, b, func(x, y []int16) bool { return slices.Equal(x, y) })
}

// kvGrad is d loss / d (a shared prefix's keys and values) per layer,
// [prefix tokens, KV*hd] each: the keys after norm and rotation, as
// attention reads them.
type kvGrad[T Float] struct{ dk, dv [][]T }

func newKVGrad[T Float](c *Config, n int) *kvGrad[T] {
	g := &kvGrad[T]{dk: make([][]T, c.NumHiddenLayers), dv: make([][]T, c.NumHiddenLayers)}
	for l := range g.dk {
		g.dk[l] = make([]T, n*c.NumKeyValueHeads*c.HeadDim)
		g.dv[l] = make([]T, n*c.NumKeyValueHeads*c.HeadDim)
	}
	return g
}

// add adds h to g.
func (g *kvGrad[T]) add(h *kvGrad[T]) {
	for l := range g.dk {
		addTo(g.dk[l], h.dk[l])
		addTo(g.dv[l], h.dv[l])
	}
}

// addTo adds src to dst elementwise.
func addTo[T Float](dst, src []T) {
	for i, v := range src {
		dst[i] += v
	}
}

// sharedBackward runs the forward and backward passes of seqs sharing
// their first n tokens (0 < n < every prompt's length): the prefix's pass
// forward, the sequences' passes after it (sequence i on worker i mod
// len(bufs), gradients into bufs[worker]), then the prefix's pass backward
// into bufs[0] with the sum, in worker order, of what every sequence sent
// back to its keys and values. block is the attention's row block.
func sharedBackward[T Float](o backend.Ops[T], c *Config, p *params[T], support int, seqs []Sequence, n, block int, weights WeightFunc, bufs []*params[T]) ([]Result, error) {
	pre := prefixPass(o, c, p, support, seqs[0], n, block)
	pre.forward()
	workers := len(bufs)
	dkv := make([]*kvGrad[T], workers)
	out := make([]Result, len(seqs))
	errs := make([]error, len(seqs))
	var wg sync.WaitGroup
	for w := range workers {
		dkv[w] = newKVGrad[T](c, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(seqs); i += workers {
				ps := pre.suffix(seqs[i])
				ps.dkv = dkv[w]
				ps.forward()
				out[i] = toResult(ps)
				out[i].Routing = joinRoutes(pre.routes, ps.routes)
				ps.w = weights(i, out[i].Logprobs)
				if len(ps.w) != len(seqs[i].Completion) {
					errs[i] = fmt.Errorf("%w: sequence %d has %d weights for %d completion tokens", ErrInput, i, len(ps.w), len(seqs[i].Completion))
					continue
				}
				ps.backward(bufs[w])
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	for _, g := range dkv[1:] {
		dkv[0].add(g)
	}
	pre.dkv = dkv[0]
	pre.backward(bufs[0])
	return out, nil
}

// prefixPass returns the pass of the first n tokens of s as a shared
// prefix: it keeps every layer's keys and values for the passes after it
// and computes no logprob.
func prefixPass[T Float](o backend.Ops[T], c *Config, p *params[T], support int, s Sequence, n, block int) *pass[T] {
	pre := &pass[T]{c: c, ops: o, p: p, V: support, ids: s.Prompt[:n:n], block: block, S: n, P: n, temp: 1,
		train: true, shared: true, rope: newRope[T](n, c.HeadDim, c.RopeTheta)}
	if s.Routing != nil {
		pre.replay = s.Routing[:n]
	}
	return pre
}

// LogprobsSharedPrefix is Logprobs for a batch whose sequences start with
// the same tokens (found as BackwardSharedPrefix finds them): the prefix's
// layers run once, then each sequence's own tokens run after it,
// attending to its keys and values. It is the trainer's recomputation of
// a micro-batch under one system prompt. Results equal Logprobs' up to
// float32 rounding, not bitwise; each sequence's pass is its own, so they
// do not depend on scheduling. Without a shared token it is Logprobs.
func (m *Model) LogprobsSharedPrefix(seqs []Sequence) ([]Result, error) {
	for i, s := range seqs {
		if err := m.cfg.check(i, s, m.support); err != nil {
			return nil, err
		}
	}
	n := sharedPrefix(seqs)
	if n == 0 {
		return m.Logprobs(seqs)
	}
	out := sharedForward(m.be, &m.cfg, m.p, m.support, seqs, n, attnBlock)
	if err := m.backendErr(); err != nil {
		return nil, err
	}
	return out, nil
}

// sharedForward runs the forward passes of seqs sharing their first n
// tokens: the prefix's pass, then the sequences' passes after it, in
// parallel.
func sharedForward[T Float](o backend.Ops[T], c *Config, p *params[T], support int, seqs []Sequence, n, block int) []Result {
	pre := prefixPass(o, c, p, support, seqs[0], n, block)
	pre.forward()
	out := make([]Result, len(seqs))
	backend.ParallelFor(len(seqs), func(i int) {
		ps := pre.suffix(seqs[i])
		ps.train = false
		ps.forward()
		out[i] = toResult(ps)
		out[i].Routing = joinRoutes(pre.routes, ps.routes)
	})
	return out
}

// suffix returns the training pass of s's tokens after the shared prefix
// whose pass is pre.
func (pre *pass[T]) suffix(s Sequence) *pass[T] {
	n := pre.S
	ids := make([]int32, 0, len(s.Prompt)+len(s.Completion)-n)
	ids = append(append(ids, s.Prompt[n:]...), s.Completion...)
	temp := s.Temperature
	if temp == 0 {
		temp = 1
	}
	ps := &pass[T]{c: pre.c, ops: pre.ops, p: pre.p, V: pre.V, ids: ids, block: pre.block, S: len(ids), P: len(s.Prompt) - n,
		temp: temp, train: true, pos0: n, prefix: pre, rope: newRope[T](n+len(ids), pre.c.HeadDim, pre.c.RopeTheta)}
	if s.Routing != nil {
		ps.replay = s.Routing[n:]
	}
	return ps
}

// joinRoutes returns the routing of a whole sequence from its shared
// prefix's (copied) and its own; nil for a dense model.
func joinRoutes(pre, own [][][]int16) [][][]int16 {
	if own == nil {
		return nil
	}
	out := make([][][]int16, 0, len(pre)+len(own))
	for _, layers := range pre {
		c := make([][]int16, len(layers))
		for l, ids := range layers {
			c[l] = slices.Clone(ids)
		}
		out = append(out, c)
	}
	return append(out, own...)
}

// attentionBackAt is Ops.AttentionBack for queries after a shared prefix
// (a.Pos0 > 0), which backends leave out: it sets dq [S, Heads*HeadDim]
// and dk, dv [Pos0+S, KV*HeadDim], the prefix's rows included, from the
// probabilities [Heads][S][Pos0+S]. It is the CPU backend's algorithm
// written with Ops.Gemm, so it runs on every backend: per query head, in
// parallel, dP = dO V^T and dV = P^T dO, the softmax's backward, then
// dQ = scale dS K and dK = scale dS^T Q, skipping the masked triangle by
// blocks; the heads of a key/value group are summed in head order.
func attentionBackAt[T Float](o backend.Ops[T], dq, dk, dv, dout, q, k, v, probs []T, a backend.AttnShape) {
	S, p0 := a.S, a.Pos0
	N := p0 + S // keys, and the row stride of the probabilities
	H, KV, hd := a.Heads, a.KV, a.HeadDim
	group := H / KV
	scale := T(1 / math.Sqrt(float64(hd)))
	block := max(a.Block, 1)
	dkH := make([]T, H*N*hd)
	dvH := make([]T, H*N*hd)
	backend.ParallelFor(H, func(h int) {
		kh := h / group
		P := probs[h*S*N : (h+1)*S*N]
		dP := make([]T, S*N)
		dO, Q := dout[h*hd:], q[h*hd:]
		// keyRows calls f for blocks of key rows [c0, c1) with the first
		// query row that sees them: every row sees the prefix, suffix key
		// c only rows from c - p0 on.
		keyRows := func(f func(c0, c1, i0 int)) {
			f(0, p0, 0)
			for r0 := 0; r0 < S; r0 += block {
				f(p0+r0, p0+min(r0+block, S), r0)
			}
		}
		// O = P V: dP = dO V^T (query rows [r0, r1) see keys [0, p0+r1)),
		// dV = P^T dO.
		for r0 := 0; r0 < S; r0 += block {
			r1 := min(r0+block, S)
			o.Gemm(false, true, r1-r0, p0+r1, hd, 1, dO[r0*H*hd:], H*hd, v[kh*hd:], KV*hd, 0, dP[r0*N:], N)
		}
		keyRows(func(c0, c1, i0 int) {
			o.Gemm(true, false, c1-c0, hd, S-i0, 1, P[i0*N+c0:], N, dO[i0*H*hd:], H*hd, 0, dvH[(h*N+c0)*hd:], hd)
		})
		// softmax: dS = P * (dP - rowsum(dP * P))
		for i := 0; i < S; i++ {
			last := p0 + i
			pr, dr := P[i*N:i*N+last+1], dP[i*N:(i+1)*N]
			var dot T
			for j, p := range pr {
				dot += p * dr[j]
			}
			for j, p := range pr {
				dr[j] = p * (dr[j] - dot)
			}
			clear(dr[last+1:])
		}
		// S = scale * Q K^T
		for r0 := 0; r0 < S; r0 += block {
			r1 := min(r0+block, S)
			o.Gemm(false, false, r1-r0, hd, p0+r1, scale, dP[r0*N:], N, k[kh*hd:], KV*hd, 0, dq[(r0*H+h)*hd:], H*hd)
		}
		keyRows(func(c0, c1, i0 int) {
			o.Gemm(true, false, c1-c0, hd, S-i0, scale, dP[i0*N+c0:], N, Q[i0*H*hd:], H*hd, 0, dkH[(h*N+c0)*hd:], hd)
		})
	})
	clear(dk[:N*KV*hd])
	clear(dv[:N*KV*hd])
	for h := 0; h < H; h++ {
		kh := h / group
		for t := 0; t < N; t++ {
			addTo(dk[(t*KV+kh)*hd:(t*KV+kh+1)*hd], dkH[(h*N+t)*hd:(h*N+t+1)*hd])
			addTo(dv[(t*KV+kh)*hd:(t*KV+kh+1)*hd], dvH[(h*N+t)*hd:(h*N+t+1)*hd])
		}
	}
}
