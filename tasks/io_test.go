package tasks_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/legorl/legorl/tasks"
)

func sample() tasks.Instance {
	return tasks.Instance{
		InstanceID: "x__y-1", Repo: "x/y", BaseCommit: "0123456789abcdef0123456789abcdef01234567",
		ProblemStatement: "it breaks", FailToPass: tasks.TestList{"tests/test_a.py::test_a"}, PassToPass: tasks.TestList{"tests/test_a.py::test_b"},
		TestPatch: "diff --git a/tests/test_a.py b/tests/test_a.py\n--- a/tests/test_a.py\n+++ b/tests/test_a.py\n@@ -1 +1 @@\n-a\n+b\n",
		Patch:     "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-a\n+b\n",
		Snapshot:  "repos/x", Language: "python", Family: "wrong_operator", Split: tasks.SplitTrain,
	}
}

func TestJSONLRoundTrip(t *testing.T) {
	in := []tasks.Instance{sample(), sample()}
	in[1].InstanceID = "x__y-2"
	var buf bytes.Buffer
	if err := tasks.WriteJSONL(&buf, in); err != nil {
		t.Fatal(err)
	}
	out, err := tasks.ReadJSONL(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip:\n%+v\n%+v", in, out)
	}
}

// SWE-bench stores the test lists as strings holding JSON.
func TestJSONLSWEBenchStrings(t *testing.T) {
	line := `{"instance_id":"a__b-1","repo":"a/b","base_commit":"abcdef0","FAIL_TO_PASS":"[\"t::x\", \"t::y\"]","PASS_TO_PASS":"[]","patch":"p","test_patch":"q","problem_statement":"s","environment_setup_commit":"abcdef0"}` + "\n"
	out, err := tasks.ReadJSONL(strings.NewReader(line))
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 || !reflect.DeepEqual([]string(out[0].FailToPass), []string{"t::x", "t::y"}) || len(out[0].PassToPass) != 0 {
		t.Fatalf("%+v", out)
	}
	if _, err := tasks.ReadJSONL(strings.NewReader("{\"instance_id\": 3}\n")); !errors.Is(err, tasks.ErrInvalid) || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("bad line: %v", err)
	}
}

func TestParquetRoundTrip(t *testing.T) {
	in := []tasks.Instance{sample(), sample()}
	in[1].InstanceID = "x__y-2"
	in[1].PassToPass = nil
	dir := t.TempDir()
	p := filepath.Join(dir, "suite.parquet")
	fh, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := tasks.WriteParquet(fh, in); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	s, err := tasks.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	for i := range in {
		got, want := s.Instances[i], in[i]
		if len(got.PassToPass) == 0 && len(want.PassToPass) == 0 {
			got.PassToPass, want.PassToPass = nil, nil
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("instance %d:\n%+v\n%+v", i, got, want)
		}
	}
	if s.Dir != dir || s.Instances[0].SnapshotDir(s.Dir) != filepath.Join(dir, "repos/x") {
		t.Fatalf("dir %s snapshot %s", s.Dir, s.Instances[0].SnapshotDir(s.Dir))
	}
	if _, err := tasks.ReadParquet(bytes.NewReader([]byte("PAR1garbagePAR1")), 15); !errors.Is(err, tasks.ErrInvalid) {
		t.Fatalf("garbage parquet: %v", err)
	}
}

func TestCheckReasons(t *testing.T) {
	cases := []struct {
		name   string
		edit   func(*tasks.Instance)
		reason string
	}{
		{"ok", func(*tasks.Instance) {}, "ok"},
		{"no id", func(in *tasks.Instance) { in.InstanceID = "" }, "invalid"},
		{"id with slash", func(in *tasks.Instance) { in.InstanceID = "../x" }, "invalid"},
		{"bad commit", func(in *tasks.Instance) { in.BaseCommit = "main" }, "invalid"},
		{"no F2P", func(in *tasks.Instance) { in.FailToPass = nil }, "invalid"},
		{"duplicate test", func(in *tasks.Instance) { in.PassToPass = in.FailToPass }, "invalid"},
		{"option-like test id", func(in *tasks.Instance) { in.FailToPass = tasks.TestList{"--junitxml=/tmp/x"} }, "invalid"},
		{"bad go test name", func(in *tasks.Instance) { in.Runner = tasks.RunnerGoTest; in.FailToPass = tasks.TestList{"TestA|.*"} }, "invalid"},
		{"no snapshot", func(in *tasks.Instance) { in.Snapshot = "" }, "invalid"},
		{"unknown runner", func(in *tasks.Instance) { in.Runner = "jest" }, "invalid"},
		{"gold patch climbs out", func(in *tasks.Instance) { in.Patch = strings.ReplaceAll(in.Patch, "a.py", "../a.py") }, "patch_invalid"},
		{"binary test patch", func(in *tasks.Instance) { in.TestPatch = "diff --git a/x b/x\nGIT binary patch\n" }, "patch_invalid"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := sample()
			c.edit(&in)
			if got := tasks.Reason(in.Check()); got != c.reason {
				t.Fatalf("reason %s (%v), want %s", got, in.Check(), c.reason)
			}
		})
	}
}

// TestRunnable: only instances that pass Check count, and of those the
// ones in a given split or in none.
func TestRunnable(t *testing.T) {
	mk := func(id, split string, valid bool) tasks.Instance {
		in := sample()
		in.InstanceID, in.Split = id, split
		if !valid {
			in.FailToPass = nil
		}
		return in
	}
	ins := []tasks.Instance{
		mk("a", tasks.SplitTrain, true), mk("b", tasks.SplitTrain, false), mk("c", "", true),
		mk("d", "heldout", true), mk("e", "sft", true),
	}
	for _, tc := range []struct {
		splits []string
		want   int
	}{
		{[]string{tasks.SplitTrain}, 2},
		{[]string{tasks.SplitTrain, "heldout"}, 3},
		{[]string{"sft", "heldout", tasks.SplitTrain}, 4},
		{nil, 1},
	} {
		if got := tasks.Runnable(ins, tc.splits); got != tc.want {
			t.Errorf("splits %q: %d runnable, want %d", tc.splits, got, tc.want)
		}
	}
}
