package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legorl/legorl/monitor"
	"github.com/legorl/legorl/policy/safetensors"
	"github.com/legorl/legorl/schemas/synth"
	"github.com/legorl/legorl/storage"
	"github.com/legorl/legorl/trainer"
)

// writeCheckpoint makes a checkpoint folder as the trainer leaves it, as
// far as the monitor reads it: lineage.json and the recomputed logprobs of
// every segment of an iteration (the rollout's, plus 0.01).
func writeCheckpoint(t *testing.T, dir, run string, iter int, its []synth.Iteration) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var ts []safetensors.Tensor
	for _, s := range its[iter].Segments {
		v := make([]float32, len(s.Logprobs))
		for i, lp := range s.Logprobs {
			v[i] = lp + 0.01
		}
		ts = append(ts, safetensors.Tensor{Name: s.RolloutID + "/" + itoa32(s.SegmentIndex), Shape: []int{len(v)}, Data: v})
	}
	if err := safetensors.WriteFile(filepath.Join(dir, trainer.RecomputedFile), ts, safetensors.F32, map[string]string{"format": "legorl-recomputed-logprobs"}); err != nil {
		t.Fatal(err)
	}
	lin := trainer.Lineage{Format: trainer.LineageFormat, RunID: run, Iteration: iter, Version: int64(iter) + 1, CreatedAt: time.Now().UTC()}
	b, _ := json.Marshal(lin)
	if err := os.WriteFile(filepath.Join(dir, trainer.LineageFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func itoa32(i int32) string { return strconv.Itoa(int(i)) }

func fixedRunRows(runID string) []synth.Iteration {
	return synth.Run(synth.Config{RunID: runID, Seed: 7, Iterations: 2, Tasks: 2, GroupSize: 2, Turns: 2,
		PromptTokens: 4, TurnTokens: 3, ObsTokens: 2, VocabSize: 100, MoELayers: 1, TopK: 2, Experts: 4})
}

// TestCheckpointRecomputed: the monitor's reader of checkpoint folders
// (monitor.CheckpointFolders, tested in its package) reads what
// trainer.ReadRecomputed reads from a folder in the trainer's layout.
func TestCheckpointRecomputed(t *testing.T) {
	root := t.TempDir()
	its := fixedRunRows("r1")
	writeCheckpoint(t, filepath.Join(root, "r1", "v1"), "r1", 0, its)
	writeCheckpoint(t, filepath.Join(root, "other", "v1"), "r2", 0, its)
	src := &monitor.CheckpointFolders{Root: root}
	rec, err := src.Recomputed(context.Background(), "r1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Source != filepath.Join(root, "r1", "v1") || len(rec.Logprobs) != len(its[0].Segments) {
		t.Fatalf("source %s, %d segments", rec.Source, len(rec.Logprobs))
	}
	for _, s := range its[0].Segments {
		want, err := trainer.ReadRecomputed(rec.Source, s.RolloutID, s.SegmentIndex)
		if err != nil {
			t.Fatal(err)
		}
		got := rec.Logprobs[monitor.SegmentRef{RolloutID: s.RolloutID, Segment: s.SegmentIndex}]
		if len(got) != len(want) || (len(got) > 0 && got[0] != want[0]) {
			t.Errorf("%s/%d: %v, trainer reads %v", s.RolloutID, s.SegmentIndex, got, want)
		}
	}
	for _, tc := range []struct {
		run  string
		iter int
	}{{"r1", 1}, {"r3", 0}} {
		if _, err := src.Recomputed(context.Background(), tc.run, tc.iter); err == nil || !strings.Contains(err.Error(), "no recomputed logprobs") {
			t.Errorf("%s iteration %d: %v", tc.run, tc.iter, err)
		}
	}
}

// TestMonitorServes runs `legorl monitor` in process: it prints its URL,
// serves the dashboard with the checkpoints' logprobs, and stops cleanly
// when its context ends (SIGINT, in main).
func TestMonitorServes(t *testing.T) {
	dir := t.TempDir()
	st, err := storage.NewFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	writeFixedRun(t, st, "r1")
	ckpts := t.TempDir()
	writeCheckpoint(t, filepath.Join(ckpts, "v1"), "r1", 0, fixedRunRows("r1"))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		var e strings.Builder
		done <- run(ctx, testEnv(nil), []string{"monitor", "--store", "file://" + dir, "--addr", "127.0.0.1:0", "--checkpoints", ckpts}, pw, &e)
		pw.Close()
	}()
	sc := bufio.NewScanner(pr)
	if !sc.Scan() {
		t.Fatal("no output")
	}
	line := sc.Text()
	_, url, ok := strings.Cut(line, " at ")
	url, _, _ = strings.Cut(url, " ")
	if !ok || !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("first line %q has no URL", line)
	}
	for path, want := range map[string]string{
		"":                                "r1",
		"runs/r1":                         `data-panel="logprobs"`,
		"api/runs/r1/panels/logprobs":     `"source": "` + filepath.Join(ckpts, "v1"),
		"api/runs/r1/panels/reward":       `"status": "ok"`,
		"runs/r1/rollouts/r1-i0-t000-g0":  "forks",
		"api/runs/r1/rollouts/r1-i0-t0-g": "unknown rollout",
	} {
		resp, err := http.Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), want) {
			t.Errorf("/%s: HTTP %d, lacks %q", path, resp.StatusCode, want)
		}
	}
	cancel()
	go io.Copy(io.Discard, pr)
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit %d after the context ended", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("monitor did not stop")
	}
}

// TestMonitorSIGINT: the real binary stops on SIGINT with status 0.
func TestMonitorSIGINT(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "LEGORL_TEST_RUN_MAIN=1", "LEGORL_TEST_ARGS=monitor --store file://"+dir+" --addr 127.0.0.1:0 --run later")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	if !sc.Scan() || !strings.Contains(sc.Text(), "/runs/later") {
		cmd.Process.Kill()
		t.Fatalf("first line %q", sc.Text())
	}
	_, url, _ := strings.Cut(sc.Text(), " at ")
	url, _, _ = strings.Cut(url, " ")
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "no committed manifest yet") {
		t.Errorf("a run with no data: HTTP %d: %.300s", resp.StatusCode, b)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, out)
	errc := make(chan error, 1)
	go func() { errc <- cmd.Wait() }()
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("after SIGINT: %v", err)
		}
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("no exit 10s after SIGINT")
	}
}

func TestMonitorBadFlags(t *testing.T) {
	store := "file://" + t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"monitor", "--store", store, "--run", "../x"}, `run id "../x"`},
		{[]string{"monitor", "--store", store, "--poll", "1ms"}, "--poll must be at least 100ms"},
		{[]string{"monitor", "--store", store, "--addr", "nonsense"}, "listen on nonsense"},
		{[]string{"monitor", "--store", store, "--checkpoints", "/nonexistent/x"}, "--checkpoints /nonexistent/x: not a folder"},
		{[]string{"monitor", "--store", "ftp://x"}, `unknown scheme "ftp"`},
	} {
		code, _, stderr := runCLI(t, testEnv(nil), tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%v: exit %d, %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}
