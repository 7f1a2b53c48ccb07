package loop

import (
	"errors"
	"strings"
	"testing"

	"github.com/legorl/legorl/transforms"
)

func TestFamilyPass1(t *testing.T) {
	ins := pool(2, "a", "b", "c") // a-0 b-0 c-0 a-1 b-1 c-1
	got := groupPass1(ins, map[string]float64{"a-0": 1, "a-1": 0, "b-0": 1, "b-1": 0.5, "c-0": 0, "x-9": 1}, family)
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
			Families:  map[string]map[string]map[string]map[string]float64{ModeT1: {"bash": {"heldout": groupPass1(ins, rates, family)}}},
			Templates: map[string]map[string]map[string]map[string]float64{ModeT1: {"bash": {"heldout": groupPass1(ins, rates, template)}}},
			perTask:   map[string]map[string]map[string]map[string]float64{ModeT1: {"bash": {"heldout": rates}}}}
	}
	first := eval(map[string]float64{"a-0": 0, "a-1": 0, "b-0": 1, "b-1": 0})
	last := eval(map[string]float64{"a-0": 1, "a-1": 0, "b-0": 1, "b-1": 1})
	r := &Result{Evals: []EvalResult{first, last}, Comparisons: compare(first, last)}
	table := r.Table()
	for _, want := range []string{
		"by family, bash heldout t1: a 0.00 -> 0.50, b 0.50 -> 1.00\n",
		// pool's tasks alternate templates a/even, a/odd, ...
		"by template, bash heldout t1: a/even 0.00 -> 1.00, a/odd 0.00 -> 0.00, b/even 1.00 -> 1.00, b/odd 0.00 -> 1.00\n",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table has no line %q:\n%s", want, table)
		}
	}
	// Tasks without a template (a suite of an older generator) count under
	// "", which eval takes for no by-template view.
	ins = pool(2, "a", "b")
	for i := range ins {
		ins[i].Template = ""
	}
	if byT := groupPass1(ins, first.perTask[ModeT1]["bash"]["heldout"], template); !untemplated(byT) {
		t.Errorf("tasks without a template: %v, want them under \"\"", byT)
	}
}

// TestTableRepeatedTasks: the table names, per iteration, the training
// tasks an earlier iteration rolled out, and only when there were some.
func TestTableRepeatedTasks(t *testing.T) {
	const line = "training tasks rolled out by an earlier iteration, by iteration: "
	evals := []EvalResult{{PolicyVersion: 1}, {PolicyVersion: 3}} // the table is of a run with evals
	fresh := &Result{Evals: evals, Iterations: []IterationResult{{Iteration: 0}, {Iteration: 1}}}
	if table := fresh.Table(); table == "" || strings.Contains(table, line) {
		t.Errorf("every task fresh, yet the table says:\n%s", table)
	}
	used := &Result{Evals: evals, Iterations: []IterationResult{{Iteration: 0}, {Iteration: 1, Repeated: 3}, {Iteration: 2, Repeated: 32}}}
	if table := used.Table(); !strings.Contains(table, line+"0, 3, 32\n") {
		t.Errorf("no line %q in:\n%s", line+"0, 3, 32", table)
	}
}

// TestTableMasked: an eval whose rollouts were masked (environment
// failures) is named under the table with how many tasks the paired
// difference then covers; a clean comparison prints no warning.
func TestTableMasked(t *testing.T) {
	eval := func(version int64, rates map[string]float64, masked int) EvalResult {
		e := EvalResult{PolicyVersion: version, Pass1: map[string]map[string]float64{"bash": {"heldout": 0.5}},
			perTask: map[string]map[string]map[string]map[string]float64{ModeT1: {"bash": {"heldout": rates}}}}
		if masked > 0 {
			e.Masked = map[string]map[string]map[string]int{ModeT1: {"bash": {"heldout": masked}}}
		}
		return e
	}
	for _, tc := range []struct {
		name        string
		first, last EvalResult
		want        string
	}{
		{"before masked", eval(1, map[string]float64{"a-0": 1}, 3), eval(9, map[string]float64{"a-0": 1, "a-1": 0, "a-2": 1, "a-3": 0}, 0),
			"warning: bash heldout t1: the before eval (policy v1) masked 3 rollouts (environment failures, not scored) and graded 1 tasks; the difference covers the 1 tasks graded in both\n"},
		{"after masked", eval(1, map[string]float64{"a-0": 1, "a-1": 0}, 0), eval(9, map[string]float64{}, 2),
			"warning: bash heldout t1: the after eval (policy v9) masked 2 rollouts (environment failures, not scored) and graded 0 tasks; the difference covers the 0 tasks graded in both\n"},
		{"none masked", eval(1, map[string]float64{"a-0": 1}, 0), eval(9, map[string]float64{"a-0": 0}, 0), ""},
	} {
		r := &Result{Evals: []EvalResult{tc.first, tc.last}, Comparisons: compare(tc.first, tc.last)}
		table := r.Table()
		if tc.want == "" {
			if strings.Contains(table, "warning:") {
				t.Errorf("%s: a warning without masked rollouts:\n%s", tc.name, table)
			}
			continue
		}
		if !strings.Contains(table, tc.want) {
			t.Errorf("%s: table has no line %q:\n%s", tc.name, tc.want, table)
		}
	}
}

// TestRetryMasked: an eval that masked more than max_masked of its
// rollouts runs again, at most retries times, and the first attempt
// within the share (or the last) counts, whatever its pass rate.
func TestRetryMasked(t *testing.T) {
	table := func(masked, rollouts int, pass1 float64) transforms.EvalTable {
		return transforms.EvalTable{Rows: []transforms.EvalRow{{Harness: "bash", Rollouts: rollouts, Masked: masked, Pass1: pass1}}}
	}
	boom := errors.New("pipeline failed")
	for _, tc := range []struct {
		name      string
		attempts  []transforms.EvalTable
		errAt     int // attempt that fails; -1: none
		wantRuns  int
		wantPass1 float64
		wantErr   error
	}{
		{"clean", []transforms.EvalTable{table(0, 400, 0.3)}, -1, 1, 0.3, nil},
		{"within the share", []transforms.EvalTable{table(20, 400, 0.3), table(0, 400, 0.9)}, -1, 1, 0.3, nil},
		{"masked, then clean", []transforms.EvalTable{table(400, 400, 0), table(3, 400, 0.29)}, -1, 2, 0.29, nil},
		{"masked every time: the last counts", []transforms.EvalTable{table(400, 400, 0), table(239, 400, 0.4), table(100, 400, 0.35)}, -1, 3, 0.35, nil},
		{"no rollouts", []transforms.EvalTable{{}}, -1, 1, 0, nil},
		{"an error stops", []transforms.EvalTable{table(400, 400, 0), {}}, 1, 2, 0, boom},
	} {
		runs, agains := 0, 0
		got, err := retryMasked(0.05, 2, func(attempt int) (transforms.EvalTable, error) {
			if attempt != runs {
				t.Fatalf("%s: attempt %d, want %d", tc.name, attempt, runs)
			}
			runs++
			if attempt == tc.errAt {
				return transforms.EvalTable{}, boom
			}
			return tc.attempts[attempt], nil
		}, func(attempt, masked, rollouts int) {
			agains++
			if attempt != runs || masked != tc.attempts[attempt-1].Rows[0].Masked || rollouts != 400 {
				t.Errorf("%s: again(%d, %d, %d) after %d runs", tc.name, attempt, masked, rollouts, runs)
			}
		})
		if runs != tc.wantRuns || agains != runs-1 || !errors.Is(err, tc.wantErr) {
			t.Errorf("%s: %d runs, %d warnings, error %v; want %d runs, error %v", tc.name, runs, agains, err, tc.wantRuns, tc.wantErr)
		}
		if err == nil && len(got.Rows) > 0 && got.Rows[0].Pass1 != tc.wantPass1 {
			t.Errorf("%s: pass@1 %v, want %v", tc.name, got.Rows[0].Pass1, tc.wantPass1)
		}
	}
}
