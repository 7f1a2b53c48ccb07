package model

import "github.com/legorl/legorl/policy/backend"

// backward accumulates into g the gradient of sum_t w_t * logprob_t, using
// the caches of a training forward pass.
func (ps *pass[T]) backward(g *params[T]) {
	c := ps.c
	d := c.HiddenSize
	dx := make([]T, ps.S*d)
	if !ps.shared { // a shared prefix has no head: the final norm's gradient is 0
		ps.headBackward(g, dx)
	}
	for l := c.NumHiddenLayers - 1; l >= 0; l-- {
		dx = ps.layerBackward(l, dx, g)
	}
	for t, id := range ps.ids {
		ge := g.embed.data[int(id)*d : (int(id)+1)*d]
		for j, v := range dx[t*d : (t+1)*d] {
			ge[j] += v
		}
	}
}

// headBackward accumulates into g the gradients of the LM head and final
// norm, and adds d loss / d (the last layer's output) to dx.
func (ps *pass[T]) headBackward(g *params[T], dx []T) {
	c := ps.c
	d, V, S := c.HiddenSize, ps.V, ps.S
	C := S - ps.P
	dxFn := make([]T, S*d)
	if C > 0 {
		// d(w * logprob)/dz_j = w/T * (1[j=target] - softmax_j)
		dlogits := ps.probs
		ps.ops.LogprobsBack(dlogits, V, ps.ids[ps.P:], ps.w, ps.temp)
		rows := ps.xFn[(ps.P-1)*d : (S-1)*d]
		// The LM head rows past the support made no logit: no gradient.
		linearBack(ps.ops, dlogits, C, V, rows, d, ps.p.lmHead.data[:V*d], g.lmHead.data[:V*d], dxFn[(ps.P-1)*d:(S-1)*d])
	}
	rmsnormBack(ps.ops, dxFn, ps.xF, S, d, ps.p.norm.data, ps.rF, g.norm.data, dx)
}

// layerBackward takes d loss / d (layer output) and returns d loss / d (layer
// input), accumulating parameter gradients into g.
func (ps *pass[T]) layerBackward(l int, dout []T, g *params[T]) []T {
	c, lp, gp, lc := ps.c, &ps.p.layers[l], &g.layers[l], &ps.layers[l]
	d, S := c.HiddenSize, ps.S
	H, KV, hd := c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim

	// out = h + mlp(norm(h))
	dhn := make([]T, S*d)
	if lp.moe {
		ps.moeBackward(lp, gp, lc.moe, lc.hn, dout, dhn)
	} else {
		mlpBackward(ps.ops, c, lp.mlp, gp.mlp, lc.hn, S, c.IntermediateSize, lc.g, lc.u, lc.act, dout, dhn)
	}
	dh := make([]T, S*d)
	copy(dh, dout)
	rmsnormBack(ps.ops, dhn, lc.h, S, d, lp.postNorm.data, lc.rPost, gp.postNorm.data, dh)

	// h = x + o_proj(attn)
	dattn := make([]T, S*H*hd)
	linearBack(ps.ops, dh, S, d, lc.attn, H*hd, lp.o.data, gp.o.data, dattn)
	dq, dk, dv := ps.attentionBackward(lc, dattn)
	if n := ps.pos0 * KV * hd; ps.prefix != nil {
		// The rows of the shared prefix's keys and values go to its
		// backward (sharedBackward), the rest on through this layer.
		addTo(ps.dkv.dk[l], dk[:n])
		addTo(ps.dkv.dv[l], dv[:n])
		dk, dv = dk[n:], dv[n:]
	} else if ps.shared {
		addTo(dk, ps.dkv.dk[l])
		addTo(dv, ps.dkv.dv[l])
	}
	ps.rope.apply(dq, ps.pos0, S, H, true)
	ps.rope.apply(dk, ps.pos0, S, KV, true)
	dqRaw := make([]T, len(dq))
	dkRaw := make([]T, len(dk))
	rmsnormBack(ps.ops, dq, lc.qRaw, S*H, hd, lp.qNorm.data, lc.rq, gp.qNorm.data, dqRaw)
	rmsnormBack(ps.ops, dk, lc.kRaw, S*KV, hd, lp.kNorm.data, lc.rk, gp.kNorm.data, dkRaw)
	dxn := make([]T, S*d)
	linearBack(ps.ops, dqRaw, S, H*hd, lc.xn, d, lp.q.data, gp.q.data, dxn)
	linearBack(ps.ops, dkRaw, S, KV*hd, lc.xn, d, lp.k.data, gp.k.data, dxn)
	linearBack(ps.ops, dv, S, KV*hd, lc.xn, d, lp.v.data, gp.v.data, dxn)
	dx := dh // the residual path
	rmsnormBack(ps.ops, dxn, lc.x, S, d, lp.inNorm.data, lc.rIn, gp.inNorm.data, dx)
	*lc = layerCache[T]{}
	return dx
}

// attentionBackward returns the gradients of the rotated q and k and of v:
// of the keys and values from position 0, those of a shared prefix
// included.
func (ps *pass[T]) attentionBackward(lc *layerCache[T], dattn []T) (dq, dk, dv []T) {
	a := ps.attnShape()
	N := a.Pos0 + a.S
	dq = make([]T, a.S*a.Heads*a.HeadDim)
	dk = make([]T, N*a.KV*a.HeadDim)
	dv = make([]T, N*a.KV*a.HeadDim)
	if a.Pos0 > 0 {
		attentionBackAt(ps.ops, dq, dk, dv, dattn, lc.q, lc.k, lc.v, lc.probs, a)
	} else {
		ps.ops.AttentionBack(dq, dk, dv, dattn, lc.q, lc.k, lc.v, lc.probs, a)
	}
	return dq, dk, dv
}

// mlpBackward accumulates the SwiGLU MLP's parameter gradients into gm and
// d loss / d x into dx, given dout for x [n, d].
func mlpBackward[T Float](o backend.Ops[T], c *Config, m, gm mlpParams[T], x []T, n, inter int, g, u, act, dout, dx []T) {
	d := c.HiddenSize
	dact := make([]T, n*inter)
	linearBack(o, dout, n, d, act, inter, m.down.data, gm.down.data, dact)
	dg := make([]T, n*inter)
	du := dact // SwiGLUBack allows du to alias dact
	o.SwiGLUBack(dg, du, dact, g, u)
	linearBack(o, dg, n, inter, x, d, m.gate.data, gm.gate.data, dx)
	linearBack(o, du, n, inter, x, d, m.up.data, gm.up.data, dx)
}

// moeBackward accumulates the MoE block's gradients (experts and router)
// and d loss / d x into dx.
func (ps *pass[T]) moeBackward(lp, gp *layerParams[T], mc *moeCache[T], x, dout, dx []T) {
	c, S := ps.c, ps.S
	d, E, K, I := c.HiddenSize, c.NumExperts, c.NumExpertsPerTok, c.MoEIntermediateSize
	dw := make([]T, S*K)
	for e := 0; e < E; e++ {
		n := len(mc.tok[e])
		if n == 0 {
			continue
		}
		dye := make([]T, n*d)
		for i, t := range mc.tok[e] {
			k := mc.slot[e][i]
			w := mc.w[t*K+k]
			do, y, dy := dout[t*d:(t+1)*d], mc.ye[e][i*d:(i+1)*d], dye[i*d:(i+1)*d]
			var dot T
			for j := range do {
				dot += do[j] * y[j]
				dy[j] = w * do[j]
			}
			dw[t*K+k] = dot
		}
		dxe := make([]T, n*d)
		mlpBackward(ps.ops, c, lp.experts[e], gp.experts[e], mc.xe[e], n, I, mc.g[e], mc.u[e], mc.act[e], dye, dxe)
		for i, t := range mc.tok[e] {
			dst, src := dx[t*d:(t+1)*d], dxe[i*d:(i+1)*d]
			for j := range dst {
				dst[j] += src[j]
			}
		}
	}
	// Combine weights -> router probabilities -> router logits.
	dlog := make([]T, S*E)
	for t := 0; t < S; t++ {
		p := mc.probs[t*E : (t+1)*E]
		sel, w, dwt := mc.sel[t*K:(t+1)*K], mc.w[t*K:(t+1)*K], dw[t*K:(t+1)*K]
		dp := dlog[t*E : (t+1)*E]
		if c.NormTopKProb {
			// w_j = p_j / s, s = sum of chosen p: dp_i = (dw_i - sum_j dw_j w_j) / s
			var s, dot T
			for j, e := range sel {
				s += p[e]
				dot += dwt[j] * w[j]
			}
			for j, e := range sel {
				dp[e] += (dwt[j] - dot) / s
			}
		} else {
			for j, e := range sel {
				dp[e] += dwt[j]
			}
		}
		var dot T
		for j := range dp {
			dot += dp[j] * p[j]
		}
		for j := range dp {
			dp[j] = p[j] * (dp[j] - dot)
		}
	}
	linearBack(ps.ops, dlog, S, E, x, d, lp.router.data, gp.router.data, dx)
}
