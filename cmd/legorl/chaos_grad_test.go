package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/legorl/legorl/transforms"
)

// gradTestConfig is a loop config whose groups have reward variance: the
// bash-sft starter solves some of a group's G = 4 rollouts of a fresh
// training task and fails others (1 of the 8 groups of each iteration), so every update trains segments and a
// resume that trained a group twice, or dropped one, changes the weights.
func gradTestConfig(t *testing.T, dir string) string {
	t.Helper()
	cfg := `{
  "run": "grad-test",
  "store": "file://` + filepath.Join(dir, "store") + `",
  "work_dir": "` + filepath.Join(dir, "work") + `",
  "builtin": {"n": 48, "seed": 1, "languages": ["python"]},
  "policy": "starter:bash-sft",
  "harness": "bash",
  "iterations": 2,
  "group": 4,
  "rl": {"tasks_per_iteration": 8},
  "rollout": {"max_turns": 4, "max_tokens": 128, "parallel": 4, "agent_timeout": "2m"},
  "train": {"lr": 0.001, "steps": 2, "seed": 7},
  "eval": {"max_tasks": 1, "group": 1, "splits": ["heldout"]}
}`
	path := filepath.Join(dir, "loop.json")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// gradPoint is where TestChaosResumeGradients kills `legorl run`: at the
// first stderr line containing marker, or (marker "") once the store holds
// at least one claimed group of the iteration's rollouts and fewer than
// all of them.
type gradPoint struct {
	stage, marker string
	iteration     int32
}

var gradPoints = []gradPoint{
	{"a claimed group inside iteration 0's rollouts", "", 0},
	{"iteration 0's update, recomputing logprobs", "legorl train: recompute logprobs", 0},
	{"iteration 0's update, taking gradient steps", "legorl train: step 1/", 0},
	{"iteration 0's checkpoint publish and train_steps commit", "publishing the checkpoint and train_steps", 0},
	{"a claimed group inside iteration 1's rollouts", "", 1},
	{"iteration 1's checkpoint publish and train_steps commit", "publishing the checkpoint and train_steps", 0},
}

// TestChaosResumeGradients kills `legorl run` of gradTestConfig (SIGKILL
// to its process group) at every point of gradPoints, each required,
// resuming each time with the same command; then the final checkpoints'
// files, every table of every run and the summary must equal an
// uninterrupted run's (timings aside), and every update of the
// uninterrupted run must have trained segments.
func TestChaosResumeGradients(t *testing.T) {
	self, _ := os.Executable()
	dir := t.TempDir()
	ref, chaos := filepath.Join(dir, "ref"), filepath.Join(dir, "chaos")
	for _, d := range []string{ref, chaos} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	args := func(root string) []string {
		return []string{"run", "--config", gradTestConfig(t, root), "--agent", self}
	}
	start := time.Now()
	if code, _, stderr := runCLI(t, testEnv(nil), args(ref)...); code != 0 {
		t.Fatalf("the uninterrupted run: exit %d: %s", code, stderr)
	}
	t.Logf("the uninterrupted run took %s", time.Since(start).Round(time.Second))
	var sum struct {
		Iterations []struct {
			Trained      int `json:"trained"`
			Groups       int `json:"groups"`
			ZeroVariance int `json:"zero_variance"`
		} `json:"iterations"`
	}
	readJSON(t, filepath.Join(ref, "work", "summary.json"), &sum)
	if len(sum.Iterations) != 2 {
		t.Fatalf("the uninterrupted run's summary has %d iterations, want 2", len(sum.Iterations))
	}
	for i, it := range sum.Iterations {
		if it.Trained == 0 || it.ZeroVariance == it.Groups {
			t.Fatalf("iteration %d trained %d segments (%d of %d groups without variance): the test cannot catch a wrong update", i, it.Trained, it.ZeroVariance, it.Groups)
		}
		t.Logf("iteration %d: %d segments trained, %d of %d groups without variance", i, it.Trained, it.ZeroVariance, it.Groups)
	}

	chaosArgs := args(chaos)
	store := filepath.Join(chaos, "store")
	for _, p := range gradPoints {
		k := killSpec{stage: p.stage, marker: p.marker, total: 8,
			claims: filepath.Join(store, filepath.FromSlash(transforms.ClaimPrefix("grad-test", transforms.Stage, p.iteration)))}
		if log, ok := killChild(t, self, chaosArgs, k); !ok {
			t.Fatalf("kill point %q not reached: the run finished first\n%s", p.stage, log)
		}
	}
	if code, _, stderr := runCLI(t, testEnv(nil), chaosArgs...); code != 0 {
		t.Fatalf("the resumed run: exit %d: %s", code, stderr)
	}

	compared := compareStores(t, filepath.Join(ref, "store"), store)
	t.Logf("compared %d rows; the whole test took %s", compared, time.Since(start).Round(time.Second))
	for _, ck := range []string{"iter-000001", "iter-000002"} {
		ents, err := os.ReadDir(filepath.Join(ref, "work", "checkpoints", ck))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if e.Name() == "lineage.json" { // paths and times; its file hashes are compared below
				continue
			}
			a := fileSHA(t, filepath.Join(ref, "work", "checkpoints", ck, e.Name()))
			if b := fileSHA(t, filepath.Join(chaos, "work", "checkpoints", ck, e.Name())); a != b {
				t.Errorf("checkpoint %s: %s has sha256 %.12s, the uninterrupted run's %.12s", ck, e.Name(), b, a)
			}
		}
		var la, lb struct {
			Files map[string]string `json:"files"`
		}
		readJSON(t, filepath.Join(ref, "work", "checkpoints", ck, "lineage.json"), &la)
		readJSON(t, filepath.Join(chaos, "work", "checkpoints", ck, "lineage.json"), &lb)
		if fmt.Sprint(la.Files) != fmt.Sprint(lb.Files) {
			t.Errorf("checkpoint %s: lineage files %v, the uninterrupted run's %v", ck, lb.Files, la.Files)
		}
	}
	a, b := summaryText(t, ref), summaryText(t, chaos)
	if a != b {
		t.Errorf("summary.json differs (timings and the resumed flags aside):\n got %s\nwant %s", b, a)
	}
}

// compareStores compares every table of every run of two stores row by row
// (timings aside) and returns the rows compared.
func compareStores(t *testing.T, ref, chaos string) int {
	t.Helper()
	runs, _ := os.ReadDir(filepath.Join(ref, "runs"))
	compared := 0
	for _, r := range runs {
		for _, table := range []string{"rollouts", "segments", "steps", "train_steps"} {
			want, wantErr := exportRows(t, ref, r.Name(), table)
			got, gotErr := exportRows(t, chaos, r.Name(), table)
			if wantErr != gotErr {
				t.Errorf("%s %s: the uninterrupted run %q, the chaos run %q", r.Name(), table, wantErr, gotErr)
				continue
			}
			if len(got) != len(want) {
				t.Errorf("%s %s: %d rows, the uninterrupted run %d", r.Name(), table, len(got), len(want))
				continue
			}
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("%s %s: row %d differs:\n got %s\nwant %s", r.Name(), table, i, got[i], want[i])
					break
				}
			}
			compared += len(want)
		}
	}
	if compared == 0 {
		t.Fatal("no rows compared")
	}
	return compared
}

// summaryText is root's work/summary.json with the timing fields, the
// resumed flags, the process records (a killed run has more processes)
// and root itself left out, keys sorted.
func summaryText(t *testing.T, root string) string {
	t.Helper()
	var v any
	readJSON(t, filepath.Join(root, "work", "summary.json"), &v)
	var strip func(v any) any
	strip = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			for k := range x {
				if volatile.MatchString(k) || k == "resumed" || k == "processes" {
					delete(x, k)
				} else {
					x[k] = strip(x[k])
				}
			}
		case []any:
			for i := range x {
				x[i] = strip(x[i])
			}
		case string:
			return strings.ReplaceAll(x, root, "ROOT")
		}
		return v
	}
	b, _ := json.Marshal(strip(v))
	return string(b)
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// killSpec says when killChild kills: delay after the first stderr line
// containing marker, or (marker "") once the store folder claims holds at
// least one claimed group and fewer than total.
type killSpec struct {
	stage, marker string
	delay         time.Duration
	claims        string
	total         int
}

// killChild starts `legorl run` as a child in its own process group and
// SIGKILLs the group at k; false when the child ended first.
func killChild(t *testing.T, self string, args []string, k killSpec) (log string, killed bool) {
	t.Helper()
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), "LEGORL_TEST_RUN_MAIN=1", "LEGORL_TEST_ARGS="+strings.Join(args, " "))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // the kill takes its pipeline workers too
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var b strings.Builder
	fire := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		fired := false
		for sc.Scan() {
			mu.Lock()
			fmt.Fprintln(&b, sc.Text())
			mu.Unlock()
			if !fired && k.marker != "" && strings.Contains(sc.Text(), k.marker) {
				fired = true
				close(fire)
			}
		}
	}()
	if k.marker == "" {
		go func() {
			for {
				ents, _ := os.ReadDir(k.claims)
				n := 0
				for _, e := range ents {
					if !strings.HasPrefix(e.Name(), ".") { // a put in progress
						n++
					}
				}
				if n >= 1 && n < k.total {
					close(fire)
					return
				}
				if n >= k.total {
					return
				}
				select {
				case <-done:
					return
				case <-time.After(10 * time.Millisecond):
				}
			}
		}()
	}
	kill := func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		cmd.Wait()
	}
	text := func() string {
		mu.Lock()
		defer mu.Unlock()
		return b.String()
	}
	select {
	case <-fire:
		time.Sleep(k.delay)
		kill()
		return text(), true
	case <-done:
		cmd.Wait()
		return text(), false
	case <-time.After(10 * time.Minute):
		kill()
		t.Fatalf("kill point %q: not reached within 10 minutes:\n%s", k.stage, text())
		return "", false
	}
}
