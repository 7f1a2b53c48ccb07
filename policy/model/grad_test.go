package model

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/legorl/legorl/policy/backend"
)

// tinyDense and tinyMoE are the configs of the gradient checks: small enough
// for float64 finite differences over every parameter tensor.
func tinyDense(tied bool) Config {
	return Config{ModelType: "qwen3", VocabSize: 11, HiddenSize: 8, IntermediateSize: 6, NumHiddenLayers: 2,
		NumAttentionHeads: 4, NumKeyValueHeads: 2, HeadDim: 4, RMSNormEps: 1e-6, RopeTheta: 100,
		TieWordEmbeddings: tied, DecoderSparseStep: 1}
}

func tinyMoE(norm bool) Config {
	c := tinyDense(false)
	c.ModelType = "qwen3_moe"
	c.NumHiddenLayers = 3
	c.NumExperts, c.NumExpertsPerTok, c.MoEIntermediateSize, c.NormTopKProb = 4, 2, 5, norm
	c.MLPOnlyLayers = []int{1}
	return c
}

// randomParams returns float64 parameters with weights N(0, 0.4²) and norm
// weights near 1 (not exactly 1, so their gradients are not degenerate).
func randomParams[T Float](c Config, seed uint64) *params[T] {
	p := newParams[T](c)
	p.initRandom(seed, 0.4)
	r := rand.New(rand.NewPCG(seed, 7))
	for _, t := range p.all {
		if t.is1D() {
			for i := range t.data {
				t.data[i] = T(1 + 0.2*r.NormFloat64())
			}
		}
	}
	return p
}

// testSeqs returns two sequences whose completion ids are below support
// (Model.Support) and their loss weights.
func testSeqs(c Config, support int, seed uint64) ([]Sequence, [][]float32) {
	r := rand.New(rand.NewPCG(seed, 3))
	var seqs []Sequence
	var ws [][]float32
	for _, n := range [][2]int{{3, 4}, {1, 5}} {
		s := Sequence{Temperature: []float64{1, 0.7}[len(seqs)]}
		for range n[0] {
			s.Prompt = append(s.Prompt, int32(r.IntN(c.VocabSize)))
		}
		var w []float32
		for range n[1] {
			s.Completion = append(s.Completion, int32(r.IntN(support)))
			w = append(w, float32(r.IntN(7)-3)/4)
		}
		seqs, ws = append(seqs, s), append(ws, w)
	}
	return seqs, ws
}

func loss64(c *Config, p *params[float64], support int, seqs []Sequence, ws [][]float32) float64 {
	var L float64
	for i, s := range seqs {
		ps := newPass[float64](backend.CPUOps[float64]{}, c, p, support, s)
		ps.block = 2 // exercise the causal blocks of attention on short sequences
		ps.forward()
		for t, lp := range ps.logprobs {
			L += float64(ws[i][t]) * lp
		}
	}
	return L
}

func grad64(c *Config, p *params[float64], support int, seqs []Sequence, ws [][]float32) (*params[float64], []Result) {
	g := newParams[float64](*c)
	var res []Result
	for i, s := range seqs {
		ps := newPass[float64](backend.CPUOps[float64]{}, c, p, support, s)
		ps.block = 2
		ps.train, ps.w = true, ws[i]
		ps.forward()
		ps.backward(g)
		res = append(res, toResult(ps))
	}
	return g, res
}

// TestGradientCheck compares the backward pass with float64 central
// differences for elements of every parameter tensor of dense (tied and
// untied LM head) and MoE (with and without renormalised top-k, with a
// dense mlp_only layer, and with replayed routing) models: embedding,
// RMSNorms, q/k/v/o projections, q/k norms (through RoPE and attention),
// SwiGLU MLPs, routers, experts and LM head. The padded cases score only
// the first 7 of 11 ids (Model.Support below vocab_size): their LM head
// rows past the support must get no gradient.
func TestGradientCheck(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		replay  bool
		support int // 0: vocab_size
	}{
		{"dense tied", tinyDense(true), false, 0},
		{"dense untied", tinyDense(false), false, 0},
		{"moe norm_topk", tinyMoE(true), false, 0},
		{"moe raw topk", tinyMoE(false), false, 0},
		{"moe replay", tinyMoE(true), true, 0},
		{"dense tied padded", tinyDense(true), false, 7},
		{"dense untied padded", tinyDense(false), false, 7},
	}
	for ti, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.cfg
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			p := randomParams[float64](c, uint64(ti+1))
			support := cmp.Or(tc.support, c.VocabSize)
			seqs, ws := testSeqs(c, support, uint64(ti+10))
			if tc.replay {
				// Replay a routing unlike the router's own choice: the
				// lowest-probability experts, reversed.
				r := rand.New(rand.NewPCG(5, 5))
				for i := range seqs {
					S := len(seqs[i].Prompt) + len(seqs[i].Completion)
					seqs[i].Routing = make([][][]int16, S)
					for tok := range seqs[i].Routing {
						for range c.MoELayers() {
							perm := r.Perm(c.NumExperts)
							seqs[i].Routing[tok] = append(seqs[i].Routing[tok], []int16{int16(perm[0]), int16(perm[1])})
						}
					}
				}
			}
			g, res := grad64(&c, p, support, seqs, ws)
			if !c.TieWordEmbeddings {
				for j, v := range g.lmHead.data[support*c.HiddenSize:] {
					if v != 0 {
						t.Fatalf("lm_head gradient %g at row %d, past the support of %d", v, support+j/c.HiddenSize, support)
					}
				}
			}
			if tc.replay {
				for i := range seqs {
					if fmt.Sprint(res[i].Routing) != fmt.Sprint(seqs[i].Routing) {
						t.Fatalf("replayed routing not reported back")
					}
				}
			}
			r := rand.New(rand.NewPCG(uint64(ti), 9))
			const h = 1e-5
			checked := 0
			for k, pt := range p.all {
				gt := g.all[k]
				// The element with the largest gradient plus random ones.
				idx := []int{0}
				for j := range gt.data {
					if math.Abs(gt.data[j]) > math.Abs(gt.data[idx[0]]) {
						idx[0] = j
					}
				}
				for range 3 {
					idx = append(idx, r.IntN(len(pt.data)))
				}
				if math.Abs(gt.data[idx[0]]) == 0 && !strings.Contains(pt.name, "experts.") { // an expert no token chose has none
					t.Errorf("%s: gradient is all zero", pt.name)
				}
				for _, j := range idx {
					old := pt.data[j]
					pt.data[j] = old + h
					lp := loss64(&c, p, support, seqs, ws)
					pt.data[j] = old - h
					lm := loss64(&c, p, support, seqs, ws)
					pt.data[j] = old
					num := (lp - lm) / (2 * h)
					ana := gt.data[j]
					if err := math.Abs(num - ana); err > 1e-6*math.Max(1, math.Abs(num)) {
						t.Errorf("%s[%d]: backward %.10g, finite difference %.10g", pt.name, j, ana, num)
					}
					checked++
				}
			}
			t.Logf("%d elements of %d tensors agree", checked, len(p.all))
		})
	}
}

// TestBackwardFloat32 checks that the public float32 Backward (parallel
// workers, summed buffers) matches the float64 gradient.
func TestBackwardFloat32(t *testing.T) {
	c := tinyMoE(true)
	p64 := randomParams[float64](c, 42)
	p32 := randomParams[float32](c, 42)
	m := &Model{cfg: c, p: p32, be: backend.NewCPU(), support: c.VocabSize}
	seqs, ws := testSeqs(c, c.VocabSize, 43)
	seqs = append(seqs, seqs...)
	ws = append(ws, ws...)
	g64, _ := grad64(&c, p64, c.VocabSize, seqs, ws)
	g := m.NewGrads()
	if _, err := m.Backward(seqs, ws, g); err != nil {
		t.Fatal(err)
	}
	var diff, ref float64
	for i, v := range g64.flat {
		diff += (float64(g.p.flat[i]) - v) * (float64(g.p.flat[i]) - v)
		ref += v * v
	}
	if rel := math.Sqrt(diff / ref); rel > 1e-4 {
		t.Fatalf("float32 gradient differs from float64 by %.3g (relative L2)", rel)
	}
	if n := g.Norm(); math.Abs(n-math.Sqrt(ref)) > 1e-3*n {
		t.Fatalf("norm %g, want %g", n, math.Sqrt(ref))
	}
}

// TestBackwardFunc checks that weights computed from the pass's own
// logprobs (a PPO-style -A * ratio) give the gradient of Backward with the
// same weights computed from a separate forward pass, and that a wrong
// number of weights is an error that leaves the gradients untouched.
func TestBackwardFunc(t *testing.T) {
	c := tinyMoE(true)
	m := &Model{cfg: c, p: randomParams[float32](c, 50), be: backend.NewCPU(), support: c.VocabSize}
	seqs, _ := testSeqs(c, c.VocabSize, 51)
	ppo := func(i int, lp []float32) []float32 {
		w := make([]float32, len(lp))
		for t, v := range lp {
			ratio := math.Exp(float64(v) - (-2.5)) // against an old logprob of -2.5
			w[t] = float32(-float64(i+1) * ratio)
		}
		return w
	}
	res, err := m.Logprobs(seqs)
	if err != nil {
		t.Fatal(err)
	}
	var ws [][]float32
	for i, r := range res {
		ws = append(ws, ppo(i, r.Logprobs))
	}
	g1, g2 := m.NewGrads(), m.NewGrads()
	if _, err := m.Backward(seqs, ws, g1); err != nil {
		t.Fatal(err)
	}
	if _, err := m.BackwardFunc(seqs, ppo, g2); err != nil {
		t.Fatal(err)
	}
	if n1, n2 := g1.Norm(), g2.Norm(); n1 == 0 || math.Abs(n1-n2) > 1e-6*n1 {
		t.Fatalf("norms %v and %v", n1, n2)
	}
	g3 := m.NewGrads()
	_, err = m.BackwardFunc(seqs, func(int, []float32) []float32 { return []float32{1} }, g3)
	if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "has 1 weights for") || g3.Norm() != 0 {
		t.Fatalf("got %v, norm %v", err, g3.Norm())
	}
}
