package monitor

import "strings"

// The dashboard's markup is written only by html/template (assets/page.html
// and assets/panels.html) from the values in this file: no Go code writes
// HTML, so text that comes from a run (tool arguments, errors, task and
// rollout ids, harness names) is escaped for the context it lands in,
// text, attribute, URL or CSS, and cannot open a tag or an attribute.

// frag is a panel's body: its nodes in page order.
type frag []node

// node is one piece of a panel body; exactly one field is set.
type node struct {
	Table   *table
	Chart   *chart
	P       *para
	H3      string
	Div     *div
	Details *details
	Iters   *iterNav
}

func tableNode(t *table) node { return node{Table: t} }
func chartNode(c *chart) node { return node{Chart: c} }

// para is <p class=Class data-alarm=Alarm>Text</p>.
type para struct{ Class, Alarm, Text string }

// div groups nodes in a <div class=Class>.
type div struct {
	Class string
	Body  frag
}

// details folds nodes under a <summary>.
type details struct {
	Summary string
	Body    frag
}

// iterNav is the rollouts panel's iteration links.
type iterNav struct {
	Links []iterLink
	Task  string // the task filter, if any
	Iter  int    // the iteration shown
	Total int
}

type iterLink struct {
	Iter int
	Sel  bool
}

// kv is a data-K="V" attribute (K is a plain lower-case name).
type kv struct{ K, V string }

// table is a <table> with a header row.
type table struct {
	Cols []string
	Rows []trow
}

type trow struct {
	Data  []kv
	Class string
	Cells []tcell
}

// tcell is a <td>: data-k=Key, Text as text (a link to Href when set).
type tcell struct {
	Key, Text, Title, Class string
	Data                    []kv
	Colspan                 int
	Href, LinkClass         string
	// Shade, when set, colours the cell: "none" grey, else the lightness
	// (a number, percent) of a green.
	Shade string
}

// tb builds a table row by row.
type tb struct{ t table }

func (t *tb) head(cols ...string) { t.t.Cols = cols }

// row starts a row; attrs are name, value pairs: "class" or "data-NAME".
func (t *tb) row(attrs ...string) {
	var r trow
	for i := 0; i+1 < len(attrs); i += 2 {
		if attrs[i] == "class" {
			r.Class = attrs[i+1]
		} else {
			r.Data = append(r.Data, kv{strings.TrimPrefix(attrs[i], "data-"), attrs[i+1]})
		}
	}
	t.t.Rows = append(t.t.Rows, r)
}

// cell adds a cell with data-k=key (omitted when empty) and text; attrs
// are name, value pairs: "title", "class" or "data-NAME".
func (t *tb) cell(key, text string, attrs ...string) {
	c := tcell{Key: key, Text: text}
	for i := 0; i+1 < len(attrs); i += 2 {
		switch attrs[i] {
		case "title":
			c.Title = attrs[i+1]
		case "class":
			c.Class = attrs[i+1]
		default:
			c.Data = append(c.Data, kv{strings.TrimPrefix(attrs[i], "data-"), attrs[i+1]})
		}
	}
	t.add(c)
}

// add adds a cell to the current row.
func (t *tb) add(c tcell) {
	if len(t.t.Rows) == 0 {
		t.row()
	}
	r := &t.t.Rows[len(t.t.Rows)-1]
	r.Cells = append(r.Cells, c)
}

func (t *tb) end() node { return tableNode(&t.t) }

// chart is an SVG chart: its marks in drawing order.
type chart struct {
	Class string // "chart", or "chart tokmap"
	W, H  string
	Label string
	Wide  bool // style="max-width:none"
	Marks []mark
}

// mark is one SVG element; Tag picks which fields apply. Numbers are
// formatted by the code that lays the chart out.
type mark struct {
	Tag               string // line, text, rect, circle, polygon, polyline
	Class             string
	X1, X2, Y1, Y2    string // line
	X, Y, W, H, R     string // text, rect, circle
	Anchor, Transform string // text
	Fill, Stroke      string
	Dash              bool
	Points            string // polygon, polyline
	Text, Title       string
}

// panelView is one panel's <section>.
type panelView struct {
	ID, Title, Help, Status string
	Version                 int
	Problems                []Problem
	Missing                 bool
	Body                    frag
}

// trajView is the trajectory page's body.
type trajView struct {
	RolloutID string
	Problems  []string
	KV        []trajKV
	TokMap    *chart
	Segments  node
	Steps     node
}

type trajKV struct{ Key, Label, Value string }
