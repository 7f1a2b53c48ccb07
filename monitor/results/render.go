package results

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Begin and End enclose the generated tables in docs/RESULTS.md.
const (
	Begin = "<!-- results: the tables below are written by `make results` from docs/results; do not edit them -->"
	End   = "<!-- results: end of the generated tables -->"
)

// ErrMarkers: a document lacks Begin and End, in that order, once each.
var ErrMarkers = errors.New("results: the document needs the generated tables' begin and end markers once each, in order")

// agentOrder puts the agents of the project's tables first, in the
// order a reader meets them; other agents follow by name.
var agentOrder = []string{"bash", "tools", "pi", "demo", "moe"}

// agentTitles names a table; an agent without one is titled by its name.
var agentTitles = map[string]string{
	"demo": "demo: `make demo` and demo-sized bash runs",
	"moe":  "MoE: bash with a mixture-of-experts policy",
}

// Render writes one markdown table per agent of runs: a row per
// comparison (split and decoding mode) of each run, a run's splits of one
// mode next to each other (test before validation), and after the runs of
// a replicated config (configs equal but for the run name) a row of their
// mean and spread per split and mode. Links are relative to the folder
// that holds the results folder, prefixed with dir ("results/").
func Render(runs []Run, dir string) string {
	byAgent := map[string][]Run{}
	for _, r := range runs {
		byAgent[r.Agent] = append(byAgent[r.Agent], r)
	}
	agents := make([]string, 0, len(byAgent))
	for a := range byAgent {
		agents = append(agents, a)
	}
	slices.SortFunc(agents, func(a, b string) int {
		ia, ib := rank(agentOrder, a), rank(agentOrder, b)
		if ia != ib {
			return ia - ib
		}
		return strings.Compare(a, b)
	})
	var b strings.Builder
	for i, a := range agents {
		if i > 0 {
			b.WriteString("\n")
		}
		title := agentTitles[a]
		if title == "" {
			title = a
		}
		fmt.Fprintf(&b, "## %s\n\n", title)
		b.WriteString("| config | split | decoding | pass@1 before -> after | difference [95% interval] | McNemar p | tasks | RL iterations | lowest gate Pearson | wall time | files |\n")
		b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
		for _, g := range replicateGroups(byAgent[a]) {
			for _, r := range g {
				for _, row := range sortedRows(r.Rows) {
					writeRow(&b, r, row, dir)
				}
			}
			if len(g) > 1 {
				writeMeans(&b, g)
			}
		}
	}
	return b.String()
}

// replicateGroups splits runs into groups of equal configs, each sorted
// by name, the groups by their first name.
func replicateGroups(runs []Run) [][]Run {
	idx := map[string]int{}
	var groups [][]Run
	for _, r := range runs {
		i, ok := idx[r.key]
		if !ok {
			i = len(groups)
			idx[r.key] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], r)
	}
	for _, g := range groups {
		slices.SortFunc(g, func(a, b Run) int { return strings.Compare(a.Name, b.Name) })
	}
	slices.SortFunc(groups, func(a, b []Run) int { return strings.Compare(a[0].Name, b[0].Name) })
	return groups
}

// sortedRows orders a run's rows by decoding mode (t1, greedy, others),
// then split (test, heldout, others), then source.
func sortedRows(rows []Row) []Row {
	out := slices.Clone(rows)
	slices.SortStableFunc(out, func(a, b Row) int {
		if d := rank([]string{"t1", "greedy"}, a.Mode) - rank([]string{"t1", "greedy"}, b.Mode); d != 0 {
			return d
		}
		if c := strings.Compare(a.Mode, b.Mode); c != 0 {
			return c
		}
		if d := rank([]string{"test", "heldout"}, a.Split) - rank([]string{"test", "heldout"}, b.Split); d != 0 {
			return d
		}
		if c := strings.Compare(a.Split, b.Split); c != 0 {
			return c
		}
		return strings.Compare(a.Source, b.Source)
	})
	return out
}

func rank(order []string, s string) int {
	if i := slices.Index(order, s); i >= 0 {
		return i
	}
	return len(order)
}

func writeRow(b *strings.Builder, r Run, row Row, dir string) {
	c := row.Comparison
	wall := "-"
	if row.Source == r.Name+".summary.json" {
		wall = formatWall(r.WallSeconds, r.LastProcess)
	}
	files := fmt.Sprintf("[%s](%s%s)", linkText(r.Name, row.Source), dir, row.Source)
	if r.Notes != "" {
		files += fmt.Sprintf(", [notes](%s%s)", dir, r.Notes)
	}
	fmt.Fprintf(b, "| [`%s.json`](%s%s.json) | %s | %s | %s | %s | %s | %d | %d | %s | %s | %s |\n",
		r.Name, dir, r.Name, c.Split, c.Mode, PassCell(c.Before, c.After), DiffCell(c.Diff, c.Lo, c.Hi),
		PCell(c.P), c.Tasks, r.Iterations, pearsonCell(r.Pearson, r.HasPearson), wall, files)
}

// linkText names a row's source: "summary" for the run's own, the file
// name for a comparison made after it.
func linkText(name, source string) string {
	if source == name+".summary.json" {
		return "summary"
	}
	return strings.TrimPrefix(source, name+"/")
}

// writeMeans writes, for each split and mode that every run of a
// replicated config measured, the mean before and after, and the mean
// difference with the runs' range and standard deviation.
func writeMeans(b *strings.Builder, g []Run) {
	seen := map[[2]string]bool{}
	for _, first := range sortedRows(g[0].Rows) {
		if seen[[2]string{first.Split, first.Mode}] {
			continue
		}
		seen[[2]string{first.Split, first.Mode}] = true
		var rows []Row
		for _, r := range g {
			i := slices.IndexFunc(r.Rows, func(x Row) bool { return x.Split == first.Split && x.Mode == first.Mode })
			if i < 0 {
				break
			}
			rows = append(rows, r.Rows[i])
		}
		if len(rows) < len(g) {
			continue
		}
		m := Mean(rows)
		tasks, iters := fmt.Sprint(rows[0].Tasks), fmt.Sprint(g[0].Iterations)
		pearson, has, wall, partial := g[0].Pearson, g[0].HasPearson, 0.0, false
		for i, r := range g {
			if rows[i].Tasks != rows[0].Tasks {
				tasks = "-"
			}
			if r.Iterations != g[0].Iterations {
				iters = "-"
			}
			if r.HasPearson && (!has || r.Pearson < pearson) {
				pearson, has = r.Pearson, true
			}
			wall += r.WallSeconds / float64(len(g))
			partial = partial || r.LastProcess || r.WallSeconds <= 0
		}
		wallCell := "mean " + formatWall(wall, false)
		if partial { // a run's wall time is not whole: no mean
			wallCell = "-"
		}
		fmt.Fprintf(b, "| **mean of %d runs** | %s | %s | %s | %s | - | %s | %s | %s | %s | - |\n",
			len(g), first.Split, first.Mode, PassCell(m.Before, m.After), MeanCell(m), tasks, iters,
			pearsonCell(pearson, has), wallCell)
	}
}

// Spread is the mean of replicated runs' comparisons of one split and
// mode, and the range and sample standard deviation of their differences.
type Spread struct {
	Before, After, Diff float64
	Min, Max, SD        float64
}

// Mean returns the mean and spread of rows' comparisons.
func Mean(rows []Row) Spread {
	n := float64(len(rows))
	s := Spread{Min: math.Inf(1), Max: math.Inf(-1)}
	for _, r := range rows {
		s.Before += r.Before / n
		s.After += r.After / n
		s.Diff += r.Diff / n
		s.Min, s.Max = math.Min(s.Min, r.Diff), math.Max(s.Max, r.Diff)
	}
	if len(rows) > 1 {
		var ss float64
		for _, r := range rows {
			ss += (r.Diff - s.Diff) * (r.Diff - s.Diff)
		}
		s.SD = math.Sqrt(ss / (n - 1))
	}
	return s
}

// PassCell writes pass@1 before and after, to 3 decimals.
func PassCell(before, after float64) string { return fmt.Sprintf("%.3f -> %.3f", before, after) }

// DiffCell writes a difference and its 95% interval, to 3 decimals.
func DiffCell(d, lo, hi float64) string { return fmt.Sprintf("%+.3f [%+.3f, %+.3f]", d, lo, hi) }

// PCell writes McNemar's p to 2 significant digits.
func PCell(p float64) string { return fmt.Sprintf("%.2g", p) }

// MeanCell writes replicates' mean difference, range and deviation.
func MeanCell(s Spread) string {
	return fmt.Sprintf("mean %+.3f, runs %+.3f to %+.3f (sd %.3f)", s.Diff, s.Min, s.Max, s.SD)
}

func pearsonCell(p float64, ok bool) string {
	if !ok {
		return "-"
	}
	return fmt.Sprintf("%.12f", p)
}

// formatWall writes whole seconds with thousands separators; a resumed
// run whose summary holds only its last process says so.
func formatWall(s float64, lastProcess bool) string {
	if s <= 0 {
		return "-"
	}
	n := fmt.Sprintf("%.0f", s)
	for i := len(n) - 3; i > 0; i -= 3 {
		n = n[:i] + "," + n[i:]
	}
	if lastProcess {
		return n + " s (last process)"
	}
	return n + " s"
}

// Splice returns doc with the text between Begin and End replaced by
// tables.
func Splice(doc, tables string) (string, error) {
	head, rest, ok := strings.Cut(doc, Begin+"\n")
	if !ok || strings.Contains(rest, Begin) {
		return "", ErrMarkers
	}
	_, tail, ok := strings.Cut(rest, End)
	if !ok || strings.Contains(tail, End) {
		return "", ErrMarkers
	}
	return head + Begin + "\n\n" + tables + "\n" + End + tail, nil
}
