package results

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// Figures are the pass@1 and difference values the tables hold: each
// comparison's before and after, its difference and interval, and each
// replicated config's means. A document that cites results cites these.
type Figures struct {
	pairs     [][2]float64 // pass@1 before, after
	diffs     []float64    // differences, as fractions
	intervals [][3]float64 // difference, low, high
}

// Backing returns the figures of runs' rows and of their replicates' means.
func Backing(runs []Run) Figures {
	var f Figures
	for _, r := range runs {
		for _, row := range r.Rows {
			f.pairs = append(f.pairs, [2]float64{row.Before, row.After})
			f.diffs = append(f.diffs, row.Diff)
			f.intervals = append(f.intervals, [3]float64{row.Diff, row.Lo, row.Hi})
		}
	}
	for _, g := range replicateGroups(runs) {
		if len(g) < 2 {
			continue
		}
		for _, first := range g[0].Rows {
			var rows []Row
			for _, r := range g {
				for _, x := range r.Rows {
					if x.Split == first.Split && x.Mode == first.Mode {
						rows = append(rows, x)
						break
					}
				}
			}
			if len(rows) == len(g) {
				m := Mean(rows)
				f.pairs = append(f.pairs, [2]float64{m.Before, m.After})
				f.diffs = append(f.diffs, m.Diff)
			}
		}
	}
	return f
}

var (
	// "+12.0 points [+7.1, +16.9]", "+10.5 points, 95% interval [+6.5,
	// +14.5]", "+0.120 [+0.071, +0.169]"
	intervalRE = regexp.MustCompile(`([+-]\d+\.\d+)(?: points)?(?:,? 95% interval)? \[([+-]\d+\.\d+), ([+-]\d+\.\d+)\]`)
	// "0.290 -> 0.410", "from 0.290 to 0.410"
	pairRE = regexp.MustCompile(`\b(\d\.\d+) -> (\d\.\d+)\b|\bfrom (\d\.\d+) to (\d\.\d+)\b`)
	// a signed decimal on its own: "+8.3 in a rerun", "(-9.0 to +6.5)"
	signedRE = regexp.MustCompile(`(?:^|[\s(])([+-]\d+\.\d+)(?:[^\dx%e.]|$)`)
)

// Unbacked returns each pass@1 or difference figure of text that no table
// row backs, with its line number: pass@1 pairs ("A -> B", "from A to
// B"), differences with their interval ("+D [+L, +H]") and signed
// differences on their own ("+D points", "+D"). A figure of 3 or more
// decimals is a fraction, one of fewer is in points (percentage points);
// it matches a row's value when equal to it at the figure's precision
// (either rounding of a half). Integers ("+10 points", the goal) are not
// figures of a run and are not checked.
func (f Figures) Unbacked(text string) []string {
	var bad []string
	for n, line := range strings.Split(text, "\n") {
		for _, m := range intervalRE.FindAllStringSubmatch(line, -1) {
			if !f.hasInterval(m[1], m[2], m[3]) {
				bad = append(bad, fmt.Sprintf("line %d: difference %q is no row's", n+1, m[0]))
			}
		}
		rest := intervalRE.ReplaceAllString(line, " ")
		for _, m := range pairRE.FindAllStringSubmatch(rest, -1) {
			a, b := m[1], m[2]
			if a == "" {
				a, b = m[3], m[4]
			}
			if !f.hasPair(a, b) {
				bad = append(bad, fmt.Sprintf("line %d: pass@1 %q is no row's", n+1, m[0]))
			}
		}
		rest = pairRE.ReplaceAllString(rest, " ")
		for _, m := range signedRE.FindAllStringSubmatch(rest, -1) {
			if !f.hasDiff(m[1]) {
				bad = append(bad, fmt.Sprintf("line %d: difference %q is no row's", n+1, m[1]))
			}
		}
	}
	return bad
}

func (f Figures) hasPair(a, b string) bool {
	for _, p := range f.pairs {
		if near(a, p[0], false) && near(b, p[1], false) {
			return true
		}
	}
	return false
}

func (f Figures) hasDiff(d string) bool {
	for _, x := range f.diffs {
		if near(d, x, true) {
			return true
		}
	}
	return false
}

func (f Figures) hasInterval(d, lo, hi string) bool {
	for _, x := range f.intervals {
		if near(d, x[0], true) && near(lo, x[1], true) && near(hi, x[2], true) {
			return true
		}
	}
	return false
}

// near reports whether the written figure s is v at its precision. With
// points, a figure of fewer than 3 decimals is read as 100 v.
func near(s string, v float64, points bool) bool {
	x, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return false
	}
	_, frac, _ := strings.Cut(s, ".")
	if points && len(frac) < 3 {
		v *= 100
	}
	return math.Abs(x-v) <= 0.5*math.Pow(10, -float64(len(frac)))+1e-9
}
