package rollout

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/legorl/legorl/proxy"
	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/schemas/synth"
	"github.com/legorl/legorl/storage"
)

func fileStore(t *testing.T) storage.Store {
	t.Helper()
	st, err := storage.NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func footer(t *testing.T, st storage.Store, fe storage.FileEntry) schemas.Footer {
	t.Helper()
	f, err := storage.OpenFile(context.Background(), st, fe, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return f.Footer
}

// TestWriteRows: a rollout's rows come back from the store, typed, under
// the rollout stage's manifest of their iteration, one file per table that
// has rows, with the code version in the footers; a second write of the
// same rollout is refused (write-once).
func TestWriteRows(t *testing.T) {
	ctx := context.Background()
	it := synth.Run(synth.Config{RunID: "wr", Iterations: 1, Tasks: 1, GroupSize: 1, Turns: 2, PromptTokens: 8, TurnTokens: 4, ObsTokens: 4, VocabSize: 64})[0]
	row := it.Rollouts[0]
	for _, tc := range []struct {
		name  string
		segs  []schemas.Segment
		steps []schemas.Step
		files int
	}{
		{"all tables", it.Segments, it.Steps, 3},
		{"rollouts only", nil, nil, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := fileStore(t)
			if err := WriteRows(ctx, st, row, tc.segs, tc.steps, "v-test"); err != nil {
				t.Fatal(err)
			}
			m, err := storage.Latest(ctx, st, storage.ManifestRef{RunID: row.RunID, Iteration: int(row.Iteration), Stage: schemas.StageRollout})
			if err != nil {
				t.Fatal(err)
			}
			if len(m.Files) != tc.files {
				t.Fatalf("%d files committed, want %d", len(m.Files), tc.files)
			}
			for _, fe := range m.Files {
				if f := footer(t, st, fe); f.CodeVersion != "v-test" || f.ConfigHash != "legorl-rollout" || f.PolicyVersion != row.PolicyVersion {
					t.Errorf("%s: footer %+v", fe.Key, f)
				}
				switch schemas.Table(fe.Table) {
				case schemas.TableRollouts:
					got, err := storage.ReadRows[schemas.Rollout](ctx, st, fe)
					if err != nil || len(got) != 1 || got[0].RolloutID != row.RolloutID {
						t.Errorf("rollouts: %v %+v", err, got)
					}
				case schemas.TableSegments:
					got, err := storage.ReadRows[schemas.Segment](ctx, st, fe)
					if err != nil || len(got) != len(tc.segs) {
						t.Errorf("segments: %v, %d rows, want %d", err, len(got), len(tc.segs))
					}
				case schemas.TableSteps:
					got, err := storage.ReadRows[schemas.Step](ctx, st, fe)
					if err != nil || len(got) != len(tc.steps) {
						t.Errorf("steps: %v, %d rows, want %d", err, len(got), len(tc.steps))
					}
				}
			}
			if err := WriteRows(ctx, st, row, tc.segs, tc.steps, "v-test"); !errors.Is(err, storage.ErrExists) {
				t.Errorf("a second write of the rollout: %v, want ErrExists", err)
			}
		})
	}
}

// rotations is a Rotator that hands out prepared records in turn.
type rotations struct {
	ids  []string
	recs []proxy.Record
}

func (r *rotations) Rotate(id string) (proxy.Record, error) {
	r.ids = append(r.ids, id)
	if len(r.recs) == 0 {
		return proxy.Record{}, nil
	}
	rec := r.recs[0]
	r.recs = r.recs[1:]
	return rec, nil
}

// TestRecorder: each flush with segments writes one file under stage
// serve with the next serve-NNNNNN id (continuing after an earlier
// session's files), an empty flush writes nothing, and a Recorder without
// a store never rotates.
func TestRecorder(t *testing.T) {
	ctx := context.Background()
	segs := synth.Run(synth.Config{RunID: "rec", Iterations: 1, Tasks: 1, GroupSize: 2, Turns: 2, PromptTokens: 8, TurnTokens: 4, ObsTokens: 4, VocabSize: 64})[0].Segments
	st := fileStore(t)
	ref := storage.ManifestRef{RunID: "rec", Iteration: 0, Stage: schemas.StageServe}

	var ids []string
	for session, flushes := range [][]proxy.Record{
		{{Segments: segs[:1]}, {}, {Segments: segs[1:]}},
		{{Segments: segs[:2]}},
	} {
		r := &Recorder{Store: st, RunID: "rec", CodeVersion: "v-test"}
		rot := &rotations{recs: flushes}
		for range flushes {
			if err := r.Flush(ctx, rot, proxy.DefaultRollout); err != nil {
				t.Fatalf("session %d: %v", session, err)
			}
		}
		for _, id := range rot.ids {
			if id != proxy.DefaultRollout {
				t.Errorf("session %d rotated %q", session, rot.ids)
			}
		}
		wantFiles, wantSegs := 0, 0
		for _, f := range flushes {
			if len(f.Segments) > 0 {
				wantFiles++
				wantSegs += len(f.Segments)
			}
		}
		if r.Files() != wantFiles || r.Segments() != wantSegs {
			t.Errorf("session %d: %d files, %d segments; want %d, %d", session, r.Files(), r.Segments(), wantFiles, wantSegs)
		}
	}
	m, err := storage.Latest(ctx, st, ref)
	if err != nil {
		t.Fatal(err)
	}
	for _, fe := range m.Files {
		rows, err := storage.ReadRows[schemas.Segment](ctx, st, fe)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range rows {
			ids = append(ids, s.RolloutID)
		}
		if f := footer(t, st, fe); f.ConfigHash != "legorl-serve" || f.CodeVersion != "v-test" {
			t.Errorf("%s: footer %+v", fe.Key, f)
		}
	}
	slices.Sort(ids)
	want := []string{"serve-000000", "serve-000001", "serve-000002", "serve-000002"}
	if !reflect.DeepEqual(ids, want) {
		t.Errorf("recorded rollout ids %q, want %q", ids, want)
	}

	none := &rotations{recs: []proxy.Record{{Segments: segs}}}
	if err := (&Recorder{RunID: "rec"}).Flush(ctx, none, proxy.DefaultRollout); err != nil || len(none.ids) != 0 {
		t.Errorf("a Recorder without a store: %v, rotated %q", err, none.ids)
	}
}
