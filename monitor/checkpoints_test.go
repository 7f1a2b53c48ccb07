package monitor

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/legorl/legorl/policy/checkpoint"
	"github.com/legorl/legorl/policy/safetensors"
)

// writeCheckpointFolder makes a checkpoint folder as the trainer leaves
// it, as far as CheckpointFolders reads it: a lineage header and one
// recomputed tensor per segment of rollout "r" (segment i holds the
// value fill+i). recomputed false leaves the tensors out.
func writeCheckpointFolder(t *testing.T, dir, run string, iter int, at time.Time, fill float32, recomputed bool) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(checkpoint.Header{Format: checkpoint.Format, RunID: run, Iteration: iter, Version: int64(iter) + 1, CreatedAt: at})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, checkpoint.File), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if !recomputed {
		return
	}
	var ts []safetensors.Tensor
	for i := 0; i < 2; i++ {
		ts = append(ts, safetensors.Tensor{Name: "r/" + strconv.Itoa(i), Shape: []int{1}, Data: []float32{fill + float32(i)}})
	}
	ts = append(ts, safetensors.Tensor{Name: "not-a-segment", Shape: []int{1}, Data: []float32{0}})
	if err := safetensors.WriteFile(filepath.Join(dir, checkpoint.RecomputedFile), ts, safetensors.F32, nil); err != nil {
		t.Fatal(err)
	}
}

// TestCheckpointFolders: the iteration's checkpoint is found by its
// lineage header (run and iteration), the newest of two wins, folders
// deeper than three levels and other runs or iterations are not read,
// and a checkpoint without recomputed logprobs is ErrNoRecomputed.
func TestCheckpointFolders(t *testing.T) {
	root := t.TempDir()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	writeCheckpointFolder(t, filepath.Join(root, "a", "v1"), "run", 0, t0, 10, true)
	writeCheckpointFolder(t, filepath.Join(root, "b", "v1"), "run", 0, t0.Add(time.Hour), 20, true) // retrained: newer
	writeCheckpointFolder(t, filepath.Join(root, "c", "v2"), "run", 1, t0, 30, true)
	writeCheckpointFolder(t, filepath.Join(root, "d", "e", "f", "g"), "run", 2, t0, 40, true) // too deep
	writeCheckpointFolder(t, filepath.Join(root, "h"), "run", 3, t0, 0, false)
	writeCheckpointFolder(t, filepath.Join(root, "other"), "other", 4, t0, 50, true)
	src := &CheckpointFolders{Root: root}
	for _, tc := range []struct {
		run    string
		iter   int
		source string // "" : ErrNoRecomputed
		first  float32
	}{
		{"run", 0, "b/v1", 20},
		{"run", 1, "c/v2", 30},
		{"run", 2, "", 0},
		{"run", 3, "", 0},
		{"run", 4, "", 0},
		{"other", 4, "other", 50},
	} {
		t.Run(tc.run+"/"+strconv.Itoa(tc.iter), func(t *testing.T) {
			rec, err := src.Recomputed(context.Background(), tc.run, tc.iter)
			if tc.source == "" {
				if !errors.Is(err, ErrNoRecomputed) {
					t.Fatalf("got %v, want ErrNoRecomputed", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if rec.Source != filepath.Join(root, tc.source) || len(rec.Logprobs) != 2 {
				t.Fatalf("source %s, %d segments; want %s, 2", rec.Source, len(rec.Logprobs), tc.source)
			}
			for i := int32(0); i < 2; i++ {
				if got := rec.Logprobs[SegmentRef{RolloutID: "r", Segment: i}]; len(got) != 1 || got[0] != tc.first+float32(i) {
					t.Errorf("segment %d: %v, want [%v]", i, got, tc.first+float32(i))
				}
			}
			again, err := src.Recomputed(context.Background(), tc.run, tc.iter)
			if err != nil || again != rec {
				t.Errorf("a second read of an unchanged file was not the cached one: %v", err)
			}
		})
	}
}
