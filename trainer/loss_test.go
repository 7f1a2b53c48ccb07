package trainer_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/legorl/legorl/trainer"
)

// lp builds float32 logprobs.
func lp(v ...float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol*math.Max(1, math.Abs(b)) }

func TestPPOWeights(t *testing.T) {
	p := trainer.LossParams{ClipLow: 0.2, ClipHigh: 0.2, TISCap: 2, Scale: 0.5}
	ln := math.Log
	old := []float64{-1, -2, -0.5, -3, -1.5}
	// Tokens: ratio 1.1 (inside), 1.5 (above), 0.5 (below), masked, ratio
	// 1 with pi_old/pi_rollout = 3 (capped at 2).
	ratio := []float64{1.1, 1.5, 0.5, 1, 1}
	rollout := []float64{-1, -2, -0.5, -3, -1.5 - ln(3)}
	mask := []int8{1, 1, 1, 0, 1}
	newLP := make([]float64, len(old))
	for i := range old {
		newLP[i] = old[i] + ln(ratio[i])
	}
	tests := []struct {
		name      string
		adv       float64
		weights   []float64
		loss      float64
		clipped   float64
		truncated int
	}{
		{
			// A > 0: the clipped term is taken above 1.2 (no gradient);
			// below 0.8 the unclipped ratio*A is the smaller, so it flows.
			name: "positive advantage", adv: 1,
			weights: []float64{-0.5 * 1.1, 0, -0.5 * 0.5, 0, -0.5 * 2},
			loss:    -0.5 * (1.1 + 1.2 + 0.5 + 2), clipped: 1, truncated: 1,
		},
		{
			// A < 0: clipped below 0.8 (constant -0.8), the unclipped term
			// above 1.2 (-1.5 < -1.2) keeps its gradient.
			name: "negative advantage", adv: -1,
			weights: []float64{0.5 * 1.1, 0.5 * 1.5, 0, 0, 0.5 * 2},
			loss:    0.5 * (1.1 + 1.5 + 0.8 + 2), clipped: 1, truncated: 1,
		},
		{name: "zero advantage", adv: 0, weights: []float64{0, 0, 0, 0, 0}, loss: 0, truncated: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, st := trainer.PPOWeights(trainer.LossInput{New: lp(newLP...), Old: lp(old...), Rollout: lp(rollout...), Mask: mask, Advantage: tt.adv}, p)
			for i := range w {
				if !near(float64(w[i]), tt.weights[i], 1e-5) {
					t.Errorf("weight %d = %v, want %v", i, w[i], tt.weights[i])
				}
			}
			if !near(st.Loss, tt.loss, 1e-5) {
				t.Errorf("loss %v, want %v", st.Loss, tt.loss)
			}
			if st.Tokens != 4 || st.Clipped != tt.clipped || st.Truncated != tt.truncated {
				t.Errorf("tokens %d clipped %v truncated %d, want 4, %v, %d", st.Tokens, st.Clipped, st.Truncated, tt.clipped, tt.truncated)
			}
			// Diagnostics over the 4 sampled tokens: IS ratio new/rollout.
			is := []float64{1.1, 1.5, 0.5, 3}
			var sum, sq float64
			for _, r := range is {
				sum, sq = sum+r, sq+r*r
			}
			if !near(st.RatioMean(), sum/4, 1e-5) || !near(st.RatioMin, 0.5, 1e-5) || !near(st.RatioMax, 3, 1e-5) || !near(st.ESS(), sum*sum/(4*sq), 1e-5) {
				t.Errorf("ratio mean %v min %v max %v ess %v", st.RatioMean(), st.RatioMin, st.RatioMax, st.ESS())
			}
			ent := -(newLP[0] + newLP[1] + newLP[2] + newLP[4]) / 4
			if !near(st.Entropy(), ent, 1e-5) || !near(st.ClipFraction(), tt.clipped/4, 1e-9) {
				t.Errorf("entropy %v (want %v), clip fraction %v", st.Entropy(), ent, st.ClipFraction())
			}
			var kl float64
			for _, r := range is {
				kl += r - 1 - math.Log(r)
			}
			if !near(st.KL(), kl/4, 1e-5) {
				t.Errorf("KL %v, want %v", st.KL(), kl/4)
			}
		})
	}
}

func TestGSPOWeights(t *testing.T) {
	p := trainer.LossParams{ClipLow: 0.2, ClipHigh: 0.2, TISCap: 2, Scale: 0.5}
	mask := []int8{1, 1, 0, 1}
	old := []float64{-1, -2, -0.5, -3}
	// seq builds a sequence whose sampled tokens have the given log ratios
	// new-old and old-rollout; the masked token has wild values that must
	// not count.
	seq := func(dNew, dOld []float64, adv float64) trainer.LossInput {
		n, r := make([]float64, 4), make([]float64, 4)
		for i := range old {
			n[i], r[i] = old[i]+dNew[i], old[i]-dOld[i]
		}
		return trainer.LossInput{New: lp(n...), Old: lp(old...), Rollout: lp(r...), Mask: mask, Advantage: adv}
	}
	e := math.Exp
	tests := []struct {
		name      string
		in        trainer.LossInput
		weight    float64 // of each sampled token
		loss      float64
		clipped   float64
		truncated int
	}{
		// mean log ratio 0.1 (inside the range), mean old-rollout 0.2.
		{"inside", seq([]float64{0.1, 0.2, 5, 0}, []float64{0.3, 0, 9, 0.3}, 1),
			-0.5 * e(0.2) * e(0.1) / 3, -0.5 * e(0.2) * e(0.1), 0, 0},
		// mean log ratio 0.3: s = 1.35 > 1.2 with A > 0: clipped at 1.2.
		{"above the range", seq([]float64{0.3, 0.3, -5, 0.3}, []float64{0.3, 0, 9, 0.3}, 1),
			0, -0.5 * e(0.2) * 1.2, 3, 0},
		// mean log ratio -0.3: s = 0.74 < 0.8 with A < 0: clipped at 0.8.
		{"below the range", seq([]float64{-0.3, -0.3, 5, -0.3}, []float64{0.3, 0, 9, 0.3}, -1),
			0, 0.5 * e(0.2) * 0.8, 3, 0},
		// s = 0.74 with A > 0: the unclipped term is the smaller, kept.
		{"below the range, positive advantage", seq([]float64{-0.3, -0.3, 5, -0.3}, []float64{0.3, 0, 9, 0.3}, 1),
			-0.5 * e(0.2) * e(-0.3) / 3, -0.5 * e(0.2) * e(-0.3), 0, 0},
		// mean old-rollout 1: weight e = 2.718 capped at 2.
		{"importance weight capped", seq([]float64{0.1, 0.1, 0, 0.1}, []float64{1, 1, 0, 1}, -1),
			0.5 * 2 * e(0.1) / 3, 0.5 * 2 * e(0.1), 0, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, st := trainer.GSPOWeights(tt.in, p)
			for i, m := range mask {
				want := tt.weight
				if m == 0 {
					want = 0
				}
				if !near(float64(w[i]), want, 1e-5) {
					t.Errorf("weight %d = %v, want %v", i, w[i], want)
				}
			}
			if !near(st.Loss, tt.loss, 1e-5) || st.Clipped != tt.clipped || st.Truncated != tt.truncated || st.Tokens != 3 {
				t.Errorf("loss %v clipped %v truncated %d tokens %d, want %v, %v, %d, 3", st.Loss, st.Clipped, st.Truncated, st.Tokens, tt.loss, tt.clipped, tt.truncated)
			}
		})
	}
	if w, st := trainer.GSPOWeights(trainer.LossInput{New: lp(-1), Old: lp(-1), Rollout: lp(0), Mask: []int8{0}, Advantage: 1}, p); w[0] != 0 || st.Loss != 0 || st.Tokens != 0 {
		t.Errorf("a sequence without sampled tokens has weight %v loss %v", w, st.Loss)
	}
}

// The weights are the derivatives of the loss: check them against central
// finite differences of the loss on random inputs, away from the kinks.
func TestLossWeightsAreGradients(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	p := trainer.LossParams{ClipLow: 0.2, ClipHigh: 0.28, TISCap: 1.5, Scale: 0.3}
	for _, loss := range []struct {
		name string
		fn   func(trainer.LossInput, trainer.LossParams) ([]float32, trainer.LossStats)
	}{{"ppo", trainer.PPOWeights}, {"gspo", trainer.GSPOWeights}} {
		t.Run(loss.name, func(t *testing.T) {
			checked := 0
			for trial := 0; trial < 50; trial++ {
				n := 6
				in := trainer.LossInput{New: make([]float32, n), Old: make([]float32, n), Rollout: make([]float32, n),
					Mask: make([]int8, n), Advantage: rng.NormFloat64()}
				for i := 0; i < n; i++ {
					in.Old[i] = -float32(rng.ExpFloat64())
					in.New[i] = in.Old[i] + float32(rng.NormFloat64()*0.3)
					in.Rollout[i] = in.Old[i] + float32(rng.NormFloat64()*0.3)
					in.Mask[i] = int8(rng.IntN(4)/3 ^ 1) // mostly 1
				}
				w, _ := loss.fn(in, p)
				for i := 0; i < n; i++ {
					const h = 1e-3
					x := in.New[i]
					xs := []float32{x - h, x, x + h}
					var f [3]float64
					for k, v := range xs {
						c := in
						c.New = append([]float32(nil), in.New...)
						c.New[i] = v
						_, st := loss.fn(c, p)
						f[k] = st.Loss
					}
					left := (f[1] - f[0]) / float64(xs[1]-xs[0])
					right := (f[2] - f[1]) / float64(xs[2]-xs[1])
					if math.Abs(left-right) > 0.01*math.Max(1e-3, math.Abs(left)) {
						continue // a kink of the clip between the points
					}
					fd := (f[2] - f[0]) / float64(xs[2]-xs[0])
					if math.Abs(fd-float64(w[i])) > 1e-3*math.Max(1e-2, math.Abs(fd)) {
						t.Errorf("trial %d token %d: weight %v, finite difference %v", trial, i, w[i], fd)
					}
					checked++
				}
			}
			if checked < 100 {
				t.Errorf("only %d tokens checked", checked)
			}
		})
	}
}
