package stats

import (
	"math"
	"testing"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func TestWilson(t *testing.T) {
	cases := []struct {
		k, n   int
		lo, hi float64
	}{
		// Reference values: R's prop.test(correct=FALSE) / statsmodels proportion_confint(method="wilson").
		{0, 10, 0, 0.2775},
		{5, 10, 0.2366, 0.7634},
		{10, 10, 0.7225, 1},
		{40, 400, 0.0743, 0.1333},
		{0, 0, 0, 0},
	}
	for _, c := range cases {
		lo, hi := Wilson(c.k, c.n)
		if !near(lo, c.lo, 5e-4) || !near(hi, c.hi, 5e-4) {
			t.Errorf("Wilson(%d, %d) = [%.4f, %.4f], want [%.4f, %.4f]", c.k, c.n, lo, hi, c.lo, c.hi)
		}
	}
}

func TestMcNemar(t *testing.T) {
	cases := []struct {
		b, c int
		p    float64
	}{
		{0, 0, 1},
		{5, 5, 1},
		{0, 5, 0.0625},   // 2 * 0.5^5
		{10, 2, 0.0386},  // binom.test(2, 12)$p.value
		{30, 10, 0.0022}, // binom.test(10, 40)$p.value
	}
	for _, c := range cases {
		if p := McNemar(c.b, c.c); !near(p, c.p, 5e-4) {
			t.Errorf("McNemar(%d, %d) = %.4f, want %.4f", c.b, c.c, p, c.p)
		}
	}
}

func TestComparePaired(t *testing.T) {
	before := make([]float64, 400)
	after := make([]float64, 400)
	for i := range before {
		before[i] = float64(i % 5 / 4) // 1 in 5 passed
		after[i] = before[i]
		if i%5 == 1 || i%5 == 2 {
			after[i] = 1 // 160 tasks gained
		}
	}
	after[4] = 0 // one lost
	p := ComparePaired(before, after)
	if p.Tasks != 400 || p.Gained != 160 || p.Lost != 1 || !near(p.Diff, 159.0/400, 1e-12) || !p.AboveZero || p.McNemarP > 1e-6 {
		t.Fatalf("%+v", p)
	}
	same := ComparePaired(before, before)
	if same.Diff != 0 || same.AboveZero || same.BelowZero || same.McNemarP != 1 {
		t.Fatalf("no change: %+v", same)
	}
}
