package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legorl/legorl/schemas/synth"
	"github.com/legorl/legorl/storage"
	"github.com/legorl/legorl/storage/synthstore"
)

// TestExportTrainer runs `legorl export --format slime|verl` on a small
// synthetic run: one file per iteration, written into --out, and a
// summary line; storage/handoff checks the files' content.
func TestExportTrainer(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	store := "file://" + filepath.Join(dir, "store")
	st, err := storage.Open(ctx, store, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := synth.Config{RunID: "r", Seed: 3, Iterations: 2, Tasks: 2, GroupSize: 2, Turns: 1, PromptTokens: 4, TurnTokens: 3, VocabSize: 100}
	for i, it := range synth.Run(cfg) {
		if _, err := synthstore.WriteIteration(ctx, st, "r", i, it, synthstore.Options{VocabSize: 100}); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []struct{ name, ext string }{{"slime", ".pt"}, {"verl", ".jsonl"}} {
		out := filepath.Join(dir, f.name)
		code, _, stderr := runCLI(t, testEnv(nil), "export", "--store", store, "--run", "r", "--format", f.name, "--out", out)
		if code != 0 || !strings.Contains(stderr, "8 samples") || !strings.Contains(stderr, "in 2 "+f.name+" files") {
			t.Fatalf("%s: exit %d: %s", f.name, code, stderr)
		}
		for _, it := range []string{"0", "1"} {
			if fi, err := os.Stat(filepath.Join(out, it+f.ext)); err != nil || fi.Size() == 0 {
				t.Errorf("%s: iteration %s: %v", f.name, it, err)
			}
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--run", "r", "--format", "slime"}, "--format slime needs --run RUN and --out FOLDER"},
		{[]string{"--format", "verl", "--out", dir}, "--format verl needs --run RUN"},
		{[]string{"--run", "nope", "--format", "verl", "--out", filepath.Join(dir, "x")}, "no committed rollouts files"},
	} {
		code, _, stderr := runCLI(t, testEnv(nil), append([]string{"export", "--store", store}, tc.args...)...)
		if code == 0 || !strings.Contains(stderr, tc.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q, want %q", tc.args, code, stderr, tc.want)
		}
	}
}
