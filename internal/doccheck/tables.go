package doccheck

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"strings"
)

// ErrBlocks is returned when docs/PERFORMANCE.md's generated blocks and
// the table list disagree.
var ErrBlocks = errors.New("generated blocks")

// Table is one component's table in docs/PERFORMANCE.md, made from
// docs/perf/NAME.txt, which `make bench-NAME` writes.
type Table struct {
	Name string
	// Make is the command that writes the output file ("" is make
	// bench-NAME).
	Make    string
	Rows    *regexp.Regexp // the results shown; nil shows every one
	Columns []Column
	Ratios  []Ratio // a column each, after Columns
}

// Column is the median (and range) of one figure of each row: the first
// of Units that the row reports.
type Column struct {
	Head  string
	Units []string
}

// Ratio is a row's figure over its anchor's, measured in the same run:
// the medians' ratio, or with Diff their difference.
type Ratio struct {
	Head string
	// Unit and AnchorUnit: the row's figure and the anchor's
	// (AnchorUnit "" is Unit).
	Unit, AnchorUnit string
	// Anchor names a row's anchor ("" for none; the row's own name when
	// one result reports both figures).
	Anchor func(name string) string
	Diff   bool
}

// Render makes a table's Markdown from its benchmark output.
func (t Table) Render(o Output) string {
	var b strings.Builder
	fmt.Fprintf(&b, "`%s`", o.Config["command"])
	if m := o.Config["machine"]; m != "" {
		fmt.Fprintf(&b, " on %s", m)
	}
	if ts := o.Config["tests"]; ts != "" {
		fmt.Fprintf(&b, "; tests %s", ts)
	}
	if l := o.Config["load"]; l != "" {
		fmt.Fprintf(&b, ", load average %s", l)
	}
	// The cells, row by row; a column no row has a figure for is left out
	// (a ratio whose anchor was not run).
	head := []string{"benchmark"}
	for _, c := range t.Columns {
		head = append(head, c.Head)
	}
	for _, r := range t.Ratios {
		head = append(head, r.Head)
	}
	var rows [][]string
	for _, name := range o.Names() {
		if t.Rows != nil && !t.Rows.MatchString(name) {
			continue
		}
		row := []string{strings.TrimPrefix(name, "Benchmark")}
		for _, c := range t.Columns {
			row = append(row, cell(o, name, c.Units))
		}
		for _, r := range t.Ratios {
			row = append(row, r.cell(o, name))
		}
		rows = append(rows, row)
	}
	keep := make([]bool, len(head))
	for _, row := range rows {
		for i, c := range row {
			keep[i] = keep[i] || c != ""
		}
	}
	line := func(cells []string) {
		b.WriteString("|")
		for i, c := range cells {
			if keep[i] {
				b.WriteString(" " + c + " |")
			}
		}
		b.WriteString("\n")
	}
	b.WriteString(":\n\n")
	line(head)
	sep := make([]string, len(head))
	for i := range sep {
		sep[i] = "---"
	}
	line(sep)
	for _, row := range rows {
		line(row)
	}
	return b.String()
}

// cell is the median of the first unit a row reports, with the range of
// its samples when they differ; "" when it reports none.
func cell(o Output, name string, units []string) string {
	for _, u := range units {
		vs := o.Values(name, u)
		m, ok := median(vs)
		if !ok {
			continue
		}
		lo, hi := vs[0], vs[0]
		for _, v := range vs {
			lo, hi = min(lo, v), max(hi, v)
		}
		if lo == hi {
			return Num(m)
		}
		return fmt.Sprintf("%s (%s-%s)", Num(m), Num(lo), Num(hi))
	}
	return ""
}

func (r Ratio) cell(o Output, name string) string {
	anchor := r.Anchor(name)
	if anchor == "" {
		return ""
	}
	au := r.AnchorUnit
	if au == "" {
		au = r.Unit
	}
	v, ok1 := median(o.Values(name, r.Unit))
	a, ok2 := median(o.Values(anchor, au))
	switch {
	case !ok1 || !ok2:
		return ""
	case r.Diff:
		d := Num(v - a)
		if v >= a {
			d = "+" + d
		}
		return d
	case a == 0:
		return ""
	}
	return Num(v/a) + "x"
}

// Block markers in docs/PERFORMANCE.md: the lines between them are
// generated.
const (
	beginMark = "<!-- bench table %s: made from docs/perf/%s.txt by `go test ./internal/doccheck -update`; do not edit -->"
	endMark   = "<!-- end of bench table %s -->"
)

var beginRe = regexp.MustCompile(`(?m)^<!-- bench table ([a-z0-9-]+):.*-->$`)

// Update returns doc with the lines of each table's block made again from
// perf (the folder docs/perf); a table without a recorded output says so.
// Every block must have a table and every table a block.
func Update(doc []byte, tables []Table, perf fs.FS) ([]byte, error) {
	byName := map[string]Table{}
	for _, t := range tables {
		byName[t.Name] = t
	}
	done := map[string]bool{}
	var out bytes.Buffer
	rest := doc
	for {
		loc := beginRe.FindSubmatchIndex(rest)
		if loc == nil {
			out.Write(rest)
			break
		}
		name := string(rest[loc[2]:loc[3]])
		t, ok := byName[name]
		if !ok {
			return nil, fmt.Errorf("doccheck: %w: block %q has no table in internal/doccheck", ErrBlocks, name)
		}
		if done[name] {
			return nil, fmt.Errorf("doccheck: %w: block %q twice", ErrBlocks, name)
		}
		done[name] = true
		end := []byte(fmt.Sprintf(endMark, name))
		after := rest[loc[1]:]
		e := bytes.Index(after, end)
		if e < 0 {
			return nil, fmt.Errorf("doccheck: %w: block %q has no end line %q", ErrBlocks, name, end)
		}
		out.Write(rest[:loc[0]])
		fmt.Fprintf(&out, beginMark+"\n", name, name)
		body, err := t.body(perf)
		if err != nil {
			return nil, err
		}
		out.WriteString(body)
		out.Write(end)
		rest = after[e+len(end):]
	}
	for _, t := range tables {
		if !done[t.Name] {
			return nil, fmt.Errorf("doccheck: %w: table %q has no block in docs/PERFORMANCE.md", ErrBlocks, t.Name)
		}
	}
	return out.Bytes(), nil
}

func (t Table) body(perf fs.FS) (string, error) {
	f, err := perf.Open(t.Name + ".txt")
	if errors.Is(err, fs.ErrNotExist) {
		cmd := t.Make
		if cmd == "" {
			cmd = "make bench-" + t.Name
		}
		return fmt.Sprintf("No output recorded yet: `%s` writes docs/perf/%s.txt.\n", cmd, t.Name), nil
	}
	if err != nil {
		return "", fmt.Errorf("doccheck: %w", err)
	}
	defer f.Close()
	o, err := Parse(f)
	if err != nil {
		return "", fmt.Errorf("doccheck: docs/perf/%s.txt: %w", t.Name, err)
	}
	return t.Render(o), nil
}
