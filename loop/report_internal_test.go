package loop

import (
	"strings"
	"testing"
)

func TestFamilyPass1(t *testing.T) {
	ins := pool(2, "a", "b", "c") // a-0 b-0 c-0 a-1 b-1 c-1
	got := familyPass1(ins, map[string]float64{"a-0": 1, "a-1": 0, "b-0": 1, "b-1": 0.5, "c-0": 0, "x-9": 1})
	want := map[string]float64{"a": 0.5, "b": 0.75, "c": 0}
	if len(got) != len(want) {
		t.Fatalf("families %v, want %v (c-1 has no result; x-9 is not an eval task)", got, want)
	}
	for f, w := range want {
		if got[f] != w {
			t.Errorf("%s: %v, want %v", f, got[f], w)
		}
	}
}

func TestTableByFamily(t *testing.T) {
	ins := pool(2, "a", "b")
	eval := func(rates map[string]float64) EvalResult {
		return EvalResult{Pass1: map[string]map[string]float64{"bash": {"heldout": 0.5}},
			Families: map[string]map[string]map[string]map[string]float64{ModeT1: {"bash": {"heldout": familyPass1(ins, rates)}}},
			perTask:  map[string]map[string]map[string]map[string]float64{ModeT1: {"bash": {"heldout": rates}}}}
	}
	first := eval(map[string]float64{"a-0": 0, "a-1": 0, "b-0": 1, "b-1": 0})
	last := eval(map[string]float64{"a-0": 1, "a-1": 0, "b-0": 1, "b-1": 1})
	r := &Result{Evals: []EvalResult{first, last}, Comparisons: compare(first, last)}
	table := r.Table()
	if want := "by family, bash heldout t1: a 0.00 -> 0.50, b 0.50 -> 1.00\n"; !strings.Contains(table, want) {
		t.Errorf("table has no line %q:\n%s", want, table)
	}
}
