package model

import (
	"github.com/legorl/legorl/policy/backend"
)

// layerCache keeps what one decoder layer's backward pass needs.
type layerCache[T Float] struct {
	x, xn, rIn   []T // layer input, its norm, reciprocal roots
	qRaw, kRaw   []T // projections before q/k norm
	rq, rk       []T
	q, k, v      []T // after norm and rope; k and v from position 0 (a shared prefix's too)
	probs        []T // [H][S][pos0+S] attention probabilities
	attn         []T // [S, H*hd] attention output before o_proj
	h, hn, rPost []T // residual after attention, its norm
	g, u, act    []T // dense MLP: gate, up, silu(gate)*up
	moe          *moeCache[T]
}

// moeCache keeps one MoE block's routing and per-expert activations.
type moeCache[T Float] struct {
	probs   []T     // [S, E] router softmax
	sel     []int   // [S, K] chosen experts
	w       []T     // [S, K] combine weights
	tok     [][]int // per expert: token indices
	slot    [][]int // per expert: slot of the token's choice
	xe      [][]T   // per expert: gathered inputs [n, d]
	g, u    [][]T   // per expert [n, I]
	act, ye [][]T   // per expert [n, I], expert outputs [n, d]
}

// pass is one sequence's forward (and, when training, backward) pass.
type pass[T Float] struct {
	c      *Config
	ops    backend.Ops[T]
	p      *params[T]
	V      int // ids the head scores: Model.Support, the first V rows of the LM head
	rope   ropeTable[T]
	ids    []int32
	S, P   int
	temp   float64
	train  bool
	w      []float32 // loss weights per completion token, set before backward
	replay [][][]int16
	block  int // row block of the causal attention matmuls
	pos0   int // position of the first token (0 but when extending a KV cache or after a shared prefix)
	kv     *kvCache[T]
	// prefix, when set, is the pass of a shared prefix (sharedBackward)
	// that this pass's tokens follow: pos0 is prefix.S and attention also
	// sees the prefix's keys and values.
	prefix *pass[T]
	// shared marks the pass of a shared prefix: it has no head, and its
	// backward adds dkv, the suffixes' gradients of its keys and values,
	// to those of its own attention.
	shared bool
	// dkv, when training with a shared prefix, is d loss / d (the prefix's
	// keys and values): a suffix's backward adds its part into it, the
	// prefix's backward reads the sum.
	dkv *kvGrad[T]

	layers      []layerCache[T]
	xF, xFn, rF []T // final residual, its norm, roots
	probs       []T // [C, V] softmax of logits/T when training; backward turns it into d loss / d logits
	logprobs    []T
	routes      [][][]int16
}

func (ps *pass[T]) forward() {
	c := ps.c
	d, S := c.HiddenSize, ps.S
	x := make([]T, S*d)
	for t, id := range ps.ids {
		copy(x[t*d:(t+1)*d], ps.p.embed.data[int(id)*d:])
	}
	ps.layers = make([]layerCache[T], c.NumHiddenLayers)
	if c.MoELayers() > 0 {
		ps.routes = make([][][]int16, S)
		for t := range ps.routes {
			ps.routes[t] = make([][]int16, 0, c.MoELayers())
		}
	}
	moeIdx := 0
	for l := range ps.layers {
		x = ps.layerForward(l, moeIdx, x)
		if c.IsMoE(l) {
			moeIdx++
		}
	}
	ps.xF = x
	if ps.shared {
		return // no logprob is computed from a shared prefix's rows
	}
	ps.xFn, ps.rF = rmsnorm(ps.ops, x, S, d, ps.p.norm.data, c.RMSNormEps)
	if ps.kv == nil {
		ps.head()
	}
}

// head computes the logprob of each completion token from the final hidden
// state of the position before it, and when training keeps the softmax.
// Only the first V rows of the LM head (the support) make logits: the ids
// past them are out of the softmax, as if their logits were -inf.
func (ps *pass[T]) head() {
	c := ps.c
	d, V := c.HiddenSize, ps.V
	C := ps.S - ps.P
	ps.logprobs = make([]T, C)
	if C == 0 {
		return
	}
	rows := ps.xFn[(ps.P-1)*d : (ps.S-1)*d]
	logits := linear(ps.ops, rows, C, d, ps.p.lmHead.data[:V*d], V)
	ps.ops.Logprobs(ps.logprobs, logits, V, ps.ids[ps.P:], 1/ps.temp, ps.train)
	if ps.train {
		ps.probs = logits
	}
}

func (ps *pass[T]) layerForward(l, moeIdx int, x []T) []T {
	c, lp, lc := ps.c, &ps.p.layers[l], &ps.layers[l]
	d, S := c.HiddenSize, ps.S
	H, KV, hd := c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim
	xn, rIn := rmsnorm(ps.ops, x, S, d, lp.inNorm.data, c.RMSNormEps)
	qRaw := linear(ps.ops, xn, S, d, lp.q.data, H*hd)
	kRaw := linear(ps.ops, xn, S, d, lp.k.data, KV*hd)
	v := linear(ps.ops, xn, S, d, lp.v.data, KV*hd)
	q, rq := rmsnorm(ps.ops, qRaw, S*H, hd, lp.qNorm.data, c.RMSNormEps)
	k, rk := rmsnorm(ps.ops, kRaw, S*KV, hd, lp.kNorm.data, c.RMSNormEps)
	ps.rope.apply(q, ps.pos0, S, H, false)
	ps.rope.apply(k, ps.pos0, S, KV, false)
	kAll, vAll := k, v
	if ps.kv != nil {
		kAll, vAll = ps.kv.append(l, k, v)
	} else if ps.prefix != nil {
		pl := &ps.prefix.layers[l]
		kAll = append(append(make([]T, 0, len(pl.k)+len(k)), pl.k...), k...)
		vAll = append(append(make([]T, 0, len(pl.v)+len(v)), pl.v...), v...)
	}
	attn, probs := ps.attention(q, kAll, vAll)
	o := linear(ps.ops, attn, S, H*hd, lp.o.data, d)
	h := o
	for i := range h {
		h[i] += x[i]
	}
	hn, rPost := rmsnorm(ps.ops, h, S, d, lp.postNorm.data, c.RMSNormEps)
	var out []T
	if lp.moe {
		var mc *moeCache[T]
		out, mc = ps.moeForward(lp, hn, moeIdx)
		lc.moe = mc
	} else {
		var g, u, act []T
		out, g, u, act = mlpForward(ps.ops, c, lp.mlp, hn, S, c.IntermediateSize)
		lc.g, lc.u, lc.act = g, u, act
	}
	for i := range out {
		out[i] += h[i]
	}
	if ps.train {
		lc.x, lc.xn, lc.rIn = x, xn, rIn
		lc.qRaw, lc.kRaw, lc.rq, lc.rk = qRaw, kRaw, rq, rk
		lc.q, lc.k, lc.v, lc.probs, lc.attn = q, kAll, vAll, probs, attn
		lc.h, lc.hn, lc.rPost = h, hn, rPost
	} else {
		*lc = layerCache[T]{}
	}
	return out
}

// attnBlock is the row block of the causal attention matmuls: a block of
// query rows multiplies only the keys up to its last row, which skips most
// of the masked upper triangle while keeping the matmuls large.
const attnBlock = 64

// attention runs causal grouped-query attention of the queries q [S, H*hd]
// (positions pos0..pos0+S-1) over the keys and values k, v [pos0+S, KV*hd].
// It returns the output [S, H*hd] and, when training, the probabilities
// [H][S][pos0+S].
func (ps *pass[T]) attention(q, k, v []T) (out, probs []T) {
	a := ps.attnShape()
	out = make([]T, a.S*a.Heads*a.HeadDim)
	if ps.train {
		probs = make([]T, a.Heads*a.S*(a.Pos0+a.S))
	}
	ps.ops.Attention(out, probs, q, k, v, a)
	return out, probs
}

// attnShape describes the pass's attention calls.
func (ps *pass[T]) attnShape() backend.AttnShape {
	c := ps.c
	return backend.AttnShape{S: ps.S, Pos0: ps.pos0, Heads: c.NumAttentionHeads, KV: c.NumKeyValueHeads, HeadDim: c.HeadDim, Block: ps.block}
}

// mlpForward runs a SwiGLU MLP: down(silu(gate(x)) * up(x)) on x [n, d].
func mlpForward[T Float](o backend.Ops[T], c *Config, m mlpParams[T], x []T, n, inter int) (out, g, u, act []T) {
	d := c.HiddenSize
	g = linear(o, x, n, d, m.gate.data, inter)
	u = linear(o, x, n, d, m.up.data, inter)
	act = make([]T, len(g))
	o.SwiGLU(act, g, u)
	out = linear(o, act, n, inter, m.down.data, d)
	return out, g, u, act
}

// moeForward runs a sparse MoE block on x [S, d]: router softmax over all
// experts, top-k (or the replayed experts), optional renormalisation, and
// the weighted sum of the chosen experts' SwiGLU outputs.
func (ps *pass[T]) moeForward(lp *layerParams[T], x []T, moeIdx int) ([]T, *moeCache[T]) {
	c, S := ps.c, ps.S
	d, E, K, I := c.HiddenSize, c.NumExperts, c.NumExpertsPerTok, c.MoEIntermediateSize
	mc := &moeCache[T]{sel: make([]int, S*K), w: make([]T, S*K)}
	probs := linear(ps.ops, x, S, d, lp.router.data, E)
	order := make([]int, E)
	for t := 0; t < S; t++ {
		var replay []int16
		if ps.replay != nil {
			replay = ps.replay[t][moeIdx]
		}
		r := route(probs[t*E:(t+1)*E], replay, c.NormTopKProb, order, mc.sel[t*K:(t+1)*K], mc.w[t*K:(t+1)*K])
		ps.routes[t] = append(ps.routes[t], r)
	}
	mc.probs = probs
	mc.tok = make([][]int, E)
	mc.slot = make([][]int, E)
	for t := 0; t < S; t++ {
		for j := 0; j < K; j++ {
			e := mc.sel[t*K+j]
			mc.tok[e] = append(mc.tok[e], t)
			mc.slot[e] = append(mc.slot[e], j)
		}
	}
	mc.xe, mc.g, mc.u, mc.act, mc.ye = make([][]T, E), make([][]T, E), make([][]T, E), make([][]T, E), make([][]T, E)
	out := make([]T, S*d)
	for e := 0; e < E; e++ {
		n := len(mc.tok[e])
		if n == 0 {
			continue
		}
		xe := make([]T, n*d)
		for i, t := range mc.tok[e] {
			copy(xe[i*d:(i+1)*d], x[t*d:(t+1)*d])
		}
		ye, g, u, act := mlpForward(ps.ops, c, lp.experts[e], xe, n, I)
		for i, t := range mc.tok[e] {
			w := mc.w[t*K+mc.slot[e][i]]
			o, y := out[t*d:(t+1)*d], ye[i*d:(i+1)*d]
			for j := range o {
				o[j] += w * y[j]
			}
		}
		mc.xe[e], mc.g[e], mc.u[e], mc.act[e], mc.ye[e] = xe, g, u, act, ye
	}
	if !ps.train {
		return out, nil
	}
	return out, mc
}
