package tasks_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legorl/legorl/tasks"
)

// TestCreateRepoMatchesGit: the repository CreateRepo writes without git
// has the commit git init, add and commit make of the same tree (same
// identity, date and message), git reads it back whole (fsck), and its
// tree is the one written.
func TestCreateRepoMatchesGit(t *testing.T) {
	ctx := context.Background()
	tree := tasks.Tree{
		"README.md":        {Data: []byte("# m\n"), Mode: tasks.ModeFile},
		"m.py":             {Data: []byte("def f():\n    return 1\n"), Mode: tasks.ModeFile},
		"run.sh":           {Data: []byte("#!/bin/sh\necho hi\n"), Mode: tasks.ModeExec},
		"link":             {Data: []byte("m.py"), Mode: tasks.ModeSymlink},
		"tests/test_m.py":  {Data: []byte("import m\n"), Mode: tasks.ModeFile},
		"tests-x.txt":      {Data: []byte("sorts between tests/ and tests.py\n"), Mode: tasks.ModeFile},
		"a/b/c/deep.txt":   {Data: []byte("deep\n"), Mode: tasks.ModeFile},
		"a/b.txt":          {Data: []byte(""), Mode: tasks.ModeFile},
		"tests.py":         {Data: []byte("x = 1\n"), Mode: tasks.ModeFile},
		"same/one.txt":     {Data: []byte("dup\n"), Mode: tasks.ModeFile},
		"same/two/one.txt": {Data: []byte("dup\n"), Mode: tasks.ModeFile},
	}
	ours := filepath.Join(t.TempDir(), "ours")
	id, err := tasks.CreateRepo(ctx, ours, tree, "Initial version of m")
	if err != nil {
		t.Fatal(err)
	}
	theirs := filepath.Join(t.TempDir(), "theirs")
	if err := tasks.WriteTree(theirs, tree); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main", "--template=", "."}, {"add", "-A"}, {"commit", "-q", "--no-verify", "-m", "Initial version of m"}} {
		if _, err := tasks.Git(ctx, theirs, nil, args...); err != nil {
			t.Fatal(err)
		}
	}
	want, err := tasks.Git(ctx, theirs, nil, "rev-parse", "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	if id != strings.TrimSpace(string(want)) {
		t.Fatalf("commit %s, git made %s", id, want)
	}
	if out, err := tasks.Git(ctx, ours, nil, "fsck", "--strict", "--no-dangling"); err != nil {
		t.Fatalf("fsck: %v: %s", err, out)
	}
	if head, err := tasks.Git(ctx, ours, nil, "rev-parse", "HEAD"); err != nil || strings.TrimSpace(string(head)) != id {
		t.Fatalf("HEAD %q %v, want %s", head, err, id)
	}
	back, err := tasks.ReadTree(ctx, ours, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != len(tree) {
		t.Fatalf("read back %d paths, wrote %d", len(back), len(tree))
	}
	for p, f := range tree {
		if g, ok := back[p]; !ok || string(g.Data) != string(f.Data) || g.Mode != f.Mode {
			t.Fatalf("%s: read back %+v, wrote %+v", p, g, f)
		}
	}
}
