package model

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/legorl/legorl/policy/backend"
)

// stepState is what a sequence leaves after some Steps: the logits after
// its last token, its routing and its cache.
type stepState struct {
	logits []float32
	routes [][][]int16
	cache  *Cache
}

// sameBits reports the first element where a and b differ bitwise.
func sameBits(a, b []float32) error {
	if len(a) != len(b) {
		return fmt.Errorf("lengths %d and %d", len(a), len(b))
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return fmt.Errorf("element %d: %g vs %g", i, a[i], b[i])
		}
	}
	return nil
}

// checkSame requires two states to be bitwise identical: logits, routing
// and every layer's keys and values.
func checkSame(t *testing.T, what string, got, want stepState) {
	t.Helper()
	if err := sameBits(got.logits, want.logits); err != nil {
		t.Errorf("%s: logits differ: %v", what, err)
	}
	if fmt.Sprint(got.routes) != fmt.Sprint(want.routes) {
		t.Errorf("%s: routing differs", what)
	}
	if got.cache.Len() != want.cache.Len() {
		t.Fatalf("%s: cache holds %d positions, want %d", what, got.cache.Len(), want.cache.Len())
	}
	for l := range got.cache.kv.k {
		if err := sameBits(got.cache.kv.k[l], want.cache.kv.k[l]); err != nil {
			t.Errorf("%s: layer %d keys differ: %v", what, l, err)
		}
		if err := sameBits(got.cache.kv.v[l], want.cache.kv.v[l]); err != nil {
			t.Errorf("%s: layer %d values differ: %v", what, l, err)
		}
	}
}

func randomIDs(r *rand.Rand, n, vocab int) []int32 {
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(r.IntN(vocab))
	}
	return ids
}

// TestStepInvariant runs one token sequence through Step in every way the
// engine can (the whole prompt at once, chunks, one token at a time alone,
// one token at a time in a batch with other sequences at other positions
// and in other batch slots, a truncated and re-extended cache) and
// requires bitwise identical logits, routing and KV caches; then checks
// the logits against the full forward pass within float32 tolerance.
func TestStepInvariant(t *testing.T) {
	for _, name := range []string{"tiny.json", "tiny_moe.json"} {
		t.Run(name, func(t *testing.T) {
			c, err := LoadConfig(filepath.Join("testdata", name))
			if err != nil {
				t.Fatal(err)
			}
			m, err := New(c, 3)
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(5, 6))
			ids := randomIDs(r, 90, c.VocabSize)
			// run feeds ids in the chunk sizes sizes(i), batching each chunk
			// with the given companions.
			run := func(sizes func(i int) int, companions int) stepState {
				t.Helper()
				st := stepState{cache: m.NewCache()}
				others := make([]*Cache, companions)
				for i := range others {
					others[i] = m.NewCache()
					if _, err := m.Step([]StepInput{{Cache: others[i], IDs: randomIDs(r, 1+r.IntN(40), c.VocabSize)}}); err != nil {
						t.Fatal(err)
					}
				}
				for pos, i := 0, 0; pos < len(ids); i++ {
					end := min(pos+sizes(i), len(ids))
					in := []StepInput{}
					for _, o := range others {
						in = append(in, StepInput{Cache: o, IDs: randomIDs(r, 1+r.IntN(3), c.VocabSize), SkipLogits: r.IntN(2) == 0})
					}
					slot := r.IntN(len(in) + 1)
					in = append(in[:slot], append([]StepInput{{Cache: st.cache, IDs: ids[pos:end]}}, in[slot:]...)...)
					out, err := m.Step(in)
					if err != nil {
						t.Fatal(err)
					}
					st.logits = out[slot].Logits
					st.routes = append(st.routes, out[slot].Routing...)
					pos = end
				}
				return st
			}
			whole := run(func(int) int { return len(ids) }, 0)
			if c.NumExperts > 0 && len(whole.routes) != len(ids) {
				t.Fatalf("%d routing entries for %d tokens", len(whole.routes), len(ids))
			}
			cases := []struct {
				name       string
				sizes      func(i int) int
				companions int
			}{
				{"chunks of 7", func(int) int { return 7 }, 0},
				{"chunks of 33", func(int) int { return 33 }, 0},
				{"decode alone", func(int) int { return 1 }, 0},
				{"decode in a batch of 8", func(int) int { return 1 }, 7},
				{"ragged chunks in a batch of 4", func(i int) int { return 1 + i*5%11 }, 3},
			}
			for _, tc := range cases {
				checkSame(t, tc.name, run(tc.sizes, tc.companions), whole)
			}
			// Prefix reuse: truncate and extend again.
			re := run(func(int) int { return len(ids) }, 0)
			if err := re.cache.Truncate(40); err != nil {
				t.Fatal(err)
			}
			if re.routes != nil {
				re.routes = re.routes[:40]
			}
			out, err := m.Step([]StepInput{{Cache: re.cache, IDs: ids[40:]}})
			if err != nil {
				t.Fatal(err)
			}
			re.logits, re.routes = out[0].Logits, append(re.routes, out[0].Routing...)
			checkSame(t, "truncated and re-extended", re, whole)

			// Agreement with the full forward pass, logprobs and routing.
			next := int32(17)
			full, err := m.Logprobs([]Sequence{{Prompt: ids, Completion: []int32{next}}})
			if err != nil {
				t.Fatal(err)
			}
			if d := math.Abs(logSoftmaxAt(whole.logits, next) - float64(full[0].Logprobs[0])); d > 1e-5 {
				t.Errorf("logprob differs from the full forward pass by %.3g", d)
			}
			if c.NumExperts > 0 && fmt.Sprint(whole.routes) != fmt.Sprint(full[0].Routing[:len(ids)]) {
				t.Error("routing differs from the full forward pass")
			}
		})
	}
}

// TestStepMatchesLogprobsSmall checks Step against the full pass on the
// small gradient-check configs, whose odd sizes take Dot's scalar tails.
func TestStepMatchesLogprobsSmall(t *testing.T) {
	for name, c := range map[string]Config{"dense": tinyDense(true), "moe": tinyMoE(true)} {
		t.Run(name, func(t *testing.T) {
			m := &Model{cfg: c, p: randomParams[float32](c, 61), be: backend.NewCPU(), support: c.VocabSize}
			ids := randomIDs(rand.New(rand.NewPCG(1, 1)), 40, c.VocabSize)
			full, err := m.Logprobs([]Sequence{{Prompt: ids[:1], Completion: ids[1:]}})
			if err != nil {
				t.Fatal(err)
			}
			cache := m.NewCache()
			var routes [][][]int16
			for i := range len(ids) - 1 {
				out, err := m.Step([]StepInput{{Cache: cache, IDs: ids[i : i+1]}})
				if err != nil {
					t.Fatal(err)
				}
				routes = append(routes, out[0].Routing...)
				if d := math.Abs(logSoftmaxAt(out[0].Logits, ids[i+1]) - float64(full[0].Logprobs[i])); d > 2e-5 {
					t.Fatalf("position %d: logprob differs by %.3g", i, d)
				}
			}
			if c.NumExperts > 0 && fmt.Sprint(routes) != fmt.Sprint(full[0].Routing[:len(ids)-1]) {
				t.Error("routing differs from the full forward pass")
			}
		})
	}
}

func TestStepErrors(t *testing.T) {
	c := tinyDense(true)
	c.MaxPositionEmbeddings = 8
	m := &Model{cfg: c, p: randomParams[float32](c, 1), be: backend.NewCPU(), support: c.VocabSize}
	other := &Model{cfg: c, p: m.p, be: backend.NewCPU(), support: c.VocabSize}
	a := m.NewCache()
	if _, err := m.Step([]StepInput{{Cache: a, IDs: []int32{1, 2, 3}}}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		in   []StepInput
	}{
		{"nil cache", []StepInput{{IDs: []int32{1}}}},
		{"other model", []StepInput{{Cache: other.NewCache(), IDs: []int32{1}}}},
		{"twice", []StepInput{{Cache: a, IDs: []int32{1}}, {Cache: a, IDs: []int32{2}}}},
		{"no tokens", []StepInput{{Cache: m.NewCache()}}},
		{"bad id", []StepInput{{Cache: m.NewCache(), IDs: []int32{int32(c.VocabSize)}}}},
		{"past the context", []StepInput{{Cache: a, IDs: make([]int32, 6)}}},
	}
	for _, tc := range tests {
		if _, err := m.Step(tc.in); !errors.Is(err, ErrInput) {
			t.Errorf("%s: error %v, want ErrInput", tc.name, err)
		}
	}
	if a.Len() != 3 {
		t.Errorf("a failed step changed the cache: %d positions", a.Len())
	}
	if _, err := m.Step([]StepInput{{Cache: a, IDs: make([]int32, 5)}}); err != nil {
		t.Errorf("filling the context exactly: %v", err)
	}
}
