package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legorl/legorl/loop"
	"github.com/legorl/legorl/storage"
	"github.com/legorl/legorl/transforms"
)

// TestCompareEvals runs two greedy evals of one policy and one at
// temperature 1 with `legorl eval`, then compares them: the greedy pair
// gives a row of the two tasks with no change, written to --out as the
// stored tables have it; pairing greedy with t1 is refused.
func TestCompareEvals(t *testing.T) {
	suite, policy, self, store := evalFixture(t)
	for _, e := range []struct {
		iteration, topK string
	}{{"1", "1"}, {"2", "1"}, {"3", "0"}} {
		code, _, stderr := runCLI(t, testEnv(nil), "eval", "--tasks", suite, "--harness", "tools", "--policy", policy, "--store", store,
			"--run", "cmp", "--iteration", e.iteration, "--top-k", e.topK, "--max-turns", "2", "--max-tokens", "16", "--agent", self,
			"--split", "sft,train,heldout,heldout_family")
		if code != 0 {
			t.Fatalf("eval %s: exit %d: %s", e.iteration, code, stderr)
		}
	}
	out := filepath.Join(t.TempDir(), "cmp.json")
	code, stdout, stderr := runCLI(t, testEnv(nil), "compare", "--store", store, "--before", "cmp@1", "--after", "cmp@2", "--out", out)
	if code != 0 {
		t.Fatalf("compare: exit %d: %s", code, stderr)
	}
	t.Logf("%s%s", stdout, stderr)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "harness  split") || strings.Join(strings.Fields(lines[1]), " ") !=
		"tools sft,train,heldout,heldout_family greedy 2 0.000 [0.000, 0.658] 0.000 [0.000, 0.658] +0.000 [+0.000, +0.000] 1 0/0" {
		t.Fatalf("table %q", stdout)
	}
	var c loop.EvalComparison
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	if c.Before.Run != "cmp" || c.Before.Iteration != 1 || c.After.Iteration != 2 || !strings.Contains(c.After.Report, "/reports/eval/iter-000002/") ||
		len(c.Comparisons) != 1 || c.Comparisons[0].Tasks != 2 || c.Comparisons[0].Mode != "greedy" || c.Comparisons[0].Diff != 0 {
		t.Errorf("--out %s", b)
	}
	code, _, stderr = runCLI(t, testEnv(nil), "compare", "--store", store, "--before", "cmp@1", "--after", "cmp@3")
	if code != 2 || !strings.Contains(stderr, "the evals decode differently (greedy before, t1 after)") {
		t.Errorf("greedy against t1: exit %d: %s", code, stderr)
	}
}

// TestCompareTables compares hand-written eval tables: the paired figures,
// the note on tasks graded in one eval only, and each refusal as one line.
func TestCompareTables(t *testing.T) {
	dir := t.TempDir()
	store := "file://" + dir
	st, err := storage.Open(context.Background(), store, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// 40 tasks: 10 pass before; after, 8 more pass, 2 of the 10 fail and
	// task 39 was not graded.
	before, after := map[string]float64{}, map[string]float64{}
	for i := range 40 {
		id := fmt.Sprintf("t%02d", i)
		before[id] = float64(min(1, i/30))
		switch {
		case i < 8:
			after[id] = 1
		case i == 30 || i == 31:
			after[id] = 0
		case i < 39:
			after[id] = before[id]
		}
	}
	table := func(run string, it int32, dec string, splits []string, rows ...transforms.EvalRow) {
		t.Helper()
		body, _ := json.Marshal(transforms.EvalTable{RunID: run, Iteration: it, K: 1, Decoding: dec, Splits: splits, Rows: rows})
		if err := st.Put(context.Background(), transforms.EvalReportKey(run, it, "20261206T000000-aa"), bytes.NewReader(body), int64(len(body))); err != nil {
			t.Fatal(err)
		}
	}
	row := func(h string, per map[string]float64) transforms.EvalRow {
		r := transforms.EvalRow{Harness: h, Tasks: len(per), Rollouts: len(per), PerTask: per}
		for _, v := range per {
			r.Pass1 += v / float64(len(per))
		}
		return r
	}
	heldout := []string{"heldout"}
	table("r", 1, "greedy", heldout, row("pi", before), row("tools", before))
	table("r", 2, "greedy", heldout, row("pi", after))
	table("s", 1, "greedy", []string{"heldout", "heldout_family"}, row("pi", after))
	table("u", 1, "greedy", heldout, row("bash", after))
	table("v", 1, "greedy", heldout, row("pi", map[string]float64{"x": 1}))

	code, stdout, stderr := runCLI(t, testEnv(nil), "compare", "--store", store, "--before", "r@1", "--after", "r@2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	// pass@1 10/40 before (Wilson [0.142, 0.402]) and 15/39 after ([0.249,
	// 0.541]); paired on 39 tasks, +8 -2: diff 6/39 with the normal
	// interval [+0.0005, +0.307]; McNemar's p for 8 against 2 is 0.109.
	want := "pi       heldout  greedy    39     0.250 [0.142, 0.402]  0.385 [0.249, 0.541]  +0.154 [+0.000, +0.307]  0.11       8/2"
	if lines := strings.Split(strings.TrimSpace(stdout), "\n"); len(lines) != 2 || lines[1] != want {
		t.Errorf("table:\n%s\nwant the row\n%s", stdout, want)
	}
	if !strings.Contains(stderr, "harness pi: 40 tasks graded before and 39 after; the 39 graded in both are paired") {
		t.Errorf("no note on the ungraded task: %s", stderr)
	}
	for _, tc := range []struct {
		name, before, after, want string
	}{
		{"no iteration", "r", "r@2", `--before "r": want RUN@ITERATION`},
		{"bad iteration", "r@1", "r@x", `--after "r@x": the iteration "x" is not a whole number >= 0`},
		{"one eval twice", "r@1", "r@1", "--before and --after both name r@1"},
		{"no such eval", "r@1", "r@7", "no eval of run r at iteration 7 in " + store},
		{"other splits", "r@1", "s@1", "the evals cover different splits (heldout before, heldout,heldout_family after)"},
		{"no shared harness", "r@2", "u@1", "the evals share no harness"},
		{"no shared task", "r@2", "v@1", "harness pi: no task was graded in both evals"},
	} {
		code, _, stderr := runCLI(t, testEnv(nil), "compare", "--store", store, "--before", tc.before, "--after", tc.after)
		if code != 2 || !strings.Contains(stderr, tc.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%s: exit %d, %q; want exit 2 and one line with %q", tc.name, code, stderr, tc.want)
		}
	}
}
