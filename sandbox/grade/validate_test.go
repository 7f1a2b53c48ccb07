package grade_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legorl/legorl/sandbox/grade"
	"github.com/legorl/legorl/tasks"
)

// Every generated instance validates: gold passes (twice), base fails.
func TestValidateBuiltinSuite(t *testing.T) {
	_, ins := suite(t)
	s := &tasks.Suite{Instances: ins}
	for _, r := range grader(t).ValidateSuite(context.Background(), s, 2, 2) {
		if r.Err != nil {
			t.Errorf("%s: %s: %v", r.InstanceID, tasks.Reason(r.Err), r.Err)
		}
	}
}

func TestValidateRejects(t *testing.T) {
	good := *pick(t, "python", "wrong_operator")
	cases := []struct {
		name   string
		edit   func(in *tasks.Instance)
		reason string
	}{
		{"F2P passes on base", func(in *tasks.Instance) { in.FailToPass = in.PassToPass[:1]; in.PassToPass = in.PassToPass[1:] }, "f2p_passes_on_base"},
		{"gold patch fixes nothing", func(in *tasks.Instance) {
			in.Patch = "diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-" + strings.SplitN(readFile(t, in, "README.md"), "\n", 2)[0] + "\n+# renamed\n"
		}, "gold_fails"},
		{"gold patch does not apply", func(in *tasks.Instance) { in.Patch = strings.ReplaceAll(in.Patch, "\n-", "\n-zz") }, "patch_invalid"},
		{"missing required test", func(in *tasks.Instance) { in.PassToPass = append(in.PassToPass, "tests/test_none.py::test_missing") }, "gold_fails"},
		{"snapshot missing", func(in *tasks.Instance) { in.Snapshot = filepath.Join(t.TempDir(), "nothing") }, "snapshot"},
		{"base commit not in snapshot", func(in *tasks.Instance) { in.BaseCommit = strings.Repeat("ab", 20) }, "snapshot"},
		{"invalid field", func(in *tasks.Instance) { in.FailToPass = nil }, "invalid"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := good
			in.FailToPass = append(tasks.TestList{}, good.FailToPass...)
			in.PassToPass = append(tasks.TestList{}, good.PassToPass...)
			c.edit(&in)
			err := grader(t).Validate(context.Background(), "", &in, 1)
			if got := tasks.Reason(err); got != c.reason {
				t.Fatalf("reason %s (%v), want %s", got, err, c.reason)
			}
		})
	}
	t.Run("duplicate ids, the rest go on", func(t *testing.T) {
		bad := good
		bad.InstanceID = "broken"
		bad.BaseCommit = strings.Repeat("cd", 20)
		s := &tasks.Suite{Instances: []tasks.Instance{good, good, bad}}
		rs := grader(t).ValidateSuite(context.Background(), s, 1, 2)
		got := []string{tasks.Reason(rs[0].Err), tasks.Reason(rs[1].Err), tasks.Reason(rs[2].Err)}
		if strings.Join(got, ",") != "ok,duplicate,snapshot" {
			t.Fatalf("reasons %v", got)
		}
	})
}

func readFile(t *testing.T, in *tasks.Instance, p string) string {
	t.Helper()
	tr, err := tasks.ReadTree(context.Background(), in.Snapshot, in.BaseCommit)
	if err != nil {
		t.Fatal(err)
	}
	return string(tr[p].Data)
}

// A prepared workspace leaks nothing; a careless one leaks everything the
// scan looks for.
func TestSecrecyScan(t *testing.T) {
	ctx := context.Background()
	_, ins := suite(t)
	for i := range ins {
		if i%3 != 0 && ins[i].Language == "python" {
			continue // a sample of the Python families, every Go instance
		}
		in := &ins[i]
		ws := filepath.Join(t.TempDir(), "ws")
		if err := tasks.PrepareWorkspace(ctx, in.Snapshot, in.BaseCommit, ws); err != nil {
			t.Fatal(err)
		}
		f, err := grader(t).Scan(ctx, "", in, ws)
		if err != nil {
			t.Fatal(err)
		}
		if len(f) > 0 {
			t.Errorf("%s: prepared workspace leaks %v", in.InstanceID, f)
		}
	}
	t.Run("careless workspace", func(t *testing.T) {
		in := pick(t, "python", "")
		ws := t.TempDir()
		if err := os.CopyFS(ws, os.DirFS(in.Snapshot)); err != nil {
			t.Fatal(err)
		}
		// The fix committed ahead, a tag, a remote, the hidden tests and
		// the gold patch lying around.
		if _, err := tasks.Git(ctx, ws, strings.NewReader(in.Patch), "apply", "-"); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"commit", "-qam", "fix"}, {"tag", "v1"}, {"remote", "add", "origin", "https://leak.test/x"}} {
			if _, err := tasks.Git(ctx, ws, nil, args...); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := tasks.Git(ctx, ws, strings.NewReader(in.TestPatch), "apply", "-"); err != nil {
			t.Fatal(err)
		}
		os.MkdirAll(filepath.Join(ws, ".git", "logs"), 0o755)
		if err := os.WriteFile(filepath.Join(ws, ".git", "logs", "HEAD"), []byte("0000 ef60 legorl 1704067200 +0000\tcommit: fix\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, "gold.diff"), []byte(in.Patch), 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := grader(t).Scan(ctx, "", in, ws)
		if err != nil {
			t.Fatal(err)
		}
		joined := strings.Join(f, "\n")
		for _, want := range []string{"hidden_test:", "hidden_test_file:", "gold_fix:", "gold_patch:gold.diff", "git_object_after_base:", "git_ref:refs/tags/v1", "git_ref:refs/heads/main", "git_remote:", "git_file:logs"} {
			if !strings.Contains(joined, want) {
				t.Errorf("scan missed %s; found:\n%s", want, joined)
			}
		}
	})
}

func TestTakeDiff(t *testing.T) {
	tg := newTarget(t, "python")
	ctx := context.Background()
	fresh := func(t *testing.T) string {
		ws := filepath.Join(t.TempDir(), "ws")
		if err := tasks.PrepareWorkspace(ctx, tg.in.Snapshot, tg.in.BaseCommit, ws); err != nil {
			t.Fatal(err)
		}
		return ws
	}
	t.Run("untouched is empty", func(t *testing.T) {
		ws := fresh(t)
		os.MkdirAll(filepath.Join(ws, "tests", "__pycache__"), 0o755)
		os.WriteFile(filepath.Join(ws, "tests", "__pycache__", "x.cpython-311.pyc"), []byte("\x00\x01"), 0o644)
		os.MkdirAll(filepath.Join(ws, ".pytest_cache"), 0o755)
		if d, err := grade.TakeDiff(tg.base, ws, grade.DiffLimits{}); err != nil || d != "" {
			t.Fatalf("diff %q err %v", d, err)
		}
	})
	t.Run("fix round-trips to reward 1", func(t *testing.T) {
		ws := fresh(t)
		os.WriteFile(filepath.Join(ws, tg.mod), tg.fixed[tg.mod].Data, 0o644)
		os.WriteFile(filepath.Join(ws, "NOTES.md"), []byte("notes\n"), 0o644)
		d, err := grade.TakeDiff(tg.base, ws, grade.DiffLimits{})
		if err != nil {
			t.Fatal(err)
		}
		if g := mustGrade(t, tg.in, d); g.Reward != 1 {
			t.Fatalf("grade %+v", g)
		}
	})
	cases := []struct {
		name  string
		setup func(ws string)
		want  error
	}{
		{"binary file", func(ws string) { os.WriteFile(filepath.Join(ws, "a.out"), []byte("\x7fELF\x00\x00"), 0o755) }, tasks.ErrPatchBinary},
		{"oversized file", func(ws string) {
			os.WriteFile(filepath.Join(ws, "big.txt"), []byte(strings.Repeat("a\n", 1<<20)), 0o644)
		}, tasks.ErrPatchTooLarge},
		{"oversized diff", func(ws string) {
			for i := range 40 {
				os.WriteFile(filepath.Join(ws, "f"+strings.Repeat("x", i)+".txt"), []byte(strings.Repeat("line\n", 6000)), 0o644)
			}
		}, tasks.ErrPatchTooLarge},
		{"symlink to /etc/shadow", func(ws string) { os.Symlink("/etc/shadow", filepath.Join(ws, "s")) }, tasks.ErrPatchSymlink},
		{"symlinked folder out", func(ws string) { os.Symlink("/etc", filepath.Join(ws, "etc")) }, tasks.ErrPatchSymlink},
		{"bad file name", func(ws string) { os.WriteFile(filepath.Join(ws, "a\nb.py"), []byte("x\n"), 0o644) }, tasks.ErrPatchPath},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ws := fresh(t)
			c.setup(ws)
			_, err := grade.TakeDiff(tg.base, ws, grade.DiffLimits{})
			if !errors.Is(err, c.want) || !errors.Is(err, tasks.ErrPatch) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
}
