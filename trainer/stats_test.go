package trainer_test

import (
	"math"
	"testing"

	"github.com/legorl/legorl/trainer"
)

func TestAgree(t *testing.T) {
	tests := []struct {
		name                string
		a, b                []float64
		pearson, spearman   float64
		meanAbs, maxAbs, kl float64
	}{
		{"identical", []float64{-1, -2, -3}, []float64{-1, -2, -3}, 1, 1, 0, 0, 0},
		{"shifted", []float64{-1, -2, -3}, []float64{-1.5, -2.5, -3.5}, 1, 1, 0.5, 0.5, math.Expm1(-0.5) + 0.5},
		{"reversed", []float64{-1, -2, -3}, []float64{-3, -2, -1}, -1, -1, 4.0 / 3, 2, (math.Expm1(-2) + 2 + math.Expm1(2) - 2) / 3},
		// x = 1..5, y = 2 1 4 3 5: Pearson = Spearman = 0.8 by hand
		// (sum of dx*dy = 8 over sqrt(10*10)).
		{"textbook", []float64{1, 2, 3, 4, 5}, []float64{2, 1, 4, 3, 5}, 0.8, 0.8, 0.8, 1, (2*(math.Expm1(1)-1) + 2*(math.Expm1(-1)+1)) / 5},
		// Ties share ranks: ranks of a are 1 2.5 2.5 4, of b 1 2 3 4.
		// Pearson = 3 / sqrt(2*5); Spearman = 4.5 / sqrt(4.5*5).
		{"ties", []float64{1, 2, 2, 3}, []float64{1, 2, 3, 4}, 3 / math.Sqrt(2*5), 4.5 / math.Sqrt(4.5*5), 0.5, 1, (math.Expm1(1) - 1 + math.Expm1(1) - 1) / 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := trainer.Agree(tt.a, tt.b)
			for _, c := range []struct {
				what      string
				got, want float64
			}{{"pearson", g.Pearson, tt.pearson}, {"spearman", g.Spearman, tt.spearman},
				{"mean abs", g.MeanAbsDiff, tt.meanAbs}, {"max abs", g.MaxAbsDiff, tt.maxAbs}, {"kl", g.KL, tt.kl}} {
				if math.Abs(c.got-c.want) > 1e-12 {
					t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
				}
			}
			if g.Tokens != len(tt.a) {
				t.Errorf("tokens %d", g.Tokens)
			}
		})
	}
	if g := trainer.Agree([]float64{-1, -1}, []float64{-1, -1}); !math.IsNaN(g.Pearson) || !math.IsNaN(g.Spearman) {
		t.Errorf("constant inputs: pearson %v spearman %v, want NaN (undefined)", g.Pearson, g.Spearman)
	}
}

func TestPack(t *testing.T) {
	tests := []struct {
		name   string
		tokens []int
		budget int
		want   [][]int
	}{
		// First-fit decreasing: 8 opens bin 0, 5 opens bin 1, 3 joins 5,
		// 2 fills bin 0 to exactly 10.
		{"first fit decreasing", []int{5, 3, 8, 2}, 10, [][]int{{2, 3}, {0, 1}}},
		{"longer than the budget goes alone", []int{15, 1, 1}, 10, [][]int{{0}, {1, 2}}},
		{"ties keep index order", []int{4, 4, 4}, 8, [][]int{{0, 1}, {2}}},
		{"empty", nil, 10, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := trainer.Pack(tt.tokens, tt.budget)
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for i := range got {
				if len(got[i]) != len(tt.want[i]) {
					t.Fatalf("got %v, want %v", got, tt.want)
				}
				for j := range got[i] {
					if got[i][j] != tt.want[i][j] {
						t.Fatalf("got %v, want %v", got, tt.want)
					}
				}
			}
		})
	}
}
