package model

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/legorl/legorl/policy/backend"
)

func TestSharedPrefix(t *testing.T) {
	seq := func(prompt ...int32) Sequence { return Sequence{Prompt: prompt, Completion: []int32{9}} }
	routed := func(s Sequence, experts ...int16) Sequence {
		for _, e := range experts {
			s.Routing = append(s.Routing, [][]int16{{e, 0}})
		}
		return s
	}
	tests := []struct {
		name string
		seqs []Sequence
		want int
	}{
		{"empty batch", nil, 0},
		{"one sequence: all but its last prompt token", []Sequence{seq(1, 2, 3, 4)}, 3},
		{"same prompts", []Sequence{seq(1, 2, 3), seq(1, 2, 3), seq(1, 2, 3)}, 2},
		{"diverging", []Sequence{seq(1, 2, 3, 4, 5), seq(1, 2, 7, 4, 5), seq(1, 2, 3, 4)}, 2},
		{"a prompt that is the start of another", []Sequence{seq(1, 2, 3, 4, 5, 6), seq(1, 2, 3)}, 2},
		{"one-token prompt", []Sequence{seq(1, 2, 3), seq(1)}, 0},
		{"first token differs", []Sequence{seq(1, 2, 3), seq(2, 2, 3)}, 0},
		{"same replayed routing", []Sequence{routed(seq(1, 2, 3), 1, 2, 3, 4), routed(seq(1, 2, 3), 1, 2, 3, 4)}, 2},
		{"routing differs at token 1", []Sequence{routed(seq(1, 2, 3), 1, 2, 3, 4), routed(seq(1, 2, 3), 1, 3, 3, 4)}, 1},
		{"routing in one sequence only", []Sequence{routed(seq(1, 2, 3), 1, 2, 3, 4), seq(1, 2, 3)}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := sharedPrefix(tc.seqs); got != tc.want {
				t.Errorf("sharedPrefix = %d, want %d", got, tc.want)
			}
		})
	}
}

// prefixBatch is a batch shape of the shared-prefix tests: every sequence
// starts with the same prefix tokens, then its own prompt tail and
// completion.
type prefixBatch struct {
	name   string
	prefix int
	tails  [][2]int // per sequence: own prompt tokens after the prefix, completion tokens
}

var prefixBatches = []prefixBatch{
	{"one sequence", 6, [][2]int{{1, 4}}},
	{"the whole prompt shared", 5, [][2]int{{0, 3}, {0, 5}, {0, 1}}},
	{"a prompt inside another", 4, [][2]int{{0, 3}, {3, 2}, {1, 4}}},
	{"diverging tails", 7, [][2]int{{2, 3}, {1, 6}, {4, 1}, {3, 3}, {2, 0}}},
}

// publicPrefixBatches adds to prefixBatches one with sequences past the
// attention block (64 rows), for the float32 tests of the public methods.
var publicPrefixBatches = append(prefixBatches[:len(prefixBatches):len(prefixBatches)],
	prefixBatch{"past the attention block", 70, [][2]int{{5, 80}, {66, 10}, {0, 70}}})

// makePrefixBatch draws the batch's tokens, temperatures and loss weights
// (and replayed routing when replay is set).
func makePrefixBatch(c Config, b prefixBatch, replay bool, seed uint64) ([]Sequence, [][]float32) {
	r := rand.New(rand.NewPCG(seed, 11))
	tok := func() int32 { return int32(r.IntN(c.VocabSize)) }
	var prefix []int32
	for range b.prefix {
		prefix = append(prefix, tok())
	}
	var prefixRoutes [][][]int16
	route := func() [][]int16 {
		var layers [][]int16
		for range c.MoELayers() {
			perm := r.Perm(c.NumExperts)
			layers = append(layers, []int16{int16(perm[0]), int16(perm[1])})
		}
		return layers
	}
	if replay {
		for range prefix {
			prefixRoutes = append(prefixRoutes, route())
		}
	}
	var seqs []Sequence
	var ws [][]float32
	for i, tail := range b.tails {
		s := Sequence{Prompt: append([]int32(nil), prefix...), Temperature: []float64{1, 0.7, 1.3}[i%3]}
		for range tail[0] {
			s.Prompt = append(s.Prompt, tok())
		}
		var w []float32
		for range tail[1] {
			s.Completion = append(s.Completion, tok())
			w = append(w, float32(r.IntN(7)-3)/4)
		}
		if replay {
			s.Routing = append([][][]int16(nil), prefixRoutes...)
			for range len(s.Prompt) + len(s.Completion) - len(prefix) {
				s.Routing = append(s.Routing, route())
			}
		}
		seqs, ws = append(seqs, s), append(ws, w)
	}
	return seqs, ws
}

var prefixConfigs = []struct {
	name   string
	cfg    Config
	replay bool
}{
	{"dense tied", tinyDense(true), false},
	{"dense untied", tinyDense(false), false},
	{"moe", tinyMoE(true), false},
	{"moe raw topk", tinyMoE(false), false},
	{"moe replay", tinyMoE(true), true},
}

// relL2 returns |a - b| / |b| over two slices.
func relL2[T, U Float](a []T, b []U) float64 {
	var diff, ref float64
	for i, v := range b {
		d := float64(a[i]) - float64(v)
		diff += d * d
		ref += float64(v) * float64(v)
	}
	if ref == 0 {
		return math.Sqrt(diff)
	}
	return math.Sqrt(diff / ref)
}

// TestSharedBackwardFloat64 runs the shared-prefix passes in float64 with
// short attention blocks (so the prefix's and the suffixes' causal blocks
// are exercised) on one and on two workers, and requires the logprobs,
// routing and every parameter's gradient of the unshared passes to 1e-12:
// the algebra is the same, only the rounding differs.
func TestSharedBackwardFloat64(t *testing.T) {
	for ci, tc := range prefixConfigs {
		for bi, b := range prefixBatches {
			t.Run(tc.name+"/"+b.name, func(t *testing.T) {
				c := tc.cfg
				p := randomParams[float64](c, uint64(ci+1))
				seqs, ws := makePrefixBatch(c, b, tc.replay, uint64(10*ci+bi))
				n := sharedPrefix(seqs)
				least := b.prefix // or more, where random tails agree
				for _, s := range seqs {
					least = min(least, len(s.Prompt)-1)
				}
				if n < least || n == 0 {
					t.Fatalf("shared prefix %d, want at least %d", n, least)
				}
				want, wantRes := grad64(&c, p, c.VocabSize, seqs, ws)
				for _, workers := range []int{1, 2} {
					bufs := make([]*params[float64], workers)
					for w := range bufs {
						bufs[w] = newParams[float64](c)
					}
					weights := func(i int, _ []float32) []float32 { return ws[i] }
					res, err := sharedBackward[float64](backend.CPUOps[float64]{}, &c, p, c.VocabSize, seqs, n, 2, weights, bufs)
					if err != nil {
						t.Fatal(err)
					}
					for _, buf := range bufs[1:] {
						bufs[0].addFrom(buf)
					}
					for i := range seqs {
						if e := relL2(res[i].Logprobs, wantRes[i].Logprobs); e > 1e-6 { // float32 results
							t.Errorf("%d workers: sequence %d: logprobs differ by %.3g", workers, i, e)
						}
						if fmt.Sprint(res[i].Routing) != fmt.Sprint(wantRes[i].Routing) {
							t.Errorf("%d workers: sequence %d: routing %v, want %v", workers, i, res[i].Routing, wantRes[i].Routing)
						}
					}
					for k, tt := range want.all {
						if e := relL2(bufs[0].all[k].data, tt.data); e > 1e-12 {
							t.Errorf("%d workers: %s: gradient differs by %.3g (relative L2)", workers, tt.name, e)
						}
					}
				}
			})
		}
	}
}

// TestBackwardSharedPrefix compares the public float32 BackwardSharedPrefix
// with BackwardFunc, dense and MoE, on the test batches and on one with
// sequences past the attention block (64 rows): logprobs, routing and
// gradients agree to float32 rounding. Repeated calls are bitwise
// identical with more workers than cores.
func TestBackwardSharedPrefix(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(3))
	for ci, tc := range prefixConfigs {
		for bi, b := range publicPrefixBatches {
			t.Run(tc.name+"/"+b.name, func(t *testing.T) {
				c := tc.cfg
				m := &Model{cfg: c, p: randomParams[float32](c, uint64(ci+20)), be: backend.NewCPU(), support: c.VocabSize}
				seqs, ws := makePrefixBatch(c, b, tc.replay, uint64(10*ci+bi+100))
				weights := func(i int, _ []float32) []float32 { return ws[i] }
				want, got, again := m.NewGrads(), m.NewGrads(), m.NewGrads()
				wantRes, err := m.BackwardFunc(seqs, weights, want)
				if err != nil {
					t.Fatal(err)
				}
				res, err := m.BackwardSharedPrefix(seqs, weights, got)
				if err != nil {
					t.Fatal(err)
				}
				for i := range seqs {
					for k, v := range res[i].Logprobs {
						if w := wantRes[i].Logprobs[k]; math.Abs(float64(v-w)) > 2e-5*math.Max(1, math.Abs(float64(w))) {
							t.Errorf("sequence %d token %d: logprob %g, want %g", i, k, v, w)
						}
					}
					if fmt.Sprint(res[i].Routing) != fmt.Sprint(wantRes[i].Routing) {
						t.Errorf("sequence %d: routing differs", i)
					}
				}
				for k, tt := range want.p.all {
					if e := relL2(got.p.all[k].data, tt.data); e > 1e-5 {
						t.Errorf("%s: gradient differs by %.3g (relative L2)", tt.name, e)
					}
				}
				if _, err := m.BackwardSharedPrefix(seqs, weights, again); err != nil {
					t.Fatal(err)
				}
				if err := sameBits(got.p.flat, again.p.flat); err != nil {
					t.Errorf("a second call differs: %v", err)
				}
			})
		}
	}
}

// TestBackwardSharedPrefixErrors: a wrong number of weights is an error
// that leaves the gradients untouched, and a batch with nothing in common
// takes BackwardFunc's path.
func TestBackwardSharedPrefixErrors(t *testing.T) {
	c := tinyMoE(true)
	m := &Model{cfg: c, p: randomParams[float32](c, 60), be: backend.NewCPU(), support: c.VocabSize}
	seqs, ws := makePrefixBatch(c, prefixBatches[3], false, 61)
	g := m.NewGrads()
	_, err := m.BackwardSharedPrefix(seqs, func(int, []float32) []float32 { return []float32{1} }, g)
	if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "has 1 weights for") || g.Norm() != 0 {
		t.Fatalf("got %v, norm %v", err, g.Norm())
	}
	seqs[1].Prompt[0] = (seqs[0].Prompt[0] + 1) % int32(c.VocabSize)
	weights := func(i int, _ []float32) []float32 { return ws[i] }
	g1, g2 := m.NewGrads(), m.NewGrads()
	if _, err := m.BackwardFunc(seqs, weights, g1); err != nil {
		t.Fatal(err)
	}
	if _, err := m.BackwardSharedPrefix(seqs, weights, g2); err != nil {
		t.Fatal(err)
	}
	if err := sameBits(g1.p.flat, g2.p.flat); err != nil {
		t.Fatalf("no shared prefix: gradient differs from BackwardFunc's: %v", err)
	}
}

// TestLogprobsSharedPrefix compares LogprobsSharedPrefix with Logprobs,
// dense and MoE, on the test batches and on one past the attention block:
// logprobs agree to float32 rounding and routing is the same; a batch with
// nothing in common gives Logprobs' results bit for bit.
func TestLogprobsSharedPrefix(t *testing.T) {
	for ci, tc := range prefixConfigs {
		for bi, b := range publicPrefixBatches {
			t.Run(tc.name+"/"+b.name, func(t *testing.T) {
				c := tc.cfg
				m := &Model{cfg: c, p: randomParams[float32](c, uint64(ci+40)), be: backend.NewCPU(), support: c.VocabSize}
				seqs, _ := makePrefixBatch(c, b, tc.replay, uint64(10*ci+bi+200))
				want, err := m.Logprobs(seqs)
				if err != nil {
					t.Fatal(err)
				}
				got, err := m.LogprobsSharedPrefix(seqs)
				if err != nil {
					t.Fatal(err)
				}
				for i := range seqs {
					if len(got[i].Logprobs) != len(seqs[i].Completion) {
						t.Fatalf("sequence %d: %d logprobs for %d tokens", i, len(got[i].Logprobs), len(seqs[i].Completion))
					}
					for k, v := range got[i].Logprobs {
						if w := want[i].Logprobs[k]; math.Abs(float64(v-w)) > 2e-5*math.Max(1, math.Abs(float64(w))) {
							t.Errorf("sequence %d token %d: logprob %g, want %g", i, k, v, w)
						}
					}
					if fmt.Sprint(got[i].Routing) != fmt.Sprint(want[i].Routing) {
						t.Errorf("sequence %d: routing differs", i)
					}
				}
			})
		}
	}
	c := tinyDense(true)
	m := &Model{cfg: c, p: randomParams[float32](c, 70), be: backend.NewCPU(), support: c.VocabSize}
	seqs, _ := makePrefixBatch(c, prefixBatches[3], false, 71)
	seqs[1].Prompt[0] = (seqs[0].Prompt[0] + 1) % int32(c.VocabSize)
	want, _ := m.Logprobs(seqs)
	got, err := m.LogprobsSharedPrefix(seqs)
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("no shared prefix: %v, results differ from Logprobs'", err)
	}
	seqs[0].Completion = append(seqs[0].Completion, int32(c.VocabSize))
	if _, err := m.LogprobsSharedPrefix(seqs); !errors.Is(err, ErrInput) {
		t.Errorf("a token past the vocabulary: %v, want ErrInput", err)
	}
}
