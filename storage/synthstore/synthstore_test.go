package synthstore

import (
	"context"
	"errors"
	"testing"

	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/schemas/synth"
	"github.com/legorl/legorl/storage"
)

// TestWriteIteration: every table of a synthetic iteration is committed
// under its stage and reads back typed with every row; CountRows reads
// the same counts as Arrow batches; an invalid row writes nothing.
func TestWriteIteration(t *testing.T) {
	ctx := context.Background()
	st, err := storage.NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg := synth.Config{RunID: "s", Seed: 3, Iterations: 2, Tasks: 2, GroupSize: 2, Turns: 2, PromptTokens: 4, TurnTokens: 3, ObsTokens: 2, VocabSize: 100}
	its := synth.Run(cfg)
	o := Options{ConfigHash: "synthetic", CodeVersion: "test", VocabSize: 100}
	for i, it := range its {
		files, err := WriteIteration(ctx, st, "s", i, it, o)
		if err != nil {
			t.Fatal(err)
		}
		if len(files) != 5 {
			t.Errorf("iteration %d: %d files, want 5", i, len(files))
		}
	}
	for _, tc := range []struct {
		table schemas.Table
		rows  int
	}{
		{schemas.TableRollouts, len(its[0].Rollouts) + len(its[1].Rollouts)},
		{schemas.TableSegments, len(its[0].Segments) + len(its[1].Segments)},
		{schemas.TableSteps, len(its[0].Steps) + len(its[1].Steps)},
		{schemas.TableTrainSteps, len(its[0].TrainSteps) + len(its[1].TrainSteps)},
	} {
		files, rows, err := storage.CountRows(ctx, st, "s", string(tc.table))
		if err != nil || rows != int64(tc.rows) || files == 0 {
			t.Errorf("%s: %d files, %d rows (%v); want %d rows", tc.table, files, rows, err, tc.rows)
		}
	}
	fes, err := storage.TableFiles(ctx, st, "s", string(schemas.TableRollouts))
	if err != nil {
		t.Fatal(err)
	}
	got, err := storage.ReadRows[schemas.Rollout](ctx, st, fes[0])
	if err != nil || len(got) != len(its[0].Rollouts) || got[0].RolloutID != its[0].Rollouts[0].RolloutID {
		t.Errorf("rollouts of iteration 0 read back: %v, %d rows", err, len(got))
	}

	bad := synth.Run(cfg)[0]
	bad.Rollouts[0].RolloutID = ""
	if _, err := WriteIteration(ctx, st, "bad", 0, bad, o); err == nil {
		t.Fatal("an invalid row was written")
	}
	if _, _, err := storage.CountRows(ctx, st, "bad", string(schemas.TableRollouts)); !errors.Is(err, storage.ErrNoData) {
		t.Errorf("an invalid iteration left data: %v", err)
	}
}
