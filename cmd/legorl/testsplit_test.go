package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/legorl/legorl/loop"
)

// runSummary is what the test split's and the process records' checks
// read of a summary.json.
type runSummary struct {
	TestSuite   *loop.TestSuite   `json:"test_suite"`
	Comparisons []loop.Comparison `json:"comparisons"`
	Processes   []loop.Process    `json:"processes"`
	WallSeconds float64           `json:"wall_seconds"`
}

func readSummary(t *testing.T, work string) runSummary {
	t.Helper()
	var s runSummary
	if err := json.Unmarshal(mustRead(t, filepath.Join(work, "summary.json")), &s); err != nil {
		t.Fatalf("summary.json: %v", err)
	}
	return s
}

// checkProcesses checks that wall_seconds is the sum of the processes'
// seconds, each ending after it starts.
func checkProcesses(t *testing.T, s runSummary, want int) {
	t.Helper()
	if len(s.Processes) != want {
		t.Fatalf("%d processes, want %d: %+v", len(s.Processes), want, s.Processes)
	}
	var sum float64
	for i, p := range s.Processes {
		sum += p.Seconds
		if !(p.Seconds > 0) || p.End.Before(p.Start) || (i > 0 && p.Start.Before(s.Processes[i-1].Start)) {
			t.Errorf("process %d: %+v", i, p)
		}
	}
	if d := s.WallSeconds - sum; d > 1e-6 || d < -1e-6 {
		t.Errorf("wall_seconds %v, the processes' sum %v", s.WallSeconds, sum)
	}
}

// checkTestSplit continues TestRunLoop (a run done, then resumed once): the
// run measured its starting and final policies on its test suite (the
// built-in suite of the seed of its config's hash) beside the validation
// split, in both modes and on as many tasks; its processes are recorded.
// Then the run is made as a run from before the test split and process
// records (their files and evals removed, its summary without them) and
// resumed: only the test suite and its evals are made, nothing else is
// redone, and the old summary's process is kept.
func checkTestSplit(t *testing.T, dir, cfgPath, stdout string, args []string) {
	t.Helper()
	work := filepath.Join(dir, "work")
	cfg, err := loop.ReadConfig(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	hash, err := loop.ConfigHash(cfg)
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := loop.TestSeed(hash)
	s := readSummary(t, work)
	if s.TestSuite == nil || s.TestSuite.ConfigHash != hash || s.TestSuite.Seed != seed || s.TestSuite.N != 16 {
		t.Fatalf("summary's test_suite %+v, want hash %s seed %d n 16", s.TestSuite, hash, seed)
	}
	rows := map[string]loop.Comparison{}
	for _, c := range s.Comparisons {
		rows[c.Split+" "+c.Mode] = c
	}
	for _, key := range []string{"heldout t1", "heldout greedy", "test t1", "test greedy"} {
		if c, ok := rows[key]; !ok || c.Tasks != 1 {
			t.Errorf("no comparison %s on 1 task: %+v", key, s.Comparisons)
		}
	}
	for key, c := range rows {
		if val, test := strings.CutPrefix(c.Split, "test"); test && rows["heldout"+val+" "+c.Mode].Tasks != c.Tasks {
			t.Errorf("%s: %d tasks, its validation row %d", key, c.Tasks, rows["heldout"+val+" "+c.Mode].Tasks)
		}
	}
	suite := string(mustRead(t, filepath.Join(work, "suite", "tasks.jsonl")))
	var test struct {
		ID    string `json:"instance_id"`
		Split string `json:"split"`
	}
	if err := json.Unmarshal(mustRead(t, filepath.Join(work, "pools", "eval-test.jsonl")), &test); err != nil || test.Split != "heldout" ||
		strings.Contains(suite, `"instance_id":"`+test.ID+`"`) || !strings.Contains(string(mustRead(t, filepath.Join(work, "test-suite", "tasks.jsonl"))), test.ID) {
		t.Errorf("the test task %+v (%v): want a heldout task of the test suite, not of the run's suite", test, err)
	}
	if !regexp.MustCompile(`(?m)^bash +test +t1 +\d\.\d{3} \[`).MatchString(stdout) || !regexp.MustCompile(`(?m)^bash +test +greedy `).MatchString(stdout) ||
		!strings.Contains(stdout, "the built-in suite of seed "+strconvU(seed)+" from the config's hash "+hash[:12]) {
		t.Errorf("the table lacks the test rows or the seed %d:\n%s", seed, stdout)
	}
	// Two processes so far: the run (did everything) and its resume (did
	// nothing).
	checkProcesses(t, s, 2)
	if first := strings.Join(s.Processes[0].Did, "; "); s.Processes[0].Exit != "done" || !strings.Contains(first, "generate the built-in suite; bash demonstrations; tokenizer and initial policy; SFT; generate the test suite; eval of policy v1 on heldout, t1;") ||
		!strings.Contains(first, "iterations 0-1; eval of policy v3 on heldout, t1;") {
		t.Errorf("the first process did %q (exit %q)", first, s.Processes[0].Exit)
	}
	if p := s.Processes[1]; p.Exit != "done" || len(p.Did) != 0 {
		t.Errorf("the resume did %q (exit %q), want nothing", p.Did, p.Exit)
	}

	// A run from before the test split: no test suite, test evals or
	// process records, and a summary without them.
	for _, p := range []string{"work/test-suite", "work/test-suite.json", "work/processes", "work/pools/eval-test.jsonl", "work/pools/eval-test_family.jsonl"} {
		os.RemoveAll(filepath.Join(dir, p))
	}
	evals, _ := filepath.Glob(filepath.Join(dir, "store", "runs", "loop-test-eval-test*"))
	if len(evals) == 0 {
		t.Fatal("no test eval in the store")
	}
	for _, p := range evals {
		os.RemoveAll(p)
	}
	var old map[string]any
	json.Unmarshal(mustRead(t, filepath.Join(work, "summary.json")), &old)
	delete(old, "test_suite")
	delete(old, "processes")
	old["wall_seconds"] = 50.5
	old["comparisons"] = slices.DeleteFunc(old["comparisons"].([]any), func(c any) bool { return strings.HasPrefix(c.(map[string]any)["split"].(string), "test") })
	b, _ := json.Marshal(old)
	if err := os.WriteFile(filepath.Join(work, "summary.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout2, stderr := runCLI(t, testEnv(nil), args...)
	if code != 0 {
		t.Fatalf("resume of a run from before the test split: exit %d: %s", code, stderr)
	}
	if strings.Count(stderr, "done by an earlier run") != 2 || strings.Contains(stderr, "training") || strings.Contains(stderr, "sft step") {
		t.Errorf("the resume redid work:\n%s", stderr)
	}
	if tableLines(stdout2) != tableLines(stdout) {
		t.Errorf("the resumed run's table differs (same seed, same committed evals):\n%s\nvs\n%s", stdout2, stdout)
	}
	s = readSummary(t, work)
	checkProcesses(t, s, 2)
	if p := s.Processes[0]; p.Seconds != 50.5 || p.Note == "" || p.Exit != "done" {
		t.Errorf("the earlier process, from its summary: %+v", p)
	}
	did := s.Processes[1].Did
	if len(did) == 0 || did[0] != "generate the test suite" {
		t.Errorf("the resume did %q; want the test suite first", did)
	}
	for _, d := range did[1:] {
		if !regexp.MustCompile(`^eval of policy v[13] on test(_family)?, (t1|greedy)$`).MatchString(d) {
			t.Errorf("the resume did %q: only the test evals are missing (%q)", d, did)
		}
	}
	if s.TestSuite == nil || s.TestSuite.Seed != seed || len(s.Comparisons) != len(rows) {
		t.Errorf("the resumed run's summary: test suite %+v, %d comparisons (want seed %d, %d)", s.TestSuite, len(s.Comparisons), seed, len(rows))
	}
}

func strconvU(v uint64) string { b, _ := json.Marshal(v); return string(b) }

// cancelWriter is a log that cancels a run once a line holds marker.
type cancelWriter struct {
	mu     sync.Mutex
	b      strings.Builder
	marker string
	cancel context.CancelFunc
}

func (w *cancelWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	if strings.Contains(w.b.String(), w.marker) {
		w.cancel()
	}
	return len(p), nil
}

// TestRunStopResume: a run stopped (its context canceled, as by SIGINT or
// SIGTERM) during iteration 1 and resumed has two processes in its
// summary, the first ended by the stop having done iteration 0 and not 1,
// the second doing iteration 1 and the final evals; wall_seconds is their
// sum.
func TestRunStopResume(t *testing.T) {
	dir := t.TempDir()
	cfgPath := loopTestConfig(t, dir)
	self, _ := os.Executable()
	args := []string{"run", "--config", cfgPath, "--agent", self}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := &cancelWriter{marker: "iteration 1: rollouts of policy", cancel: cancel}
	var out strings.Builder
	if code := run(ctx, testEnv(nil), args, &out, log); code == 0 {
		t.Fatalf("the stopped run exited 0:\n%s", log.b.String())
	}
	reps := filepath.Join(dir, "rep-*.summary.json")
	code, stdout, stderr := runCLI(t, testEnv(nil), append(args, "--replicates", reps)...)
	if code != 0 {
		t.Fatalf("resume: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "replicates: no committed summary matches "+reps+" yet") {
		t.Errorf("no word on the missing replicates:\n%s", stdout)
	}
	s := readSummary(t, filepath.Join(dir, "work"))
	checkProcesses(t, s, 2)
	first, second := s.Processes[0], s.Processes[1]
	if !strings.HasPrefix(first.Exit, "error: ") || !strings.Contains(first.Exit, "context canceled") || !slices.Contains(first.Did, "iteration 0") ||
		slices.ContainsFunc(first.Did, func(d string) bool { return strings.HasPrefix(d, "iteration 1") || strings.HasPrefix(d, "iterations") }) {
		t.Errorf("the stopped process: %+v", first)
	}
	if second.Exit != "done" || len(second.Did) == 0 || second.Did[0] != "iteration 1" || !slices.Contains(second.Did, "eval of policy v3 on test, greedy") ||
		slices.Contains(second.Did, "eval of policy v1 on heldout, t1") {
		t.Errorf("the resume: %+v", second)
	}
	// With a replicate committed (this run's summary under another name),
	// the spread is printed beside the run's own result.
	if err := os.WriteFile(filepath.Join(dir, "rep-1.summary.json"), mustRead(t, filepath.Join(dir, "work", "summary.json")), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = runCLI(t, testEnv(nil), append(args, "--replicates", reps)...)
	if code != 0 || !strings.Contains(stdout, "the difference after - before across the 1 committed replicates") ||
		!regexp.MustCompile(`(?m)^bash +test +t1 +1 [+-]\d\.\d{3} .* rep-1 [+-]\d\.\d{3} \[`).MatchString(stdout) {
		t.Errorf("exit %d, no replicates' spread:\n%s\n%s", code, stdout, stderr)
	}
}
