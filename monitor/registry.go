package monitor

import (
	"fmt"
	"math"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/legorl/legorl/schemas"
)

// panelDef is one panel: how to compute its data from a run, and how to
// draw it. HTML gets the data Data returned.
type panelDef struct {
	ID, Title, Help string
	Data            func(v *view) (any, error)
	HTML            func(v *view, data any) frag
}

// panels lists the dashboard's panels in page order.
var panels = []panelDef{
	{"overview", "Run overview", "What the run's manifests commit, and which tables could be read.", overviewData, overviewHTML},
	{"reward", "Reward and pass rate", "Pass rate: share of completed rollouts with reward 1, per harness and iteration. Masked rollouts are left out (they are not rewards of 0).", rewardData, rewardHTML},
	{"outcomes", "Outcomes and failure taxonomy", "Completed rollouts: solved or why not (max_turns, no_diff, regression, fix_failed, other). Masked rollouts by reason. No gradient: completed rollouts of groups whose rewards are all equal.", outcomesData, outcomesHTML},
	{"turns", "Turns per episode", "Completed rollouts' turns: median and p10–p90 band per iteration; histogram of the newest iteration.", turnsData, turnsHTML},
	{"response", "Response length", "Sampled tokens (loss mask 1) of each LLM call's response and of each episode, from the segments table.", responseData, responseHTML},
	{"tools", "Tool calls", "Tool calls and unparsable tool calls per turn of completed rollouts. Alarm: an iteration below the threshold times the first iteration's rate.", toolsData, toolsHTML},
	{"verify", "Edit-then-verify", "Of the rollouts that edited a file, the share that later viewed a file or ran a command (steps table).", verifyData, verifyHTML},
	{"logprobs", "Logprob agreement", "Train-inference agreement per optimizer step (train_steps), and rollout vs recomputed logprobs of the sampled tokens (the trainer's checkpoints).", logprobData, logprobHTML},
	{"training", "Training curves", "Per optimizer step, in run order.", trainingData, trainingHTML},
	{"tasks", "Per-task solve grid", "Share of completed rollouts solved, per task and iteration; – where none completed.", tasksData, tasksHTML},
	{"rollouts", "Rollouts", "The rollouts of one iteration; open one for its trajectory.", rolloutsData, rolloutsHTML},
}

// PanelIDs returns the panel ids in page order.
func PanelIDs() []string {
	ids := make([]string, len(panels))
	for i, p := range panels {
		ids[i] = p.ID
	}
	return ids
}

func panelByID(id string) (panelDef, bool) {
	for _, p := range panels {
		if p.ID == id {
			return p, true
		}
	}
	return panelDef{}, false
}

// ---- formatting ----

func fmtNum(n Num, prec int) string {
	if !n.ok() {
		return "–"
	}
	return strconv.FormatFloat(float64(n), 'f', prec, 64)
}

// fmtG formats a metric with 4 significant digits.
func fmtG(n Num) string {
	if !n.ok() {
		return "–"
	}
	return strconv.FormatFloat(float64(n), 'g', 4, 64)
}

func itoa(i int) string { return strconv.Itoa(i) }

func nums(n ...Num) []float64 {
	out := make([]float64, len(n))
	for i, v := range n {
		out[i] = float64(v)
	}
	return out
}

func iterXs(its []int) []float64 {
	out := make([]float64, len(its))
	for i, it := range its {
		out[i] = float64(it)
	}
	return out
}

// ---- overview ----

// OverviewData is the run overview panel.
type OverviewData struct {
	RunID     string         `json:"run_id"`
	Version   int            `json:"version"`
	Tables    []TableStatus  `json:"tables"`
	Manifests []ManifestInfo `json:"manifests"`
}

func overviewData(v *view) (any, error) {
	d := OverviewData{RunID: v.s.RunID, Version: v.s.Version, Manifests: v.s.Manifests}
	for _, t := range schemas.Tables() {
		ts := v.s.tableStatus(v.ctx, v.m, t)
		if t == schemas.TableReplay && ts.Files == 0 {
			continue // only legorl audit --replay writes it: most runs have none
		}
		d.Tables = append(d.Tables, ts)
	}
	v.problems = append(v.problems, v.s.Problems...)
	return d, nil
}

func overviewHTML(v *view, data any) frag {
	d := data.(OverviewData)
	var t tb
	t.head("table", "files read", "rows", "status")
	for _, s := range d.Tables {
		t.row("data-table", s.Table, "class", "st-"+s.Status)
		t.cell("table", s.Table)
		t.cell("files", fmt.Sprintf("%d/%d", s.Read, s.Files))
		t.cell("rows", strconv.FormatInt(s.Rows, 10))
		var why []string
		for _, p := range s.Problems {
			why = append(why, p.Reason)
		}
		text := s.Status
		if len(why) > 0 {
			text += ": " + strings.Join(why, "; ")
		}
		t.cell("status", text)
	}
	out := frag{t.end()}
	if len(d.Manifests) > 0 {
		var m tb
		m.head("iteration", "stage", "version", "files", "committed")
		for _, man := range d.Manifests {
			m.row("data-iter", itoa(man.Iteration), "data-stage", man.Stage)
			m.cell("iteration", itoa(man.Iteration))
			m.cell("stage", man.Stage)
			m.cell("version", itoa(man.Version))
			m.cell("files", itoa(man.Files))
			m.cell("committed", man.CommittedAt.UTC().Format("2006-01-02 15:04:05Z"))
		}
		out = append(out, node{Details: &details{Summary: fmt.Sprintf("%d manifests", len(d.Manifests)), Body: frag{m.end()}}})
	}
	return out
}

// ---- reward ----

func rewardData(v *view) (any, error) {
	rs, err := v.rollouts()
	if err != nil {
		return nil, err
	}
	return RewardCurves(rs), nil
}

func rewardHTML(v *view, data any) frag {
	d := data.(RewardData)
	var ls []line
	for i, s := range d.Series {
		l := line{Name: s.Harness, Color: color(i), Dashed: s.Harness == "all"}
		for _, p := range s.Points {
			l.Points = append(l.Points, xy{float64(p.Iteration), float64(p.PassRate),
				fmt.Sprintf("%s, iteration %d: %s (%d/%d solved, %d masked)", s.Harness, p.Iteration, fmtNum(p.PassRate, 3), p.Solved, p.Completed, p.Masked)})
		}
		ls = append(ls, l)
	}
	chart := lineChart(chartOpts{Title: "pass rate", XLabel: "iteration", YLabel: "pass rate", YMin: 0, YMax: 1, XMin: math.NaN(), XMax: math.NaN(), XInt: true}, ls)
	var t tb
	cols := []string{"harness"}
	for _, it := range d.Iterations {
		cols = append(cols, "iter "+itoa(it))
	}
	t.head(cols...)
	for _, s := range d.Series {
		t.row("data-harness", s.Harness)
		t.cell("", s.Harness)
		for _, p := range s.Points {
			t.cell("pass_rate", fmt.Sprintf("%s (%d/%d)", fmtNum(p.PassRate, 3), p.Solved, p.Completed),
				"data-iter", itoa(p.Iteration), "title", fmt.Sprintf("mean reward %s, %d masked", fmtNum(p.MeanReward, 3), p.Masked))
		}
	}
	return frag{chart, t.end()}
}

// ---- outcomes ----

func outcomesData(v *view) (any, error) {
	rs, err := v.rollouts()
	if err != nil {
		return nil, err
	}
	return outcomes(rs), nil
}

func outcomesHTML(v *view, data any) frag {
	d := data.(OutcomeData)
	var xs []float64
	for _, r := range d.Rows {
		xs = append(xs, float64(r.Iteration))
	}
	cats := []stack{{Name: "solved", Color: "#16a34a"}}
	kindColor := map[string]string{"max_turns": "#d97706", "no_diff": "#a3a3a3", "regression": "#db2777", "fix_failed": "#dc2626", "other": "#7c3aed"}
	for _, k := range FailureKinds {
		cats = append(cats, stack{Name: k, Color: kindColor[k]})
	}
	for i, k := range d.MaskReasons {
		cats = append(cats, stack{Name: "masked:" + k, Color: []string{"#1e3a8a", "#0e7490", "#334155", "#4338ca", "#0f766e", "#475569"}[i%6]})
	}
	for _, r := range d.Rows {
		cats[0].Values = append(cats[0].Values, float64(r.Solved))
		for j, k := range FailureKinds {
			cats[1+j].Values = append(cats[1+j].Values, float64(r.Failed[k]))
		}
		for j, k := range d.MaskReasons {
			cats[1+len(FailureKinds)+j].Values = append(cats[1+len(FailureKinds)+j].Values, float64(r.MaskedBy[k]))
		}
	}
	chart := barChart(chartOpts{Title: "rollouts by outcome", XLabel: "iteration", YLabel: "rollouts", XInt: true, YMax: math.NaN(), W: 560, H: 260}, xs, cats)
	var t tb
	t.head("iteration", "rollouts", "solved", "failed (why)", "masked (why)", "no gradient", "zero-variance groups")
	for _, r := range d.Rows {
		t.row("data-iter", itoa(r.Iteration))
		t.cell("iteration", itoa(r.Iteration))
		t.cell("rollouts", itoa(r.Rollouts))
		t.cell("solved", itoa(r.Solved))
		t.cell("failed", countsText(r.Completed-r.Solved, r.Failed, FailureKinds))
		t.cell("masked", countsText(r.Masked, r.MaskedBy, d.MaskReasons), "title", errorsText(r.Errors))
		t.cell("no_gradient", itoa(r.NoGradient))
		t.cell("zero_variance", fmt.Sprintf("%d/%d", r.ZeroVarianceGroups, r.Groups))
	}
	return frag{chart, t.end()}
}

// countsText is "N" or "N: a 2, b 1" in the order of keys.
func countsText(n int, m map[string]int, keys []string) string {
	var parts []string
	for _, k := range keys {
		if m[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
		}
	}
	if len(parts) == 0 {
		return itoa(n)
	}
	return itoa(n) + ": " + strings.Join(parts, ", ")
}

func errorsText(cs []Count) string {
	var parts []string
	for _, c := range cs {
		parts = append(parts, fmt.Sprintf("%d× %s", c.N, c.Value))
	}
	return strings.Join(parts, "\n")
}

// ---- distributions ----

func distLine(name string, c string, rows []Dist) line {
	l := line{Name: name, Color: c}
	for _, r := range rows {
		l.Points = append(l.Points, xy{float64(r.Iteration), float64(r.P50),
			fmt.Sprintf("iteration %d: median %s, p10 %s, p90 %s, n %d", r.Iteration, fmtNum(r.P50, 1), fmtNum(r.P10, 1), fmtNum(r.P90, 1), r.N)})
		l.Lo, l.Hi = append(l.Lo, float64(r.P10)), append(l.Hi, float64(r.P90))
	}
	return l
}

func distTable(t *tb, rows []Dist, label string) {
	for _, r := range rows {
		t.row("data-iter", itoa(r.Iteration), "data-dist", label)
		t.cell("iteration", itoa(r.Iteration))
		if label != "" {
			t.cell("what", label)
		}
		t.cell("n", itoa(r.N))
		t.cell("mean", fmtNum(r.Mean, 2))
		t.cell("p10", fmtNum(r.P10, 0))
		t.cell("p50", fmtNum(r.P50, 0))
		t.cell("p90", fmtNum(r.P90, 0))
		t.cell("max", fmtNum(r.Max, 0))
	}
}

func turnsData(v *view) (any, error) {
	rs, err := v.rollouts()
	if err != nil {
		return nil, err
	}
	return turns(rs), nil
}

func turnsHTML(v *view, data any) frag {
	d := data.(TurnsData)
	c := lineChart(chartOpts{Title: "turns: median, p10–p90", XLabel: "iteration", YLabel: "turns", XInt: true, YMin: 0, YMax: math.NaN(), XMin: math.NaN(), XMax: math.NaN()},
		[]line{distLine("turns", color(0), d.Rows)})
	h := histChart(chartOpts{Title: fmt.Sprintf("turns, iteration %d", d.HistIteration), XLabel: "turns", YLabel: "rollouts", YMax: math.NaN(), XMin: math.NaN(), XMax: math.NaN()}, d.Histogram)
	var t tb
	t.head("iteration", "rollouts", "mean", "p10", "p50", "p90", "max")
	distTable(&t, d.Rows, "")
	return frag{{Div: &div{Class: "pair", Body: frag{c, h}}}, t.end()}
}

func responseData(v *view) (any, error) {
	td, err := v.table(schemas.TableSegments)
	if err != nil {
		return nil, err
	}
	return responses(td.segments), nil
}

func responseHTML(v *view, data any) frag {
	d := data.(ResponseData)
	c := lineChart(chartOpts{Title: "tokens per response: median, p10–p90", XLabel: "iteration", YLabel: "tokens", XInt: true, YMin: 0, YMax: math.NaN(), XMin: math.NaN(), XMax: math.NaN()},
		[]line{distLine("per call", color(0), d.PerCall), distLine("per episode", color(1), d.PerEpisode)})
	h := histChart(chartOpts{Title: fmt.Sprintf("tokens per response, iteration %d", d.HistIteration), XLabel: "tokens", YLabel: "responses", YMax: math.NaN(), XMin: math.NaN(), XMax: math.NaN()}, d.Histogram)
	var t tb
	t.head("iteration", "of", "n", "mean", "p10", "p50", "p90", "max")
	distTable(&t, d.PerCall, "call")
	distTable(&t, d.PerEpisode, "episode")
	return frag{{Div: &div{Class: "pair", Body: frag{c, h}}}, t.end()}
}

// ---- tools ----

func toolsData(v *view) (any, error) {
	rs, err := v.rollouts()
	if err != nil {
		return nil, err
	}
	return tools(rs, v.m.opts.ToolCollapse), nil
}

func toolsHTML(v *view, data any) frag {
	d := data.(ToolsData)
	calls := line{Name: "tool calls / turn", Color: color(0)}
	fails := line{Name: "parse failures / turn", Color: color(1)}
	thr := line{Name: "alarm threshold", Color: "#9ca3af", Dashed: true}
	for _, r := range d.Rows {
		calls.Points = append(calls.Points, xy{float64(r.Iteration), float64(r.CallsPerTurn), fmt.Sprintf("iteration %d: %s tool calls per turn", r.Iteration, fmtNum(r.CallsPerTurn, 3))})
		fails.Points = append(fails.Points, xy{float64(r.Iteration), float64(r.FailuresPerTurn), fmt.Sprintf("iteration %d: %s parse failures per turn", r.Iteration, fmtNum(r.FailuresPerTurn, 3))})
		thr.Points = append(thr.Points, xy{float64(r.Iteration), d.Threshold * float64(d.Baseline), "threshold"})
	}
	chart := lineChart(chartOpts{Title: "tool use", XLabel: "iteration", YLabel: "per turn", XInt: true, YMin: 0, YMax: math.NaN(), XMin: math.NaN(), XMax: math.NaN()}, []line{calls, fails, thr})
	var out node
	if d.Alarm != "" {
		out = node{P: &para{Class: "alarm", Alarm: "tool-collapse", Text: d.Alarm}}
	} else {
		out = node{P: &para{Class: "ok", Alarm: "none", Text: "no alarm: tool calls per turn stay at or above " + fmtNum(Num(d.Threshold*100), 0) + "% of iteration " + itoa(d.BaselineIteration) + "'s " + fmtNum(d.Baseline, 3)}}
	}
	var t tb
	t.head("iteration", "rollouts", "turns", "tool calls", "calls/turn", "parse failures", "failures/turn", "alarm")
	for _, r := range d.Rows {
		t.row("data-iter", itoa(r.Iteration))
		t.cell("iteration", itoa(r.Iteration))
		t.cell("rollouts", itoa(r.Rollouts))
		t.cell("turns", itoa(r.Turns))
		t.cell("tool_calls", itoa(r.ToolCalls))
		t.cell("calls_per_turn", fmtNum(r.CallsPerTurn, 3))
		t.cell("parse_failures", itoa(r.ParseFailures))
		t.cell("failures_per_turn", fmtNum(r.FailuresPerTurn, 3))
		alarm := ""
		if r.Collapsed {
			alarm = "collapsed"
		}
		t.cell("collapsed", alarm)
	}
	return frag{out, chart, t.end()}
}

// ---- verify ----

func verifyData(v *view) (any, error) {
	td, err := v.table(schemas.TableSteps)
	if err != nil {
		return nil, err
	}
	return editThenVerify(td.steps), nil
}

func verifyHTML(v *view, data any) frag {
	d := data.(VerifyData)
	l := line{Name: "edit-then-verify", Color: color(2)}
	for _, r := range d.Rows {
		l.Points = append(l.Points, xy{float64(r.Iteration), float64(r.Rate), fmt.Sprintf("iteration %d: %s (%d/%d)", r.Iteration, fmtNum(r.Rate, 3), r.Verified, r.Editing)})
	}
	chart := lineChart(chartOpts{Title: "edit-then-verify rate", XLabel: "iteration", YLabel: "share of editing rollouts", XInt: true, YMin: 0, YMax: 1, XMin: math.NaN(), XMax: math.NaN()}, []line{l})
	var t tb
	t.head("iteration", "rollouts", "editing", "verified", "rate", "edit turns")
	for _, r := range d.Rows {
		t.row("data-iter", itoa(r.Iteration))
		t.cell("iteration", itoa(r.Iteration))
		t.cell("rollouts", itoa(r.Rollouts))
		t.cell("editing", itoa(r.Editing))
		t.cell("verified", itoa(r.Verified))
		t.cell("rate", fmtNum(r.Rate, 3))
		t.cell("edit_turns", itoa(r.EditTurns))
	}
	return frag{chart, t.end()}
}

// ---- logprobs ----

func logprobData(v *view) (any, error) {
	var d LogprobData
	td, trainErr := v.table(schemas.TableTrainSteps)
	if trainErr == nil {
		d.Steps = logprobSteps(td.train)
	}
	// The recomputed side: every iteration with segments.
	sd := v.s.table(v.ctx, v.m, schemas.TableSegments)
	its := map[int]bool{}
	for _, fe := range v.s.files[schemas.TableSegments] {
		its[v.s.iterOf[fe.Key]] = true
	}
	var order []int
	for it := range its {
		order = append(order, it)
	}
	sort.Ints(order)
	if sd.missing() {
		order = nil
	}
	found := false
	for _, it := range order {
		a := v.s.agreement(v.ctx, v.m, it)
		found = found || a.Segments > 0
		d.Recomputed = append(d.Recomputed, a)
	}
	if trainErr != nil && !found {
		return nil, errMissing
	}
	return d, nil
}

func logprobHTML(v *view, data any) frag {
	d := data.(LogprobData)
	var out frag
	if len(d.Steps) > 0 {
		p := line{Name: "pearson", Color: color(0)}
		s := line{Name: "spearman", Color: color(2)}
		thr := line{Name: "0.99", Color: "#9ca3af", Dashed: true}
		isr := line{Name: "IS ratio mean (min–max)", Color: color(4)}
		for _, r := range d.Steps {
			tip := fmt.Sprintf("iteration %d step %d: pearson %s, spearman %s", r.Iteration, r.Step, fmtNum(r.Pearson, 4), fmtNum(r.Spearman, 4))
			p.Points = append(p.Points, xy{float64(r.Index), float64(r.Pearson), tip})
			s.Points = append(s.Points, xy{float64(r.Index), float64(r.Spearman), tip})
			thr.Points = append(thr.Points, xy{float64(r.Index), 0.99, "threshold 0.99"})
			isr.Points = append(isr.Points, xy{float64(r.Index), float64(r.ISRatio), fmt.Sprintf("iteration %d step %d: IS ratio mean %s, min %s, max %s, ESS %s", r.Iteration, r.Step, fmtG(r.ISRatio), fmtG(r.ISRatioMin), fmtG(r.ISRatioMax), fmtG(r.ESS))})
			isr.Lo, isr.Hi = append(isr.Lo, float64(r.ISRatioMin)), append(isr.Hi, float64(r.ISRatioMax))
		}
		out = append(out, node{Div: &div{Class: "pair", Body: frag{
			lineChart(chartOpts{Title: "logprob correlation per step", XLabel: "step", YLabel: "correlation", XInt: true, YMin: math.NaN(), YMax: 1, XMin: math.NaN(), XMax: math.NaN()}, []line{p, s, thr}),
			lineChart(chartOpts{Title: "importance-sampling ratio", XLabel: "step", YLabel: "ratio", XInt: true, YMin: math.NaN(), YMax: math.NaN(), XMin: math.NaN(), XMax: math.NaN()}, []line{isr})}}})
	}
	// The scatter of the newest iteration that has one.
	for i := len(d.Recomputed) - 1; i >= 0; i-- {
		if a := d.Recomputed[i]; len(a.Points) > 0 {
			out = append(out, node{Div: &div{Class: "scatter", Body: frag{
				scatterChart(chartOpts{W: 300, H: 300, Title: fmt.Sprintf("iteration %d: recomputed vs rollout", a.Iteration), XLabel: "rollout logprob", YLabel: "recomputed logprob"}, a.Points)}}})
			break
		}
	}
	if len(d.Recomputed) > 0 {
		var t tb
		t.head("iteration", "segments", "tokens", "pearson", "mean |diff|", "max |diff|", "source")
		for _, a := range d.Recomputed {
			t.row("data-iter", itoa(a.Iteration), "data-recomputed", "")
			t.cell("iteration", itoa(a.Iteration))
			if a.Missing != "" && a.Segments == 0 {
				t.add(tcell{Key: "missing", Text: a.Missing, Class: "miss", Colspan: 6})
				continue
			}
			t.cell("segments", itoa(a.Segments))
			t.cell("tokens", itoa(a.Tokens))
			t.cell("pearson", fmtNum(a.Pearson, 4))
			t.cell("mean_abs_diff", fmtG(a.MeanAbs))
			t.cell("max_abs_diff", fmtG(a.MaxAbs))
			t.cell("source", a.Source)
		}
		out = append(out, node{H3: "rollout vs recomputed logprobs (computed here)"}, t.end())
	}
	if len(d.Steps) > 0 {
		var t tb
		t.head("iteration", "step", "pearson", "spearman", "mean |diff|", "max |diff|", "IS ratio mean", "IS min", "IS max", "ESS")
		for _, r := range d.Steps {
			t.row("data-iter", itoa(r.Iteration), "data-step", itoa(r.Step))
			t.cell("iteration", itoa(r.Iteration))
			t.cell("step", itoa(r.Step))
			t.cell("pearson", fmtNum(r.Pearson, 4))
			t.cell("spearman", fmtNum(r.Spearman, 4))
			t.cell("mean_abs_diff", fmtG(r.MeanAbs))
			t.cell("max_abs_diff", fmtG(r.MaxAbs))
			t.cell("is_ratio_mean", fmtG(r.ISRatio))
			t.cell("is_ratio_min", fmtG(r.ISRatioMin))
			t.cell("is_ratio_max", fmtG(r.ISRatioMax))
			t.cell("ess", fmtG(r.ESS))
		}
		out = append(out, node{H3: "per optimizer step (the trainer's check)"}, t.end())
	}
	return out
}

// ---- training ----

func trainingData(v *view) (any, error) {
	td, err := v.table(schemas.TableTrainSteps)
	if err != nil {
		return nil, err
	}
	return training(td.train), nil
}

func trainingHTML(v *view, data any) frag {
	d := data.(TrainData)
	metrics := []struct {
		name string
		get  func(TrainRow) Num
	}{
		{"loss", func(r TrainRow) Num { return r.Loss }},
		{"grad norm", func(r TrainRow) Num { return r.GradNorm }},
		{"entropy", func(r TrainRow) Num { return r.Entropy }},
		{"KL", func(r TrainRow) Num { return r.KL }},
		{"clip fraction", func(r TrainRow) Num { return r.ClipFraction }},
	}
	grid := &div{Class: "grid5"}
	for i, mt := range metrics {
		l := line{Name: mt.name, Color: color(i)}
		for _, r := range d.Rows {
			l.Points = append(l.Points, xy{float64(r.Index), float64(mt.get(r)), fmt.Sprintf("iteration %d step %d: %s %s", r.Iteration, r.Step, mt.name, fmtG(mt.get(r)))})
		}
		grid.Body = append(grid.Body, lineChart(chartOpts{W: 300, H: 180, Title: mt.name, XLabel: "step", XInt: true, YMin: math.NaN(), YMax: math.NaN(), XMin: math.NaN(), XMax: math.NaN()}, []line{l}))
	}
	var t tb
	t.head("iteration", "step", "loss", "grad norm", "lr", "clip fraction", "entropy", "KL", "tokens/s")
	for _, r := range d.Rows {
		t.row("data-iter", itoa(r.Iteration), "data-step", itoa(r.Step))
		t.cell("iteration", itoa(r.Iteration))
		t.cell("step", itoa(r.Step))
		t.cell("loss", fmtG(r.Loss))
		t.cell("grad_norm", fmtG(r.GradNorm))
		t.cell("lr", fmtG(r.LR))
		t.cell("clip_fraction", fmtG(r.ClipFraction))
		t.cell("entropy", fmtG(r.Entropy))
		t.cell("kl", fmtG(r.KL))
		t.cell("tokens_per_second", fmtNum(r.TokensPerSec, 0))
	}
	return frag{{Div: grid}, t.end()}
}

// ---- tasks ----

func tasksData(v *view) (any, error) {
	rs, err := v.rollouts()
	if err != nil {
		return nil, err
	}
	return taskGrid(rs), nil
}

func tasksHTML(v *view, data any) frag {
	g := data.(TaskGrid)
	var t tb
	cols := []string{"task"}
	for _, it := range g.Iterations {
		cols = append(cols, itoa(it))
	}
	t.head(append(cols, "all")...)
	for _, row := range g.Tasks {
		t.row("data-task", row.TaskID)
		t.cell("", row.TaskID, "class", "task")
		for _, c := range row.Cells {
			shade := "none"
			if c.Share.ok() {
				// white (0) to green (1)
				shade = strconv.FormatFloat(96-float64(c.Share)*50, 'f', 0, 64)
			}
			q := url.Values{"iter": {itoa(c.Iteration)}, "task": {row.TaskID}}
			t.add(tcell{Class: "cell", Key: "share", Data: []kv{{"iter", itoa(c.Iteration)}}, Shade: shade,
				Title: fmt.Sprintf("%d/%d solved, %d masked", c.Solved, c.Completed, c.Rollouts-c.Completed),
				Href:  "?" + q.Encode() + "#panel-rollouts", Text: fmtNum(c.Share, 2)})
		}
		t.cell("overall", fmtNum(row.Share, 2))
	}
	return frag{t.end()}
}

// ---- rollouts ----

func rolloutsData(v *view) (any, error) {
	rs, err := v.rollouts()
	if err != nil {
		return nil, err
	}
	return rolloutList(rs, v.intParam("iter", -1), v.q.Get("task")), nil
}

func rolloutsHTML(v *view, data any) frag {
	l := data.(RolloutList)
	nav := &iterNav{Task: l.Task, Iter: l.Iteration, Total: l.Total}
	for _, it := range l.Iterations {
		nav.Links = append(nav.Links, iterLink{Iter: it, Sel: it == l.Iteration})
	}
	var t tb
	t.head("rollout", "task", "harness", "status", "termination", "reward", "turns", "tool calls", "diff bytes")
	for _, r := range l.Rows {
		t.row("data-rollout", r.RolloutID, "class", "st-"+r.Status)
		t.add(tcell{Key: "rollout_id", Text: r.RolloutID, Href: trajectoryPath(v.s.RunID, r.RolloutID), LinkClass: "traj"})
		t.cell("task", r.TaskID)
		t.cell("harness", r.Harness)
		t.cell("status", r.Status)
		t.cell("termination", r.Termination)
		t.cell("reward", strconv.FormatFloat(r.Reward, 'g', 4, 64))
		t.cell("turns", itoa(r.Turns))
		t.cell("tool_calls", itoa(r.ToolCalls))
		t.cell("diff_bytes", strconv.FormatInt(r.DiffBytes, 10))
	}
	if l.Total > len(l.Rows) {
		t.row()
		t.add(tcell{Colspan: 9, Text: fmt.Sprintf("… %d more (filter by task in the grid)", l.Total-len(l.Rows))})
	}
	return frag{{Iters: nav}, t.end()}
}

func trajectoryPath(run, id string) string {
	return "/runs/" + url.PathEscape(run) + "/rollouts/" + url.PathEscape(id)
}
