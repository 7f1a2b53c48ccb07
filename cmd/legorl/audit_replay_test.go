package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legorl/legorl/rollout"
	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/storage"
	"github.com/legorl/legorl/tasks"
	"github.com/legorl/legorl/tasks/builtin"
)

// TestAuditReplay replays a run the rollout pipeline wrote: every
// rollout reproduces and the replay table says so. Then copies of the run
// with one thing changed are each caught with the right type: the stored
// diff, the stored reward, a recorded prompt token, and (on the original
// run) the task's hidden tests. Bad input is one line and exit 2.
func TestAuditReplay(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	suite := filepath.Join(dir, "suite")
	if _, err := builtin.Generate(ctx, suite, builtin.Options{N: 2, Seed: 8, Languages: []string{"python"}}); err != nil {
		t.Fatal(err)
	}
	policy := testPolicy(t)
	self, _ := os.Executable()
	storeDir := filepath.Join(dir, "store")
	store := "file://" + storeDir
	if code, _, stderr := runCLI(t, testEnv(nil), "rollout", "--tasks", suite, "--harness", "bash", "--policy", policy, "--group", "2",
		"--store", store, "--run", "rp", "--split", "sft,train", "--max-turns", "2", "--max-tokens", "16", "--agent", self); code != 0 {
		t.Fatalf("rollout: exit %d: %s", code, stderr)
	}
	st, err := storage.NewFileStore(storeDir)
	if err != nil {
		t.Fatal(err)
	}
	rows := readTable[schemas.Rollout](t, st, "rp", schemas.TableRollouts)
	segs := readTable[schemas.Segment](t, st, "rp", schemas.TableSegments)
	scored := 0
	for _, r := range rows {
		if r.Status == schemas.StatusCompleted {
			scored++
			if rollout.DiffHash(r.Flags) == "" {
				t.Errorf("rollout %s carries no diff hash: flags %v", r.RolloutID, r.Flags)
			}
		}
	}
	if scored < 2 {
		t.Fatalf("only %d scored rollouts of %d", scored, len(rows))
	}
	replay := func(run, suiteDir string, extra ...string) (int, string, string) {
		args := append([]string{"audit", "--store", store, "--run", run, "--tasks", suiteDir, "--policy", policy,
			"--max-turns", "2", "--agent", self, "--parallel", "2"}, extra...)
		if len(extra) == 0 {
			args = append(args, "--replay", "100")
		}
		return runCLI(t, testEnv(nil), args...)
	}

	// A clean run reproduces 100%.
	code, stdout, stderr := replay("rp", suite)
	t.Log(stdout)
	if code != 0 || strings.Count(stdout, "ok   replay") != scored || !strings.Contains(stdout, "(100.0%)") {
		t.Fatalf("replay of a clean run: exit %d: %s %s", code, stdout, stderr)
	}
	table := readTable[schemas.Replay](t, st, "rp", schemas.TableReplay)
	if len(table) != scored {
		t.Fatalf("replay table: %d rows, want %d", len(table), scored)
	}
	for _, r := range table {
		if !r.Reproduced || r.CallsServed != r.CallsRecorded || r.CallsRecorded == 0 || r.DiffSHA256 == "" || r.DiffSHA256 != r.ReplayedDiffSHA256 {
			t.Errorf("replay row %+v", r)
		}
	}

	// Copies of the run with one rollout changed, and the type each must
	// be caught with.
	victim := ""
	for _, r := range rows {
		if r.Status == schemas.StatusCompleted {
			victim = r.RolloutID
			break
		}
	}
	for _, c := range []struct {
		run  string
		want schemas.Mismatch
		edit func(*schemas.Rollout, []schemas.Segment)
	}{
		{"rp-diff", schemas.MismatchDiff, func(r *schemas.Rollout, _ []schemas.Segment) {
			for i, f := range r.Flags {
				if strings.HasPrefix(f, rollout.DiffFlagPrefix) {
					r.Flags[i] = rollout.DiffFlag("--- a/x\n+++ b/x\n")
				}
			}
		}},
		{"rp-reward", schemas.MismatchReward, func(r *schemas.Rollout, _ []schemas.Segment) { r.Reward = 1 - r.Reward }},
		{"rp-prompt", schemas.MismatchPrompt, func(_ *schemas.Rollout, s []schemas.Segment) {
			s[0].PromptTokenIDs[len(s[0].PromptTokenIDs)/2] ^= 1
		}},
	} {
		t.Run(string(c.want), func(t *testing.T) {
			for _, r := range rows {
				var own []schemas.Segment
				for _, s := range segs {
					if s.RolloutID == r.RolloutID {
						s.RunID = c.run
						s.PromptTokenIDs = append([]int32(nil), s.PromptTokenIDs...)
						own = append(own, s)
					}
				}
				r.RunID, r.Flags = c.run, append([]string(nil), r.Flags...)
				if r.RolloutID == victim {
					c.edit(&r, own)
				}
				if err := rollout.WriteRows(ctx, st, r, own, nil, version); err != nil {
					t.Fatal(err)
				}
			}
			code, stdout, _ := replay(c.run, suite)
			t.Log(stdout)
			if code != 2 || strings.Count(stdout, "FAIL") != 1 || !strings.Contains(stdout, "FAIL "+string(c.want)+" ") ||
				!strings.Contains(stdout, victim) || strings.Count(stdout, "ok   replay") != scored-1 {
				t.Fatalf("exit %d: %s", code, stdout)
			}
			if c.want == schemas.MismatchPrompt && !strings.Contains(stdout, "call 0 (segment 0): prompt token ") {
				t.Errorf("the divergence names no call and token: %s", stdout)
			}
			rs := readTable[schemas.Replay](t, st, c.run, schemas.TableReplay)
			for _, r := range rs {
				if (r.RolloutID == victim) != (r.Mismatch == c.want) {
					t.Errorf("replay row %s: mismatch %q", r.RolloutID, r.Mismatch)
				}
			}
		})
	}

	// The task's hidden test changed: the FAIL_TO_PASS test (the one the
	// test patch adds) passes now, bug or no bug.
	t.Run("hidden tests", func(t *testing.T) {
		changed := filepath.Join(dir, "suite-changed")
		if err := os.CopyFS(changed, os.DirFS(suite)); err != nil {
			t.Fatal(err)
		}
		s, err := tasks.Load(changed)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, in := range s.Instances {
			in.TestPatch = strings.ReplaceAll(in.TestPatch, "+    assert ", "+    assert True or ")
			line, _ := json.Marshal(in)
			b.Write(append(line, '\n'))
		}
		if err := os.WriteFile(filepath.Join(changed, "tasks.jsonl"), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		code, stdout, _ := replay("rp", changed, "--replay", "1")
		t.Log(stdout)
		if code != 2 || !strings.Contains(stdout, "FAIL reward ") || !strings.Contains(stdout, "reward 0 -> 1; f2p_passed [] -> [tests/") {
			t.Fatalf("exit %d: %s", code, stdout)
		}
	})

	// Bad input: one line, exit 2, nothing replayed.
	noSegs := rows[0]
	noSegs.RunID = "rp-nosegs"
	if err := rollout.WriteRows(ctx, st, noSegs, nil, nil, version); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown run", []string{"--run", "nothing", "--replay", "1"}, `run "nothing"`},
		{"missing table", []string{"--run", "rp-nosegs", "--replay", "1"}, `run "rp-nosegs" has no segments table`},
		{"unknown rollout", []string{"--run", "rp-diff", "--rollouts", victim + ",x"}, `rollout "x" is not in run rp-diff`},
		{"no suite", []string{"--run", "rp", "--replay", "1", "--tasks", ""}, "the run's suite"},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"audit", "--store", store, "--policy", policy, "--agent", self, "--tasks", suite}, c.args...)
			code, stdout, stderr := runCLI(t, testEnv(nil), args...)
			if code != 2 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, c.want) || stdout != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want one line with %q", code, stdout, stderr, c.want)
			}
		})
	}
	// A named rollout without segments: its segments file removed from
	// the manifest by writing a run of its rows and another rollout's.
	t.Run("named rollout without segments", func(t *testing.T) {
		other := rows[1]
		other.RunID = "rp-half"
		var own []schemas.Segment
		for _, s := range segs {
			if s.RolloutID == other.RolloutID {
				s.RunID = "rp-half"
				own = append(own, s)
			}
		}
		first := rows[0]
		first.RunID = "rp-half"
		if err := rollout.WriteRows(ctx, st, first, nil, nil, version); err != nil {
			t.Fatal(err)
		}
		if err := rollout.WriteRows(ctx, st, other, own, nil, version); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := runCLI(t, testEnv(nil), "audit", "--store", store, "--run", "rp-half", "--rollouts", first.RolloutID,
			"--tasks", suite, "--policy", policy, "--agent", self)
		if code != 2 || stdout != "" || !strings.Contains(stderr, "rollout "+first.RolloutID+" of run rp-half has no segments") {
			t.Fatalf("exit %d: %q %q", code, stdout, stderr)
		}
	})
}

// readTable reads every committed file of a table of run.
func readTable[T any](t *testing.T, st storage.Store, run string, table schemas.Table) []T {
	t.Helper()
	files, err := storage.TableFiles(context.Background(), st, run, string(table))
	if err != nil {
		t.Fatal(err)
	}
	var out []T
	for _, f := range files {
		rows, err := storage.ReadRows[T](context.Background(), st, f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rows...)
	}
	return out
}
