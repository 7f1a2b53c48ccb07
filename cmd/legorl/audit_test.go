package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legorl/legorl/tasks/builtin"
)

// TestAudit audits a run the pipeline wrote: every check passes, the
// recomputed logprobs agree with the recorded ones; then one byte of a
// committed file changes and the audit names it and exits 2.
func TestAudit(t *testing.T) {
	dir := t.TempDir()
	suite := filepath.Join(dir, "suite")
	if _, err := builtin.Generate(context.Background(), suite, builtin.Options{N: 1, Seed: 8, Languages: []string{"python"}}); err != nil {
		t.Fatal(err)
	}
	policy := testPolicy(t)
	self, _ := os.Executable()
	storeDir := filepath.Join(dir, "store")
	store := "file://" + storeDir
	code, _, stderr := runCLI(t, testEnv(nil), "rollout", "--tasks", suite, "--harness", "bash", "--policy", policy, "--group", "2",
		"--store", store, "--run", "aud", "--split", "sft,train", "--max-turns", "2", "--max-tokens", "16", "--agent", self)
	if code != 0 {
		t.Fatalf("rollout: exit %d: %s", code, stderr)
	}
	ckpt := filepath.Join(dir, "ckpt1")
	if code, _, stderr := runCLI(t, testEnv(nil), "train", "--store", store, "--run", "aud", "--iteration", "0", "--policy", policy, "--out", ckpt); code != 0 {
		t.Fatalf("train: exit %d: %s", code, stderr)
	}
	code, stdout, stderr := runCLI(t, testEnv(nil), "audit", "--store", store, "--run", "aud", "--checkpoints", policy+","+ckpt)
	t.Log(stdout)
	if code != 0 || !strings.Contains(stdout, "ok   logprobs   iteration 0, version 0") || !strings.Contains(stdout, "every check passed") ||
		!strings.Contains(stdout, "ckpt1: version 1 (parent 0)") || !strings.Contains(stdout, "4 committed files") {
		t.Fatalf("audit: exit %d: %s %s", code, stdout, stderr)
	}
	// A checkpoint file changed after publication: its lineage fails.
	opt := filepath.Join(ckpt, "optimizer.safetensors")
	data, err := os.ReadFile(opt)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-1] ^= 0xff
	os.WriteFile(opt, data, 0o644)
	code, stdout, _ = runCLI(t, testEnv(nil), "audit", "--store", store, "--run", "aud", "--checkpoints", ckpt)
	if code != 2 || !strings.Contains(stdout, "FAIL lineage") || !strings.Contains(stdout, "optimizer.safetensors") {
		t.Errorf("audit of a changed checkpoint: exit %d: %s", code, stdout)
	}
	// Flip a byte of a committed segments file.
	segs, _ := filepath.Glob(filepath.Join(storeDir, "runs/aud/data/segments/iter-000000/*.parquet"))
	if len(segs) != 1 {
		t.Fatalf("segments files %v", segs)
	}
	data, _ = os.ReadFile(segs[0])
	data[len(data)/2] ^= 0xff
	os.Chmod(segs[0], 0o644)
	if err := os.WriteFile(segs[0], data, 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = runCLI(t, testEnv(nil), "audit", "--store", store, "--run", "aud")
	if code != 2 || !strings.Contains(stdout, "FAIL file") || !strings.Contains(stdout, filepath.Base(segs[0])) || !strings.Contains(stderr, "1 check(s) failed") {
		t.Errorf("audit of a changed file: exit %d: %s %s", code, stdout, stderr)
	}
	if code, _, stderr := runCLI(t, testEnv(nil), "audit", "--store", store, "--run", "nothing"); code != 2 || !strings.Contains(stderr, "failed") {
		t.Errorf("audit of a run without files: exit %d: %s", code, stderr)
	}
}
