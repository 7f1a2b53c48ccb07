package results

import (
	"errors"
	"flag"
	"os"
	"strings"
	"testing"
	"testing/fstest"
)

var update = flag.Bool("update", false, "rewrite testdata/render.golden")

// TestRender: the tables of testdata/results, a replicated config (a-x
// and a-x-r2: equal but for the run name and training and sampling seeds,
// keys in another order) with its mean row, a config equal to them but for
// the suite's seed (a-y) on its own, test and validation rows side by side, a comparison made after
// a run, a run with no trained update, a resumed run whose summary lists
// no processes, and a second agent. Rendering twice gives the same bytes.
func TestRender(t *testing.T) {
	runs, err := Load(os.DirFS("testdata/results"))
	if err != nil {
		t.Fatal(err)
	}
	got := Render(runs, "results/")
	if again := Render(runs, "results/"); again != got {
		t.Fatal("two renderings differ")
	}
	if *update {
		if err := os.WriteFile("testdata/render.golden", []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile("testdata/render.golden")
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("render differs from testdata/render.golden (go test -update):\n%s", got)
	}
	for _, cell := range []string{
		"| [`a-x.json`](results/a-x.json) | test | t1 | 0.200 -> 0.300 | +0.100 [+0.020, +0.180] | 0.012 | 300 | 3 | 0.995000000000 | 51 s (last process) |",
		"| **mean of 2 runs** | test | t1 | 0.210 -> 0.320 | mean +0.110, runs +0.100 to +0.120 (sd 0.014) | - | 300 | 3 |",
		"| 7,210 s | [summary](results/a-x-r2.summary.json) |",
		"| 0.999999999993 | 3,142 s |",
		"| [greedy.compare.json](results/a-x/greedy.compare.json) |",
		"| 2 | - | 100 s | [summary](results/a-y.summary.json), [notes](results/a-y/NOTES.md) |",
	} {
		if !strings.Contains(got, cell) {
			t.Errorf("rendered tables lack %q", cell)
		}
	}
	// A run's test row comes before its heldout row, t1 before greedy.
	test, heldout, greedy := strings.Index(got, "| test | t1 | 0.200"), strings.Index(got, "| heldout | t1 | 0.250"), strings.Index(got, "| heldout | greedy | 0.300")
	if test < 0 || heldout < test || greedy < heldout {
		t.Errorf("a-x's rows out of order: test %d, heldout %d, greedy %d", test, heldout, greedy)
	}
}

// TestLoadErrors: what cannot be read is an error naming the file.
func TestLoadErrors(t *testing.T) {
	sum := []byte(`{"comparisons": [], "iterations": []}`)
	for _, tc := range []struct {
		name string
		fs   fstest.MapFS
		want string
	}{
		{"no config", fstest.MapFS{"x.summary.json": {Data: sum}}, "x.json"},
		{"bad summary", fstest.MapFS{"x.summary.json": {Data: []byte("{")}, "x.json": {Data: []byte("{}")}}, "x.summary.json"},
		{"orphan compare", fstest.MapFS{"y/g.compare.json": {Data: []byte(`{"comparisons": [{}]}`)}}, "y/g.compare.json: no y.summary.json"},
		{"empty compare", fstest.MapFS{"x.summary.json": {Data: sum}, "x.json": {Data: []byte("{}")}, "x/g.compare.json": {Data: []byte(`{}`)}}, "x/g.compare.json: no comparisons"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.fs)
			if !errors.Is(err, ErrSummary) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("err %v, want one line naming %q", err, tc.want)
			}
		})
	}
}

// TestSplice: the tables replace what is between the markers and nothing
// else; a document without both markers, once each, is refused.
func TestSplice(t *testing.T) {
	doc := "# R\n\nintro\n" + Begin + "\nold table\n" + End + "\nreading\n"
	got, err := Splice(doc, "new table\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := "# R\n\nintro\n" + Begin + "\n\nnew table\n\n" + End + "\nreading\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if again, _ := Splice(got, "new table\n"); again != got {
		t.Error("splicing the same tables again changed the document")
	}
	for _, bad := range []string{"no markers", Begin + "\nx\n", End + "\n" + Begin + "\n", Begin + "\n" + End + Begin + "\n" + End} {
		if _, err := Splice(bad, "t"); !errors.Is(err, ErrMarkers) {
			t.Errorf("%q: err %v, want ErrMarkers", bad, err)
		}
	}
}

// TestUnbacked: a document's pass@1 and difference figures are checked
// against the rows, each kind able to fail by one digit.
func TestUnbacked(t *testing.T) {
	runs, err := Load(os.DirFS("testdata/results"))
	if err != nil {
		t.Fatal(err)
	}
	f := Backing(runs)
	for _, tc := range []struct {
		text string
		bad  int
	}{
		{"a-x raised pass@1 from 0.25 to 0.40: +15.0 points [+5.0, +25.0].", 0},
		{"a-x: 0.250 -> 0.400, +0.150 [+0.050, +0.250]", 0},
		{"b-z +20.8 [+15.9, +25.6] and +20.7 points, 0.360 -> 0.568", 0}, // 20.75 either way
		{"a-x +15.0 points, 95% interval [+5.0, +25.0]; a rerun gave +9.0", 0},
		{"the replicates' mean: +12.0 (0.260 -> 0.380), -2.0 for a-y", 0},
		{"the goal: +10 points, pass@1 0.3", 0}, // integers and lone values are not run figures
		{"a-x raised pass@1 from 0.25 to 0.41", 1},
		{"0.250 -> 0.401", 1},
		{"+15.0 [+5.1, +25.0]", 1},
		{"+15.1 points [+5.0, +25.0]", 1},
		{"+20.9 [+15.9, +25.6]", 1},
		{"a rerun gave +9.2", 1},
		{"(-3.0 to +15.0)", 1},
		{"+0.151 and 0.250 -> 0.400", 1},
	} {
		if got := f.Unbacked(tc.text); len(got) != tc.bad {
			t.Errorf("%q: unbacked %q, want %d", tc.text, got, tc.bad)
		}
	}
}

// TestResultsMatchSummaries: docs/RESULTS.md's tables are what Render
// writes from the committed summaries (`make results` rewrites them), and
// every pass@1 and difference figure that RESULTS.md and README.md state
// is a row of those tables: the prose cites rows, never a figure typed
// from elsewhere.
func TestResultsMatchSummaries(t *testing.T) {
	runs, err := Load(os.DirFS("../../docs/results"))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../docs/RESULTS.md")
	if err != nil {
		t.Fatal(err)
	}
	want, err := Splice(string(doc), Render(runs, "results/"))
	if err != nil {
		t.Fatal(err)
	}
	if want != string(doc) {
		t.Error("docs/RESULTS.md's tables differ from the committed summaries: run make results")
	}
	f := Backing(runs)
	for _, name := range []string{"../../docs/RESULTS.md", "../../README.md"} {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range f.Unbacked(string(b)) {
			t.Errorf("%s: %s", strings.TrimPrefix(name, "../../"), u)
		}
	}
}
