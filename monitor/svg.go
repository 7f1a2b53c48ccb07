package monitor

import (
	"fmt"
	"html"
	"html/template"
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

func (f *frame) open(b *strings.Builder, label string) {
	fmt.Fprintf(b, `<svg class="chart" viewBox="0 0 %d %d" role="img" aria-label="%s" xmlns="http://www.w3.org/2000/svg">`, f.o.W, f.o.H, esc(label))
	if f.o.Title != "" {
		fmt.Fprintf(b, `<text class="ct" x="%g" y="14">%s</text>`, f.l, esc(f.o.Title))
	}
	for _, y := range f.yticks {
		fmt.Fprintf(b, `<line class="grid" x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f"/>`, f.l, f.r, f.Y(y), f.Y(y))
		fmt.Fprintf(b, `<text class="tick" x="%.1f" y="%.1f" text-anchor="end">%s</text>`, f.l-4, f.Y(y)+3, tickLabel(y))
	}
	for _, x := range f.xticks {
		fmt.Fprintf(b, `<text class="tick" x="%.1f" y="%.1f" text-anchor="middle">%s</text>`, f.X(x), f.b+13, tickLabel(x))
	}
	fmt.Fprintf(b, `<line class="axis" x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f"/>`, f.l, f.r, f.b, f.b)
	fmt.Fprintf(b, `<line class="axis" x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f"/>`, f.l, f.l, f.t, f.b)
	if f.o.XLabel != "" {
		fmt.Fprintf(b, `<text class="al" x="%.1f" y="%d" text-anchor="middle">%s</text>`, (f.l+f.r)/2, f.o.H-4, esc(f.o.XLabel))
	}
	if f.o.YLabel != "" {
		fmt.Fprintf(b, `<text class="al" transform="translate(12 %.1f) rotate(-90)" text-anchor="middle">%s</text>`, (f.t+f.b)/2, esc(f.o.YLabel))
	}
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

func legend(b *strings.Builder, f *frame, names, colors []string) {
	pos, _ := legendRows(names, f.o.W)
	for i, p := range pos {
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="9" height="9" fill="%s"/><text class="lg" x="%.1f" y="%.1f">%s</text>`, p[0], p[1]-8, colors[i], p[0]+12, p[1], esc(names[i]))
	}
}

// lineChart draws series over x; gaps where y is not finite.
func lineChart(o chartOpts, series []line) template.HTML {
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
	var b strings.Builder
	f.open(&b, o.Title)
	var colors []string
	for _, s := range series {
		colors = append(colors, s.Color)
		if s.Lo != nil {
			var up, down []string
			for i, p := range s.Points {
				if finite(s.Lo[i]) && finite(s.Hi[i]) {
					up = append(up, fmt.Sprintf("%.1f,%.1f", f.X(p.X), f.Y(s.Hi[i])))
					down = append([]string{fmt.Sprintf("%.1f,%.1f", f.X(p.X), f.Y(s.Lo[i]))}, down...)
				}
			}
			if len(up) > 0 {
				fmt.Fprintf(&b, `<polygon class="band" fill="%s" points="%s"/>`, s.Color, strings.Join(append(up, down...), " "))
			}
		}
		var seg []string
		flush := func() {
			if len(seg) > 1 {
				dash := ""
				if s.Dashed {
					dash = ` stroke-dasharray="4 3"`
				}
				fmt.Fprintf(&b, `<polyline class="ln" stroke="%s"%s points="%s"/>`, s.Color, dash, strings.Join(seg, " "))
			}
			seg = seg[:0]
		}
		for _, p := range s.Points {
			if !finite(p.Y) {
				flush()
				continue
			}
			seg = append(seg, fmt.Sprintf("%.1f,%.1f", f.X(p.X), f.Y(p.Y)))
		}
		flush()
		if len(s.Points) <= 60 {
			for _, p := range s.Points {
				if finite(p.Y) {
					fmt.Fprintf(&b, `<circle class="pt" cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%s</title></circle>`, f.X(p.X), f.Y(p.Y), s.Color, esc(p.Tip))
				}
			}
		}
	}
	legend(&b, f, names, colors)
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// stack is one category of a stacked bar chart: one value per x.
type stack struct {
	Name   string
	Color  string
	Values []float64
}

// barChart draws stacked bars, one per x.
func barChart(o chartOpts, xs []float64, stacks []stack) template.HTML {
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
	var b strings.Builder
	f.open(&b, o.Title)
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
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s at %s: %s</title></rect>`,
				f.X(xs[i])-w/2, y1, w, y0-y1, s.Color, esc(s.Name), tickLabel(xs[i]), tickLabel(v))
			base[i] += v
		}
	}
	legend(&b, f, names, colors)
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// histChart draws a histogram.
func histChart(o chartOpts, bins []Bin) template.HTML {
	o = defaults(o)
	if len(bins) == 0 {
		return ""
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
	var b strings.Builder
	f.open(&b, o.Title)
	for _, bn := range bins {
		x0, x1 := f.X(bn.Lo), f.X(bn.Hi)
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>[%s, %s): %d</title></rect>`,
			x0+0.5, f.Y(float64(bn.Count)), math.Max(1, x1-x0-1), f.b-f.Y(float64(bn.Count)), palette[0], tickLabel(bn.Lo), tickLabel(bn.Hi), bn.Count)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// scatterChart draws points with the y = x diagonal.
func scatterChart(o chartOpts, pts []ScatterPoint) template.HTML {
	o = defaults(o)
	var xs []float64
	for _, p := range pts {
		xs = append(xs, float64(p.Rollout), float64(p.Recomputed))
	}
	lo, hi := bounds(xs, math.NaN(), math.NaN())
	o.XMin, o.XMax, o.YMin, o.YMax = lo, hi, lo, hi
	f := newFrame(o, xs, xs)
	var b strings.Builder
	f.open(&b, o.Title)
	fmt.Fprintf(&b, `<line class="diag" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`, f.X(f.x0), f.Y(f.x0), f.X(f.x1), f.Y(f.x1))
	for _, p := range pts {
		fmt.Fprintf(&b, `<circle class="sp" cx="%.1f" cy="%.1f" r="2"/>`, f.X(float64(p.Rollout)), f.Y(float64(p.Recomputed)))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

func esc(s string) string { return html.EscapeString(s) }
