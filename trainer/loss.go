package trainer

import "math"

// LossInput is one sequence's data for the loss. The logprob slices have
// one entry per completion token; only tokens with Mask 1 count.
type LossInput struct {
	// New: under the weights being trained (this step's forward pass).
	New []float32
	// Old: under the weights at the start of the iteration (Recompute),
	// held fixed across the iteration's steps: the PPO/GSPO ratio is
	// pi_new / pi_old.
	Old []float32
	// Rollout: as recorded by the inference engine. The truncated
	// importance weight min(pi_old / pi_rollout, TISCap) corrects for the
	// engine sampling from a slightly different distribution.
	Rollout   []float32
	Mask      []int8
	Advantage float64
}

// LossParams are the loss's constants.
type LossParams struct {
	ClipLow, ClipHigh float64 // ratio clipped to [1-ClipLow, 1+ClipHigh]
	TISCap            float64 // C: importance weights are capped at C
	// Scale multiplies this sequence's loss: 1 / (sampled tokens of the
	// step) for PPO, 1 / (sequences of the step) for GSPO, so that the
	// gradients of all micro-batches add up to the step's mean loss.
	Scale float64
}

// LossStats are a step's loss and diagnostics, summed over sequences.
type LossStats struct {
	Loss   float64 // the scaled loss: summed over a step, the step's loss
	Tokens int     // sampled tokens
	// Clipped counts sampled tokens whose objective was clipped (no
	// gradient); for GSPO every token of a clipped sequence.
	Clipped float64
	// Truncated counts sampled tokens whose importance weight hit TISCap
	// (for GSPO, every token of a sequence whose weight did).
	Truncated int
	// NegLogprob sums -logprob under the current weights: divided by
	// Tokens it estimates the policy's entropy from the sampled tokens.
	NegLogprob float64
	// K3 sums the k3 estimate of KL(pi_rollout || pi_current) per token.
	K3 float64
	// The importance-sampling ratio pi_current / pi_rollout per token:
	// sum, sum of squares, min, max.
	RatioSum, RatioSqSum, RatioMin, RatioMax float64
}

// Add merges o into s.
func (s *LossStats) Add(o LossStats) {
	if o.Tokens == 0 {
		s.Loss += o.Loss
		return
	}
	if s.Tokens == 0 {
		s.RatioMin, s.RatioMax = o.RatioMin, o.RatioMax
	}
	s.Loss += o.Loss
	s.Tokens += o.Tokens
	s.Clipped += o.Clipped
	s.Truncated += o.Truncated
	s.NegLogprob += o.NegLogprob
	s.K3 += o.K3
	s.RatioSum += o.RatioSum
	s.RatioSqSum += o.RatioSqSum
	s.RatioMin = math.Min(s.RatioMin, o.RatioMin)
	s.RatioMax = math.Max(s.RatioMax, o.RatioMax)
}

func (s LossStats) per(v float64) float64 {
	if s.Tokens == 0 {
		return 0
	}
	return v / float64(s.Tokens)
}

// ClipFraction is the fraction of sampled tokens whose objective was clipped.
func (s LossStats) ClipFraction() float64 { return s.per(s.Clipped) }

// Entropy is the mean -logprob of the sampled tokens (see the package doc).
func (s LossStats) Entropy() float64 { return s.per(s.NegLogprob) }

// KL is the mean k3 estimate of KL(pi_rollout || pi_current).
func (s LossStats) KL() float64 { return s.per(s.K3) }

// RatioMean is the mean importance ratio pi_current / pi_rollout.
func (s LossStats) RatioMean() float64 { return s.per(s.RatioSum) }

// ESS is the normalised effective sample size of the importance ratios,
// (sum r)^2 / (n sum r^2), in (0, 1]: 1 when every ratio is equal.
func (s LossStats) ESS() float64 {
	if s.Tokens == 0 || s.RatioSqSum == 0 {
		return 0
	}
	return s.RatioSum * s.RatioSum / (float64(s.Tokens) * s.RatioSqSum)
}

// observe adds the per-token diagnostics of a sampled token.
func (s *LossStats) observe(newLP, rolloutLP float64) {
	d := newLP - rolloutLP
	r := math.Exp(d)
	if s.Tokens == 0 {
		s.RatioMin, s.RatioMax = r, r
	}
	s.Tokens++
	s.NegLogprob -= newLP
	s.K3 += k3(d)
	s.RatioSum += r
	s.RatioSqSum += r * r
	s.RatioMin = math.Min(s.RatioMin, r)
	s.RatioMax = math.Max(s.RatioMax, r)
}

// clippedSide reports whether PPO's min(ratio*A, clip(ratio)*A) takes the
// clipped term with a constant value, which has no gradient: above the
// range for a positive advantage, below it for a negative one.
func clippedSide(ratio, adv float64, p LossParams) bool {
	return (adv > 0 && ratio > 1+p.ClipHigh) || (adv < 0 && ratio < 1-p.ClipLow)
}

func clamp(v, lo, hi float64) float64 { return math.Max(lo, math.Min(hi, v)) }

// PPOWeights returns the per-token loss weights d(loss)/d(New[t]) of
// token-level PPO-clip with truncated importance sampling,
//
//	loss = Scale * sum_t -w_t * min(rho_t A, clip(rho_t, 1-ClipLow, 1+ClipHigh) A)
//	rho_t = exp(New_t - Old_t),  w_t = min(exp(Old_t - Rollout_t), TISCap)
//
// over tokens with Mask 1 (w is a constant: no gradient flows through it),
// so d(loss)/d(New_t) = -Scale * w_t * A * rho_t where the unclipped term
// is taken and 0 where the clipped one is. It also returns the sequence's
// loss and diagnostics.
func PPOWeights(in LossInput, p LossParams) ([]float32, LossStats) {
	w := make([]float32, len(in.New))
	var st LossStats
	A := in.Advantage
	for t, m := range in.Mask {
		if m != 1 {
			continue
		}
		newLP, oldLP := float64(in.New[t]), float64(in.Old[t])
		st.observe(newLP, float64(in.Rollout[t]))
		rho := math.Exp(newLP - oldLP)
		tis := math.Exp(oldLP - float64(in.Rollout[t]))
		if tis > p.TISCap {
			tis = p.TISCap
			st.Truncated++
		}
		if clippedSide(rho, A, p) {
			st.Clipped++
			st.Loss -= p.Scale * tis * A * clamp(rho, 1-p.ClipLow, 1+p.ClipHigh)
			continue
		}
		st.Loss -= p.Scale * tis * A * rho
		w[t] = float32(-p.Scale * tis * A * rho)
	}
	return w, st
}

// GSPOWeights returns the per-token loss weights of GSPO with a
// sequence-level truncated importance weight,
//
//	loss = Scale * -w * min(s A, clip(s, 1-ClipLow, 1+ClipHigh) A)
//	s = exp(mean_t (New_t - Old_t)),  w = min(exp(mean_t (Old_t - Rollout_t)), TISCap)
//
// with means over the n tokens with Mask 1 (length normalised, as GSPO's
// ratio: the geometric mean of the token ratios), so every sampled token
// gets d(loss)/d(New_t) = -Scale * w * A * s / n when unclipped, else 0.
func GSPOWeights(in LossInput, p LossParams) ([]float32, LossStats) {
	w := make([]float32, len(in.New))
	var st LossStats
	var dNew, dOld float64
	for t, m := range in.Mask {
		if m != 1 {
			continue
		}
		st.observe(float64(in.New[t]), float64(in.Rollout[t]))
		dNew += float64(in.New[t]) - float64(in.Old[t])
		dOld += float64(in.Old[t]) - float64(in.Rollout[t])
	}
	n := float64(st.Tokens)
	if st.Tokens == 0 {
		return w, st
	}
	A := in.Advantage
	s := math.Exp(dNew / n)
	tis := math.Exp(dOld / n)
	if tis > p.TISCap {
		tis = p.TISCap
		st.Truncated = st.Tokens
	}
	if clippedSide(s, A, p) {
		st.Clipped = n
		st.Loss = -p.Scale * tis * A * clamp(s, 1-p.ClipLow, 1+p.ClipHigh)
		return w, st
	}
	st.Loss = -p.Scale * tis * A * s
	g := float32(-p.Scale * tis * A * s / n)
	for t, m := range in.Mask {
		if m == 1 {
			w[t] = g
		}
	}
	return w, st
}
