package grade

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/legorl/legorl/tasks"
)

// Scan looks through a prepared agent workspace for anything that reveals
// the answer, and returns one finding per leak (none is the only good
// answer): hidden test functions or files, the gold patch or the fixed
// file contents, git objects not reachable from base_commit, refs other
// than the branch at base_commit, tags, remotes, reflogs, alternates,
// FETCH_HEAD/ORIG_HEAD, and hooks. Git is run on the host with the safe
// flags and environment of tasks.Git; call it on a workspace before the
// agent gets it.
func (g *Grader) Scan(ctx context.Context, suiteDir string, inst *tasks.Instance, workspace string) ([]string, error) {
	prep, err := g.prepare(ctx, suiteDir, inst)
	if err != nil {
		return nil, err
	}
	fixed, err := g.fixedFiles(ctx, prep, inst)
	if err != nil {
		return nil, err
	}
	var findings []string
	// Test names the hidden tests add.
	var needles []string
	for _, id := range inst.FailToPass {
		name := id
		if i := strings.LastIndex(name, "::"); i >= 0 {
			name = name[i+2:]
		}
		if i := strings.IndexByte(name, '['); i >= 0 {
			name = name[:i]
		}
		if inst.TestRunner() == tasks.RunnerGoTest {
			needles = append(needles, "func "+name+"(")
		} else {
			needles = append(needles, "def "+name+"(")
		}
	}
	goldBody := goldAddedText(inst.Patch)
	err = filepath.Walk(workspace, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(workspace, p)
		rel = filepath.ToSlash(rel)
		if fi.IsDir() {
			if rel == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		if !fi.Mode().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, n := range needles {
			if bytes.Contains(data, []byte(n)) {
				findings = append(findings, "hidden_test:"+rel)
			}
		}
		for hp, hf := range prep.hidden {
			if hf != nil && len(hf.Data) > 0 && bytes.Equal(data, hf.Data) {
				if bf, ok := prep.base[hp]; !ok || !bytes.Equal(bf.Data, hf.Data) {
					findings = append(findings, "hidden_test_file:"+rel)
				}
			}
		}
		for fp, ff := range fixed {
			if bytes.Equal(data, ff) {
				findings = append(findings, "gold_fix:"+rel+"="+fp)
			}
		}
		if goldBody != "" && bytes.Contains(data, []byte(goldBody)) {
			findings = append(findings, "gold_patch:"+rel)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("grade: scan: %w", err)
	}
	gitFindings, err := scanGit(ctx, workspace, inst.BaseCommit)
	if err != nil {
		return nil, err
	}
	findings = append(findings, gitFindings...)
	sort.Strings(findings)
	return findings, nil
}

// goldAddedText returns the lines the gold patch adds, joined, or "" when
// they are too short to be a telling needle.
func goldAddedText(patch string) string {
	var b strings.Builder
	for _, l := range strings.Split(patch, "\n") {
		if strings.HasPrefix(l, "+") && !strings.HasPrefix(l, "+++") {
			b.WriteString(l[1:] + "\n")
		}
	}
	if strings.TrimSpace(b.String()) == "" {
		return ""
	}
	return b.String()
}

// fixedFiles returns the content, after the gold patch, of each file the
// gold patch changes (deleted files are left out).
func (g *Grader) fixedFiles(ctx context.Context, prep *prepared, inst *tasks.Instance) (map[string][]byte, error) {
	fps, err := tasks.ParsePatch(inst.Patch, tasks.PatchLimits{MaxBytes: 64 << 20, MaxFiles: 10000})
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "legorl-gold-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	if err := tasks.WriteTree(tmp, prep.base); err != nil {
		return nil, err
	}
	if err := gitApply(ctx, tmp, inst.Patch); err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, p := range tasks.PatchedPaths(fps) {
		b, err := os.ReadFile(filepath.Join(tmp, filepath.FromSlash(p)))
		if err == nil {
			if bf, ok := prep.base[p]; !ok || !bytes.Equal(bf.Data, b) {
				out[p] = b
			}
		}
	}
	return out, nil
}

// scanGit lists what the workspace's .git holds beyond base_commit.
func scanGit(ctx context.Context, ws, base string) ([]string, error) {
	gd := filepath.Join(ws, ".git")
	if _, err := os.Stat(gd); os.IsNotExist(err) {
		return nil, nil
	}
	var out []string
	for _, p := range []string{"logs", "FETCH_HEAD", "ORIG_HEAD", "MERGE_HEAD", "packed-refs", "objects/info/alternates", "refs/tags", "refs/remotes"} {
		fi, err := os.Stat(filepath.Join(gd, p))
		if err != nil {
			continue
		}
		if fi.IsDir() {
			if ents, _ := os.ReadDir(filepath.Join(gd, p)); len(ents) == 0 {
				continue
			}
		}
		out = append(out, "git_file:"+p)
	}
	if ents, _ := os.ReadDir(filepath.Join(gd, "hooks")); len(ents) > 0 {
		out = append(out, "git_hooks")
	}
	cfg, _ := os.ReadFile(filepath.Join(gd, "config"))
	for _, l := range strings.Split(string(cfg), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "[remote") {
			out = append(out, "git_remote:"+strings.TrimSpace(l))
		}
	}
	refs, err := tasks.Git(ctx, ws, nil, "for-each-ref", "--format=%(refname) %(objectname)")
	if err != nil {
		return nil, fmt.Errorf("grade: scan: %w", err)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(refs)), "\n") {
		if l != "" && l != "refs/heads/main "+base {
			out = append(out, "git_ref:"+l)
		}
	}
	all, err := tasks.Git(ctx, ws, nil, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)")
	if err != nil {
		return nil, fmt.Errorf("grade: scan: %w", err)
	}
	reach, err := tasks.Git(ctx, ws, nil, "rev-list", "--objects", base)
	if err != nil {
		return nil, fmt.Errorf("grade: scan: %w", err)
	}
	ok := map[string]bool{}
	for _, l := range strings.Split(string(reach), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			ok[f[0]] = true
		}
	}
	for _, l := range strings.Split(strings.TrimSpace(string(all)), "\n") {
		if l != "" && !ok[l] {
			out = append(out, "git_object_after_base:"+l)
		}
	}
	return out, nil
}
