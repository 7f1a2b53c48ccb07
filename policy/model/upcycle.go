package model

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
)

// UpcycleOptions shape the mixture of experts Upcycle makes.
type UpcycleOptions struct {
	// Experts per layer and TopK experts per token (num_experts,
	// num_experts_per_tok). Required: 1 <= TopK <= Experts.
	Experts int `json:"experts"`
	TopK    int `json:"top_k"`
	// Noise scales each expert's copy of the dense weights by (1 + Noise*z),
	// z ~ N(0, 1) per weight, so the experts differ and the routing matters.
	// 0 keeps them identical: the MoE then computes the dense model's
	// function whatever the router picks.
	Noise float64 `json:"noise,omitempty"`
	// Seed draws the router (N(0, InitStd²), as New) and the noise.
	Seed uint64 `json:"seed,omitempty"`
}

// Upcycle returns a Qwen3-MoE copy of the dense model m (sparse upcycling,
// Komatsuzaki et al. 2022): every layer's MLP becomes a sparse MoE block of
// o.Experts copies of it, the top-o.TopK renormalised (norm_topk_prob), with
// a fresh random router. Attention, norms and embeddings are copied
// unchanged. With o.Noise 0 the new model's logprobs are the dense model's
// (the top-k weights sum to 1 over identical experts); either way it starts
// as competent as m, so RL on a MoE need not first spend an SFT on it.
func Upcycle(m *Model, o UpcycleOptions) (*Model, error) {
	c := m.cfg
	if c.NumExperts > 0 {
		return nil, fmt.Errorf("%w: upcycle: the model is already a mixture of experts (num_experts %d)", ErrConfig, c.NumExperts)
	}
	if o.Experts < 1 || o.TopK < 1 || o.TopK > o.Experts {
		return nil, fmt.Errorf("%w: upcycle: experts %d, top-k %d: want 1 <= top-k <= experts", ErrConfig, o.Experts, o.TopK)
	}
	if o.Noise < 0 {
		return nil, fmt.Errorf("%w: upcycle: noise %g is negative", ErrConfig, o.Noise)
	}
	c.ModelType, c.Extra = "qwen3_moe", maps.Clone(c.Extra)
	c.NumExperts, c.NumExpertsPerTok, c.NormTopKProb = o.Experts, o.TopK, true
	c.MoEIntermediateSize, c.DecoderSparseStep, c.MLPOnlyLayers = c.IntermediateSize, 1, nil
	if err := c.Validate(); err != nil {
		return nil, err
	}
	p := newParams[float32](c)
	byName := map[string]*tensor[float32]{}
	for _, t := range m.p.all {
		byName[t.name] = t
	}
	r := rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))
	for l := range p.layers {
		lp, dense := &p.layers[l], &m.p.layers[l]
		for _, t := range []*tensor[float32]{lp.inNorm, lp.q, lp.k, lp.v, lp.o, lp.qNorm, lp.kNorm, lp.postNorm} {
			copy(t.data, byName[t.name].data)
		}
		for i := range lp.router.data {
			lp.router.data[i] = float32(r.NormFloat64() * InitStd)
		}
		for e := range lp.experts {
			for _, pair := range [][2]*tensor[float32]{{lp.experts[e].gate, dense.mlp.gate}, {lp.experts[e].up, dense.mlp.up}, {lp.experts[e].down, dense.mlp.down}} {
				dst, src := pair[0], pair[1]
				if !slices.Equal(dst.shape, src.shape) {
					return nil, fmt.Errorf("%w: upcycle: %s is %v, the dense %s %v", ErrConfig, dst.name, dst.shape, src.name, src.shape)
				}
				for i, v := range src.data {
					dst.data[i] = v
					if o.Noise > 0 {
						dst.data[i] = v * float32(1+o.Noise*r.NormFloat64())
					}
				}
			}
		}
	}
	copy(p.embed.data, m.p.embed.data)
	copy(p.norm.data, m.p.norm.data)
	if !c.TieWordEmbeddings {
		copy(p.lmHead.data, m.p.lmHead.data)
	}
	return &Model{cfg: c, p: p, be: m.be, support: m.support}, nil
}
