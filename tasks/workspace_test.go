package tasks_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/legorl/legorl/tasks"
)

// listing maps each path under dir to its mode and contents (a link's
// target), so two workspaces can be compared whole.
func listing(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		v := fi.Mode().String()
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			v += " -> " + l
		case fi.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			v += " " + string(b)
		}
		out[rel] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sameWorkspace compares two listings but for the bytes of .git/index,
// which record each file's inode and times (git compares contents where
// those differ).
func sameWorkspace(a, b map[string]string) bool {
	return len(differing(a, b)) == 0
}

func differing(a, b map[string]string) []string {
	var out []string
	for k, v := range a {
		if w, ok := b[k]; !ok || (v != w && k != filepath.Join(".git", "index")) {
			out = append(out, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	return out
}

// NewWorkspace makes what PrepareWorkspace makes (the same paths, modes
// and bytes, .git included) and reads the tree ReadTree reads.
func TestNewWorkspace(t *testing.T) {
	ctx := context.Background()
	snap := t.TempDir()
	tree := tasks.Tree{
		"a.py":          f("def f():\n    return 1\n"),
		"pkg/b.py":      f("x = 2\n"),
		"run.sh":        {Data: []byte("#!/bin/sh\necho hi\n"), Mode: tasks.ModeExec},
		"tests/link.py": {Data: []byte("../a.py"), Mode: tasks.ModeSymlink},
	}
	base, err := tasks.CreateRepo(ctx, snap, tree, "base")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	w, err := tasks.NewWorkspace(ctx, snap, base, filepath.Join(root, "prepared"))
	if err != nil {
		t.Fatal(err)
	}
	direct := filepath.Join(root, "direct")
	if err := tasks.PrepareWorkspace(ctx, snap, base, direct); err != nil {
		t.Fatal(err)
	}
	if got, want := listing(t, w.Dir), listing(t, direct); !sameWorkspace(got, want) {
		t.Errorf("prepared workspace differs from PrepareWorkspace's in %v", differing(got, want))
	}
	pristine, err := tasks.ReadTree(ctx, snap, base)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(w.Tree, pristine) || len(w.Tree) != 4 {
		t.Errorf("tree %v, want %v", w.Tree, pristine)
	}
	if _, err := tasks.NewWorkspace(ctx, snap, strings.Repeat("0", 40), filepath.Join(root, "bad")); !errors.Is(err, tasks.ErrSnapshot) {
		t.Errorf("unknown commit: err %v, want ErrSnapshot", err)
	}
}
