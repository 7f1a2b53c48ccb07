package builtin_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legorl/legorl/tasks"
	"github.com/legorl/legorl/tasks/builtin"
)

func TestGenerateIsDeterministic(t *testing.T) {
	ctx := context.Background()
	a, b := t.TempDir(), t.TempDir()
	if _, err := builtin.Generate(ctx, a, builtin.Options{N: 8, Seed: 42}); err != nil {
		t.Fatal(err)
	}
	if _, err := builtin.Generate(ctx, b, builtin.Options{N: 8, Seed: 42}); err != nil {
		t.Fatal(err)
	}
	ja, _ := os.ReadFile(filepath.Join(a, "tasks.jsonl"))
	jb, _ := os.ReadFile(filepath.Join(b, "tasks.jsonl"))
	if len(ja) == 0 || !bytes.Equal(ja, jb) {
		t.Fatal("same n and seed gave different suites")
	}
	c := t.TempDir()
	if _, err := builtin.Generate(ctx, c, builtin.Options{N: 8, Seed: 43}); err != nil {
		t.Fatal(err)
	}
	if jc, _ := os.ReadFile(filepath.Join(c, "tasks.jsonl")); bytes.Equal(ja, jc) {
		t.Fatal("different seeds gave the same suite")
	}
}

func TestGenerateFamiliesAndSplits(t *testing.T) {
	dir := t.TempDir()
	ins, err := builtin.Generate(context.Background(), dir, builtin.Options{N: 30, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	fams := map[string]int{}
	templates := map[string]int{}
	splits := map[string]int{}
	langs := map[string]int{}
	ids := map[string]bool{}
	for _, in := range ins {
		if err := in.Check(); err != nil {
			t.Fatal(err)
		}
		if ids[in.InstanceID] {
			t.Fatalf("duplicate id %s", in.InstanceID)
		}
		ids[in.InstanceID] = true
		fams[in.Family]++
		templates[in.Template]++
		if fam, _, ok := strings.Cut(in.Template, "/"); !ok || fam != in.Family {
			t.Fatalf("%s: template %q of family %s", in.InstanceID, in.Template, in.Family)
		}
		splits[in.Split]++
		langs[in.Language]++
		if builtin.HeldoutFamilies[in.Family] != (in.Split == tasks.SplitHeldoutFamily) {
			t.Fatalf("%s: family %s in split %s", in.InstanceID, in.Family, in.Split)
		}
		if in.Split != builtin.Split(in.InstanceID, in.Family) {
			t.Fatalf("%s: split is not a function of the id", in.InstanceID)
		}
		for _, secret := range []string{in.Patch, in.TestPatch} {
			if edit := leakedEdit(in.ProblemStatement, secret); edit != "" {
				t.Fatalf("%s: statement holds the edit %q", in.InstanceID, edit)
			}
			// The check can fail: the same statement with an edit of the
			// patch quoted in it is caught.
			for _, edit := range addedRuns(secret) {
				if leakedEdit(in.ProblemStatement+" Write `"+edit+"`.", secret) == "" {
					t.Fatalf("%s: a statement quoting %q passes the check", in.InstanceID, edit)
				}
			}
		}
	}
	if len(fams) != len(builtin.Families()) || len(fams) < 7 {
		t.Fatalf("families %v", fams)
	}
	if len(templates) != 13 { // 30 instances cycle through all 13, each named once
		t.Fatalf("templates %v, want 13 names", templates)
	}
	for _, s := range []string{tasks.SplitSFT, tasks.SplitTrain, tasks.SplitHeldout, tasks.SplitHeldoutFamily} {
		if splits[s] == 0 {
			t.Fatalf("split %s empty: %v", s, splits)
		}
	}
	if langs["python"] == 0 || langs["go"] == 0 {
		t.Fatalf("languages %v", langs)
	}
}

// Each repository's history is exactly its base commit: one commit, no
// other refs, objects, remotes or reflogs, and no hidden test in the tree.
func TestRepoHistoryIsBaseOnly(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ins, err := builtin.Generate(ctx, dir, builtin.Options{N: 4, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range ins {
		repo := in.SnapshotDir(dir)
		revs, err := tasks.Git(ctx, repo, nil, "rev-list", "--all")
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(string(revs)) != in.BaseCommit {
			t.Fatalf("%s: history %q, want only %s", in.InstanceID, revs, in.BaseCommit)
		}
		reach, _ := tasks.Git(ctx, repo, nil, "rev-list", "--objects", "--all")
		all, _ := tasks.Git(ctx, repo, nil, "cat-file", "--batch-all-objects", "--batch-check")
		if a, r := strings.Count(string(all), "\n"), strings.Count(string(reach), "\n"); a != r {
			t.Fatalf("%s: %d objects, %d reachable from base", in.InstanceID, a, r)
		}
		for _, p := range []string{".git/logs", ".git/hooks", ".git/FETCH_HEAD"} {
			if _, err := os.Stat(filepath.Join(repo, p)); !os.IsNotExist(err) {
				t.Fatalf("%s: %s present", in.InstanceID, p)
			}
		}
		if cfg, _ := os.ReadFile(filepath.Join(repo, ".git/config")); strings.Contains(string(cfg), "remote") {
			t.Fatalf("%s: remote in config", in.InstanceID)
		}
		tree, err := tasks.ReadTree(ctx, repo, in.BaseCommit)
		if err != nil {
			t.Fatal(err)
		}
		name := in.FailToPass[0]
		if i := strings.LastIndex(name, "::"); i >= 0 {
			name = name[i+2:]
		}
		for p, f := range tree {
			if strings.Contains(string(f.Data), name+"(") {
				t.Fatalf("%s: hidden test %s is in %s at base", in.InstanceID, name, p)
			}
		}
	}
}

// TestSurfaceVaries: what a policy must copy varies per instance, so that
// memorising it does not pay (DESIGN.md §6): over 300 instances, module
// and function names almost never repeat, every wording of the statement
// and of the file's location occurs, the number of functions in the module
// varies, and so does the line the gold patch changes.
func TestSurfaceVaries(t *testing.T) {
	dir := t.TempDir()
	ins, err := builtin.Generate(context.Background(), dir, builtin.Options{N: 300, Seed: 7, Languages: []string{"python"}})
	if err != nil {
		t.Fatal(err)
	}
	mods, fns := map[string]bool{}, map[string]bool{}
	wordings := map[string]int{}
	funcs, hunks := map[int]int{}, map[string]int{}
	for _, in := range ins {
		mod := strings.TrimPrefix(in.Repo, "legorl-builtin/")
		mods[mod] = true
		fns[in.FailToPass[0]] = true
		st := in.ProblemStatement
		switch {
		case strings.HasPrefix(st, "Expected `"):
			wordings["expected"]++
		case strings.Contains(st, "Right now `"):
			wordings["right now"]++
		default:
			wordings["original"]++
		}
		for _, w := range []string{"The function is in ", "It is defined in ", "You will find it in "} {
			if strings.Contains(st, w+mod+".py.") {
				wordings[w]++
			}
		}
		tree, err := tasks.ReadTree(context.Background(), in.SnapshotDir(dir), in.BaseCommit)
		if err != nil {
			t.Fatal(err)
		}
		funcs[strings.Count("\n"+string(tree[mod+".py"].Data), "\ndef ")]++
		if i := strings.Index(in.Patch, "@@ -"); i >= 0 {
			hunks[strings.Fields(in.Patch[i+3:])[0]]++
		}
	}
	if len(mods) < 250 || len(fns) < 290 {
		t.Fatalf("%d distinct modules and %d distinct functions in 300 instances", len(mods), len(fns))
	}
	if len(wordings) != 6 {
		t.Fatalf("wordings %v", wordings)
	}
	if len(funcs) < 3 || len(hunks) < 10 {
		t.Fatalf("functions per module %v, gold hunk positions %v", funcs, hunks)
	}
}

// addedRuns returns the added or changed text of a unified diff: each run
// of consecutive "+" lines (file headers aside), its lines trimmed and
// joined by a space.
func addedRuns(patch string) []string {
	var runs, cur []string
	flush := func() {
		if len(cur) > 0 {
			runs = append(runs, strings.Join(cur, " "))
			cur = nil
		}
	}
	for _, l := range strings.Split(patch, "\n") {
		if strings.HasPrefix(l, "+") && !strings.HasPrefix(l, "+++ ") {
			if t := strings.TrimSpace(l[1:]); t != "" {
				cur = append(cur, t)
			}
			continue
		}
		flush()
	}
	flush()
	return runs
}

// leakedEdit returns the first of patch's added runs, or of their lines
// of code, that statement holds, whitespace aside, or "": a statement may
// say what a fix must achieve ("should return 0 when b is 0") but not the
// edit itself ("if b == 0: return 0", "return score >= 84"). A line of
// code has an operator or bracket and a letter or digit, so that a line
// of prose shape ("return 0") or a lone "}" is checked only within its
// run.
func leakedEdit(statement, patch string) string {
	flat := strings.Join(strings.Fields(statement), " ")
	for _, run := range addedRuns(patch) {
		if strings.Contains(flat, strings.Join(strings.Fields(run), " ")) {
			return run
		}
	}
	for _, l := range strings.Split(patch, "\n") {
		if !strings.HasPrefix(l, "+") || strings.HasPrefix(l, "+++ ") {
			continue
		}
		code := strings.Join(strings.Fields(l[1:]), " ")
		if strings.ContainsAny(code, "=<>+-*/%()[]{}:") && strings.IndexFunc(code, func(r rune) bool {
			return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		}) >= 0 && strings.Contains(flat, code) {
			return code
		}
	}
	return ""
}

// TestLeakedEdit: the statement check catches an edit quoted in a
// statement, one-line or inserted, and lets a statement that names the
// wanted value pass.
func TestLeakedEdit(t *testing.T) {
	patch := "diff --git a/s.py b/s.py\n--- a/s.py\n+++ b/s.py\n@@ -5,6 +5,8 @@\n def pack(a, b):\n-    return a / b\n+    if b == 0:\n+        return 0\n+    return a // b\n"
	for _, tc := range []struct {
		statement, want string
	}{
		{"`pack(a, b)` should return 0 when b is 0, but `pack(31, 0)` fails.", ""},
		{"`pack(a, b)` fails on 0: add `if b == 0: return 0 return a // b`.", "if b == 0: return 0 return a // b"},
		{"`pack` fails on 0: add\n    if b == 0:\n        return 0\n    return a // b\n", "if b == 0: return 0 return a // b"},
		{"`pack` fails on 0: add `if b == 0:`", "if b == 0:"},              // a line of the inserted block
		{"`pack` should return a // b, and 0 for b == 0", "return a // b"}, // the changed line
		{"`pack(a, b)` should return a divided by b", ""},
	} {
		if got := leakedEdit(tc.statement, patch); got != tc.want {
			t.Errorf("%q: leaked %q, want %q", tc.statement, got, tc.want)
		}
	}
}
