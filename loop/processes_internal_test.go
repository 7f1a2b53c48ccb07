package loop

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestProcessRecords: a work folder resumed for the first time since
// process records exist keeps its summary's process; the new process
// records what it did (consecutive iterations as one entry) and how it
// ended; readProcesses lists both, oldest first, and sums their seconds.
func TestProcessRecords(t *testing.T) {
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "summary.json"), []byte(`{"wall_seconds": 12.5, "iterations": []}`), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := startProcess(work)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"eval of policy v1 on test, t1", "iteration 4", "iteration 5", "iteration 6", "rl.probe after 7 iterations", "iteration 7", "iteration 9"} {
		r.did(d)
	}
	if err := r.finish(errors.New("context canceled")); err != nil {
		t.Fatal(err)
	}
	ps, total, err := readProcesses(work)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 2 {
		t.Fatalf("%d processes, want 2: %+v", len(ps), ps)
	}
	old, cur := ps[0], ps[1]
	if old.Seconds != 12.5 || old.Note == "" || old.Exit != "done" || !old.End.After(old.Start) {
		t.Errorf("the summary's process: %+v", old)
	}
	want := []string{"eval of policy v1 on test, t1", "iterations 4-6", "rl.probe after 7 iterations", "iteration 7", "iteration 9"}
	if !slices.Equal(cur.Did, want) || cur.Exit != "error: context canceled" || cur.Start.Before(old.End) {
		t.Errorf("the process: did %q exit %q, want %q", cur.Did, cur.Exit, want)
	}
	if total != old.Seconds+cur.Seconds {
		t.Errorf("total %v, want %v + %v", total, old.Seconds, cur.Seconds)
	}
	// A second process does not import the summary again.
	r, err = startProcess(work)
	if err != nil {
		t.Fatal(err)
	}
	r.finish(nil)
	if ps, _, _ := readProcesses(work); len(ps) != 3 || ps[2].Exit != "done" || len(ps[2].Did) != 0 {
		t.Errorf("after a second process: %+v", ps)
	}
}
