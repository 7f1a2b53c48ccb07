package model

import (
	"math"
	"sort"
)

// route turns one token's router logits into its experts and combine
// weights. row becomes the softmax over all experts (max-subtracted, summed
// in float64); sel gets the k = len(sel) experts of highest probability in
// descending order (ties to the lower index), or the replayed ones when
// replay is non-nil; w gets their probabilities, divided by their sum when
// norm (norm_topk_prob). order is scratch of len(row). It returns the
// chosen experts as a routing record.
//
// The trainer's forward and the engine's step both route through it: the
// train-inference gate compares their logprobs, so the two may not drift.
func route[T Float](row []T, replay []int16, norm bool, order, sel []int, w []T) []int16 {
	mx := row[0]
	for _, v := range row {
		mx = max(mx, v)
	}
	var sum float64
	for j, v := range row {
		e := math.Exp(float64(v - mx))
		row[j] = T(e)
		sum += e
	}
	for j := range row {
		row[j] = T(float64(row[j]) / sum)
	}
	if replay != nil {
		for j, e := range replay {
			sel[j] = int(e)
		}
	} else {
		for j := range order {
			order[j] = j
		}
		sort.SliceStable(order, func(a, b int) bool { return row[order[a]] > row[order[b]] })
		copy(sel, order[:len(sel)])
	}
	var ws T
	r := make([]int16, len(sel))
	for j, e := range sel {
		w[j] = row[e]
		ws += row[e]
		r[j] = int16(e)
	}
	if norm {
		for j := range sel {
			w[j] /= ws
		}
	}
	return r
}
