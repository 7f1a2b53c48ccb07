// Package stats holds the few statistics the loop reports so that a
// change in pass@1 can be told from noise: Wilson intervals of a
// proportion, a paired interval of a before/after difference, and the
// exact McNemar test on the tasks that changed.
package stats

import (
	"math"
	"sort"
)

// z95 is the two-sided 95% normal quantile.
const z95 = 1.959963984540054

// Wilson returns the 95% Wilson score interval of k successes in n
// trials ([0, 0] when n is 0). Unlike the normal interval it stays inside
// [0, 1] and is sensible at 0 or n successes.
func Wilson(k, n int) (lo, hi float64) {
	if n <= 0 {
		return 0, 0
	}
	p := float64(k) / float64(n)
	nf := float64(n)
	den := 1 + z95*z95/nf
	mid := (p + z95*z95/(2*nf)) / den
	half := z95 * math.Sqrt(p*(1-p)/nf+z95*z95/(4*nf*nf)) / den
	return math.Max(0, mid-half), math.Min(1, mid+half)
}

// Mean returns the mean of xs and its 95% normal interval (the standard
// error from the sample variance; [m, m] for fewer than two values).
func Mean(xs []float64) (m, lo, hi float64) {
	n := float64(len(xs))
	if n == 0 {
		return 0, 0, 0
	}
	for _, x := range xs {
		m += x
	}
	m /= n
	if n < 2 {
		return m, m, m
	}
	var ss float64
	for _, x := range xs {
		ss += (x - m) * (x - m)
	}
	se := math.Sqrt(ss / (n - 1) / n)
	return m, m - z95*se, m + z95*se
}

// Paired compares two measurements of the same tasks (after[i] and
// before[i] are one task's pass rates): the mean difference after -
// before with its 95% interval (normal, from the per-task differences),
// and McNemar's exact two-sided p-value over the tasks that went from
// failed to passed (Gained) or back (Lost), for 0/1 outcomes.
type Paired struct {
	Tasks     int     `json:"tasks"`
	Diff      float64 `json:"diff"`
	Lo        float64 `json:"ci95_lo"`
	Hi        float64 `json:"ci95_hi"`
	Gained    int     `json:"gained"` // failed before, passed after
	Lost      int     `json:"lost"`   // passed before, failed after
	McNemarP  float64 `json:"mcnemar_p"`
	AboveZero bool    `json:"above_zero"` // the interval's lower end is above 0
	BelowZero bool    `json:"below_zero"`
}

// ComparePaired computes Paired for pass rates in [0, 1]; a task counts
// as gained or lost when its rate crossed 0.5.
func ComparePaired(before, after []float64) Paired {
	n := min(len(before), len(after))
	d := make([]float64, n)
	p := Paired{Tasks: n}
	for i := range n {
		d[i] = after[i] - before[i]
		switch b, a := before[i] >= 0.5, after[i] >= 0.5; {
		case !b && a:
			p.Gained++
		case b && !a:
			p.Lost++
		}
	}
	p.Diff, p.Lo, p.Hi = Mean(d)
	p.McNemarP = McNemar(p.Gained, p.Lost)
	p.AboveZero, p.BelowZero = n > 1 && p.Lo > 0, n > 1 && p.Hi < 0
	return p
}

// McNemar is the exact two-sided McNemar p-value for b and c discordant
// pairs: twice the binomial(b + c, 1/2) tail of min(b, c), at most 1.
func McNemar(b, c int) float64 {
	n := b + c
	if n == 0 {
		return 1
	}
	k := min(b, c)
	// log C(n, i) / 2^n summed for i <= k.
	tail := 0.0
	for i := 0; i <= k; i++ {
		lg := lgamma(n+1) - lgamma(i+1) - lgamma(n-i+1) - float64(n)*math.Ln2
		tail += math.Exp(lg)
	}
	return math.Min(1, 2*tail)
}

func lgamma(x int) float64 {
	v, _ := math.Lgamma(float64(x))
	return v
}

// PairTasks compares two evals' per-task pass rates (task id -> rate),
// paired on the tasks both graded, in task-id order; tasks only one of
// them graded are left out.
func PairTasks(before, after map[string]float64) Paired {
	ids := make([]string, 0, len(before))
	for id := range before {
		if _, ok := after[id]; ok {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	b, a := make([]float64, len(ids)), make([]float64, len(ids))
	for i, id := range ids {
		b[i], a[i] = before[id], after[id]
	}
	return ComparePaired(b, a)
}

// Pass1Interval is the 95% interval of pass@1 from per-task pass rates:
// Wilson's when every rate is 0 or 1 (one rollout per task), else the
// normal interval of the rates, kept inside [0, 1].
func Pass1Interval(perTask map[string]float64) [2]float64 {
	rates := make([]float64, 0, len(perTask))
	k, binary := 0, true
	for _, v := range perTask {
		rates = append(rates, v)
		switch v {
		case 1:
			k++
		case 0:
		default:
			binary = false
		}
	}
	if binary {
		lo, hi := Wilson(k, len(rates))
		return [2]float64{lo, hi}
	}
	sort.Float64s(rates) // a map's order would change the sums' rounding
	_, lo, hi := Mean(rates)
	return [2]float64{max(0, lo), min(1, hi)}
}
