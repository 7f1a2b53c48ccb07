package loop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/legorl/legorl/loop/stats"
	"github.com/legorl/legorl/storage"
	"github.com/legorl/legorl/transforms"
)

// EvalRef names one stored eval: its run id and iteration, and the key of
// the table read.
type EvalRef struct {
	Run       string `json:"run"`
	Iteration int32  `json:"iteration"`
	Report    string `json:"report"`
}

// EvalComparison is what `legorl compare --out` writes: the two evals and,
// per harness they share, the paired change of pass@1, in the shape of a
// run summary's comparisons.
type EvalComparison struct {
	Before      EvalRef      `json:"before"`
	After       EvalRef      `json:"after"`
	Comparisons []Comparison `json:"comparisons"`
}

// CompareEvals reads two stored evals, RUN@ITERATION each, and pairs them
// (compareEvalTables): what `legorl compare` prints. The notes say where a
// harness's tasks were not all graded in both.
func CompareEvals(ctx context.Context, st storage.Store, before, after string) (EvalComparison, []string, error) {
	b, err := parseEvalRef("--before", before)
	if err != nil {
		return EvalComparison{}, nil, err
	}
	a, err := parseEvalRef("--after", after)
	if err != nil {
		return EvalComparison{}, nil, err
	}
	if b.Run == a.Run && b.Iteration == a.Iteration {
		return EvalComparison{}, nil, fmt.Errorf("--before and --after both name %s@%d: compare two evals", b.Run, b.Iteration)
	}
	bt, err := readEvalTable(ctx, st, &b)
	if err != nil {
		return EvalComparison{}, nil, err
	}
	at, err := readEvalTable(ctx, st, &a)
	if err != nil {
		return EvalComparison{}, nil, err
	}
	c, notes, err := compareEvalTables(bt, at)
	return EvalComparison{Before: b, After: a, Comparisons: c}, notes, err
}

// parseEvalRef reads RUN@ITERATION; flag names it in errors.
func parseEvalRef(flag, s string) (EvalRef, error) {
	run, it, ok := strings.Cut(s, "@")
	if !ok {
		return EvalRef{}, fmt.Errorf("%s %q: want RUN@ITERATION, e.g. myrun-eval@1", flag, s)
	}
	if err := storage.CheckName("run id", run); err != nil {
		return EvalRef{}, fmt.Errorf("%s: %w", flag, err)
	}
	n, err := strconv.ParseInt(it, 10, 32)
	if err != nil || n < 0 {
		return EvalRef{}, fmt.Errorf("%s %q: the iteration %q is not a whole number >= 0", flag, s, it)
	}
	return EvalRef{Run: run, Iteration: int32(n)}, nil
}

// readEvalTable reads the newest table stored for ref (a rerun of an eval
// stores its own; job ids start with the time) and records its key in
// ref.
func readEvalTable(ctx context.Context, st storage.Store, ref *EvalRef) (transforms.EvalTable, error) {
	prefix := path.Dir(transforms.EvalReportKey(ref.Run, ref.Iteration, "job")) + "/" // every job's table of the eval
	keys, err := st.List(ctx, prefix)
	if err != nil {
		return transforms.EvalTable{}, fmt.Errorf("eval %s@%d: %w", ref.Run, ref.Iteration, err)
	}
	keys = slices.DeleteFunc(keys, func(k string) bool { return !strings.HasSuffix(k, ".json") })
	if len(keys) == 0 {
		return transforms.EvalTable{}, fmt.Errorf("no eval of run %s at iteration %d in %s (legorl eval --run %s --iteration %d stores one)",
			ref.Run, ref.Iteration, st.URI(), ref.Run, ref.Iteration)
	}
	slices.Sort(keys)
	ref.Report = keys[len(keys)-1]
	var t transforms.EvalTable
	if err := transforms.ReadJSON(ctx, st, ref.Report, "eval table", &t); err != nil {
		return t, err
	}
	return t, nil
}

// compareEvalTables pairs two eval tables per harness they share. It refuses
// tables that record different decodings or splits: their change would
// say nothing about the policies. The notes say where a harness's tasks
// were not all graded in both.
func compareEvalTables(before, after transforms.EvalTable) (out []Comparison, notes []string, err error) {
	if before.Decoding != after.Decoding {
		return nil, nil, fmt.Errorf("the evals decode differently (%s before, %s after): compare evals of one decoding",
			orUnrecorded(before.Decoding), orUnrecorded(after.Decoding))
	}
	bs, as := strings.Join(before.Splits, ","), strings.Join(after.Splits, ",")
	if bs != as {
		return nil, nil, fmt.Errorf("the evals cover different splits (%s before, %s after)", orUnrecorded(bs), orUnrecorded(as))
	}
	for _, br := range before.Rows {
		i := slices.IndexFunc(after.Rows, func(r transforms.EvalRow) bool { return r.Harness == br.Harness })
		if i < 0 {
			continue
		}
		ar := after.Rows[i]
		c := Comparison{Harness: br.Harness, Split: bs, Mode: before.Decoding, Before: br.Pass1, After: ar.Pass1,
			BeforeCI: stats.Pass1Interval(br.PerTask), AfterCI: stats.Pass1Interval(ar.PerTask), Paired: stats.PairTasks(br.PerTask, ar.PerTask)}
		if c.Tasks == 0 {
			return nil, nil, fmt.Errorf("harness %s: no task was graded in both evals (were they of one suite?)", br.Harness)
		}
		if c.Tasks != br.Tasks || c.Tasks != ar.Tasks {
			notes = append(notes, fmt.Sprintf("harness %s: %d tasks graded before and %d after; the %d graded in both are paired "+
				"(masked rollouts leave a task ungraded)", br.Harness, br.Tasks, ar.Tasks, c.Tasks))
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, nil, errors.New("the evals share no harness")
	}
	slices.SortFunc(out, func(x, y Comparison) int { return strings.Compare(x.Harness, y.Harness) })
	return out, notes, nil
}

func orUnrecorded(s string) string {
	if s == "" {
		return "unrecorded"
	}
	return s
}

// WriteJSON writes the comparison as indented JSON, what `legorl compare
// --out` stores.
func (c EvalComparison) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(c)
}

// WriteTable writes the comparison as the table `legorl compare` prints.
func (c EvalComparison) WriteTable(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "harness\tsplit\tdecoding\ttasks\tbefore [95%%]\tafter [95%%]\tdifference [95%%]\tMcNemar p\tgained/lost\n")
	for _, r := range c.Comparisons {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.3f [%.3f, %.3f]\t%.3f [%.3f, %.3f]\t%+.3f [%+.3f, %+.3f]\t%.2g\t%d/%d\n",
			r.Harness, orUnrecorded(r.Split), orUnrecorded(r.Mode), r.Tasks, r.Before, r.BeforeCI[0], r.BeforeCI[1],
			r.After, r.AfterCI[0], r.AfterCI[1], r.Diff, r.Lo, r.Hi, r.McNemarP, r.Gained, r.Lost)
	}
	tw.Flush()
}
