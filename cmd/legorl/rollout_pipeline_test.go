package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/storage"
	"github.com/legorl/legorl/tasks/builtin"
	"github.com/legorl/legorl/transforms"
)

// TestRolloutPipelineKillResume runs `legorl rollout` in pipeline form (no
// --task) in a child process, kills it with SIGKILL once a group is
// claimed, and runs it again: the second run finishes the iteration
// without running the claimed group again, and the manifest lists each of
// the suite's rollouts exactly once.
func TestRolloutPipelineKillResume(t *testing.T) {
	dir := t.TempDir()
	suite := filepath.Join(dir, "suite")
	if _, err := builtin.Generate(context.Background(), suite, builtin.Options{N: 3, Seed: 4, Languages: []string{"python"}}); err != nil {
		t.Fatal(err)
	}
	policy := testPolicy(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var storeDir string
	var args []string
	killedAt := 0
	// The first run must be killed with at least one claim made: a run that
	// ends before any claim proves nothing, so it is retried on a fresh
	// store, and the test fails if no attempt could be killed in time.
	for attempt := 1; killedAt == 0; attempt++ {
		if attempt > 3 {
			t.Fatal("the first run ended before its first claim in 3 attempts: the kill -9 was never exercised")
		}
		storeDir = filepath.Join(dir, "store-"+strconv.Itoa(attempt))
		args = []string{"rollout", "--tasks", suite, "--harness", "bash", "--policy", policy, "--group", "1", "--parallel", "1",
			"--store", "file://" + storeDir, "--split", "sft,train,heldout,heldout_family", "--run", "kill9", "--iteration", "2", "--max-turns", "2", "--max-tokens", "16", "--agent", self}
		killedAt = killAfterFirstClaim(t, self, args, filepath.Join(storeDir, "runs/kill9/claims/rollout/iter-000002"))
	}
	st, err := storage.Open(context.Background(), "file://"+storeDir, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := storage.Latest(context.Background(), st, storage.ManifestRef{RunID: "kill9", Iteration: 2, Stage: "rollout"}); err == nil {
		t.Fatal("a killed run committed its manifest")
	}

	// Second run: completes the iteration.
	start := time.Now()
	code, stdout, stderr := runCLI(t, testEnv(nil), args...)
	if code != 0 {
		t.Fatalf("rerun: exit %d: %s", code, stderr)
	}
	t.Logf("rerun in %s: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(stdout))
	m := regexp.MustCompile(`launched 3, completed (\d+), masked (\d+) .*\(ran (\d+), reused (\d+),`).FindStringSubmatch(stdout)
	if m == nil || strings.Count(stdout, "\n") != 1 {
		t.Fatalf("summary %q", stdout)
	}
	completed, _ := strconv.Atoi(m[1])
	masked, _ := strconv.Atoi(m[2])
	ran, _ := strconv.Atoi(m[3])
	reused, _ := strconv.Atoi(m[4])
	if completed+masked != 3 || ran+reused != 3 || reused < killedAt {
		t.Errorf("summary %q: want the %d claimed group(s) reused", stdout, killedAt)
	}
	if !strings.Contains(stderr, "groups") {
		t.Errorf("no progress on stderr: %q", stderr)
	}

	files, err := storage.TableFiles(context.Background(), st, "kill9", "rollouts")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, f := range files {
		rows, err := storage.ReadRows[schemas.Rollout](context.Background(), st, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			seen[r.RolloutID]++
		}
	}
	if len(seen) != 3 {
		t.Errorf("committed rollouts %v, want 3 distinct", seen)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("rollout %s committed %d times", id, n)
		}
	}
}

// killAfterFirstClaim runs `legorl ARGS` in a child process and kills it
// with SIGKILL as soon as the claims folder holds a committed claim. It
// returns the number of claims seen at the kill, or 0 when the child ended
// on its own before any claim.
func killAfterFirstClaim(t *testing.T, self string, args []string, claims string) int {
	t.Helper()
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), "LEGORL_TEST_RUN_MAIN=1", "LEGORL_TEST_ARGS="+strings.Join(args, " "))
	var childErr bytes.Buffer
	cmd.Stderr = &childErr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.After(3 * time.Minute)
	for {
		select {
		case err := <-exited:
			t.Logf("the first run ended before it could be killed (%v): %s", err, childErr.String())
			return 0
		case <-deadline:
			cmd.Process.Kill()
			<-exited
			t.Fatalf("no claim within 3 minutes: %s", childErr.String())
		case <-time.After(50 * time.Millisecond):
		}
		// Count committed claims only: the file store writes a temporary
		// file in the same folder before it links the claim's name.
		ents, _ := os.ReadDir(claims)
		n := 0
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), ".json") && !strings.HasPrefix(e.Name(), ".") {
				n++
			}
		}
		if n >= 1 {
			cmd.Process.Kill() // SIGKILL
			<-exited
			t.Logf("first run killed after %s with %d group(s) claimed", time.Since(start).Round(time.Millisecond), n)
			return n
		}
	}
}

func TestRolloutPipelineBadInput(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "tasks.jsonl"), nil, 0o644)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--tasks", dir}, "--tasks, --harness, --policy and --run are required"},
		{[]string{"--tasks", dir, "--harness", "bash", "--policy", dir, "--run", "r", "--group", "0"}, "--group 0"},
		{[]string{"--tasks", dir, "--harness", "bash", "--policy", dir, "--run", "r"}, "tokenizer.json"},
		{[]string{"--tasks", dir, "--harness", "bash", "--policy", dir, "--run", "r", "--beam", "novalue"}, "want name=value"},
	} {
		code, _, stderr := runCLI(t, testEnv(nil), append([]string{"rollout"}, tt.args...)...)
		if code != 2 || !strings.Contains(stderr, tt.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q, want %q", tt.args, code, stderr, tt.want)
		}
	}
}

// startChild runs `legorl ARGS` in a child process (the test binary) and
// returns the endpoint it prints on its first line; the child is stopped
// when the test ends.
func startChild(t *testing.T, args ...string) string {
	t.Helper()
	self, _ := os.Executable()
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), "LEGORL_TEST_RUN_MAIN=1", "LEGORL_TEST_ARGS="+strings.Join(args, " "))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	line := make(chan string, 1)
	go func() {
		buf := make([]byte, 256)
		n, _ := out.Read(buf)
		line <- string(buf[:n])
		io.Copy(io.Discard, out)
	}()
	select {
	case l := <-line:
		_, ep, ok := strings.Cut(strings.TrimSpace(l), " at ")
		if !ok {
			t.Fatalf("%v: first line %q", args, l)
		}
		return ep
	case <-time.After(time.Minute):
		t.Fatalf("%v: no endpoint within a minute", args)
	}
	return ""
}

// TestRolloutDistributed runs the rollout pipeline with Prism as a
// separate job-server process and the SDK workers in a separate worker-pool
// process: the launcher (this process) builds no engine and no sandbox,
// and the rows land in the store all the same.
func TestRolloutDistributed(t *testing.T) {
	dir := t.TempDir()
	suite := filepath.Join(dir, "suite")
	if _, err := builtin.Generate(context.Background(), suite, builtin.Options{N: 2, Seed: 6, Languages: []string{"python"}}); err != nil {
		t.Fatal(err)
	}
	policy := testPolicy(t)
	self, _ := os.Executable()
	jobs := startChild(t, "beam", "job-server")
	pool := startChild(t, "beam", "worker-pool")
	t.Logf("job server %s, worker pool %s", jobs, pool)
	before := transforms.RuntimesBuilt()
	start := time.Now()
	code, stdout, stderr := runCLI(t, testEnv(nil), "rollout", "--tasks", suite, "--harness", "bash", "--policy", policy, "--group", "2",
		"--store", "file://"+filepath.Join(dir, "store"), "--split", "sft,train,heldout,heldout_family", "--run", "dist", "--max-turns", "2", "--max-tokens", "16", "--agent", self,
		"--runner", "universal", "--endpoint", jobs, "--environment-type", "EXTERNAL", "--environment-config", pool)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	t.Logf("%s: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(stdout))
	if !strings.Contains(stdout, "launched 4, completed") || !strings.Contains(stdout, "manifest v1") {
		t.Errorf("summary %q", stdout)
	}
	if n := transforms.RuntimesBuilt() - before; n != 0 {
		t.Errorf("the launcher built %d runtimes: the DoFns ran in this process", n)
	}
}
