package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legorl/legorl/tasks"
)

// TestTasksGenerateValidateGrade runs the task commands end to end: a
// generated suite validates, and `legorl sandbox grade` gives the gold
// patch reward 1 and the base reward 0, as one JSON object.
func TestTasksGenerateValidateGrade(t *testing.T) {
	dir := t.TempDir()
	code, stdout, stderr := runCLI(t, testEnv(nil), "tasks", "generate", "--n", "2", "--seed", "9", "--languages", "python", "--out", dir)
	if code != 0 || !strings.Contains(stdout, "2 instances") {
		t.Fatalf("generate: exit %d: %s %s", code, stdout, stderr)
	}
	code, stdout, stderr = runCLI(t, testEnv(nil), "tasks", "validate", dir, "--runs", "1", "--strict", "--out", filepath.Join(dir, "valid.jsonl"))
	if code != 0 || !strings.Contains(stdout, "total 2: ok 2, rejected 0") {
		t.Fatalf("validate: exit %d: %s %s", code, stdout, stderr)
	}
	s, err := tasks.Load(filepath.Join(dir, "valid.jsonl"))
	if err != nil || len(s.Instances) != 2 {
		t.Fatalf("valid.jsonl: %v", err)
	}
	in := s.Instances[0]
	gold := filepath.Join(dir, "gold.diff")
	empty := filepath.Join(dir, "empty.diff")
	os.WriteFile(gold, []byte(in.Patch), 0o644)
	os.WriteFile(empty, nil, 0o644)
	for _, c := range []struct {
		diff   string
		reward float64
	}{{gold, 1}, {empty, 0}} {
		code, stdout, stderr = runCLI(t, testEnv(nil), "sandbox", "grade", "--task", in.InstanceID, "--tasks", dir, "--diff", c.diff)
		if code != 0 {
			t.Fatalf("grade: exit %d: %s", code, stderr)
		}
		var g struct {
			Reward  float64
			Outcome string
		}
		if err := json.Unmarshal([]byte(stdout), &g); err != nil || strings.Count(stdout, "\n") != 1 {
			t.Fatalf("grade output %q: %v", stdout, err)
		}
		if g.Reward != c.reward || g.Outcome != "completed" {
			t.Fatalf("%s: %s", c.diff, stdout)
		}
	}
	// A broken suite: one rejected instance, the other still reported.
	lines := strings.Split(strings.TrimSpace(readString(t, filepath.Join(dir, "tasks.jsonl"))), "\n")
	broken := strings.Replace(lines[1], `"base_commit":"`, `"base_commit":"ffff`, 1)
	os.WriteFile(filepath.Join(dir, "broken.jsonl"), []byte(lines[0]+"\n"+broken+"\n"), 0o644)
	code, stdout, _ = runCLI(t, testEnv(nil), "tasks", "validate", filepath.Join(dir, "broken.jsonl"), "--runs", "1")
	if code != 0 || !strings.Contains(stdout, "FAIL") || !strings.Contains(stdout, "snapshot") || !strings.Contains(stdout, "ok 1, rejected 1") {
		t.Fatalf("broken suite: exit %d: %s", code, stdout)
	}
}

func TestTasksBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"tasks"},
		{"tasks", "frobnicate"},
		{"tasks", "generate"},
		{"tasks", "generate", "--out", t.TempDir(), "--suite", "nope"},
		{"tasks", "generate", "--out", t.TempDir(), "--languages", "cobol"},
		{"tasks", "validate"},
		{"tasks", "validate", "/nonexistent/suite.jsonl"},
		{"sandbox", "grade", "--task", "x"},
		{"sandbox", "grade", "--task", "x", "--tasks", "/nonexistent", "--diff", "/dev/null"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, _, stderr := runCLI(t, testEnv(nil), args...)
			if code != 2 || strings.Count(stderr, "\n") != 1 {
				t.Fatalf("exit %d, stderr %q", code, stderr)
			}
		})
	}
}

func readString(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
