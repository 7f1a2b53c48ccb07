package storage_test

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/storage"
)

// writeRowGroups writes rows at key with a row group target of
// rowGroupBytes (0: the default) and returns the file's entry.
func writeRowGroups[T any](t testing.TB, st storage.Store, key string, footer schemas.Footer, rows []T, rowGroupBytes int64) storage.FileEntry {
	t.Helper()
	w, err := storage.NewWriter[T](st, key, footer, storage.WriterOptions{TempDir: t.TempDir(), RowGroupBytes: rowGroupBytes})
	if err != nil {
		t.Fatal(err)
	}
	// Two writes, so that a row group may span them.
	half := len(rows) / 2
	for _, part := range [][]T{rows[:half], rows[half:]} {
		if err := w.Write(part); err != nil {
			t.Fatal(err)
		}
	}
	e, err := w.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// rowGroupRows returns the row count of each row group of a Parquet file.
func rowGroupRows(t testing.TB, data []byte) []int64 {
	t.Helper()
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	var out []int64
	for rg := range pf.NumRowGroups() {
		out = append(out, pf.MetaData().RowGroup(rg).NumRows())
	}
	return out
}

// TestRowGroups writes segments with several row group targets and reads
// them back through every path: the row groups are cut where the payload
// reaches the target, batches never span a row group, and every path gives
// the rows written.
func TestRowGroups(t *testing.T) {
	segs := pqIteration.Segments
	var perRow []int64 // payload of each row, as the writer counts it
	for _, s := range segs {
		perRow = append(perRow, segmentsPayload([]schemas.Segment{s})+
			int64(len(s.RunID)+len(s.RolloutID)+len(s.FinishReason))+8*int64(len(s.PolicyVersions))+4*9+8) // nine 4-byte fields, one int64
	}
	// wantGroups cuts rows as the writer does: a group ends at the first
	// row whose payload reaches the target.
	wantGroups := func(target int64) []int64 {
		var out []int64
		var n, b int64
		for _, p := range perRow {
			n, b = n+1, b+p
			if b >= target {
				out, n, b = append(out, n), 0, 0
			}
		}
		if n > 0 {
			out = append(out, n)
		}
		return out
	}
	for _, tc := range []struct {
		name      string
		target    int64
		batchRows int
	}{
		{"default", 0, 0},
		{"one row per group", 1, 0},
		{"a few rows per group", 3 * perRow[0], 0},
		{"a few rows per group, batches of 2", 3 * perRow[0], 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachBackend(t, func(t *testing.T, st storage.Store) {
				ctx := context.Background()
				e := writeRowGroups(t, st, "seg.parquet", segmentsFooter("pq"), segs, tc.target)
				groups := rowGroupRows(t, mustGet(t, st, e.Key))
				want := []int64{int64(len(segs))}
				if tc.target > 0 {
					want = wantGroups(tc.target)
				}
				if !reflect.DeepEqual(groups, want) {
					t.Fatalf("row groups of %v rows, want %v", groups, want)
				}
				if tc.target > 0 && len(groups) < 2 {
					t.Fatalf("one row group: the case tests nothing")
				}

				rows, err := storage.ReadRows[schemas.Segment](ctx, st, e)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(rows, segs) {
					t.Fatal("ReadRows differs from the rows written")
				}

				mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
				defer mem.AssertSize(t, 0)
				f, err := storage.OpenFile(ctx, st, e, mem)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				var got []schemas.Segment
				rg, inGroup := 0, int64(0)
				for b, err := range f.Batches(ctx, tc.batchRows) {
					if err != nil {
						t.Fatal(err)
					}
					if tc.batchRows > 0 && b.NumRows() > int64(tc.batchRows) {
						t.Fatalf("batch of %d rows, asked for %d", b.NumRows(), tc.batchRows)
					}
					if inGroup += b.NumRows(); inGroup > groups[rg] {
						t.Fatalf("a batch spans row groups %d and %d", rg, rg+1)
					} else if inGroup == groups[rg] {
						rg, inGroup = rg+1, 0
					}
					part, err := storage.DecodeBatch[schemas.Segment](b, nil)
					if err != nil {
						t.Fatal(err)
					}
					got = append(got, part...)
				}
				if rg != len(groups) {
					t.Fatalf("batches ended in row group %d of %d", rg, len(groups))
				}
				if !reflect.DeepEqual(got, segs) {
					t.Fatal("batches differ from the rows written")
				}
			})
		})
	}
}

// TestBatchesDefaultSize: left to Batches, a batch of wide rows (segments
// with MoE routing) holds a few rows, and one of narrow rows (rollouts) the
// whole row group.
func TestBatchesDefaultSize(t *testing.T) {
	ctx := context.Background()
	segs, _ := benchSegments() // 96 rows of about 1.6 MB to decode each
	for _, tc := range []struct {
		name    string
		table   schemas.Table
		write   func(st storage.Store, key string, foot schemas.Footer) storage.FileEntry
		maxRows int64
		minRows int64
	}{
		{"segments", schemas.TableSegments, func(st storage.Store, key string, foot schemas.Footer) storage.FileEntry {
			return writeRowGroups(t, st, key, foot, segs, 0)
		}, 4, 1},
		{"rollouts", schemas.TableRollouts, func(st storage.Store, key string, foot schemas.Footer) storage.FileEntry {
			return writeRowGroups(t, st, key, foot, pqIteration.Rollouts, 0)
		}, int64(len(pqIteration.Rollouts)), int64(len(pqIteration.Rollouts))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newFileStore(t)
			foot := schemas.Footer{SchemaVersion: schemas.Version, Table: tc.table, RunID: "bench", CodeVersion: "test"}
			e := tc.write(st, fmt.Sprintf("%s.parquet", tc.table), foot)
			f, err := storage.OpenFile(ctx, st, e, memory.DefaultAllocator)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var n int64
			for b, err := range f.Batches(ctx, 0) {
				if err != nil {
					t.Fatal(err)
				}
				if b.NumRows() > tc.maxRows || b.NumRows() < min(tc.minRows, e.Rows-n) {
					t.Fatalf("batch of %d rows, want %d to %d", b.NumRows(), tc.minRows, tc.maxRows)
				}
				n += b.NumRows()
			}
			if n != e.Rows {
				t.Fatalf("read %d rows of %d", n, e.Rows)
			}
		})
	}
}
