package tasks_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legorl/legorl/tasks"
)

func f(s string) tasks.File { return tasks.File{Data: []byte(s), Mode: tasks.ModeFile} }

// applyWithGit writes a, applies patch with git apply, and reads the tree back.
func applyWithGit(t *testing.T, a tasks.Tree, patch string) tasks.Tree {
	t.Helper()
	dir := t.TempDir()
	if err := tasks.WriteTree(dir, a); err != nil {
		t.Fatal(err)
	}
	if patch != "" {
		cmd := exec.Command("git", "apply", "--whitespace=nowarn", "-")
		cmd.Dir = dir
		cmd.Env = append(tasks.GitEnv(), "GIT_CEILING_DIRECTORIES="+filepath.Dir(dir))
		cmd.Stdin = strings.NewReader(patch)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git apply: %v: %s\npatch:\n%s", err, out, patch)
		}
	}
	got := tasks.Tree{}
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == dir || fi.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if fi.Mode()&os.ModeSymlink != 0 {
			target, err := os.Readlink(p)
			got[filepath.ToSlash(rel)] = tasks.File{Data: []byte(target), Mode: tasks.ModeSymlink}
			return err
		}
		b, err := os.ReadFile(p)
		mode := tasks.ModeFile
		if fi.Mode()&0o111 != 0 {
			mode = tasks.ModeExec
		}
		got[filepath.ToSlash(rel)] = tasks.File{Data: b, Mode: mode}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func equalTrees(a, b tasks.Tree) error {
	for p, fa := range a {
		fb, ok := b[p]
		if !ok {
			return fmt.Errorf("%s missing", p)
		}
		if fa.Mode != fb.Mode || string(fa.Data) != string(fb.Data) {
			return fmt.Errorf("%s differs: %o %q vs %o %q", p, fa.Mode, fa.Data, fb.Mode, fb.Data)
		}
	}
	for p := range b {
		if _, ok := a[p]; !ok {
			return fmt.Errorf("%s extra", p)
		}
	}
	return nil
}

func TestDiffAppliesWithGit(t *testing.T) {
	base := tasks.Tree{"a.py": f("one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nnine\nten\n"), "dir/b.txt": f("x\n"), "gone.txt": f("bye\n"), "nonl": f("last")}
	cases := []struct {
		name string
		b    tasks.Tree
	}{
		{"same", base},
		{"modify two far lines", tasks.Tree{"a.py": f("ONE\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nnine\nTEN\n"), "dir/b.txt": f("x\n"), "gone.txt": f("bye\n"), "nonl": f("last")}},
		{"add delete", tasks.Tree{"a.py": base["a.py"], "dir/b.txt": f("x\n"), "new/c.go": f("package c\n"), "nonl": f("last")}},
		{"no newline at end", tasks.Tree{"a.py": base["a.py"], "dir/b.txt": f("x"), "gone.txt": f("bye\n"), "nonl": f("last\n")}},
		{"mode change", tasks.Tree{"a.py": {Data: base["a.py"].Data, Mode: tasks.ModeExec}, "dir/b.txt": f("x\n"), "gone.txt": f("bye\n"), "nonl": f("last")}},
		{"symlink inside", tasks.Tree{"a.py": base["a.py"], "dir/b.txt": f("x\n"), "gone.txt": f("bye\n"), "nonl": f("last"), "link": {Data: []byte("dir/b.txt"), Mode: tasks.ModeSymlink}}},
		{"empty file", tasks.Tree{"a.py": base["a.py"], "dir/b.txt": f(""), "gone.txt": f("bye\n"), "nonl": f("last")}},
		{"everything deleted", tasks.Tree{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := tasks.Diff(base, c.b)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tasks.ParsePatch(d, tasks.DefaultPatchLimits); err != nil {
				t.Fatalf("own diff does not parse: %v\n%s", err, d)
			}
			if err := equalTrees(c.b, applyWithGit(t, base, d)); err != nil {
				t.Fatalf("%v\n%s", err, d)
			}
		})
	}
}

// TestDiffRandomEdits checks Diff against git apply on random line edits.
func TestDiffRandomEdits(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 40 {
		var lines []string
		for range 5 + r.IntN(40) {
			lines = append(lines, fmt.Sprintf("line %d\n", r.IntN(8)))
		}
		edited := append([]string{}, lines...)
		for range 1 + r.IntN(6) {
			k := r.IntN(len(edited) + 1)
			switch r.IntN(3) {
			case 0:
				edited = append(edited[:k], append([]string{"new\n"}, edited[k:]...)...)
			case 1:
				if k < len(edited) {
					edited = append(edited[:k], edited[k+1:]...)
				}
			default:
				if k < len(edited) {
					edited[k] = "changed\n"
				}
			}
		}
		a := tasks.Tree{"f.txt": f(strings.Join(lines, ""))}
		b := tasks.Tree{"f.txt": f(strings.Join(edited, ""))}
		if len(edited) == 0 {
			b = tasks.Tree{}
		}
		d, err := tasks.Diff(a, b)
		if err != nil {
			t.Fatal(err)
		}
		if err := equalTrees(b, applyWithGit(t, a, d)); err != nil {
			t.Fatalf("case %d: %v\n%s", i, err, d)
		}
	}
}

func TestDiffRefuses(t *testing.T) {
	base := tasks.Tree{"a.py": f("x\n")}
	cases := []struct {
		name string
		b    tasks.Tree
		want error
	}{
		{"binary", tasks.Tree{"a.py": f("x\n"), "blob.bin": f("\x00\x01")}, tasks.ErrPatchBinary},
		{"symlink to /etc/shadow", tasks.Tree{"a.py": f("x\n"), "s": {Data: []byte("/etc/shadow"), Mode: tasks.ModeSymlink}}, tasks.ErrPatchSymlink},
		{"symlink climbing out", tasks.Tree{"a.py": f("x\n"), "d/s": {Data: []byte("../../x"), Mode: tasks.ModeSymlink}}, tasks.ErrPatchSymlink},
		{"symlink into .git", tasks.Tree{"a.py": f("x\n"), "s": {Data: []byte(".git/config"), Mode: tasks.ModeSymlink}}, tasks.ErrPatchSymlink},
		{"path with a space", tasks.Tree{"a.py": f("x\n"), "a b.py": f("y\n")}, tasks.ErrPatchPath},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := tasks.Diff(base, c.b)
			if !errors.Is(err, c.want) || !errors.Is(err, tasks.ErrPatch) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
}

func TestParsePatchPolicy(t *testing.T) {
	ok := "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n"
	cases := []struct {
		name, patch string
		want        error
	}{
		{"ok", ok, nil},
		{"empty", "", nil},
		{"plain unified diff", "--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n", nil},
		{"git binary patch", "diff --git a/x.bin b/x.bin\nnew file mode 100644\nGIT binary patch\nliteral 3\nKcmZ>\n", tasks.ErrPatchBinary},
		{"binary files differ", "diff --git a/x.bin b/x.bin\nBinary files a/x.bin and b/x.bin differ\n", tasks.ErrPatchBinary},
		{"climbs out", strings.ReplaceAll(ok, "x.py", "../x.py"), tasks.ErrPatchPath},
		{"absolute", "--- /etc/passwd\n+++ /etc/passwd\n@@ -1 +1 @@\n-a\n+b\n", tasks.ErrPatchPath},
		{"into .git", strings.ReplaceAll(ok, "x.py", ".git/config"), tasks.ErrPatchPath},
		{"into .GIT", strings.ReplaceAll(ok, "x.py", "sub/.GIT/hooks/pre-commit"), tasks.ErrPatchPath},
		{"symlink to /etc/shadow", "diff --git a/s b/s\nnew file mode 120000\n--- /dev/null\n+++ b/s\n@@ -0,0 +1 @@\n+/etc/shadow\n\\ No newline at end of file\n", tasks.ErrPatchSymlink},
		{"symlink inside", "diff --git a/s b/s\nnew file mode 120000\n--- /dev/null\n+++ b/s\n@@ -0,0 +1 @@\n+x.py\n\\ No newline at end of file\n", nil},
		{"device mode", "diff --git a/d b/d\nnew file mode 020644\n", tasks.ErrPatchPath},
		{"too large", ok + strings.Repeat("#", 2<<20), tasks.ErrPatchTooLarge},
		{"hunk longer than header", "--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n+c\n", tasks.ErrPatchSyntax},
		{"hunk shorter than header", "--- a/x.py\n+++ b/x.py\n@@ -1,3 +1,3 @@\n-a\n+b\n", tasks.ErrPatchSyntax},
		{"garbage", "hello\nworld\n", tasks.ErrPatchSyntax},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := tasks.ParsePatch(c.patch, tasks.DefaultPatchLimits)
			if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
}

func FuzzParsePatch(f *testing.F) {
	f.Add("diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n")
	f.Add("--- a/x\n+++ b/x\n@@ -1,2 +1,3 @@\n a\n+b\n c\n\\ No newline at end of file\n")
	f.Add("diff --git a/s b/s\nnew file mode 120000\n--- /dev/null\n+++ b/s\n@@ -0,0 +1 @@\n+../x\n")
	f.Fuzz(func(t *testing.T, s string) {
		files, err := tasks.ParsePatch(s, tasks.PatchLimits{MaxBytes: 1 << 16, MaxFiles: 50})
		if err != nil {
			if !errors.Is(err, tasks.ErrPatch) {
				t.Fatalf("error %v does not wrap ErrPatch", err)
			}
			return
		}
		for _, p := range tasks.PatchedPaths(files) {
			if err := tasks.CheckPath(p); err != nil {
				t.Fatalf("accepted path %q: %v", p, err)
			}
		}
	})
}

func TestPrepareWorkspaceHasNoFuture(t *testing.T) {
	ctx := context.Background()
	snap := t.TempDir()
	base, err := tasks.CreateRepo(ctx, snap, tasks.Tree{"a.py": f("bug\n")}, "base")
	if err != nil {
		t.Fatal(err)
	}
	// A future commit with the fix, a tag and a remote, in the snapshot only.
	if err := os.WriteFile(filepath.Join(snap, "a.py"), []byte("fix\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"commit", "-qam", "the fix"}, {"tag", "v2"}, {"remote", "add", "origin", "https://example.invalid/x.git"}} {
		if _, err := tasks.Git(ctx, snap, nil, args...); err != nil {
			t.Fatal(err)
		}
	}
	ws := filepath.Join(t.TempDir(), "ws")
	if err := tasks.PrepareWorkspace(ctx, snap, base, ws); err != nil {
		t.Fatal(err)
	}
	objs, err := tasks.Git(ctx, ws, nil, "cat-file", "--batch-all-objects", "--batch-check")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(strings.Split(strings.TrimSpace(string(objs)), "\n")); n != 3 { // commit, tree, blob
		t.Fatalf("workspace holds %d objects, want 3:\n%s", n, objs)
	}
	refs, _ := tasks.Git(ctx, ws, nil, "for-each-ref")
	if strings.Count(strings.TrimSpace(string(refs)), "\n") != 0 || !strings.Contains(string(refs), base) {
		t.Fatalf("refs: %s", refs)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "a.py")); string(b) != "bug\n" {
		t.Fatalf("a.py = %q", b)
	}
	if _, err := os.Stat(filepath.Join(ws, ".git", "logs")); !os.IsNotExist(err) {
		t.Fatalf("reflog present: %v", err)
	}
}
