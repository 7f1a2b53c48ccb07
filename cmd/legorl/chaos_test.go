package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// chaosPoint is where TestChaosResume kills `legorl run`: SIGKILL, delay
// after the first stderr line containing marker.
type chaosPoint struct {
	stage, marker string
	delay         time.Duration
}

var chaosPoints = []chaosPoint{
	{"suite generation", "generating the built-in suite", 0},
	{"demonstrations", "demonstrations of the", 0},
	{"SFT", "sft step", 0},
	{"held-out eval (pipeline)", "eval of policy v1 on heldout, t1", 300 * time.Millisecond},
	// The delays stay well under a stage's length: iteration 0's rollouts,
	// update and publish now take about a second together, and a kill past
	// them leaves the later points unreachable.
	{"rollout pipeline, iteration 0", "iteration 0: rollouts of policy", 200 * time.Millisecond},
	{"update (recompute, gradients)", "iteration 0: 4 rollouts", 0},
	{"checkpoint publish and train_steps commit", "publishing the checkpoint", 0},
	{"rollout pipeline, iteration 1", "iteration 1: rollouts of policy", 300 * time.Millisecond},
	{"final eval", "eval of policy v3 on heldout, t1", 200 * time.Millisecond},
}

// TestChaosResume kills `legorl run` (a child process, SIGKILL) at a point
// of every stage, resuming each time with the same command, and compares
// the store it ends with to an uninterrupted run's of the same config,
// table by table and row by row (timings left out): no row lost or
// duplicated, every group trained once, the same final weights, and
// `legorl audit` passes. `make chaos` runs it alone.
func TestChaosResume(t *testing.T) {
	self, _ := os.Executable()
	dir := t.TempDir()
	ref, chaos := filepath.Join(dir, "ref"), filepath.Join(dir, "chaos")
	args := func(root string) []string {
		return []string{"run", "--config", loopTestConfig(t, root), "--agent", self}
	}
	if err := os.MkdirAll(ref, 0o755); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCLI(t, testEnv(nil), args(ref)...); code != 0 {
		t.Fatalf("the uninterrupted run: exit %d: %s", code, stderr)
	}
	if err := os.MkdirAll(chaos, 0o755); err != nil {
		t.Fatal(err)
	}
	chaosArgs := args(chaos)
	var hit []string
	for _, p := range chaosPoints {
		killed, log := killAt(t, self, chaosArgs, p)
		if killed {
			hit = append(hit, p.stage)
			continue
		}
		t.Logf("kill point %q not reached: the run finished first\n%s", p.stage, log)
		break
	}
	if code, _, stderr := runCLI(t, testEnv(nil), chaosArgs...); code != 0 {
		t.Fatalf("the resumed run: exit %d: %s", code, stderr)
	}
	t.Logf("killed at %d points: %s", len(hit), strings.Join(hit, "; "))
	if len(hit) != len(chaosPoints) {
		t.Errorf("only %d of %d kill points reached (%s): each is required", len(hit), len(chaosPoints), strings.Join(hit, "; "))
	}

	// Every run of the store (the loop's, its evals', the probe's), every
	// table: the same rows.
	compared := compareStores(t, filepath.Join(ref, "store"), filepath.Join(chaos, "store"))
	t.Logf("compared %d rows", compared)
	for _, ck := range []string{"sft", "iter-000001", "iter-000002"} {
		a := fileSHA(t, filepath.Join(ref, "work", "checkpoints", ck, "model.safetensors"))
		if b := fileSHA(t, filepath.Join(chaos, "work", "checkpoints", ck, "model.safetensors")); a != b {
			t.Errorf("checkpoint %s: weights %s, the uninterrupted run's %s", ck, b[:12], a[:12])
		}
	}
	cks := []string{}
	for _, ck := range []string{"sft", "iter-000001", "iter-000002"} {
		cks = append(cks, filepath.Join(chaos, "work", "checkpoints", ck))
	}
	if code, out, stderr := runCLI(t, testEnv(nil), "audit", "--store", "file://"+filepath.Join(chaos, "store"), "--run", "loop-test",
		"--checkpoints", strings.Join(cks, ",")); code != 0 {
		t.Errorf("audit of the chaos run: exit %d: %s\n%s", code, stderr, out)
	}
}

// killAt starts `legorl run` as a child and SIGKILLs it p.delay after the
// first stderr line with p.marker; false when the child ended first.
func killAt(t *testing.T, self string, args []string, p chaosPoint) (killed bool, log string) {
	t.Helper()
	log, killed = killChild(t, self, args, killSpec{stage: p.stage, marker: p.marker, delay: p.delay})
	return killed, log
}

// volatile are row fields that measure time, not content.
var volatile = regexp.MustCompile(`_seconds$|_ms$|_at$|per_second|^seconds$|^duration`)

// exportRows exports a table of a run as JSON lines, drops the volatile
// fields, and returns the rows sorted; errOut is the export's one-line
// error (a table the run never committed), "" on success.
func exportRows(t *testing.T, store, run, table string) (rows []string, errOut string) {
	t.Helper()
	code, out, stderr := runCLI(t, testEnv(nil), "export", "--store", "file://"+store, "--run", run, "--table", table)
	if code != 0 {
		return nil, strings.TrimSpace(strings.ReplaceAll(stderr, store, "STORE"))
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%s %s: %v", run, table, err)
		}
		for k := range m {
			if volatile.MatchString(k) {
				delete(m, k)
			}
		}
		b, _ := json.Marshal(m) // keys sorted
		rows = append(rows, string(b))
	}
	sort.Strings(rows)
	return rows, ""
}
