package storage_test

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/schemas/synth"
	"github.com/legorl/legorl/storage"
)

func TestRoundTripSmoke(t *testing.T) {
	ctx := context.Background()
	st, err := storage.NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	it := synth.Run(synth.Config{RunID: "r1", Iterations: 1, MoELayers: 2})[0]
	ref := storage.ManifestRef{RunID: "r1", Iteration: 0, Stage: "rollout"}
	foot := schemas.Footer{SchemaVersion: schemas.Version, Table: schemas.TableSegments, RunID: "r1", CodeVersion: "test"}
	e, err := storage.WriteFile(ctx, st, ref.DataKey("segments", "shard-0"), foot, it.Segments)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := storage.Commit(ctx, st, ref, []storage.FileEntry{e}); err != nil {
		t.Fatal(err)
	}
	files, err := storage.TableFiles(ctx, st, "r1", "segments")
	if err != nil {
		t.Fatal(err)
	}
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	f, err := storage.OpenFile(ctx, st, files[0], mem)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows int64
	for b, err := range f.Batches(ctx, 0) {
		if err != nil {
			t.Fatal(err)
		}
		rows += b.NumRows()
	}
	if rows != int64(len(it.Segments)) {
		t.Fatalf("read %d rows, wrote %d", rows, len(it.Segments))
	}
}
