package monitor

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Charts are drawn here as SVG, so the page needs no charting library and
// works offline; each mark carries a <title> with its exact value.

var palette = []string{"#2563eb", "#dc2626", "#16a34a", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#4b5563", "#65a30d", "#9333ea"}

func color(i int) string { return palette[i%len(palette)] }

// xy is one point; a non-finite Y is a gap.
type xy struct {
	X, Y float64
	Tip  string
}

// line is one series of a line chart.
type line struct {
	Name   string
	Color  string
	Points []xy
	Dashed bool
	// Lo and Hi, when set, draw a band (one value per point).
	Lo, Hi []float64
}

// chartOpts sizes and labels a chart. A NaN bound is taken from the data.
type chartOpts struct {
	W, H           int
	Title          string
	XLabel, YLabel string
	YMin, YMax     float64
	XMin, XMax     float64
	XInt           bool // integer x ticks (iterations, steps)
}

func defaults(o chartOpts) chartOpts {
	if o.W == 0 {
		o.W = 460
	}
	if o.H == 0 {
		o.H = 220
	}
	return o
}

// frame maps data to pixels.
type frame struct {
	o                      chartOpts
	l, r, t, b             float64
	x0, x1, y0, y1         float64
	xticks, yticks         []float64
	xint                   bool
	finiteX, finiteY, anyP bool
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func newFrame(o chartOpts, xs, ys []float64, names ...string) *frame {
	_, rows := legendRows(names, o.W)
	f := &frame{o: o, l: 52, r: float64(o.W) - 12, t: 26 + 13*float64(rows), b: float64(o.H) - 34, xint: o.XInt}
	f.x0, f.x1 = bounds(xs, o.XMin, o.XMax)
	f.y0, f.y1 = bounds(ys, o.YMin, o.YMax)
	if f.x0 == f.x1 {
		f.x0, f.x1 = f.x0-0.5, f.x1+0.5
	}
	if f.y0 == f.y1 {
		pad := math.Max(math.Abs(f.y0)*0.1, 0.5)
		f.y0, f.y1 = f.y0-pad, f.y1+pad
	}
	f.yticks = ticks(f.y0, f.y1, 5)
	f.xticks = ticks(f.x0, f.x1, 6)
	if o.XInt {
		var it []float64
		for _, x := range f.xticks {
			if x == math.Trunc(x) {
				it = append(it, x)
			}
		}
		f.xticks = it
	}
	return f
}

func bounds(v []float64, lo, hi float64) (float64, float64) {
	a, b := math.Inf(1), math.Inf(-1)
	for _, x := range v {
		if finite(x) {
			a, b = math.Min(a, x), math.Max(b, x)
		}
	}
	if math.IsInf(a, 1) {
		a, b = 0, 1
	}
	if finite(lo) {
		a = lo
	}
	if finite(hi) {
		b = hi
	}
	if b < a {
		b = a
	}
	return a, b
}

// ticks returns about n round values spanning [lo, hi].
func ticks(lo, hi float64, n int) []float64 {
	span := hi - lo
	if span <= 0 || !finite(span) {
		return []float64{lo}
	}
	raw := span / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var out []float64
	for v := math.Ceil(lo/step) * step; v <= hi+step*1e-9; v += step {
		out = append(out, math.Round(v/step)*step)
	}
	return out
}

func (f *frame) X(x float64) float64 { return f.l + (x-f.x0)/(f.x1-f.x0)*(f.r-f.l) }
func (f *frame) Y(y float64) float64 { return f.b - (y-f.y0)/(f.y1-f.y0)*(f.b-f.t) }

func tickLabel(v float64) string {
	a := math.Abs(v)
	switch {
	case v == 0:
		return "0"
	case a >= 1e5 || a < 1e-3:
		return strconv.FormatFloat(v, 'g', 2, 64)
	default:
		return strconv.FormatFloat(v, 'g', 6, 64)
	}
}

// f1 formats a pixel coordinate.
func f1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// open starts a chart: the frame, title, grid, ticks, axes and labels.
func (f *frame) open(label string) *chart {
	c := &chart{Class: "chart", W: itoa(f.o.W), H: itoa(f.o.H), Label: label}
	if f.o.Title != "" {
		c.Marks = append(c.Marks, mark{Tag: "text", Class: "ct", X: strconv.FormatFloat(f.l, 'g', -1, 64), Y: "14", Text: f.o.Title})
	}
	for _, y := range f.yticks {
		c.Marks = append(c.Marks,
			mark{Tag: "line", Class: "grid", X1: f1(f.l), X2: f1(f.r), Y1: f1(f.Y(y)), Y2: f1(f.Y(y))},
			mark{Tag: "text", Class: "tick", X: f1(f.l - 4), Y: f1(f.Y(y) + 3), Anchor: "end", Text: tickLabel(y)})
	}
	for _, x := range f.xticks {
		c.Marks = append(c.Marks, mark{Tag: "text", Class: "tick", X: f1(f.X(x)), Y: f1(f.b + 13), Anchor: "middle", Text: tickLabel(x)})
	}
	c.Marks = append(c.Marks,
		mark{Tag: "line", Class: "axis", X1: f1(f.l), X2: f1(f.r), Y1: f1(f.b), Y2: f1(f.b)},
		mark{Tag: "line", Class: "axis", X1: f1(f.l), X2: f1(f.l), Y1: f1(f.t), Y2: f1(f.b)})
	if f.o.XLabel != "" {
		c.Marks = append(c.Marks, mark{Tag: "text", Class: "al", X: f1((f.l + f.r) / 2), Y: itoa(f.o.H - 4), Anchor: "middle", Text: f.o.XLabel})
	}
	if f.o.YLabel != "" {
		c.Marks = append(c.Marks, mark{Tag: "text", Class: "al", Transform: fmt.Sprintf("translate(12 %.1f) rotate(-90)", (f.t+f.b)/2), Anchor: "middle", Text: f.o.YLabel})
	}
	return c
}

// legendRows lays out legend entries left to right under the title,
// wrapping at the chart's width; it returns each entry's position and the
// rows used.
func legendRows(names []string, w int) (pos [][2]float64, rows int) {
	if len(names) < 2 {
		return nil, 0
	}
	x, row := 52.0, 0
	for _, n := range names {
		width := 18 + 6.2*float64(len([]rune(n)))
		if x+width > float64(w)-8 && x > 52 {
			x, row = 52, row+1
		}
		pos = append(pos, [2]float64{x, 30 + 13*float64(row)})
		x += width
	}
	return pos, row + 1
}

func legend(c *chart, f *frame, names, colors []string) {
	pos, _ := legendRows(names, f.o.W)
	for i, p := range pos {
		c.Marks = append(c.Marks,
			mark{Tag: "rect", X: f1(p[0]), Y: f1(p[1] - 8), W: "9", H: "9", Fill: colors[i]},
			mark{Tag: "text", Class: "lg", X: f1(p[0] + 12), Y: f1(p[1]), Text: names[i]})
	}
}

// lineChart draws series over x; gaps where y is not finite.
func lineChart(o chartOpts, series []line) node {
	o = defaults(o)
	var xs, ys []float64
	for _, s := range series {
		for i, p := range s.Points {
			xs, ys = append(xs, p.X), append(ys, p.Y)
			if s.Lo != nil {
				ys = append(ys, s.Lo[i], s.Hi[i])
			}
		}
	}
	var names []string
	for _, s := range series {
		names = append(names, s.Name)
	}
	f := newFrame(o, xs, ys, names...)
	c := f.open(o.Title)
	var colors []string
	for _, s := range series {
		colors = append(colors, s.Color)
		if s.Lo != nil {
			var up, down []string
			for i, p := range s.Points {
				if finite(s.Lo[i]) && finite(s.Hi[i]) {
					up = append(up, f1(f.X(p.X))+","+f1(f.Y(s.Hi[i])))
					down = append([]string{f1(f.X(p.X)) + "," + f1(f.Y(s.Lo[i]))}, down...)
				}
			}
			if len(up) > 0 {
				c.Marks = append(c.Marks, mark{Tag: "polygon", Class: "band", Fill: s.Color, Points: strings.Join(append(up, down...), " ")})
			}
		}
		var seg []string
		flush := func() {
			if len(seg) > 1 {
				c.Marks = append(c.Marks, mark{Tag: "polyline", Class: "ln", Stroke: s.Color, Dash: s.Dashed, Points: strings.Join(seg, " ")})
			}
			seg = seg[:0]
		}
		for _, p := range s.Points {
			if !finite(p.Y) {
				flush()
				continue
			}
			seg = append(seg, f1(f.X(p.X))+","+f1(f.Y(p.Y)))
		}
		flush()
		if len(s.Points) <= 60 {
			for _, p := range s.Points {
				if finite(p.Y) {
					c.Marks = append(c.Marks, mark{Tag: "circle", Class: "pt", X: f1(f.X(p.X)), Y: f1(f.Y(p.Y)), R: "3", Fill: s.Color, Title: p.Tip})
				}
			}
		}
	}
	legend(c, f, names, colors)
	return chartNode(c)
}

// stack is one category of a stacked bar chart: one value per x.
type stack struct {
	Name   string
	Color  string
	Values []float64
}

// barChart draws stacked bars, one per x.
func barChart(o chartOpts, xs []float64, stacks []stack) node {
	o = defaults(o)
	top := make([]float64, len(xs))
	for _, s := range stacks {
		for i, v := range s.Values {
			top[i] += v
		}
	}
	o.YMin = 0
	if len(xs) > 0 {
		o.XMin, o.XMax = xs[0]-0.6, xs[len(xs)-1]+0.6
	}
	var names []string
	for _, s := range stacks {
		names = append(names, s.Name)
	}
	f := newFrame(o, xs, top, names...)
	c := f.open(o.Title)
	w := math.Max(2, 0.7*(f.X(1)-f.X(0)))
	if len(xs) > 1 {
		w = math.Max(2, 0.7*(f.X(xs[1])-f.X(xs[0])))
	}
	base := make([]float64, len(xs))
	var colors []string
	for _, s := range stacks {
		colors = append(colors, s.Color)
		for i, v := range s.Values {
			if v <= 0 {
				continue
			}
			y0, y1 := f.Y(base[i]), f.Y(base[i]+v)
			c.Marks = append(c.Marks, mark{Tag: "rect", X: f1(f.X(xs[i]) - w/2), Y: f1(y1), W: f1(w), H: f1(y0 - y1), Fill: s.Color,
				Title: s.Name + " at " + tickLabel(xs[i]) + ": " + tickLabel(v)})
			base[i] += v
		}
	}
	legend(c, f, names, colors)
	return chartNode(c)
}

// histChart draws a histogram.
func histChart(o chartOpts, bins []Bin) node {
	o = defaults(o)
	if len(bins) == 0 {
		return node{}
	}
	xs := []float64{bins[0].Lo, bins[len(bins)-1].Hi}
	if pad := float64(5-len(bins)) / 2 * (bins[0].Hi - bins[0].Lo); pad > 0 {
		xs = []float64{xs[0] - pad, xs[1] + pad} // a few bins: keep them narrow
	}
	var ys []float64
	for _, bn := range bins {
		ys = append(ys, float64(bn.Count))
	}
	o.YMin = 0
	f := newFrame(o, xs, ys)
	c := f.open(o.Title)
	for _, bn := range bins {
		x0, x1 := f.X(bn.Lo), f.X(bn.Hi)
		c.Marks = append(c.Marks, mark{Tag: "rect", X: f1(x0 + 0.5), Y: f1(f.Y(float64(bn.Count))), W: f1(math.Max(1, x1-x0-1)), H: f1(f.b - f.Y(float64(bn.Count))),
			Fill: palette[0], Title: fmt.Sprintf("[%s, %s): %d", tickLabel(bn.Lo), tickLabel(bn.Hi), bn.Count)})
	}
	return chartNode(c)
}

// scatterChart draws points with the y = x diagonal.
func scatterChart(o chartOpts, pts []ScatterPoint) node {
	o = defaults(o)
	var xs []float64
	for _, p := range pts {
		xs = append(xs, float64(p.Rollout), float64(p.Recomputed))
	}
	lo, hi := bounds(xs, math.NaN(), math.NaN())
	o.XMin, o.XMax, o.YMin, o.YMax = lo, hi, lo, hi
	f := newFrame(o, xs, xs)
	c := f.open(o.Title)
	c.Marks = append(c.Marks, mark{Tag: "line", Class: "diag", X1: f1(f.X(f.x0)), Y1: f1(f.Y(f.x0)), X2: f1(f.X(f.x1)), Y2: f1(f.Y(f.x1))})
	for _, p := range pts {
		c.Marks = append(c.Marks, mark{Tag: "circle", Class: "sp", X: f1(f.X(float64(p.Rollout))), Y: f1(f.Y(float64(p.Recomputed))), R: "2"})
	}
	return chartNode(c)
}
