package monitor

import (
	"encoding/json"
	"math"
	"sort"
	"strings"

	"github.com/legorl/legorl/schemas"
)

// Num is a number that encodes as JSON null when it is not finite: the
// pass rate of an iteration without completed rollouts, a NaN loss.
type Num float64

// MarshalJSON implements json.Marshaler.
func (n Num) MarshalJSON() ([]byte, error) {
	if !n.ok() {
		return []byte("null"), nil
	}
	return json.Marshal(float64(n))
}

func (n Num) ok() bool { return !math.IsNaN(float64(n)) && !math.IsInf(float64(n), 0) }

func none() Num { return Num(math.NaN()) }

func ratio(a, b int) Num {
	if b == 0 {
		return none()
	}
	return Num(float64(a) / float64(b))
}

// iterations returns the sorted iterations of rows.
func iterations[T any](rows []T, it func(T) int32) []int {
	seen := map[int]bool{}
	var out []int
	for _, r := range rows {
		if i := int(it(r)); !seen[i] {
			seen[i] = true
			out = append(out, i)
		}
	}
	sort.Ints(out)
	return out
}

func rolloutIter(r schemas.Rollout) int32 { return r.Iteration }

// solved reports whether a rollout counts as solved: completed with reward 1
// (every FAIL_TO_PASS and PASS_TO_PASS test passed).
func solved(r schemas.Rollout) bool { return r.Status == schemas.StatusCompleted && r.Reward >= 1 }

// ---- reward and pass-rate curves ----

// RewardPoint is one harness's results in one iteration. Masked rollouts
// are not rewards of 0: they count in Masked only.
type RewardPoint struct {
	Iteration  int `json:"iteration"`
	Completed  int `json:"completed"`
	Masked     int `json:"masked"`
	Solved     int `json:"solved"`
	PassRate   Num `json:"pass_rate"`   // Solved / Completed
	MeanReward Num `json:"mean_reward"` // mean reward of the completed rollouts
}

// RewardSeries is one harness's curve; harness "all" pools every harness.
type RewardSeries struct {
	Harness string        `json:"harness"`
	Points  []RewardPoint `json:"points"`
}

// RewardData is the reward panel: one series per harness, "all" first.
type RewardData struct {
	Iterations []int          `json:"iterations"`
	Series     []RewardSeries `json:"series"`
}

// RewardCurves computes the reward panel's curves from rollouts rows: per
// harness (and "all") and iteration in ascending order, the completed,
// masked and solved counts, the pass rate and the mean reward. Masked
// rollouts are never rewards of 0.
func RewardCurves(rs []schemas.Rollout) RewardData {
	d := RewardData{Iterations: iterations(rs, rolloutIter)}
	harness := map[string]bool{}
	for _, r := range rs {
		harness[r.Harness] = true
	}
	names := []string{"all"}
	for h := range harness {
		names = append(names, h)
	}
	sort.Strings(names[1:])
	for _, h := range names {
		s := RewardSeries{Harness: h}
		for _, it := range d.Iterations {
			p := RewardPoint{Iteration: it}
			var sum float64
			for _, r := range rs {
				if int(r.Iteration) != it || (h != "all" && r.Harness != h) {
					continue
				}
				if r.Status != schemas.StatusCompleted {
					p.Masked++
					continue
				}
				p.Completed++
				sum += r.Reward
				if solved(r) {
					p.Solved++
				}
			}
			p.PassRate = ratio(p.Solved, p.Completed)
			p.MeanReward = none()
			if p.Completed > 0 {
				p.MeanReward = Num(sum / float64(p.Completed))
			}
			s.Points = append(s.Points, p)
		}
		d.Series = append(d.Series, s)
	}
	return d
}

// ---- rollout outcomes and failure taxonomy ----

// FailureKinds names why a completed rollout was not solved, in the order
// failureKind tries them.
var FailureKinds = []string{"max_turns", "no_diff", "regression", "fix_failed", "other"}

// failureKind classifies a completed, unsolved rollout: the turn budget ran
// out (max_turns); the agent changed nothing (no_diff: diff_bytes 0); it
// broke a test that passed before (regression: a PASS_TO_PASS test failed);
// its fix did not work (fix_failed: a FAIL_TO_PASS test failed); else other.
func failureKind(r schemas.Rollout) string {
	switch {
	case r.Termination == schemas.TerminationMaxTurns:
		return "max_turns"
	case r.DiffBytes == 0:
		return "no_diff"
	case len(r.P2PFailed) > 0:
		return "regression"
	case len(r.F2PFailed) > 0:
		return "fix_failed"
	}
	return "other"
}

// Count is a value and how often it occurs.
type Count struct {
	Value string `json:"value"`
	N     int    `json:"n"`
}

// OutcomeRow is one iteration's outcomes.
type OutcomeRow struct {
	Iteration int            `json:"iteration"`
	Rollouts  int            `json:"rollouts"`
	Completed int            `json:"completed"`
	Solved    int            `json:"solved"`
	Failed    map[string]int `json:"failed"` // completed, unsolved, by FailureKinds
	Masked    int            `json:"masked"`
	MaskedBy  map[string]int `json:"masked_by"` // by termination
	Errors    []Count        `json:"errors"`    // the most frequent errors of masked rollouts
	// Groups counts task groups with a completed rollout; a zero-variance
	// group (every completed reward equal, a lone rollout included) gives
	// no gradient, and NoGradient counts its completed rollouts.
	Groups             int `json:"groups"`
	ZeroVarianceGroups int `json:"zero_variance_groups"`
	NoGradient         int `json:"no_gradient"`
}

// OutcomeData is the outcomes panel.
type OutcomeData struct {
	Rows        []OutcomeRow `json:"rows"`
	MaskReasons []string     `json:"mask_reasons"` // every masked termination seen, sorted
}

func outcomes(rs []schemas.Rollout) OutcomeData {
	var d OutcomeData
	reasons := map[string]bool{}
	for _, it := range iterations(rs, rolloutIter) {
		row := OutcomeRow{Iteration: it, Failed: map[string]int{}, MaskedBy: map[string]int{}}
		groups := map[string][]float64{}
		errs := map[string]int{}
		for _, r := range rs {
			if int(r.Iteration) != it {
				continue
			}
			row.Rollouts++
			if r.Status != schemas.StatusCompleted {
				row.Masked++
				row.MaskedBy[string(r.Termination)]++
				reasons[string(r.Termination)] = true
				if r.Error != "" {
					errs[firstLine(r.Error)]++
				}
				continue
			}
			row.Completed++
			groups[r.GroupID] = append(groups[r.GroupID], r.Reward)
			if solved(r) {
				row.Solved++
			} else {
				row.Failed[failureKind(r)]++
			}
		}
		for _, g := range groups {
			row.Groups++
			equal := true
			for _, v := range g {
				equal = equal && v == g[0]
			}
			if equal {
				row.ZeroVarianceGroups++
				row.NoGradient += len(g)
			}
		}
		row.Errors = topCounts(errs, 3)
		d.Rows = append(d.Rows, row)
	}
	for k := range reasons {
		d.MaskReasons = append(d.MaskReasons, k)
	}
	sort.Strings(d.MaskReasons)
	return d
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}

func topCounts(m map[string]int, n int) []Count {
	out := make([]Count, 0, len(m))
	for k, v := range m {
		out = append(out, Count{k, v})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].N != out[j].N {
			return out[i].N > out[j].N
		}
		return out[i].Value < out[j].Value
	})
	if len(out) > n {
		out = out[:n]
	}
	return out
}

// ---- distributions: turns and response lengths ----

// Dist summarises the values of one iteration. Percentiles are nearest
// rank: P50 of 1, 2, 3, 4 is 2.
type Dist struct {
	Iteration int `json:"iteration"`
	N         int `json:"n"`
	Mean      Num `json:"mean"`
	Min       Num `json:"min"`
	P10       Num `json:"p10"`
	P50       Num `json:"p50"`
	P90       Num `json:"p90"`
	Max       Num `json:"max"`
}

func dist(it int, v []float64) Dist {
	d := Dist{Iteration: it, N: len(v), Mean: none(), Min: none(), P10: none(), P50: none(), P90: none(), Max: none()}
	if len(v) == 0 {
		return d
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	var sum float64
	for _, x := range s {
		sum += x
	}
	rank := func(p float64) Num {
		k := int(math.Ceil(p*float64(len(s)))) - 1
		return Num(s[min(max(k, 0), len(s)-1)])
	}
	d.Mean, d.Min, d.Max = Num(sum/float64(len(s))), Num(s[0]), Num(s[len(s)-1])
	d.P10, d.P50, d.P90 = rank(0.1), rank(0.5), rank(0.9)
	return d
}

// Bin is one bar of a histogram: values in [Lo, Hi).
type Bin struct {
	Lo    float64 `json:"lo"`
	Hi    float64 `json:"hi"`
	Count int     `json:"count"`
}

// histogram bins integer-valued v into at most n bins of equal integer width.
func histogram(v []float64, n int) []Bin {
	if len(v) == 0 {
		return nil
	}
	lo, hi := v[0], v[0]
	for _, x := range v {
		lo, hi = math.Min(lo, x), math.Max(hi, x)
	}
	width := math.Max(1, math.Ceil((hi-lo+1)/float64(n)))
	bins := make([]Bin, int((hi-lo)/width)+1)
	for i := range bins {
		bins[i] = Bin{Lo: lo + float64(i)*width, Hi: lo + float64(i+1)*width}
	}
	for _, x := range v {
		bins[int((x-lo)/width)].Count++
	}
	return bins
}

// TurnsData is the turns panel: turns per episode of completed rollouts.
type TurnsData struct {
	Rows          []Dist `json:"rows"`
	Histogram     []Bin  `json:"histogram"` // of the newest iteration
	HistIteration int    `json:"histogram_iteration"`
}

func turns(rs []schemas.Rollout) TurnsData {
	var d TurnsData
	for _, it := range iterations(rs, rolloutIter) {
		var v []float64
		for _, r := range rs {
			if int(r.Iteration) == it && r.Status == schemas.StatusCompleted {
				v = append(v, float64(r.NumTurns))
			}
		}
		d.Rows = append(d.Rows, dist(it, v))
		d.Histogram, d.HistIteration = histogram(v, 20), it
	}
	return d
}

// ResponseData is the response-length panel over every recorded segment:
// PerCall is the length of each LLM call's response (a run of sampled
// tokens, loss mask 1); PerEpisode is the sampled tokens of a rollout.
type ResponseData struct {
	PerCall       []Dist `json:"per_call"`
	PerEpisode    []Dist `json:"per_episode"`
	Histogram     []Bin  `json:"histogram"` // per-call lengths of the newest iteration
	HistIteration int    `json:"histogram_iteration"`
}

func responses(segs []segSummary) ResponseData {
	var d ResponseData
	for _, it := range iterations(segs, func(s segSummary) int32 { return s.Iteration }) {
		var calls []float64
		episode := map[string]float64{}
		var ids []string
		for _, s := range segs {
			if int(s.Iteration) != it {
				continue
			}
			for _, n := range s.Responses {
				calls = append(calls, float64(n))
			}
			if _, ok := episode[s.RolloutID]; !ok {
				ids = append(ids, s.RolloutID)
			}
			episode[s.RolloutID] += float64(s.Sampled)
		}
		ep := make([]float64, 0, len(ids))
		for _, id := range ids {
			ep = append(ep, episode[id])
		}
		d.PerCall = append(d.PerCall, dist(it, calls))
		d.PerEpisode = append(d.PerEpisode, dist(it, ep))
		d.Histogram, d.HistIteration = histogram(calls, 20), it
	}
	return d
}

// ---- tool use ----

// ToolRow is one iteration's tool use over its completed rollouts.
type ToolRow struct {
	Iteration       int  `json:"iteration"`
	Rollouts        int  `json:"rollouts"`
	Turns           int  `json:"turns"`
	ToolCalls       int  `json:"tool_calls"`
	ParseFailures   int  `json:"parse_failures"`
	CallsPerTurn    Num  `json:"calls_per_turn"`    // ToolCalls / Turns
	FailuresPerTurn Num  `json:"failures_per_turn"` // ParseFailures / Turns
	Collapsed       bool `json:"collapsed"`
}

// ToolsData is the tool-use panel. The alarm: tool use collapsed in an
// iteration whose tool calls per turn fell below Threshold times the
// baseline, the rate of the first iteration with a completed turn.
type ToolsData struct {
	Rows              []ToolRow `json:"rows"`
	Baseline          Num       `json:"baseline"`
	BaselineIteration int       `json:"baseline_iteration"`
	Threshold         float64   `json:"threshold"`
	Alarm             string    `json:"alarm,omitempty"`
}

func tools(rs []schemas.Rollout, threshold float64) ToolsData {
	d := ToolsData{Baseline: none(), BaselineIteration: -1, Threshold: threshold}
	for _, it := range iterations(rs, rolloutIter) {
		row := ToolRow{Iteration: it}
		for _, r := range rs {
			if int(r.Iteration) != it || r.Status != schemas.StatusCompleted {
				continue
			}
			row.Rollouts++
			row.Turns += int(r.NumTurns)
			row.ToolCalls += int(r.NumToolCalls)
			row.ParseFailures += int(r.ToolParseFailures)
		}
		row.CallsPerTurn = ratio(row.ToolCalls, row.Turns)
		row.FailuresPerTurn = ratio(row.ParseFailures, row.Turns)
		if !d.Baseline.ok() && row.CallsPerTurn.ok() {
			d.Baseline, d.BaselineIteration = row.CallsPerTurn, it
		}
		if d.Baseline.ok() && row.CallsPerTurn.ok() && float64(row.CallsPerTurn) < threshold*float64(d.Baseline) {
			row.Collapsed = true
			if d.Alarm == "" {
				d.Alarm = "tool use collapsed at iteration " + itoa(it) + ": " + fmtNum(row.CallsPerTurn, 3) +
					" tool calls per turn, below " + fmtNum(Num(threshold*100), 0) + "% of iteration " +
					itoa(d.BaselineIteration) + "'s " + fmtNum(d.Baseline, 3)
			}
		}
		d.Rows = append(d.Rows, row)
	}
	return d
}

// ---- edit-then-verify ----

// Tool kinds of ToolKind.
const (
	KindEdit   = "edit"
	KindVerify = "verify"
	KindOther  = "other"
)

var (
	editTools = set("edit", "edit_file", "multiedit", "multi_edit", "notebookedit", "write", "write_file", "create",
		"create_file", "insert", "str_replace", "replace", "apply_patch", "patch")
	verifyTools = set("view", "view_file", "read", "read_file", "open", "open_file", "cat", "bash", "shell", "sh",
		"execute_bash", "run", "run_tests", "exec", "execute", "terminal", "python", "pytest", "test")
	// editorTools take a "command" argument that says which it is.
	editorTools = set("str_replace_editor", "str_replace_based_edit_tool", "editor", "text_editor", "file_editor")
)

func set(names ...string) map[string]bool {
	m := map[string]bool{}
	for _, n := range names {
		m[n] = true
	}
	return m
}

// ToolKind classifies a step's tool call: edit (it changes a file: edit,
// write, str_replace, apply_patch, ...), verify (it reads a file or runs a
// command: view, read, cat, bash, shell, run_tests, ...) or other (submit,
// think, no tool). Names compare case-insensitively; an editor tool
// (str_replace_editor and the like) is verify for its "view" command and
// edit otherwise.
func ToolKind(name, args string) string {
	n := strings.ToLower(strings.TrimSpace(name))
	switch {
	case editorTools[n]:
		var a struct {
			Command string `json:"command"`
		}
		if json.Unmarshal([]byte(args), &a) == nil && strings.EqualFold(a.Command, "view") {
			return KindVerify
		}
		return KindEdit
	case editTools[n]:
		return KindEdit
	case verifyTools[n]:
		return KindVerify
	}
	return KindOther
}

// VerifyRow is one iteration's edit-then-verify rate: of the rollouts that
// edited a file (Editing), those in which some edit turn is followed by a
// later verify turn (Verified).
type VerifyRow struct {
	Iteration int `json:"iteration"`
	Rollouts  int `json:"rollouts"` // with at least one step
	Editing   int `json:"editing"`
	Verified  int `json:"verified"`
	Rate      Num `json:"rate"` // Verified / Editing
	EditTurns int `json:"edit_turns"`
}

// VerifyData is the edit-then-verify panel, from the steps table.
type VerifyData struct {
	Rows []VerifyRow `json:"rows"`
}

func editThenVerify(steps []schemas.Step) VerifyData {
	var d VerifyData
	for _, it := range iterations(steps, func(s schemas.Step) int32 { return s.Iteration }) {
		row := VerifyRow{Iteration: it}
		type state struct{ edited, verified bool }
		per := map[string]*state{}
		var order []string
		// Steps are sorted by rollout and turn.
		for _, s := range steps {
			if int(s.Iteration) != it {
				continue
			}
			st := per[s.RolloutID]
			if st == nil {
				st = &state{}
				per[s.RolloutID] = st
				order = append(order, s.RolloutID)
			}
			switch ToolKind(s.ToolName, s.Arguments) {
			case KindEdit:
				st.edited = true
				row.EditTurns++
			case KindVerify:
				if st.edited {
					st.verified = true
				}
			}
		}
		for _, id := range order {
			row.Rollouts++
			if per[id].edited {
				row.Editing++
			}
			if per[id].verified {
				row.Verified++
			}
		}
		row.Rate = ratio(row.Verified, row.Editing)
		d.Rows = append(d.Rows, row)
	}
	return d
}

// ---- training curves and logprob agreement ----

// TrainRow is one optimizer step.
type TrainRow struct {
	Index        int `json:"index"` // position in the run, from 0
	Iteration    int `json:"iteration"`
	Step         int `json:"step"`
	Loss         Num `json:"loss"`
	GradNorm     Num `json:"grad_norm"`
	LR           Num `json:"lr"`
	ClipFraction Num `json:"clip_fraction"`
	Entropy      Num `json:"entropy"`
	KL           Num `json:"kl"`
	TokensPerSec Num `json:"tokens_per_second"`
}

// TrainData is the training-curves panel.
type TrainData struct {
	Rows []TrainRow `json:"rows"`
}

func training(ts []schemas.TrainStep) TrainData {
	var d TrainData
	for i, s := range ts {
		d.Rows = append(d.Rows, TrainRow{Index: i, Iteration: int(s.Iteration), Step: int(s.Step), Loss: Num(s.Loss),
			GradNorm: Num(s.GradNorm), LR: Num(s.LR), ClipFraction: Num(s.ClipFraction), Entropy: Num(s.Entropy),
			KL: Num(s.KL), TokensPerSec: Num(s.TokensPerSecond)})
	}
	return d
}

// LogprobStep is one optimizer step's train-inference agreement, as the
// trainer measured it.
type LogprobStep struct {
	Index      int `json:"index"`
	Iteration  int `json:"iteration"`
	Step       int `json:"step"`
	Pearson    Num `json:"pearson"`
	Spearman   Num `json:"spearman"`
	MeanAbs    Num `json:"mean_abs_diff"`
	MaxAbs     Num `json:"max_abs_diff"`
	ISRatioMin Num `json:"is_ratio_min"`
	ISRatio    Num `json:"is_ratio_mean"`
	ISRatioMax Num `json:"is_ratio_max"`
	ESS        Num `json:"ess"`
}

// ScatterPoint is one sampled token: its logprob at rollout time and as
// the trainer recomputed it.
type ScatterPoint struct {
	Rollout    float32 `json:"rollout"`
	Recomputed float32 `json:"recomputed"`
}

// Agreement is one iteration's agreement between the rollout logprobs and
// the trainer's recomputed ones, computed here over every sampled token of
// the segments the trainer scored.
type Agreement struct {
	Iteration int            `json:"iteration"`
	Source    string         `json:"source,omitempty"`
	Segments  int            `json:"segments"`  // compared
	Unmatched int            `json:"unmatched"` // without recomputed logprobs of the right length
	Tokens    int            `json:"tokens"`
	Pearson   Num            `json:"pearson"`
	MeanAbs   Num            `json:"mean_abs_diff"`
	MaxAbs    Num            `json:"max_abs_diff"`
	Points    []ScatterPoint `json:"points,omitempty"` // an even sample of at most Options.ScatterPoints
	Missing   string         `json:"missing,omitempty"`
}

// LogprobData is the logprob-agreement panel.
type LogprobData struct {
	Steps      []LogprobStep `json:"steps"`
	Recomputed []Agreement   `json:"recomputed"`
}

func logprobSteps(ts []schemas.TrainStep) []LogprobStep {
	var out []LogprobStep
	for i, s := range ts {
		out = append(out, LogprobStep{Index: i, Iteration: int(s.Iteration), Step: int(s.Step), Pearson: Num(s.LogprobPearson),
			Spearman: Num(s.LogprobSpearman), MeanAbs: Num(s.LogprobMeanAbsDiff), MaxAbs: Num(s.LogprobMaxAbsDiff),
			ISRatioMin: Num(s.ISRatioMin), ISRatio: Num(s.ISRatioMean), ISRatioMax: Num(s.ISRatioMax), ESS: Num(s.ESS)})
	}
	return out
}

// ---- per-task solve grid ----

// TaskCell is one task in one iteration.
type TaskCell struct {
	Iteration int `json:"iteration"`
	Rollouts  int `json:"rollouts"`
	Completed int `json:"completed"`
	Solved    int `json:"solved"`
	Share     Num `json:"share"` // Solved / Completed
}

// TaskRow is one task across iterations.
type TaskRow struct {
	TaskID string     `json:"task_id"`
	Cells  []TaskCell `json:"cells"`
	Share  Num        `json:"share"` // over every iteration
}

// TaskGrid is the per-task solve grid.
type TaskGrid struct {
	Iterations []int     `json:"iterations"`
	Tasks      []TaskRow `json:"tasks"`
}

func taskGrid(rs []schemas.Rollout) TaskGrid {
	g := TaskGrid{Iterations: iterations(rs, rolloutIter)}
	col := map[int]int{}
	for i, it := range g.Iterations {
		col[it] = i
	}
	rows := map[string]*TaskRow{}
	var ids []string
	for _, r := range rs {
		row := rows[r.TaskID]
		if row == nil {
			row = &TaskRow{TaskID: r.TaskID, Cells: make([]TaskCell, len(g.Iterations))}
			for i, it := range g.Iterations {
				row.Cells[i].Iteration = it
			}
			rows[r.TaskID] = row
			ids = append(ids, r.TaskID)
		}
		c := &row.Cells[col[int(r.Iteration)]]
		c.Rollouts++
		if r.Status == schemas.StatusCompleted {
			c.Completed++
			if solved(r) {
				c.Solved++
			}
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		row := rows[id]
		var done, ok int
		for i := range row.Cells {
			c := &row.Cells[i]
			c.Share = ratio(c.Solved, c.Completed)
			done += c.Completed
			ok += c.Solved
		}
		row.Share = ratio(ok, done)
		g.Tasks = append(g.Tasks, *row)
	}
	return g
}

// ---- rollout list ----

// RolloutRow is one rollout in the list that leads to the trajectory viewer.
type RolloutRow struct {
	RolloutID   string  `json:"rollout_id"`
	TaskID      string  `json:"task_id"`
	Harness     string  `json:"harness"`
	Status      string  `json:"status"`
	Termination string  `json:"termination"`
	Reward      float64 `json:"reward"`
	Turns       int     `json:"turns"`
	ToolCalls   int     `json:"tool_calls"`
	DiffBytes   int64   `json:"diff_bytes"`
}

// RolloutList is the rollouts of one iteration, optionally of one task.
type RolloutList struct {
	Iteration  int          `json:"iteration"`
	Iterations []int        `json:"iterations"`
	Task       string       `json:"task,omitempty"`
	Rows       []RolloutRow `json:"rows"`
	Total      int          `json:"total"` // before the cut at maxListRows
}

const maxListRows = 500

func rolloutList(rs []schemas.Rollout, iter int, task string) RolloutList {
	l := RolloutList{Iteration: iter, Iterations: iterations(rs, rolloutIter), Task: task}
	if iter < 0 && len(l.Iterations) > 0 {
		l.Iteration = l.Iterations[len(l.Iterations)-1]
	}
	for _, r := range rs {
		if int(r.Iteration) != l.Iteration || (task != "" && r.TaskID != task) {
			continue
		}
		l.Total++
		if len(l.Rows) < maxListRows {
			l.Rows = append(l.Rows, RolloutRow{RolloutID: r.RolloutID, TaskID: r.TaskID, Harness: r.Harness,
				Status: string(r.Status), Termination: string(r.Termination), Reward: r.Reward, Turns: int(r.NumTurns),
				ToolCalls: int(r.NumToolCalls), DiffBytes: r.DiffBytes})
		}
	}
	return l
}
