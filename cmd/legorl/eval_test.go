package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legorl/legorl/storage"
	"github.com/legorl/legorl/tasks/builtin"
)

// evalFixture is a two-task suite, the test policy, this binary (the
// agent) and an empty store.
func evalFixture(t *testing.T) (suite, policy, self, store string) {
	t.Helper()
	dir := t.TempDir()
	suite = filepath.Join(dir, "suite")
	if _, err := builtin.Generate(context.Background(), suite, builtin.Options{N: 2, Seed: 9, Languages: []string{"python"}}); err != nil {
		t.Fatal(err)
	}
	self, _ = os.Executable()
	return suite, testPolicy(t), self, "file://" + filepath.Join(dir, "store")
}

// TestEval evaluates two harnesses on a two-task suite, G=2: a table row
// per harness with pass@1 and pass@2, one manifest per harness's stage;
// a rerun runs nothing again and commits no new version.
func TestEval(t *testing.T) {
	suite, policy, self, store := evalFixture(t)
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

// TestEvalGreedy: with --top-k 1 the eval decodes greedily: every segment
// records top-k 1, and the G = 2 rollouts of a task, sampled with
// different seeds, say the same tokens (at temperature 1 they do not). A
// negative --top-k is refused with a one-line error.
func TestEvalGreedy(t *testing.T) {
	suite, policy, self, store := evalFixture(t)
	completions := func(run string, topK string) map[string][]string {
		t.Helper()
		code, _, stderr := runCLI(t, testEnv(nil), "eval", "--tasks", suite, "--harness", "bash", "--policy", policy, "--group", "2",
			"--store", store, "--run", run, "--max-turns", "1", "--max-tokens", "24", "--agent", self, "--split", "sft,train,heldout,heldout_family",
			"--top-k", topK)
		if code != 0 {
			t.Fatalf("eval --top-k %s: exit %d: %s", topK, code, stderr)
		}
		rows := func(table string) []map[string]any {
			code, out, stderr := runCLI(t, testEnv(nil), "export", "--store", store, "--run", run, "--table", table)
			if code != 0 {
				t.Fatalf("export %s: %s", table, stderr)
			}
			var rs []map[string]any
			for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
				var r map[string]any
				if err := json.Unmarshal([]byte(l), &r); err != nil {
					t.Fatal(err)
				}
				rs = append(rs, r)
			}
			return rs
		}
		task := map[string]string{}
		for _, r := range rows("rollouts") {
			task[r["rollout_id"].(string)] = r["task_id"].(string)
		}
		byTask := map[string][]string{}
		for _, s := range rows("segments") {
			if s["segment_index"].(float64) != 0 {
				continue
			}
			if want := topK; fmt.Sprint(s["top_k"]) != want {
				t.Errorf("--top-k %s: a segment records top_k %v", topK, s["top_k"])
			}
			b, _ := json.Marshal(s["completion_token_ids"])
			id := task[s["rollout_id"].(string)]
			byTask[id] = append(byTask[id], string(b))
		}
		if len(byTask) != 2 {
			t.Fatalf("--top-k %s: first segments of %d tasks, want 2: %v", topK, len(byTask), byTask)
		}
		return byTask
	}
	for id, cs := range completions("greedy", "1") {
		if len(cs) != 2 || cs[0] != cs[1] {
			t.Errorf("greedy: the rollouts of %s differ: %v", id, cs)
		}
	}
	differ := 0
	for _, cs := range completions("sampled", "0") {
		if len(cs) == 2 && cs[0] != cs[1] {
			differ++
		}
	}
	if differ == 0 {
		t.Error("at temperature 1 every task's two rollouts said the same: the test cannot tell greedy from sampling")
	}

	code, _, stderr := runCLI(t, testEnv(nil), "eval", "--tasks", suite, "--harness", "bash", "--policy", policy, "--run", "bad", "--store", store, "--top-k", "-1")
	if code == 0 || !strings.Contains(stderr, "--top-k -1") || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
		t.Errorf("--top-k -1: exit %d, stderr %q; want a one-line error naming it", code, stderr)
	}
}
