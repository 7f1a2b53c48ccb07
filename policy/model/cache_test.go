package model

import (
	"fmt"
	"math"
	"testing"

	"github.com/legorl/legorl/policy/backend"
)

func logSoftmaxAt(z []float32, target int32) float64 {
	mx := math.Inf(-1)
	for _, v := range z {
		mx = math.Max(mx, float64(v))
	}
	var s float64
	for _, v := range z {
		s += math.Exp(float64(v) - mx)
	}
	return float64(z[target]) - mx - math.Log(s)
}

// TestCacheMatchesFullForward decodes with the KV cache one token at a time
// and in chunks (crossing attention row blocks), truncates to reuse a
// prefix, and requires the full forward pass's logprobs and routing.
func TestCacheMatchesFullForward(t *testing.T) {
	for name, c := range map[string]Config{"dense": tinyDense(true), "moe": tinyMoE(true)} {
		t.Run(name, func(t *testing.T) {
			m := &Model{cfg: c, p: randomParams[float32](c, 60), be: backend.NewCPU(), support: c.VocabSize}
			var ids []int32
			for i := range 150 {
				ids = append(ids, int32((i*7+3)%c.VocabSize))
			}
			P := 5
			full, err := m.Logprobs([]Sequence{{Prompt: ids[:P], Completion: ids[P:]}})
			if err != nil {
				t.Fatal(err)
			}
			for _, chunk := range []int{1, 3, 70} {
				cache := m.NewCache()
				var routes [][][]int16
				logits, r, err := cache.Extend(ids[:P], nil)
				if err != nil {
					t.Fatal(err)
				}
				routes = append(routes, r...)
				var worst float64
				pos := P
				for pos < len(ids) {
					end := min(pos+chunk, len(ids))
					worst = math.Max(worst, math.Abs(logSoftmaxAt(logits, ids[pos])-float64(full[0].Logprobs[pos-P])))
					if pos == 40 && chunk == 3 {
						// Prefix reuse: drop 10 positions and recompute them.
						if err := cache.Truncate(30); err != nil {
							t.Fatal(err)
						}
						routes = routes[:30]
						if logits, r, err = cache.Extend(ids[30:pos], nil); err != nil {
							t.Fatal(err)
						}
						routes = append(routes, r...)
						worst = math.Max(worst, math.Abs(logSoftmaxAt(logits, ids[pos])-float64(full[0].Logprobs[pos-P])))
					}
					if logits, r, err = cache.Extend(ids[pos:end], nil); err != nil {
						t.Fatal(err)
					}
					routes = append(routes, r...)
					// Logits after a chunk predict the token after it; the
					// chunk's inner tokens were checked by the full pass.
					pos = end
				}
				if cache.Len() != len(ids) {
					t.Fatalf("cache holds %d positions, want %d", cache.Len(), len(ids))
				}
				if worst > 2e-5 {
					t.Errorf("chunk %d: max logprob difference %.3g", chunk, worst)
				}
				if c.NumExperts > 0 && fmt.Sprint(routes) != fmt.Sprint(full[0].Routing) {
					t.Errorf("chunk %d: routing differs from the full pass", chunk)
				}
			}
			if err := m.NewCache().Truncate(1); err == nil {
				t.Error("truncating past the end did not fail")
			}
			if _, _, err := m.NewCache().Extend(nil, nil); err == nil {
				t.Error("extending with no tokens did not fail")
			}
		})
	}
}

// TestCacheFork checks that a fork holds the prefix (a step from it gives
// the bits of the same step on an unforked cache), that the two caches
// then grow independently, and that forks past the end are errors.
func TestCacheFork(t *testing.T) {
	c := tinyMoE(true)
	m := &Model{cfg: c, p: randomParams[float32](c, 61), be: backend.NewCPU()}
	ids := []int32{3, 1, 4, 1, 5, 9, 2, 6, 5, 3}
	src, twin := m.NewCache(), m.NewCache()
	for _, cc := range []*Cache{src, twin} {
		if _, err := m.Step([]StepInput{{Cache: cc, IDs: ids[:7]}}); err != nil {
			t.Fatal(err)
		}
	}
	f, err := src.Fork(5)
	if err != nil || f.Len() != 5 || src.Len() != 7 {
		t.Fatalf("fork: %v, lengths %d and %d", err, f.Len(), src.Len())
	}
	ref := m.NewCache()
	for _, in := range [][]StepInput{{{Cache: f, IDs: ids[5:]}}, {{Cache: ref, IDs: ids}}} {
		if _, err := m.Step(in); err != nil {
			t.Fatal(err)
		}
	}
	step := func(cc *Cache) StepOutput {
		out, err := m.Step([]StepInput{{Cache: cc, IDs: []int32{7}}})
		if err != nil {
			t.Fatal(err)
		}
		return out[0]
	}
	a, b := step(f), step(ref)
	if fmt.Sprint(a.Logits) != fmt.Sprint(b.Logits) || fmt.Sprint(a.Routing) != fmt.Sprint(b.Routing) {
		t.Fatal("a step from a fork differs from the same step on its own cache")
	}
	if fmt.Sprint(step(src).Logits) != fmt.Sprint(step(twin).Logits) {
		t.Fatal("growing the fork changed the cache it came from")
	}
	if _, err := src.Fork(9); err == nil {
		t.Error("a fork past the cache's end: no error")
	}
}
