package storage

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/schemas/synth"
)

// TestDecodeBatch: the typed read of an Arrow batch gives back exactly the
// rows written (full row type), a projection of them, only the rows keep
// picks, and list views without copies; a column missing or of another
// type is ErrCorrupt naming it.
func TestDecodeBatch(t *testing.T) {
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	st, err := NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	segs := synth.Run(synth.Config{RunID: "b", Seed: 2, Iterations: 1, Tasks: 2, GroupSize: 2, Turns: 2, PromptTokens: 4, TurnTokens: 3, ObsTokens: 2,
		VocabSize: 100, MoELayers: 1, TopK: 2, Experts: 4})[0].Segments
	e, err := WriteFile(ctx, st, "runs/b/data/segments/iter-000000/rollout-x.parquet",
		schemas.Footer{SchemaVersion: schemas.Version, Table: schemas.TableSegments, RunID: "b", ConfigHash: "c", CodeVersion: "t"}, segs)
	if err != nil {
		t.Fatal(err)
	}
	f, err := OpenFile(ctx, st, e, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var recs []arrow.RecordBatch
	for b, err := range f.Batches(ctx, 0) {
		if err != nil {
			t.Fatal(err)
		}
		b.Retain()
		recs = append(recs, b)
	}
	defer func() {
		for _, b := range recs {
			b.Release()
		}
	}()
	if len(recs) != 1 {
		t.Fatalf("%d batches", len(recs))
	}
	rec := recs[0]

	full, err := DecodeBatch[schemas.Segment](rec, nil)
	if err != nil || !reflect.DeepEqual(full, segs) {
		t.Fatalf("full rows differ from those written (%v)", err)
	}
	type proj struct {
		RolloutID string    `parquet:"rollout_id"`
		Logprobs  []float32 `parquet:"logprobs"`
	}
	picked, err := DecodeBatch[proj](rec, func(i int) bool { return i%2 == 1 })
	if err != nil || len(picked) != len(segs)/2 {
		t.Fatalf("projection: %d rows (%v)", len(picked), err)
	}
	for k, p := range picked {
		if s := segs[2*k+1]; p.RolloutID != s.RolloutID || !reflect.DeepEqual(p.Logprobs, s.Logprobs) {
			t.Errorf("row %d: %+v, want %s %v", 2*k+1, p, s.RolloutID, s.Logprobs)
		}
	}
	mask, err := ListOf[int8, *array.Int8](rec, "loss_mask")
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range segs {
		if got := mask.At(i); !reflect.DeepEqual(got, s.LossMask) {
			t.Errorf("loss_mask of row %d: %v, want %v", i, got, s.LossMask)
		}
	}

	for name, decode := range map[string]func() error{
		"missing column": func() error {
			_, err := DecodeBatch[struct {
				X string `parquet:"no_such_column"`
			}](rec, nil)
			return err
		},
		"wrong type": func() error {
			_, err := DecodeBatch[struct {
				ID int64 `parquet:"rollout_id"`
			}](rec, nil)
			return err
		},
		"list of another element type": func() error { _, err := ListOf[int32, *array.Int32](rec, "loss_mask"); return err },
		"list missing":                 func() error { _, err := ListOf[int8, *array.Int8](rec, "nothing"); return err },
		"not a list":                   func() error { _, err := ListOf[int32, *array.Int32](rec, "rollout_id"); return err },
	} {
		if err := decode(); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}
