package trainer

import (
	"encoding/json"
	"math"
	"sort"
)

// Agreement measures how closely logprobs recomputed by the trainer match
// the logprobs the inference engine recorded for the same sampled tokens.
type Agreement struct {
	Tokens int `json:"tokens"`
	// Pearson and Spearman are the linear and rank correlations; NaN with
	// fewer than two tokens or when either side is constant.
	Pearson  float64 `json:"pearson"`
	Spearman float64 `json:"spearman"`
	// MeanAbsDiff and MaxAbsDiff are over |recomputed - rollout|.
	MeanAbsDiff float64 `json:"mean_abs_diff"`
	MaxAbsDiff  float64 `json:"max_abs_diff"`
	// KL is the k3 estimate of KL(pi_rollout || pi_trainer) per token,
	// r - 1 - log r with r = pi_trainer / pi_rollout, averaged: unbiased
	// for tokens sampled from pi_rollout, never negative.
	KL float64 `json:"kl"`
}

// Agree computes the agreement of rollout logprobs a with recomputed
// logprobs b, pairwise.
func Agree(a, b []float64) Agreement {
	n := len(a)
	ag := Agreement{Tokens: n, Pearson: math.NaN(), Spearman: math.NaN()}
	if n == 0 {
		return ag
	}
	for i := range a {
		d := b[i] - a[i]
		ag.MeanAbsDiff += math.Abs(d)
		ag.MaxAbsDiff = math.Max(ag.MaxAbsDiff, math.Abs(d))
		ag.KL += k3(d)
	}
	ag.MeanAbsDiff /= float64(n)
	ag.KL /= float64(n)
	ag.Pearson = pearson(a, b)
	ag.Spearman = pearson(ranks(a), ranks(b))
	return ag
}

// k3 is r - 1 - log r for log r = d, computed stably for small d.
func k3(d float64) float64 { return math.Expm1(d) - d }

// pearson returns the Pearson correlation of x and y (two-pass, float64);
// NaN when n < 2 or either variance is 0.
func pearson(x, y []float64) float64 {
	n := float64(len(x))
	if len(x) < 2 {
		return math.NaN()
	}
	var mx, my float64
	for i := range x {
		mx += x[i]
		my += y[i]
	}
	mx, my = mx/n, my/n
	var sxy, sxx, syy float64
	for i := range x {
		dx, dy := x[i]-mx, y[i]-my
		sxy += dx * dy
		sxx += dx * dx
		syy += dy * dy
	}
	if sxx == 0 || syy == 0 {
		return math.NaN()
	}
	return math.Max(-1, math.Min(1, sxy/math.Sqrt(sxx*syy)))
}

// ranks returns the 1-based ranks of x, ties sharing their average rank.
func ranks(x []float64) []float64 {
	idx := make([]int, len(x))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(i, j int) bool { return x[idx[i]] < x[idx[j]] })
	r := make([]float64, len(x))
	for i := 0; i < len(idx); {
		j := i + 1
		for j < len(idx) && x[idx[j]] == x[idx[i]] {
			j++
		}
		avg := float64(i+j+1) / 2 // ranks i+1..j
		for k := i; k < j; k++ {
			r[idx[k]] = avg
		}
		i = j
	}
	return r
}

// MarshalJSON writes NaN and infinite values as null (JSON has no NaN).
func (a Agreement) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Tokens      int      `json:"tokens"`
		Pearson     *float64 `json:"pearson"`
		Spearman    *float64 `json:"spearman"`
		MeanAbsDiff *float64 `json:"mean_abs_diff"`
		MaxAbsDiff  *float64 `json:"max_abs_diff"`
		KL          *float64 `json:"kl"`
	}{a.Tokens, finiteOrNil(a.Pearson), finiteOrNil(a.Spearman), finiteOrNil(a.MeanAbsDiff), finiteOrNil(a.MaxAbsDiff), finiteOrNil(a.KL)})
}

func finiteOrNil(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

func isFinite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
