package doccheck

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// ErrNoResults is returned for a benchmark output without a result line.
var ErrNoResults = errors.New("no benchmark result line")

// Output is one benchmark output file in Go's benchmark format: "key:
// value" configuration lines (go test writes goos, pkg and cpu; the
// bench scripts write command, machine and load) and result lines.
type Output struct {
	Config  map[string]string // the first value of each key
	Results []Result          // in file order; -count N gives N per name
}

// Result is one result line: Name (without the -GOMAXPROCS suffix), the
// iteration count and each value by its unit.
type Result struct {
	Name   string
	Iters  int
	Values map[string]float64
}

var (
	configLine = regexp.MustCompile(`^([a-z][^\s:]*):\s*(.*)$`)
	procs      = regexp.MustCompile(`-[0-9]+$`)
)

// Parse reads a benchmark output; lines that are neither configuration nor
// results (PASS, ok, log lines) are skipped.
func Parse(r io.Reader) (Output, error) {
	out := Output{Config: map[string]string{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if m := configLine.FindStringSubmatch(line); m != nil {
			if _, ok := out.Config[m[1]]; !ok {
				out.Config[m[1]] = strings.TrimSpace(m[2])
			}
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || len(f)%2 != 0 {
			continue
		}
		iters, err := strconv.Atoi(f[1])
		if err != nil {
			continue
		}
		res := Result{Name: procs.ReplaceAllString(f[0], ""), Iters: iters, Values: map[string]float64{}}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return Output{}, fmt.Errorf("doccheck: line %d: value %q of %s: %w", n, f[i], f[i+1], err)
			}
			res.Values[f[i+1]] = v
		}
		out.Results = append(out.Results, res)
	}
	if err := sc.Err(); err != nil {
		return Output{}, fmt.Errorf("doccheck: reading benchmark output: %w", err)
	}
	if len(out.Results) == 0 {
		return Output{}, ErrNoResults
	}
	return out, nil
}

// Names returns the distinct result names in order of first appearance.
func (o Output) Names() []string {
	var names []string
	seen := map[string]bool{}
	for _, r := range o.Results {
		if !seen[r.Name] {
			seen[r.Name] = true
			names = append(names, r.Name)
		}
	}
	return names
}

// Values returns every value of a unit reported under a name.
func (o Output) Values(name, unit string) []float64 {
	var vs []float64
	for _, r := range o.Results {
		if v, ok := r.Values[unit]; ok && r.Name == name {
			vs = append(vs, v)
		}
	}
	return vs
}

// median returns the median of vs (the mean of the middle two for an even
// count) and whether there was any value.
func median(vs []float64) (float64, bool) {
	if len(vs) == 0 {
		return 0, false
	}
	s := append([]float64(nil), vs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2], true
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2, true
}

// Num formats a figure for a table: whole numbers as they are, others to
// about three significant digits; thousands grouped, never an exponent.
func Num(v float64) string {
	a := v
	if a < 0 {
		a = -a
	}
	var s string
	switch {
	case a >= 1000, v == math.Trunc(v) && a < 1e15:
		s = group(strconv.FormatFloat(v, 'f', 0, 64))
	case a >= 100:
		s = strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		s = strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		s = strconv.FormatFloat(v, 'f', 2, 64)
	case a == 0:
		s = "0"
	default:
		s = strconv.FormatFloat(v, 'g', 3, 64)
		if strings.Contains(s, "e") {
			s = strings.TrimRight(strings.TrimRight(strconv.FormatFloat(v, 'f', 6, 64), "0"), ".")
		}
	}
	return s
}

// group inserts thousands separators into an integer's digits.
func group(s string) string {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
