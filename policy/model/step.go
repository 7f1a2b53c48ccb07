package model

import (
	"fmt"

	"github.com/legorl/legorl/policy/backend"
)

// StepInput is one sequence's part of a Step: the tokens that extend its
// cache.
type StepInput struct {
	Cache *Cache
	IDs   []int32 // at least one
	// SkipLogits leaves StepOutput.Logits nil: a prefill chunk that is not
	// the prompt's last needs no prediction, and the LM head is the largest
	// product of a step.
	SkipLogits bool
}

// StepOutput is one sequence's result of a Step.
type StepOutput struct {
	// Logits (before temperature) predict the token after the last of IDs:
	// one per id of the model's Support, which may be fewer than the
	// vocabulary (the ids past it are never sampled).
	Logits []float32
	// Routing is the experts of each of IDs in every MoE layer,
	// [len(IDs)][MoE layers][k], in descending router probability; nil for
	// a dense model.
	Routing [][][]int16
}

// Step extends every input's cache with its tokens in one batched pass:
// the linear layers (projections, MLPs, experts, router, LM head) run over
// the new tokens of all sequences together, attention runs per query row
// against that row's own cache. It is what a continuous-batching engine
// calls once per decode step, with prefill chunks mixed in.
//
// The numerics are row-invariant: every element of every matrix product is
// one kernels.Dot of an input row with a weight row, attention (the
// backend's AttendRows) handles each query row and head alone with keys in
// position order, and norms and the MoE combine are per row. So a token's logits, keys, values and routing
// are bitwise the same whether it runs in a prefill of the whole prompt, in
// a chunk, alone as a decode step or in a batch with other sequences. They
// agree with Logprobs (whose Sgemm blocking depends on the sequence length)
// up to float32 rounding, not bitwise.
//
// The caches must belong to m and be distinct. On error no cache changes.
func (m *Model) Step(in []StepInput) ([]StepOutput, error) {
	cfg := &m.cfg
	seen := make(map[*Cache]bool, len(in))
	rows := 0
	for i, s := range in {
		bad := func(format string, a ...any) error {
			return fmt.Errorf("%w: step input %d: "+format, append([]any{ErrInput, i}, a...)...)
		}
		switch {
		case s.Cache == nil:
			return nil, bad("nil cache")
		case s.Cache.m != m:
			return nil, bad("the cache belongs to another model")
		case seen[s.Cache]:
			return nil, bad("the cache appears twice in one step")
		case len(s.IDs) == 0:
			return nil, bad("no tokens")
		}
		seen[s.Cache] = true
		if n := s.Cache.kv.n + len(s.IDs); cfg.MaxPositionEmbeddings > 0 && n > cfg.MaxPositionEmbeddings {
			return nil, bad("%d positions exceed max_position_embeddings %d", n, cfg.MaxPositionEmbeddings)
		}
		for k, id := range s.IDs {
			if id < 0 || int(id) >= cfg.VocabSize {
				return nil, bad("token %d is id %d, outside the vocabulary of %d", k, id, cfg.VocabSize)
			}
		}
		rows += len(s.IDs)
	}
	st := &step{m: m, in: in, rows: rows}
	if a, ok := m.scratch.Get().(*arena); ok {
		st.mem = a
	} else {
		st.mem = &arena{}
	}
	out := st.run()
	st.mem.off = 0
	m.scratch.Put(st.mem)
	if err := m.backendErr(); err != nil {
		for _, s := range in {
			_ = s.Cache.Truncate(s.Cache.kv.n) // drop the keys and values appended
		}
		return nil, err
	}
	st.commit()
	return out, nil
}

// step is the state of one Model.Step over validated inputs.
type step struct {
	m      *Model
	in     []StepInput
	rows   int         // new tokens of all inputs together
	routes [][][]int16 // [rows][MoE layers][k]
	mem    *arena      // the step's temporaries
}

// arena hands out float32 slices from one buffer, which the model's
// Steps reuse (Model.scratch): a prefill's activations are megabytes,
// which would otherwise be allocated, zeroed and collected at every layer.
// Slices come with old contents; every user overwrites them whole.
type arena struct {
	buf []float32
	off int
}

// take returns n floats. When the buffer is full, a larger one replaces it
// (the slices already taken keep the old one).
func (a *arena) take(n int) []float32 {
	if a.off+n > len(a.buf) {
		a.buf = make([]float32, max(2*len(a.buf), a.off+n, 1<<16))
	}
	s := a.buf[a.off : a.off+n : a.off+n]
	a.off += n
	return s
}

// spans calls f for each input with the first row of its tokens.
func (st *step) spans(f func(i, row0 int)) {
	row := 0
	for i, s := range st.in {
		f(i, row)
		row += len(s.IDs)
	}
}

func (st *step) run() []StepOutput {
	cfg := &st.m.cfg
	d := cfg.HiddenSize
	x := st.mem.take(st.rows * d)
	st.spans(func(i, row0 int) {
		s := st.in[i]
		for t, id := range s.IDs {
			copy(x[(row0+t)*d:(row0+t+1)*d], st.m.p.embed.data[int(id)*d:])
		}
		s.Cache.growRope(s.Cache.kv.n + len(s.IDs))
	})
	if L := cfg.MoELayers(); L > 0 {
		st.routes = make([][][]int16, st.rows)
		for t := range st.routes {
			st.routes[t] = make([][]int16, 0, L)
		}
	}
	moeIdx := 0
	for l := range st.m.p.layers {
		x = st.layer(l, moeIdx, x)
		if cfg.IsMoE(l) {
			moeIdx++
		}
	}
	// Final norm and LM head on the last row of each input that wants logits.
	var last []int
	st.spans(func(i, row0 int) {
		if !st.in[i].SkipLogits {
			last = append(last, row0+len(st.in[i].IDs)-1)
		}
	})
	xl := st.mem.take(len(last) * d)
	for j, r := range last {
		copy(xl[j*d:(j+1)*d], x[r*d:(r+1)*d])
	}
	xn := st.norm(xl, len(last), d, st.m.p.norm.data)
	V := st.m.support                      // the ids past it get no logit: they cannot be sampled
	logits := make([]float32, len(last)*V) // returned: not from the arena
	st.m.be.RowLinear(logits, xn, len(last), d, st.m.p.lmHead.data[:V*d], V)
	out := make([]StepOutput, len(st.in))
	j := 0
	st.spans(func(i, row0 int) {
		s := st.in[i]
		if st.routes != nil {
			out[i].Routing = st.routes[row0 : row0+len(s.IDs) : row0+len(s.IDs)]
		}
		if !s.SkipLogits {
			out[i].Logits = logits[j*V : (j+1)*V : (j+1)*V]
			j++
		}
	})
	return out
}

// commit counts the new positions into each input's cache.
func (st *step) commit() {
	for _, s := range st.in {
		s.Cache.kv.n += len(s.IDs)
	}
}

// layer runs decoder layer l on x [rows, d], which it overwrites with its
// output, and appends the new keys and values to each input's cache. It
// mirrors pass.layerForward operation for operation, with row-invariant
// products and attention. Its temporaries go back to the arena at the end.
func (st *step) layer(l, moeIdx int, x []float32) []float32 {
	c, lp := &st.m.cfg, &st.m.p.layers[l]
	d, R := c.HiddenSize, st.rows
	H, KV, hd := c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim
	defer func(off int) { st.mem.off = off }(st.mem.off)
	xn := st.norm(x, R, d, lp.inNorm.data)
	q := st.rowLinear(xn, R, d, lp.q.data, H*hd)
	k := st.rowLinear(xn, R, d, lp.k.data, KV*hd)
	v := st.rowLinear(xn, R, d, lp.v.data, KV*hd)
	q = st.norm(q, R*H, hd, lp.qNorm.data)
	k = st.norm(k, R*KV, hd, lp.kNorm.data)
	attn := st.mem.take(R * H * hd) // AttendRows writes every element
	// One task per head and block of up to attnRows query rows of one
	// input: their scores are one RowDots product.
	const attnRows = 4
	type task struct{ i, row0, t0, nt, h int }
	var tasks []task
	st.spans(func(i, row0 int) {
		s := st.in[i]
		n := len(s.IDs)
		pos0 := s.Cache.kv.n
		s.Cache.rope.apply(q[row0*H*hd:], pos0, n, H, false)
		s.Cache.rope.apply(k[row0*KV*hd:], pos0, n, KV, false)
		s.Cache.kv.append(l, k[row0*KV*hd:(row0+n)*KV*hd], v[row0*KV*hd:(row0+n)*KV*hd])
		for t0 := 0; t0 < n; t0 += attnRows {
			for h := range H {
				tasks = append(tasks, task{i, row0, t0, min(attnRows, n-t0), h})
			}
		}
	})
	backend.ParallelFor(len(tasks), func(j int) {
		tk := tasks[j]
		kv := &st.in[tk.i].Cache.kv
		off := ((tk.row0+tk.t0)*H + tk.h) * hd
		kh := tk.h / (H / KV)
		st.m.be.AttendRows(attn[off:], q[off:], H*hd, tk.nt, kv.k[l][kh*hd:], kv.v[l][kh*hd:], KV*hd, kv.n+tk.t0, hd)
	})
	h := st.rowLinear(attn, R, H*hd, lp.o.data, d)
	for i := range h {
		h[i] += x[i]
	}
	hn := st.norm(h, R, d, lp.postNorm.data)
	var out []float32
	if lp.moe {
		out = st.moe(lp, hn, moeIdx)
	} else {
		out = st.rowMLP(c, lp.mlp, hn, R, c.IntermediateSize)
	}
	for i := range out {
		x[i] = out[i] + h[i]
	}
	return x
}

// rowLinear computes y = x W^T for x [rows, in] and W [out, in] with the
// backend's row-invariant product: each row's result does not depend on the
// other rows. y comes from the arena.
func (st *step) rowLinear(x []float32, rows, in int, w []float32, out int) []float32 {
	y := st.mem.take(rows * out)
	st.m.be.RowLinear(y, x, rows, in, w, out)
	return y
}

// norm is rmsnorm into the arena.
func (st *step) norm(x []float32, rows, n int, w []float32) []float32 {
	y := st.mem.take(rows * n)
	st.m.be.RMSNorm(y, nil, x, rows, n, w, st.m.cfg.RMSNormEps)
	return y
}

// rowMLP is mlpForward with row-invariant products.
func (st *step) rowMLP(c *Config, m mlpParams[float32], x []float32, n, inter int) []float32 {
	d := c.HiddenSize
	g := st.rowLinear(x, n, d, m.gate.data, inter)
	u := st.rowLinear(x, n, d, m.up.data, inter)
	act := st.mem.take(len(g))
	st.m.be.SwiGLU(act, g, u)
	return st.rowLinear(act, n, inter, m.down.data, d)
}

// moe is pass.moeForward for inference with row-invariant products: each
// row's experts and combine weights come from its own router softmax, and
// its output sums the chosen experts in ascending expert order.
func (st *step) moe(lp *layerParams[float32], x []float32, moeIdx int) []float32 {
	c, R := &st.m.cfg, st.rows
	d, E, K := c.HiddenSize, c.NumExperts, c.NumExpertsPerTok
	probs := st.rowLinear(x, R, d, lp.router.data, E)
	sel := make([]int, R*K)
	wts := make([]float32, R*K)
	order := make([]int, E)
	tok := make([][]int, E) // per expert: rows, ascending
	slot := make([][]int, E)
	for t := range R {
		r := route(probs[t*E:(t+1)*E], nil, c.NormTopKProb, order, sel[t*K:(t+1)*K], wts[t*K:(t+1)*K])
		st.routes[t] = append(st.routes[t], r)
	}
	for t := range R {
		for j := range K {
			e := sel[t*K+j]
			tok[e] = append(tok[e], t)
			slot[e] = append(slot[e], j)
		}
	}
	out := st.mem.take(R * d)
	clear(out)
	for e := range E {
		n := len(tok[e])
		if n == 0 {
			continue
		}
		xe := st.mem.take(n * d)
		for i, t := range tok[e] {
			copy(xe[i*d:(i+1)*d], x[t*d:(t+1)*d])
		}
		ye := st.rowMLP(c, lp.experts[e], xe, n, c.MoEIntermediateSize)
		for i, t := range tok[e] {
			w := wts[t*K+slot[e][i]]
			o, y := out[t*d:(t+1)*d], ye[i*d:(i+1)*d]
			for j := range o {
				o[j] += w * y[j]
			}
		}
	}
	return out
}

// growRope makes the cache's rotary table cover n positions: the model's
// shared table (Model.ropeTable), which grows by doubling, so decoding
// token by token and new sessions recompute it rarely. Every position's
// angles are computed alone, so the table's size never changes a value.
func (c *Cache) growRope(n int) {
	if len(c.rope.cos) < n*c.m.cfg.HeadDim/2 {
		c.rope = c.m.ropeTable(n)
	}
}
