package storage_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	pqgo "github.com/parquet-go/parquet-go"

	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/schemas/synth"
	"github.com/legorl/legorl/storage"
)

// pqIteration is a small synthetic iteration of an MoE run: every table
// has rows, every list column has values.
var pqIteration = synth.Run(synth.Config{
	RunID: "pq", Seed: 3, Iterations: 1, Tasks: 3, GroupSize: 3,
	PromptTokens: 40, TurnTokens: 12, ObsTokens: 6, MoELayers: 3, TopK: 2,
})[0]

// TestParquetTables writes every table with WriteFile (parquet-go) and
// reads it back with arrow-go: schema, footer, every value, encodings.
func TestParquetTables(t *testing.T) {
	it := pqIteration
	for _, table := range schemas.Tables() {
		t.Run(string(table), func(t *testing.T) {
			switch table {
			case schemas.TableRollouts:
				checkTable(t, table, it.Rollouts)
			case schemas.TableSegments:
				checkTable(t, table, it.Segments)
			case schemas.TableSteps:
				checkTable(t, table, it.Steps)
			case schemas.TableTrainSteps:
				checkTable(t, table, it.TrainSteps)
			case schemas.TableReplay:
				checkTable(t, table, it.Replays)
			default:
				t.Fatalf("no test rows for table %s", table)
			}
		})
	}
}

func checkTable[T any](t *testing.T, table schemas.Table, rows []T) {
	ctx := context.Background()
	if len(rows) < 2 {
		t.Fatalf("only %d rows", len(rows))
	}
	st := newFileStore(t)
	footer := schemas.Footer{
		SchemaVersion: schemas.Version, Table: table, RunID: "pq",
		ConfigHash: "c0ffee", PolicyVersion: 42, CodeVersion: "v1.2.3-test",
	}
	key := "runs/pq/data/" + string(table) + "/iter-000000/rollout-shard-0.parquet"
	e, err := storage.WriteFile(ctx, st, key, footer, rows)
	if err != nil {
		t.Fatal(err)
	}
	data := mustGet(t, st, key)
	sum := sha256.Sum256(data)
	if want := (storage.FileEntry{Table: string(table), Key: key, Size: int64(len(data)), Rows: int64(len(rows)), SHA256: hex.EncodeToString(sum[:])}); e != want {
		t.Fatalf("entry %+v, want %+v", e, want)
	}

	// The typed read gives back the rows written.
	back, err := storage.ReadRows[T](ctx, st, e)
	if err != nil {
		t.Fatalf("ReadRows: %v", err)
	}
	if fmt.Sprintf("%+v", back) != fmt.Sprintf("%+v", rows) {
		t.Errorf("ReadRows gave other rows:\n got %+v\nwant %+v", back, rows)
	}
	if table != schemas.TableSteps {
		if _, err := storage.ReadRows[schemas.Step](ctx, st, e); err == nil || !strings.Contains(err.Error(), "columns") && !strings.Contains(err.Error(), "column 0") {
			t.Errorf("ReadRows of %s as steps: %v, want a row type error", table, err)
		}
	}
	bad := e
	bad.SHA256 = strings.Repeat("0", 64)
	if _, err := storage.ReadRows[T](ctx, st, bad); !errors.Is(err, storage.ErrChecksum) {
		t.Errorf("ReadRows with a wrong sha256: %v, want ErrChecksum", err)
	}

	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()

	// Footer metadata.
	kv := map[string]string{}
	for _, m := range pf.MetaData().KeyValueMetadata() {
		if m.Value != nil {
			kv[m.Key] = *m.Value
		}
	}
	if got, err := schemas.ParseFooter(kv); err != nil || got != footer {
		t.Fatalf("footer: %+v, %v; want %+v", got, err, footer)
	}

	// Compression and encodings, per column chunk.
	floatLists := 0
	sch := pf.MetaData().Schema
	for g := range pf.NumRowGroups() {
		rg := pf.MetaData().RowGroup(g)
		for c := range rg.NumColumns() {
			cc, err := rg.ColumnChunk(c)
			if err != nil {
				t.Fatal(err)
			}
			path := cc.PathInSchema().String()
			if cc.Compression() != compress.Codecs.Zstd {
				t.Errorf("column %s is %s, want ZSTD", path, cc.Compression())
			}
			col := sch.Column(c)
			isFloat := col.PhysicalType() == parquet.Types.Float || col.PhysicalType() == parquet.Types.Double
			if isFloat && col.MaxRepetitionLevel() > 0 {
				floatLists++
				if !slices.Contains(cc.Encodings(), parquet.Encodings.ByteStreamSplit) {
					t.Errorf("float list column %s has encodings %v, want BYTE_STREAM_SPLIT", path, cc.Encodings())
				}
			}
		}
	}
	if table == schemas.TableSegments && floatLists == 0 {
		t.Error("segments has no float list column (logprobs)")
	}

	// The Arrow schema readers see.
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 4}, mem)
	if err != nil {
		t.Fatal(err)
	}
	got, err := fr.Schema()
	if err != nil {
		t.Fatal(err)
	}
	want, err := schemas.ArrowSchema(table)
	if err != nil {
		t.Fatal(err)
	}
	if err := storage.SameColumns(want, got); err != nil {
		t.Fatalf("arrow schema of the file: %v\ngot:  %s\nwant: %s", err, got, want)
	}

	// Every value, by column name, against the row struct's parquet tags.
	fields := parquetFields[T]()
	if len(fields) != len(want.Fields()) {
		t.Fatalf("row type has %d columns, schema %d", len(fields), len(want.Fields()))
	}
	rr, err := fr.GetRecordReader(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Release()
	row := 0
	nonEmpty := map[string]bool{}
	for rr.Next() {
		rec := rr.RecordBatch()
		for i := range int(rec.NumRows()) {
			rv := reflect.ValueOf(rows[row+i])
			for c, f := range rec.Schema().Fields() {
				gotV := arrowValue(t, rec.Column(c), i)
				wantV := goValue(t, rv.Field(fields[f.Name]))
				if !reflect.DeepEqual(gotV, wantV) {
					t.Fatalf("row %d column %s: read %v, wrote %v", row+i, f.Name, gotV, wantV)
				}
				if l, ok := gotV.([]any); ok && len(l) > 0 {
					nonEmpty[f.Name] = true
				}
			}
		}
		row += int(rec.NumRows())
	}
	if err := rr.Err(); err != nil {
		t.Fatal(err)
	}
	if row != len(rows) {
		t.Fatalf("read %d rows, wrote %d", row, len(rows))
	}
	if table == schemas.TableSegments {
		for _, c := range []string{"prompt_token_ids", "completion_token_ids", "loss_mask", "logprobs", "routing_experts"} {
			if !nonEmpty[c] {
				t.Errorf("list column %s was never checked with values", c)
			}
		}
	}
}

// parquetFields maps parquet column names to the field indexes of T.
func parquetFields[T any]() map[string]int {
	rt := reflect.TypeFor[T]()
	out := map[string]int{}
	for i := range rt.NumField() {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("parquet"), ",")
		out[name] = i
	}
	return out
}

// goValue normalizes a row field: strings, int64, float64, bool, []any.
func goValue(t *testing.T, v reflect.Value) any {
	switch v.Kind() {
	case reflect.String:
		return v.String()
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int()
	case reflect.Float32, reflect.Float64:
		return v.Float()
	case reflect.Bool:
		return v.Bool()
	case reflect.Slice:
		out := make([]any, v.Len())
		for i := range out {
			out[i] = goValue(t, v.Index(i))
		}
		return out
	}
	t.Fatalf("no test conversion for %s", v.Type())
	return nil
}

// arrowValue normalizes an Arrow value as goValue does.
func arrowValue(t *testing.T, a arrow.Array, i int) any {
	if a.IsNull(i) {
		t.Fatalf("null value in a %s column", a.DataType())
	}
	switch a := a.(type) {
	case *array.String:
		return a.Value(i)
	case *array.Int8:
		return int64(a.Value(i))
	case *array.Int16:
		return int64(a.Value(i))
	case *array.Int32:
		return int64(a.Value(i))
	case *array.Int64:
		return a.Value(i)
	case *array.Float32:
		return float64(a.Value(i))
	case *array.Float64:
		return a.Value(i)
	case *array.Boolean:
		return a.Value(i)
	case *array.List:
		start, end := a.ValueOffsets(i)
		out := make([]any, end-start)
		for j := range out {
			out[j] = arrowValue(t, a.ListValues(), int(start)+j)
		}
		return out
	}
	t.Fatalf("no test conversion for %s", a.DataType())
	return nil
}

// TestRoundTrip is the reader's path: write, commit, find the file through
// the manifest, check it and read it in batches.
func TestRoundTrip(t *testing.T) {
	forEachBackend(t, func(t *testing.T, st storage.Store) {
		ctx := context.Background()
		ref := storage.ManifestRef{RunID: "pq", Iteration: 0, Stage: "rollout"}
		segs := pqIteration.Segments
		half := len(segs) / 2
		var entries []storage.FileEntry
		for i, part := range [][]schemas.Segment{segs[:half], segs[half:]} {
			e, err := storage.WriteFile(ctx, st, ref.DataKey("segments", fmt.Sprintf("shard-%d", i)), segmentsFooter("pq"), part)
			if err != nil {
				t.Fatal(err)
			}
			entries = append(entries, e)
		}
		mustCommit(t, st, ref, entries...)
		files, err := storage.TableFiles(ctx, st, "pq", "segments")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(files, entries) {
			t.Fatalf("table files %+v, want %+v", files, entries)
		}
		mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
		defer mem.AssertSize(t, 0)
		var ids []string
		for _, fe := range files {
			f, err := storage.OpenFile(ctx, st, fe, mem)
			if err != nil {
				t.Fatal(err)
			}
			if f.NumRows() != fe.Rows || f.Footer != segmentsFooter("pq") || f.Name != fe.Key {
				t.Fatalf("file %s: %d rows, footer %+v", f.Name, f.NumRows(), f.Footer)
			}
			for b, err := range f.Batches(ctx, 2) {
				if err != nil {
					t.Fatal(err)
				}
				if b.NumRows() > 2 {
					t.Fatalf("batch of %d rows, asked for 2", b.NumRows())
				}
				col := b.Column(2).(*array.String) // rollout_id
				for i := range col.Len() {
					ids = append(ids, col.Value(i))
				}
			}
			f.Close()
		}
		var want []string
		for _, s := range segs {
			want = append(want, s.RolloutID)
		}
		if !slices.Equal(ids, want) {
			t.Fatalf("rollout ids %q, want %q", ids, want)
		}
	})
}

func TestBatchesStopEarly(t *testing.T) {
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	f, err := storage.DecodeFile("x.parquet", fileBytes(t, schemas.TableSegments, pqIteration.Segments), mem)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	for b, err := range f.Batches(ctx, 1) {
		if err != nil {
			t.Fatal(err)
		}
		b.Retain() // kept past the loop, then released
		defer b.Release()
		if n++; n == 2 {
			break
		}
	}
	if n != 2 {
		t.Fatalf("%d batches", n)
	}
	// A cancelled context ends the sequence with the context's error.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	var last error
	for _, err := range f.Batches(cctx, 1) {
		last = err
	}
	if last != nil && !errors.Is(last, context.Canceled) {
		t.Fatalf("batches under a cancelled context: %v", last)
	}
}

// TestOpenFileWrongEntry opens a good file through manifest entries that
// disagree with it.
func TestOpenFileWrongEntry(t *testing.T) {
	ctx := context.Background()
	st := newFileStore(t)
	good, err := storage.WriteFile(ctx, st, "runs/pq/x.parquet", segmentsFooter("pq"), pqIteration.Segments)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		mutate func(e *storage.FileEntry)
		want   error
	}{
		{"other table", func(e *storage.FileEntry) { e.Table = "rollouts" }, storage.ErrCorrupt},
		{"unknown table", func(e *storage.FileEntry) { e.Table = "" }, storage.ErrCorrupt},
		{"more rows", func(e *storage.FileEntry) { e.Rows++ }, storage.ErrCorrupt},
		{"no rows", func(e *storage.FileEntry) { e.Rows = 0 }, storage.ErrCorrupt},
		{"smaller size", func(e *storage.FileEntry) { e.Size-- }, storage.ErrChecksum},
		{"larger size", func(e *storage.FileEntry) { e.Size++ }, storage.ErrChecksum},
		{"negative size", func(e *storage.FileEntry) { e.Size = -1 }, storage.ErrCorrupt},
		{"oversized", func(e *storage.FileEntry) { e.Size = storage.MaxFileBytes + 1 }, storage.ErrCorrupt},
		{"other sha256", func(e *storage.FileEntry) { e.SHA256 = strings.Repeat("0", 64) }, storage.ErrChecksum},
		{"missing file", func(e *storage.FileEntry) { e.Key = "runs/pq/y.parquet" }, storage.ErrNotFound},
		{"bad key", func(e *storage.FileEntry) { e.Key = "../x" }, storage.ErrInvalidKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
			defer mem.AssertSize(t, 0)
			e := good
			tt.mutate(&e)
			f, err := storage.OpenFile(ctx, st, e, mem)
			if err == nil {
				f.Close()
				t.Fatal("OpenFile accepted the entry")
			}
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), e.Key) {
				t.Fatalf("got %v, want %v naming %s", err, tt.want, e.Key)
			}
		})
	}
}

func TestWriterRefuses(t *testing.T) {
	ctx := context.Background()
	footer := segmentsFooter("pq")
	tests := []struct {
		name  string
		write func(st storage.Putter) error
		want  error // nil: any error
	}{
		{"invalid key", func(st storage.Putter) error {
			_, err := storage.WriteFile(ctx, st, "a//b", footer, pqIteration.Segments)
			return err
		}, storage.ErrInvalidKey},
		{"unknown table", func(st storage.Putter) error {
			f := footer
			f.Table = "nope"
			_, err := storage.WriteFile(ctx, st, "k", f, pqIteration.Segments)
			return err
		}, schemas.ErrUnknownTable},
		{"newer schema version", func(st storage.Putter) error {
			f := footer
			f.SchemaVersion = schemas.Version + 1
			_, err := storage.WriteFile(ctx, st, "k", f, pqIteration.Segments)
			return err
		}, schemas.ErrSchemaVersion},
		{"no run id", func(st storage.Putter) error {
			f := footer
			f.RunID = ""
			_, err := storage.WriteFile(ctx, st, "k", f, pqIteration.Segments)
			return err
		}, schemas.ErrEmpty},
		// A file whose rows are not its footer's table would be committed
		// and then fail every reader.
		{"rows of another table", func(st storage.Putter) error {
			_, err := storage.WriteFile(ctx, st, "k", footer, pqIteration.Steps)
			return err
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newFileStore(t)
			err := tt.write(st)
			if err == nil || (tt.want != nil && !errors.Is(err, tt.want)) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			if keys := mustList(t, st, ""); len(keys) != 0 {
				t.Fatalf("store holds %q", keys)
			}
		})
	}
}

// fileBytes writes rows as a legorl file of table and returns its bytes.
func fileBytes[T any](t testing.TB, table schemas.Table, rows []T) []byte {
	t.Helper()
	st := newFileStore(t)
	footer := schemas.Footer{SchemaVersion: schemas.Version, Table: table, RunID: "pq", CodeVersion: "test"}
	if _, err := storage.WriteFile(context.Background(), st, "f.parquet", footer, rows); err != nil {
		t.Fatal(err)
	}
	return mustGet(t, st, "f.parquet")
}

// plainParquet writes steps rows with parquet-go alone, with key/value
// metadata kv.
func plainParquet(t testing.TB, kv map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	var opts []pqgo.WriterOption
	for k, v := range kv {
		opts = append(opts, pqgo.KeyValueMetadata(k, v))
	}
	w := pqgo.NewGenericWriter[schemas.Step](&buf, opts...)
	if _, err := w.Write(pqIteration.Steps); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
