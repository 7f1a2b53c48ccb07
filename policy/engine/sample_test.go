package engine

import (
	"errors"
	"math"
	"testing"
)

// TestSampleTruncation checks the kept set and the renormalised logprob of
// top-k, top-p and temperature against a hand computation on a vocabulary
// of five tokens.
func TestSampleTruncation(t *testing.T) {
	logits := []float32{1, 2, 0.5, -1, 0} // by probability: 1, 0, 2, 4, 3
	// Softmax at T=1: e^2, e^1, e^0.5, e^0, e^-1 over their sum:
	// 0.5745, 0.2113, 0.1282, 0.0777, 0.0286 (tokens 1, 0, 2, 4, 3).
	tests := []struct {
		name string
		s    Sampling
		kept []int // in the order u walks them: most likely first, by id without a cut
	}{
		{"no cut", Sampling{Temperature: 1, TopP: 1}, []int{0, 1, 2, 3, 4}},
		{"top-k 2", Sampling{Temperature: 1, TopP: 1, TopK: 2}, []int{1, 0}},
		{"top-k 1", Sampling{Temperature: 1, TopP: 1, TopK: 1}, []int{1}},
		{"top-k above vocab", Sampling{Temperature: 1, TopP: 1, TopK: 9}, []int{1, 0, 2, 4, 3}},
		{"top-p 0.5", Sampling{Temperature: 1, TopP: 0.5}, []int{1}},       // 0.5745 >= 0.5
		{"top-p 0.7", Sampling{Temperature: 1, TopP: 0.7}, []int{1, 0}},    // 0.7858
		{"top-p 0.8", Sampling{Temperature: 1, TopP: 0.8}, []int{1, 0, 2}}, // 0.9140
		{"top-k 3 then top-p 0.85", Sampling{Temperature: 1, TopP: 0.85, TopK: 3}, // renormalised over 3: 0.6285, 0.2312 (0.8597)
			[]int{1, 0}},
		{"top-k 3 then top-p 0.9", Sampling{Temperature: 1, TopP: 0.9, TopK: 3}, []int{1, 0, 2}},
		{"T=0.5 top-p 0.9", Sampling{Temperature: 0.5, TopP: 0.9}, []int{1, 0}}, // e^4, e^2, ...: 0.8293, 0.1122
		{"T=3 top-k 4", Sampling{Temperature: 3, TopP: 1, TopK: 4}, []int{1, 0, 2, 4}},
	}
	for _, tc := range tests {
		var sum float64
		for _, id := range tc.kept {
			sum += math.Exp(float64(logits[id]) / tc.s.Temperature)
		}
		// Every draw is a kept token with logprob log(p/sum over kept), and
		// u walks the kept tokens in order with their cumulative masses.
		var cum float64
		for _, id := range tc.kept {
			p := math.Exp(float64(logits[id])/tc.s.Temperature) / sum
			for _, u := range []float64{cum + 1e-9, cum + p/2, cum + p - 1e-9} {
				got, lp, err := new(sampler).sample(logits, tc.s, u)
				if err != nil {
					t.Fatal(err)
				}
				if int(got) != id || math.Abs(lp-math.Log(p)) > 1e-12 {
					t.Errorf("%s: u=%.9f drew %d (logprob %.15g), want %d (%.15g)", tc.name, u, got, lp, id, math.Log(p))
				}
			}
			cum += p
		}
	}
}

// TestSampleFrequencies draws many tokens with the counter-based generator
// and requires the frequencies to fit the probabilities (chi-square, 0.1%
// critical value), with and without cuts. The seeds are fixed, so the test
// is deterministic.
func TestSampleFrequencies(t *testing.T) {
	logits := []float32{0.3, -1.2, 2.0, 0.9, 0.0, -0.4, 1.4, -2.5}
	for _, s := range []Sampling{
		{Temperature: 1, TopP: 1, Seed: 11},
		{Temperature: 0.7, TopP: 1, Seed: 12},
		{Temperature: 1.3, TopP: 0.9, Seed: 13},
		{Temperature: 1, TopP: 1, TopK: 4, Seed: 14},
	} {
		// Expected distribution, computed from scratch.
		kept := []int{2, 6, 3, 0, 4, 5, 1, 7} // by logit, descending
		if s.TopK > 0 {
			kept = kept[:s.TopK]
		}
		w := map[int]float64{}
		var sum float64
		for _, id := range kept {
			w[id] = math.Exp(float64(logits[id]) / s.Temperature)
			sum += w[id]
		}
		if s.TopP < 1 {
			var cum, sub float64
			for j, id := range kept {
				if cum += w[id] / sum; cum >= s.TopP {
					for _, drop := range kept[j+1:] {
						delete(w, drop)
					}
					break
				}
			}
			for _, v := range w {
				sub += v
			}
			sum = sub
		}
		const n = 40000
		counts := map[int32]int{}
		for i := range n {
			id, lp, err := new(sampler).sample(logits, s, uniform(s.Seed, i))
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := w[int(id)]; !ok || math.Abs(lp-math.Log(w[int(id)]/sum)) > 1e-12 {
				t.Fatalf("%+v: drew %d with logprob %g", s, id, lp)
			}
			counts[id]++
		}
		var chi2 float64
		for id, v := range w {
			exp := n * v / sum
			d := float64(counts[int32(id)]) - exp
			chi2 += d * d / exp
		}
		// 0.1% critical values of chi-square for 1..7 degrees of freedom.
		crit := []float64{10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32}[len(w)-2]
		if chi2 > crit {
			t.Errorf("%+v: chi-square %.2f over %d tokens exceeds %.2f; counts %v", s, chi2, len(w), crit, counts)
		}
	}
}

func TestSampleBadLogits(t *testing.T) {
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		if _, _, err := new(sampler).sample([]float32{0, bad, 1}, DefaultSampling(1), 0.5); !errors.Is(err, ErrBadOutput) {
			t.Errorf("logit %g: %v, want ErrBadOutput", bad, err)
		}
	}
	// A tiny temperature is a point mass on the largest logit, not a NaN.
	id, lp, err := new(sampler).sample([]float32{0, 3, 1}, Sampling{Temperature: 1e-300, TopP: 1}, 0.999)
	if err != nil || id != 1 || lp != 0 {
		t.Errorf("T=1e-300: drew %d logprob %g err %v", id, lp, err)
	}
}

// TestUniform: the draws depend on (seed, index) only, lie in [0, 1), and
// have the mean and spread of a uniform distribution.
func TestUniform(t *testing.T) {
	if uniform(1, 5) != uniform(1, 5) || uniform(1, 5) == uniform(2, 5) || uniform(1, 5) == uniform(1, 6) {
		t.Fatal("uniform is not a function of (seed, index) alone")
	}
	const n = 100000
	var sum, sq float64
	for i := range n {
		u := uniform(uint64(i%7), i/7)
		if u < 0 || u >= 1 {
			t.Fatalf("uniform = %g", u)
		}
		sum += u
		sq += u * u
	}
	mean, variance := sum/n, sq/n-(sum/n)*(sum/n)
	if math.Abs(mean-0.5) > 0.005 || math.Abs(variance-1.0/12) > 0.002 {
		t.Errorf("mean %g variance %g", mean, variance)
	}
}
