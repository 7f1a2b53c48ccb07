package loop_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/legorl/legorl/loop"
	"github.com/legorl/legorl/loop/stats"
)

// TestReport: `legorl run --replicates GLOB` prints the spread of the
// matching summaries' differences beside the run's own, row by row, and
// says so when none match.
func TestReport(t *testing.T) {
	dir := t.TempDir()
	row := func(split, mode string, diff float64) string {
		return `{"harness": "bash", "split": "` + split + `", "mode": "` + mode + `", "diff": ` + strconv.FormatFloat(diff, 'f', -1, 64) +
			`, "ci95_lo": -0.01, "ci95_hi": 0.2, "tasks": 40}`
	}
	for name, diffs := range map[string][2]float64{"demo-rep-1": {0.10, 0.02}, "demo-rep-2": {0.12, 0.04}, "demo-rep-3": {0.08, 0.00}} {
		body := `{"comparisons": [` + row("test", "t1", diffs[0]) + `, ` + row("test", "greedy", diffs[1]) + `], "wall_seconds": 1}`
		if err := os.WriteFile(filepath.Join(dir, name+".summary.json"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	res := &loop.Result{Evals: []loop.EvalResult{{}, {}}, Comparisons: []loop.Comparison{
		{Harness: "bash", Split: "test", Mode: "t1", Paired: stats.Paired{Diff: 0.15, Lo: 0.05, Hi: 0.25}}}}
	out, err := loop.Report(res, filepath.Join(dir, "demo-rep-*.summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"the difference after - before across the 3 committed replicates",
		"bash     test            t1        3 +0.100  0.020  [+0.080,+0.120] +0.150 [+0.050,+0.250]   demo-rep-1 +0.100 [-0.010,+0.200], demo-rep-2 +0.120 [-0.010,+0.200], demo-rep-3 +0.080 [-0.010,+0.200]\n",
		"bash     test            greedy    3 +0.020  0.020  [+0.000,+0.040] -                        demo-rep-1 +0.020",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	if strings.Index(out, " t1 ") > strings.Index(out, " greedy ") {
		t.Errorf("greedy before t1:\n%s", out)
	}
	out, err = loop.Report(res, filepath.Join(dir, "other-*.summary.json"))
	if err != nil || !strings.Contains(out, "replicates: no committed summary matches "+filepath.Join(dir, "other-*.summary.json")+" yet") {
		t.Errorf("no replicates: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "demo-rep-4.summary.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := loop.Report(res, filepath.Join(dir, "demo-rep-*.summary.json")); err == nil || !strings.Contains(err.Error(), "demo-rep-4.summary.json") {
		t.Errorf("a broken summary: %v, want an error naming it", err)
	}
}
