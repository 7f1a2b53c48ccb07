package loop

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/legorl/legorl/loop/stats"
)

// Comparison is the before/after change of pass@1 on one harness, split
// and mode, paired by task: the first eval (the starting policy) against
// the last.
type Comparison struct {
	Harness  string     `json:"harness"`
	Split    string     `json:"split"`
	Mode     string     `json:"mode"` // ModeT1 or ModeGreedy
	Before   float64    `json:"before"`
	After    float64    `json:"after"`
	BeforeCI [2]float64 `json:"before_ci95"`
	AfterCI  [2]float64 `json:"after_ci95"`
	stats.Paired
}

// compare pairs the first and last evals' per-task results.
func compare(first, last EvalResult) []Comparison {
	var out []Comparison
	for _, mode := range []string{ModeT1, ModeGreedy} {
		for h, bySplit := range first.perTask[mode] {
			for split, before := range bySplit {
				after, ok := last.perTask[mode][h][split]
				if !ok {
					continue
				}
				c := Comparison{Harness: h, Split: split, Mode: mode, Paired: stats.PairTasks(before, after)}
				c.Before, c.BeforeCI = first.pass1(mode, h, split)
				c.After, c.AfterCI = last.pass1(mode, h, split)
				out = append(out, c)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		x, y := out[i], out[j]
		if x.Harness != y.Harness {
			return x.Harness < y.Harness
		}
		if x.Split != y.Split {
			return x.Split < y.Split
		}
		return x.Mode > y.Mode // t1 before greedy
	})
	return out
}

// pass1 is the pass@1 of harness h on split in mode, with its interval.
func (e EvalResult) pass1(mode, h, split string) (float64, [2]float64) {
	if mode == ModeGreedy {
		return e.Greedy[h][split], e.GreedyCI95[h][split]
	}
	return e.Pass1[h][split], e.CI95[h][split]
}

// graded is how many tasks of harness h on split have a scored result in
// mode.
func (e EvalResult) graded(mode, h, split string) int { return len(e.perTask[mode][h][split]) }

// Table renders the before/after table with 95% intervals and the paired
// test, and the training split's pass rate per iteration.
func (r *Result) Table() string {
	if len(r.Evals) == 0 {
		return ""
	}
	first, last := r.Evals[0], r.Evals[len(r.Evals)-1]
	var b strings.Builder
	after := fmt.Sprintf("after %d iterations", len(r.Iterations))
	if r.Kept != nil {
		after = fmt.Sprintf("after %d of %d iterations, the best by rl.probe", *r.Kept, len(r.Iterations))
	}
	fmt.Fprintf(&b, "\npass@1 on held-out tasks, policy v%d (before RL) -> v%d (%s); 95%% intervals; paired by task\n", first.PolicyVersion, last.PolicyVersion, after)
	if t := r.TestSuite; t != nil && slices.ContainsFunc(r.Comparisons, func(c Comparison) bool { return c.Split == SplitTest || c.Split == SplitTestFamily }) {
		fmt.Fprintf(&b, "split %s (%s): the test suite, the built-in suite of seed %d from the config's hash %.12s, measured before and after only; the others are the validation splits the config was tuned on\n",
			SplitTest, SplitTestFamily, t.Seed, t.ConfigHash)
	}
	fmt.Fprintf(&b, "%-8s %-15s %-6s %-21s %-21s %-24s %5s %9s\n", "harness", "split", "mode", "before", "after", "delta", "tasks", "McNemar p")
	for _, c := range r.Comparisons {
		fmt.Fprintf(&b, "%-8s %-15s %-6s %.3f [%.3f,%.3f] %.3f [%.3f,%.3f] %+.3f [%+.3f,%+.3f] %5d %9.2g\n", c.Harness, c.Split, c.Mode,
			c.Before, c.BeforeCI[0], c.BeforeCI[1], c.After, c.AfterCI[0], c.AfterCI[1], c.Diff, c.Lo, c.Hi, c.Tasks, c.McNemarP)
	}
	for _, c := range r.Comparisons {
		for _, e := range []struct {
			name string
			ev   EvalResult
		}{{"before", first}, {"after", last}} {
			if m := e.ev.Masked[c.Mode][c.Harness][c.Split]; m > 0 {
				fmt.Fprintf(&b, "warning: %s %s %s: the %s eval (policy v%d) masked %d rollouts (environment failures, not scored) and graded %d tasks; the difference covers the %d tasks graded in both\n",
					c.Harness, c.Split, c.Mode, e.name, e.ev.PolicyVersion, m, e.ev.graded(c.Mode, c.Harness, c.Split), c.Tasks)
			}
		}
	}
	for _, by := range []struct {
		name        string
		first, last map[string]map[string]map[string]map[string]float64
	}{{"family", first.Families, last.Families}, {"template", first.Templates, last.Templates}} {
		for _, c := range r.Comparisons {
			before, after := by.first[c.Mode][c.Harness][c.Split], by.last[c.Mode][c.Harness][c.Split]
			if len(before) < 2 || after == nil {
				continue // one group: the row above says it all
			}
			groups := make([]string, 0, len(before))
			for g := range before {
				groups = append(groups, g)
			}
			sort.Strings(groups)
			parts := make([]string, len(groups))
			for i, g := range groups {
				parts[i] = fmt.Sprintf("%s %.2f -> %.2f", g, before[g], after[g])
			}
			fmt.Fprintf(&b, "by %s, %s %s %s: %s\n", by.name, c.Harness, c.Split, c.Mode, strings.Join(parts, ", "))
		}
	}
	if len(r.Iterations) > 0 {
		var rates, zv, rep []string
		repeats := false
		for _, it := range r.Iterations {
			rates = append(rates, fmt.Sprintf("%.3f", it.PassRate))
			zv = append(zv, fmt.Sprintf("%.2f", it.ZeroVarianceFrac))
			rep = append(rep, strconv.Itoa(it.Repeated))
			repeats = repeats || it.Repeated > 0
		}
		fmt.Fprintf(&b, "pass rate on the training tasks, by iteration: %s\n", strings.Join(rates, ", "))
		fmt.Fprintf(&b, "groups without reward variance, by iteration: %s\n", strings.Join(zv, ", "))
		if repeats {
			fmt.Fprintf(&b, "training tasks rolled out by an earlier iteration, by iteration: %s\n", strings.Join(rep, ", "))
		}
	}
	if len(r.Probes) > 0 {
		var ps []string
		for _, p := range r.Probes {
			ps = append(ps, fmt.Sprintf("%d: %.3f", p.Iteration, p.Pass1))
		}
		fmt.Fprintf(&b, "rl.probe pass@1 after N iterations (%d tasks): %s\n", r.Probes[0].Tasks, strings.Join(ps, ", "))
	}
	return b.String()
}

// writeSummary writes the run's figures to WorkDir/summary.json (the file
// docs/results commits next to a config).
func (l *looper) writeSummary(res *Result) error {
	body, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	return atomicFile(filepath.Join(l.cfg.WorkDir, "summary.json"), append(body, '\n'))
}
