package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/legorl/legorl/harness/agent"
	"github.com/legorl/legorl/storage"
	"github.com/legorl/legorl/tasks/builtin"
)

// The test binary doubles as legorl-agent: `legorl rollout --agent` shows
// it inside the sandbox, where it runs as the agent when called that way.
func init() {
	if len(os.Args) > 1 && slices.Contains(agent.Names(), os.Args[1]) {
		os.Exit(agent.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
}

// TestRollout runs `legorl rollout` with each built-in harness against a
// random-weight checkpoint made by `legorl model init`: the printed row
// has a typed termination and was graded, and the rows are in the store.
func TestRollout(t *testing.T) {
	dir := t.TempDir()
	suite := filepath.Join(dir, "suite")
	ins, err := builtin.Generate(context.Background(), suite, builtin.Options{N: 1, Seed: 2, Languages: []string{"python"}})
	if err != nil {
		t.Fatal(err)
	}
	policy := testPolicy(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	store := "file://" + filepath.Join(dir, "store")
	for i, h := range []string{"bash", "tools"} {
		code, stdout, stderr := runCLI(t, testEnv(nil), "rollout", "--tasks", suite, "--task", ins[0].InstanceID, "--harness", h,
			"--policy", policy, "--store", store, "--run", "cli-run", "--index", fmt.Sprint(i), "--seed", "5",
			"--agent", self, "--max-turns", "2", "--max-tokens", "16")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", h, code, stderr)
		}
		var row map[string]any
		if err := json.Unmarshal([]byte(stdout), &row); err != nil {
			t.Fatalf("%s: %v: %q", h, err, stdout)
		}
		t.Logf("%s: %s", h, stdout)
		if row["harness"] != h || row["status"] != "completed" || (row["termination"] != "max_turns" && row["termination"] != "agent_completed") ||
			row["reward"] != 0.0 || row["grade_seconds"].(float64) <= 0 || row["num_llm_calls"].(float64) < 1 || row["task_id"] != ins[0].InstanceID {
			t.Errorf("%s: row %v", h, row)
		}
	}
	st, err := storage.Open(context.Background(), store, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for table, want := range map[string]int{"rollouts": 2, "segments": 2, "steps": 2} {
		files, err := storage.TableFiles(context.Background(), st, "cli-run", table)
		if err != nil || len(files) != want {
			t.Errorf("%s: %d files, want %d (%v)", table, len(files), want, err)
		}
	}
	// The same rollout again: its files exist, nothing is replaced.
	code, stdout, stderr := runCLI(t, testEnv(nil), "rollout", "--tasks", suite, "--task", ins[0].InstanceID, "--harness", "bash",
		"--policy", policy, "--store", store, "--run", "cli-run", "--seed", "5", "--agent", self, "--max-turns", "1", "--max-tokens", "8")
	if code != 2 || !strings.Contains(stderr, "store") || !strings.Contains(stdout, `"harness":"bash"`) {
		t.Errorf("rerun: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

func TestRolloutBadInput(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "tasks.jsonl"), nil, 0o644)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--task", "x"}, "are required"},
		{[]string{"--tasks", dir, "--task", "x", "--harness", "openhands", "--policy", dir, "--run", "r"}, `unknown harness "openhands"`},
		{[]string{"--tasks", dir, "--task", "x", "--harness", "bash", "--policy", dir, "--run", "r"}, `task "x" is not in`},
		{[]string{"--tasks", dir, "--task", "x", "--harness", "bash", "--policy", dir, "--run", "../r"}, `run id "../r"`},
		{[]string{"--tasks", dir, "--task", "x", "--harness", "bash", "--policy", dir, "--run", "r", "--template", "llama"}, `unknown --template "llama"`},
	}
	for _, tt := range tests {
		code, _, stderr := runCLI(t, testEnv(nil), append([]string{"rollout"}, tt.args...)...)
		if code != 2 || !strings.Contains(stderr, tt.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q, want %q", tt.args, code, stderr, tt.want)
		}
	}
}
