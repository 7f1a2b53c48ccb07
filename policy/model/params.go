package model

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Float is the element type of the model's tensors.
type Float interface{ ~float32 | ~float64 }

// tensor is one named parameter tensor: a view into the flat buffer of its
// params.
type tensor[T Float] struct {
	name  string
	shape []int
	data  []T
}

func (t *tensor[T]) is1D() bool { return len(t.shape) == 1 }

// expertParams are one expert's SwiGLU MLP.
type mlpParams[T Float] struct {
	gate, up, down *tensor[T] // [inter, hidden], [inter, hidden], [hidden, inter]
}

type layerParams[T Float] struct {
	inNorm, postNorm *tensor[T] // [hidden]
	q, k, v, o       *tensor[T] // [H*hd, hidden], [KV*hd, hidden] x2, [hidden, H*hd]
	qNorm, kNorm     *tensor[T] // [hd]
	moe              bool
	mlp              mlpParams[T]   // dense layers
	router           *tensor[T]     // [experts, hidden], MoE layers
	experts          []mlpParams[T] // MoE layers
}

// params holds every parameter of a model (or, with the same layout, its
// gradient) in one flat buffer, listed in canonical order in all.
type params[T Float] struct {
	flat   []T
	all    []*tensor[T]
	embed  *tensor[T] // [vocab, hidden]
	layers []layerParams[T]
	norm   *tensor[T] // [hidden]
	lmHead *tensor[T] // [vocab, hidden]; the embedding when tied
}

// newParams allocates zeroed parameters with HF names and shapes for c.
func newParams[T Float](c Config) *params[T] {
	p := &params[T]{}
	var specs []*tensor[T]
	add := func(name string, shape ...int) *tensor[T] {
		t := &tensor[T]{name: name, shape: shape}
		specs = append(specs, t)
		return t
	}
	d, hd := c.HiddenSize, c.HeadDim
	p.embed = add("model.embed_tokens.weight", c.VocabSize, d)
	p.layers = make([]layerParams[T], c.NumHiddenLayers)
	for l := range p.layers {
		lp := &p.layers[l]
		pre := fmt.Sprintf("model.layers.%d.", l)
		lp.inNorm = add(pre+"input_layernorm.weight", d)
		lp.q = add(pre+"self_attn.q_proj.weight", c.NumAttentionHeads*hd, d)
		lp.k = add(pre+"self_attn.k_proj.weight", c.NumKeyValueHeads*hd, d)
		lp.v = add(pre+"self_attn.v_proj.weight", c.NumKeyValueHeads*hd, d)
		lp.o = add(pre+"self_attn.o_proj.weight", d, c.NumAttentionHeads*hd)
		lp.qNorm = add(pre+"self_attn.q_norm.weight", hd)
		lp.kNorm = add(pre+"self_attn.k_norm.weight", hd)
		lp.postNorm = add(pre+"post_attention_layernorm.weight", d)
		mlp := func(pre string, inter int) mlpParams[T] {
			return mlpParams[T]{
				gate: add(pre+"gate_proj.weight", inter, d),
				up:   add(pre+"up_proj.weight", inter, d),
				down: add(pre+"down_proj.weight", d, inter),
			}
		}
		if c.IsMoE(l) {
			lp.moe = true
			lp.router = add(pre+"mlp.gate.weight", c.NumExperts, d)
			lp.experts = make([]mlpParams[T], c.NumExperts)
			for e := range lp.experts {
				lp.experts[e] = mlp(fmt.Sprintf("%smlp.experts.%d.", pre, e), c.MoEIntermediateSize)
			}
		} else {
			lp.mlp = mlp(pre+"mlp.", c.IntermediateSize)
		}
	}
	p.norm = add("model.norm.weight", d)
	if c.TieWordEmbeddings {
		p.lmHead = p.embed
	} else {
		p.lmHead = add("lm_head.weight", c.VocabSize, d)
	}
	n := 0
	for _, t := range specs {
		n += numel(t.shape)
	}
	p.flat = make([]T, n)
	off := 0
	for _, t := range specs {
		k := numel(t.shape)
		t.data = p.flat[off : off+k : off+k]
		off += k
	}
	p.all = specs
	return p
}

func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// initRandom fills matrices with N(0, std²) and norm weights with 1, from a
// deterministic generator seeded by seed.
func (p *params[T]) initRandom(seed uint64, std float64) {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	for _, t := range p.all {
		if t.is1D() {
			for i := range t.data {
				t.data[i] = 1
			}
			continue
		}
		for i := range t.data {
			t.data[i] = T(r.NormFloat64() * std)
		}
	}
}

// zero sets every value to 0.
func (p *params[T]) zero() { clear(p.flat) }

// sumSquares returns the sum of squares of every value, in float64.
func (p *params[T]) sumSquares() float64 {
	var s float64
	for _, v := range p.flat {
		s += float64(v) * float64(v)
	}
	return s
}

// addFrom adds q (same layout) into p.
func (p *params[T]) addFrom(q *params[T]) {
	for i, v := range q.flat {
		p.flat[i] += v
	}
}

// finite reports the first tensor holding a NaN or infinity, if any.
func (p *params[T]) nonFinite() string {
	for _, t := range p.all {
		for _, v := range t.data {
			if f := float64(v); math.IsNaN(f) || math.IsInf(f, 0) {
				return t.name
			}
		}
	}
	return ""
}
