package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legorl/legorl/storage"
	"github.com/legorl/legorl/tasks/builtin"
)

// TestEval evaluates two harnesses on a two-task suite, G=2: a table row
// per harness with pass@1 and pass@2, one manifest per harness's stage;
// a rerun runs nothing again and commits no new version.
func TestEval(t *testing.T) {
	dir := t.TempDir()
	suite := filepath.Join(dir, "suite")
	if _, err := builtin.Generate(context.Background(), suite, builtin.Options{N: 2, Seed: 9, Languages: []string{"python"}}); err != nil {
		t.Fatal(err)
	}
	policy := testPolicy(t)
	self, _ := os.Executable()
	store := "file://" + filepath.Join(dir, "store")
	args := []string{"eval", "--tasks", suite, "--harness", "bash,tools", "--policy", policy, "--group", "2", "--store", store,
		"--run", "ev", "--max-turns", "2", "--max-tokens", "16", "--agent", self, "--split", "sft,train,heldout,heldout_family"}
	var first string
	for i := range 2 {
		code, stdout, stderr := runCLI(t, testEnv(nil), args...)
		if code != 0 {
			t.Fatalf("eval %d: exit %d: %s", i, code, stderr)
		}
		t.Logf("eval %d:\n%s%s", i, stdout, stderr)
		lines := strings.Split(strings.TrimSpace(stdout), "\n")
		if len(lines) != 3 || !strings.HasPrefix(lines[0], "harness  tasks  rollouts  masked  pass@1  pass@2") ||
			!strings.HasPrefix(lines[1], "bash     2      4 ") || !strings.HasPrefix(lines[2], "tools    2      4 ") {
			t.Fatalf("table %q", stdout)
		}
		if i == 0 {
			first = stdout
		} else if stdout != first {
			t.Errorf("the rerun's table differs:\n%s\nvs\n%s", stdout, first)
		}
	}
	st, _ := storage.Open(context.Background(), store, storage.Options{})
	ms, err := storage.Manifests(context.Background(), st, "ev")
	if err != nil || len(ms) != 2 || ms[0].Stage != "eval-bash" || ms[1].Stage != "eval-tools" || ms[0].Version != 1 || ms[1].Version != 1 {
		t.Errorf("manifests %+v %v", ms, err)
	}
}
