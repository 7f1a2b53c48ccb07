package transforms

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/storage"
)

func init() {
	register.DoFn2x0[Task, func(Task)](&splitFn{})
	register.DoFn2x0[GroupResult, func(EvalRollout)](&tagFn{})
	register.DoFn5x1[context.Context, []byte, func(*EvalRollout) bool, func(*Report) bool, func(EvalTable), error](&evalTableFn{})
	register.Emitter1[EvalRollout]()
	register.Emitter1[EvalTable]()
	register.Iter1[EvalRollout]()
	register.Iter1[Report]()
	for _, t := range []any{EvalRollout{}, EvalRow{}, EvalTable{}} {
		beam.RegisterType(reflect.TypeOf(t))
	}
}

// FilterSplit keeps the tasks of the given splits (tasks.SplitHeldout, ...)
// and the tasks of no split (a suite without splits is evaluated whole). It
// expects and returns a PCollection<Task>.
func FilterSplit(s beam.Scope, splits []string, ts beam.PCollection) beam.PCollection {
	s = s.Scope("transforms.FilterSplit")
	return beam.ParDo(s, &splitFn{Splits: splits}, ts)
}

type splitFn struct {
	Splits []string
}

func (f *splitFn) ProcessElement(t Task, emit func(Task)) {
	if t.Instance.Split == "" {
		emit(t)
		return
	}
	for _, s := range f.Splits {
		if s == t.Instance.Split {
			emit(t)
			return
		}
	}
}

// EvalRollout is one rollout's outcome, for the eval table.
type EvalRollout struct {
	Harness string
	TaskID  string
	Status  string
	Reward  float64
}

// EvalRow is one harness's line of the eval table.
type EvalRow struct {
	Harness  string
	Tasks    int // tasks with at least one completed rollout
	Rollouts int
	Masked   int
	// Pass1 is pass@1: the mean over tasks of passed/completed.
	Pass1 float64
	// PassK is pass@K (K = G, when G > 1) by the unbiased estimator
	// 1 - C(n-c, K)/C(n, K), over the tasks with K completed rollouts
	// (TasksK of them).
	PassK  float64
	TasksK int
	// PerTask is each task's pass rate (passed/completed), for paired
	// comparisons of two policies on the same tasks.
	PerTask map[string]float64 `json:",omitempty"`
}

// EvalTable is the eval's result.
type EvalTable struct {
	RunID     string
	Iteration int32
	K         int
	// Decoding is how the policy sampled (DecodingT1, DecodingGreedy or
	// "top-k N"), and Splits the task splits evaluated, so that a paired
	// comparison of two evals can refuse to pair unlike ones. Tables
	// stored before they were recorded have neither.
	Decoding string   `json:",omitempty"`
	Splits   []string `json:",omitempty"`
	Rows     []EvalRow
}

// The decodings of an eval: every token at temperature 1, or greedy.
const (
	DecodingT1     = "t1"
	DecodingGreedy = "greedy"
)

// Decoding names the decoding of a rollout config's TopK.
func Decoding(topK int) string {
	switch topK {
	case 0:
		return DecodingT1
	case 1:
		return DecodingGreedy
	}
	return fmt.Sprintf("top-k %d", topK)
}

// EvalReportKey is the key of an eval's stored table.
func EvalReportKey(runID string, iteration int32, jobID string) string {
	return schemas.ReportKey(runID, "eval", iteration, jobID)
}

// TagHarness turns a harness's group results into EvalRollouts. It
// expects a PCollection<GroupResult> and returns a PCollection<EvalRollout>.
func TagHarness(s beam.Scope, harness string, results beam.PCollection) beam.PCollection {
	s = s.Scope("transforms.TagHarness")
	return beam.ParDo(s, &tagFn{Harness: harness}, results)
}

type tagFn struct {
	Harness string
}

func (f *tagFn) ProcessElement(r GroupResult, emit func(EvalRollout)) {
	for _, o := range r.Rollouts {
		emit(EvalRollout{Harness: f.Harness, TaskID: r.TaskID, Status: o.Status, Reward: o.Reward})
	}
}

// StoreEvalTable computes pass@1 (and pass@K) per harness once the
// harnesses' commits are done, stores the table (EvalReportKey), labelled
// with its decoding and the splits evaluated, and returns a
// PCollection<EvalTable> of one element. It expects a
// PCollection<EvalRollout> and the PCollection<Report> of the commits.
func StoreEvalTable(s beam.Scope, cfg Config, k int, splits []string, rollouts, reports beam.PCollection) beam.PCollection {
	s = s.Scope("transforms.StoreEvalTable")
	return beam.ParDo(s, &evalTableFn{Cfg: cfg.WithDefaults(), K: k, Splits: splits}, beam.Impulse(s),
		beam.SideInput{Input: rollouts}, beam.SideInput{Input: reports})
}

type evalTableFn struct {
	Cfg    Config
	K      int
	Splits []string
}

func (f *evalTableFn) ProcessElement(ctx context.Context, _ []byte, rollouts func(*EvalRollout) bool, reports func(*Report) bool, emit func(EvalTable)) error {
	var rs []EvalRollout
	var r EvalRollout
	for rollouts(&r) {
		rs = append(rs, r)
	}
	var rep Report
	for reports(&rep) { // the commits are done: their accounting held
	}
	t := Table(f.Cfg.RunID, f.Cfg.Iteration, f.K, rs)
	t.Decoding, t.Splits = Decoding(f.Cfg.TopK), f.Splits
	st, err := storage.Open(ctx, f.Cfg.Store, currentStoreOptions(f.Cfg))
	if err != nil {
		return err
	}
	body, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return err
	}
	if err := (sameContent{st}).Put(ctx, EvalReportKey(f.Cfg.RunID, f.Cfg.Iteration, f.Cfg.JobID), bytes.NewReader(body), int64(len(body))); err != nil {
		return fmt.Errorf("transforms: eval table: %w", err)
	}
	emit(t)
	return nil
}

// Table computes the eval table of rollouts: per harness, pass@1 and
// pass@k over tasks, masked rollouts left out (they say nothing about the
// policy).
func Table(runID string, iteration int32, k int, rs []EvalRollout) EvalTable {
	type counts struct{ n, c int }
	by := map[string]map[string]*counts{}
	rows := map[string]*EvalRow{}
	for _, r := range rs {
		row := rows[r.Harness]
		if row == nil {
			row = &EvalRow{Harness: r.Harness}
			rows[r.Harness] = row
			by[r.Harness] = map[string]*counts{}
		}
		row.Rollouts++
		if r.Status != "completed" {
			row.Masked++
			continue
		}
		c := by[r.Harness][r.TaskID]
		if c == nil {
			c = &counts{}
			by[r.Harness][r.TaskID] = c
		}
		c.n++
		if r.Reward == 1 {
			c.c++
		}
	}
	t := EvalTable{RunID: runID, Iteration: iteration, K: k}
	for h, row := range rows {
		var p1, pk float64
		row.PerTask = map[string]float64{}
		for id, c := range by[h] {
			row.Tasks++
			row.PerTask[id] = float64(c.c) / float64(c.n)
			p1 += float64(c.c) / float64(c.n)
			if k > 1 && c.n >= k {
				row.TasksK++
				pk += PassAtK(c.n, c.c, k)
			}
		}
		if row.Tasks > 0 {
			row.Pass1 = p1 / float64(row.Tasks)
		}
		if row.TasksK > 0 {
			row.PassK = pk / float64(row.TasksK)
		}
		t.Rows = append(t.Rows, *row)
	}
	sort.Slice(t.Rows, func(i, j int) bool { return t.Rows[i].Harness < t.Rows[j].Harness })
	return t
}

// PassAtK is the unbiased pass@k of a task with n samples, c of them
// correct: 1 - C(n-c, k) / C(n, k).
func PassAtK(n, c, k int) float64 {
	if n-c < k {
		return 1
	}
	p := 1.0
	for i := n - c + 1; i <= n; i++ {
		p *= 1 - float64(k)/float64(i)
	}
	return 1 - p
}
