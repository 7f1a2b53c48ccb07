package loop

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Replicate is the spread across independent runs of one config (its
// replicates: the same config under other run ids, so other rollout and
// training draws and another test suite) of one comparison row: each
// run's difference after - before, and their mean, sample standard
// deviation, least and greatest. A run's 95% interval covers its rollout
// sampling only; the spread across runs covers training too.
type Replicate struct {
	Harness string    `json:"harness"`
	Split   string    `json:"split"`
	Mode    string    `json:"mode"`
	Runs    []string  `json:"runs"`
	Diffs   []float64 `json:"diffs"`
	// CI95 are the runs' 95% intervals of their differences.
	CI95 [][2]float64 `json:"ci95"`
	Mean float64      `json:"mean"`
	SD   float64      `json:"sd"` // 0 with one run
	Min  float64      `json:"min"`
	Max  float64      `json:"max"`
}

// ReadReplicates reads the run summaries (summary.json files, each named
// RUN.summary.json or RUN/summary.json) and returns each comparison row's
// spread across them, ordered by harness, split and mode (t1 first).
func ReadReplicates(paths []string) ([]Replicate, error) {
	byRow := map[[3]string]*Replicate{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("replicates: %w", err)
		}
		var s struct {
			Comparisons []Comparison `json:"comparisons"`
		}
		if err := json.Unmarshal(b, &s); err != nil {
			return nil, fmt.Errorf("replicates: %s: %w", p, err)
		}
		run := strings.TrimSuffix(filepath.Base(p), ".summary.json")
		if run == "summary.json" {
			run = filepath.Base(filepath.Dir(p))
		}
		for _, c := range s.Comparisons {
			k := [3]string{c.Harness, c.Split, c.Mode}
			if byRow[k] == nil {
				byRow[k] = &Replicate{Harness: c.Harness, Split: c.Split, Mode: c.Mode}
			}
			r := byRow[k]
			r.Runs, r.Diffs, r.CI95 = append(r.Runs, run), append(r.Diffs, c.Diff), append(r.CI95, [2]float64{c.Lo, c.Hi})
		}
	}
	var out []Replicate
	for _, r := range byRow {
		r.Min, r.Max = slices.Min(r.Diffs), slices.Max(r.Diffs)
		for _, d := range r.Diffs {
			r.Mean += d / float64(len(r.Diffs))
		}
		if n := len(r.Diffs); n > 1 {
			var ss float64
			for _, d := range r.Diffs {
				ss += (d - r.Mean) * (d - r.Mean)
			}
			r.SD = math.Sqrt(ss / float64(n-1))
		}
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b Replicate) int {
		if c := strings.Compare(a.Harness+"\x00"+a.Split, b.Harness+"\x00"+b.Split); c != 0 {
			return c
		}
		return -strings.Compare(a.Mode, b.Mode) // t1 before greedy
	})
	return out, nil
}

// Report is what `legorl run` prints after a run: the before/after table
// (Result.Table) and, when pattern is not empty, the spread of the
// summaries it matches (committed replicates of the run's config, e.g.
// docs/results/demo-rep-*.summary.json) beside the run's own difference
// and interval, row by row; with none matching, it says so.
func Report(res *Result, pattern string) (string, error) {
	if res == nil || len(res.Evals) == 0 {
		return "", nil
	}
	out := res.Table()
	if pattern == "" {
		return out, nil
	}
	paths, err := filepath.Glob(pattern)
	if err != nil {
		return out, fmt.Errorf("replicates %q: %w", pattern, err)
	}
	if len(paths) == 0 {
		return out + fmt.Sprintf("replicates: no committed summary matches %s yet, so the spread across independent runs is unknown; this run's intervals cover its rollout sampling only\n", pattern), nil
	}
	reps, err := ReadReplicates(paths)
	if err != nil {
		return out, err
	}
	var b strings.Builder
	b.WriteString(out)
	fmt.Fprintf(&b, "\nthe difference after - before across the %d committed replicates (%s), and this run's\n", len(paths), pattern)
	fmt.Fprintf(&b, "%-8s %-15s %-6s %4s %-7s %-6s %-17s %-24s %s\n", "harness", "split", "mode", "runs", "mean", "sd", "range", "this run [95%]", "each run [95%]")
	for _, r := range reps {
		own := "-"
		if i := slices.IndexFunc(res.Comparisons, func(c Comparison) bool { return c.Harness == r.Harness && c.Split == r.Split && c.Mode == r.Mode }); i >= 0 {
			c := res.Comparisons[i]
			own = fmt.Sprintf("%+.3f [%+.3f,%+.3f]", c.Diff, c.Lo, c.Hi)
		}
		each := make([]string, len(r.Runs))
		for i := range r.Runs {
			each[i] = fmt.Sprintf("%s %+.3f [%+.3f,%+.3f]", r.Runs[i], r.Diffs[i], r.CI95[i][0], r.CI95[i][1])
		}
		fmt.Fprintf(&b, "%-8s %-15s %-6s %4d %+.3f  %.3f  [%+.3f,%+.3f] %-24s %s\n", r.Harness, r.Split, r.Mode, len(r.Runs), r.Mean, r.SD, r.Min, r.Max, own, strings.Join(each, ", "))
	}
	return b.String(), nil
}
