package engine

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// uniform returns a number in [0, 1) that depends only on the seed and the
// token's index in the generation. It is counter-based (splitmix64's
// finaliser over seed-derived counters), not a stream shared between
// requests, so no scheduling, batching or concurrency changes a draw.
func uniform(seed uint64, index int) float64 {
	const gamma = 0x9e3779b97f4a7c15
	z := mix64(mix64(seed+gamma) + uint64(index+1)*gamma)
	return float64(z>>11) * 0x1p-53
}

// mix64 is splitmix64's output function, a bijection that scrambles bits.
func mix64(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// sampler holds the scratch buffers of sample, reused across calls; one
// per goroutine.
type sampler struct {
	w    []float64
	cand []int32
}

// sample draws a token from logits under normalized settings s, using the
// uniform number u in [0, 1). The distribution is softmax(logits / T),
// cut to the TopK most likely tokens, then to the smallest prefix (most
// likely first) whose probability reaches TopP, and renormalised; the
// logprob returned is that of the token under exactly this distribution.
// All arithmetic after the logits is float64. Ties in probability are
// ordered by token id, so the cut is deterministic. Without a cut u walks
// the tokens in id order, with one in the cut's order.
func (sm *sampler) sample(logits []float32, s Sampling, u float64) (int32, float64, error) {
	mx := math.Inf(-1)
	for i, v := range logits {
		f := float64(v)
		if f-f != 0 { // NaN or ±Inf
			return 0, 0, fmt.Errorf("%w: logit %d of %d is %g", ErrBadOutput, i, len(logits), v)
		}
		mx = max(mx, f)
	}
	// Weights exp((z - max) / T): at most 1 for any temperature, so a small
	// temperature underflows to 0 weights, never overflows.
	weight := func(i int32) float64 { return math.Exp((float64(logits[i]) - mx) / s.Temperature) }
	cand := sm.cand[:0]
	for i := range logits {
		cand = append(cand, int32(i))
	}
	sm.cand = cand
	if s.TopK > 0 || s.TopP < 1 {
		slices.SortFunc(cand, func(a, b int32) int {
			if c := cmp.Compare(logits[b], logits[a]); c != 0 {
				return c
			}
			return cmp.Compare(a, b)
		})
		if s.TopK > 0 && s.TopK < len(cand) {
			cand = cand[:s.TopK]
		}
	}
	w := sm.w[:0]
	var sum float64
	for _, i := range cand {
		w = append(w, weight(i))
		sum += w[len(w)-1]
	}
	sm.w = w
	if s.TopP < 1 {
		var cum float64
		for j := range cand {
			if cum += w[j] / sum; cum >= s.TopP {
				cand, w = cand[:j+1], w[:j+1]
				break
			}
		}
		sum = 0
		for _, v := range w {
			sum += v
		}
	}
	// acc reaches sum exactly (same additions in the same order) and
	// u*sum < sum, so the walk always stops at a token of positive weight.
	target, acc, pick := u*sum, 0.0, len(cand)-1
	for j, v := range w {
		if acc += v; acc > target {
			pick = j
			break
		}
	}
	return cand[pick], math.Log(w[pick]) - math.Log(sum), nil
}
