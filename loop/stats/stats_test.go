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

func TestPairTasks(t *testing.T) {
	for _, tc := range []struct {
		name          string
		before, after map[string]float64
		tasks         int
		diff          float64
		gained, lost  int
	}{
		{"same tasks", map[string]float64{"a": 0, "b": 1, "c": 0}, map[string]float64{"a": 1, "b": 1, "c": 1}, 3, 2.0 / 3, 2, 0},
		{"only shared tasks pair", map[string]float64{"a": 0, "b": 1, "x": 1}, map[string]float64{"a": 1, "b": 0, "y": 0}, 2, 0, 1, 1},
		{"rates cross 0.5", map[string]float64{"a": 0.25, "b": 0.75}, map[string]float64{"a": 0.5, "b": 0.5}, 2, 0, 1, 0},
		{"nothing shared", map[string]float64{"a": 1}, map[string]float64{"b": 1}, 0, 0, 0, 0},
	} {
		p := PairTasks(tc.before, tc.after)
		if p.Tasks != tc.tasks || !near(p.Diff, tc.diff, 1e-12) || p.Gained != tc.gained || p.Lost != tc.lost {
			t.Errorf("%s: %+v, want %d tasks, diff %.3f, %d gained, %d lost", tc.name, p, tc.tasks, tc.diff, tc.gained, tc.lost)
		}
	}
}

func TestPass1Interval(t *testing.T) {
	binary := map[string]float64{}
	for i := range 400 {
		binary[string(rune('a'+i%26))+string(rune('0'+i/26))] = float64(i % 10 / 9) // 40 of 400 passed
	}
	lo, hi := Wilson(40, 400)
	if iv := Pass1Interval(binary); iv != [2]float64{lo, hi} {
		t.Errorf("0/1 rates: %v, want Wilson's [%.4f, %.4f]", iv, lo, hi)
	}
	rates := map[string]float64{"a": 0.125, "b": 0, "c": 0, "d": 0.5}
	_, mlo, mhi := Mean([]float64{0.125, 0, 0, 0.5})
	if iv := Pass1Interval(rates); iv != [2]float64{0, mhi} || mlo >= 0 {
		t.Errorf("fractional rates: %v, want the normal interval [%.4f, %.4f] cut at 0", iv, mlo, mhi)
	}
}
