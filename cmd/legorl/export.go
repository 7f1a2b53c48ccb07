package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/storage"
)

func runExport(ctx context.Context, env *environ, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("export", stderr)
	var sf storeFlags
	sf.register(fs, env)
	run := fs.String("run", "", "run id (required)")
	table := fs.String("table", "", "table: rollouts, segments, steps or train_steps (required)")
	format := fs.String("format", "jsonl", "output format: jsonl or csv")
	out := fs.String("out", "-", "output file; - for stdout. A file is written whole or not at all")
	if err := parseFlags(fs, stderr, args); err != nil {
		return err
	}
	if *run == "" || *table == "" {
		return fmt.Errorf("--run and --table are required (see legorl export -h)")
	}
	if !schemas.Table(*table).Valid() {
		return fmt.Errorf("unknown table %q: want rollouts, segments, steps or train_steps", *table)
	}
	if *format != "jsonl" && *format != "csv" {
		return fmt.Errorf("unknown format %q: want jsonl or csv", *format)
	}
	if err := storage.CheckName("run id", *run); err != nil {
		return err
	}
	st, err := sf.open(ctx, env, false)
	if err != nil {
		return err
	}
	files, err := storage.TableFiles(ctx, st, *run, *table)
	if err != nil {
		return err
	}
	var n int64
	err = writeOutput(*out, stdout, func(w io.Writer) (err error) {
		n, err = exportFiles(ctx, st, files, *format, w)
		return err
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "legorl export: %d rows of %s from %d files of run %s in %s\n", n, *table, len(files), *run, st.URI())
	return nil
}

// writeOutput runs write against stdout, or against a temporary file that
// is renamed to path only when write succeeds.
func writeOutput(path string, stdout io.Writer, write func(io.Writer) error) error {
	if path == "-" {
		bw := bufio.NewWriterSize(stdout, 1<<20)
		if err := write(bw); err != nil {
			return err
		}
		return bw.Flush()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("output %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	bw := bufio.NewWriterSize(tmp, 1<<20)
	if err := write(bw); err != nil {
		tmp.Close()
		return err
	}
	if err := bw.Flush(); err != nil {
		tmp.Close()
		return fmt.Errorf("output %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("output %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("output %s: %w", path, err)
	}
	return nil
}

// exportFiles writes every row of the files, verified against their
// manifest checksums, in the given format. It returns the row count.
func exportFiles(ctx context.Context, st storage.Getter, files []storage.FileEntry, format string, w io.Writer) (int64, error) {
	var rows int64
	var cw *csv.Writer
	if format == "csv" {
		cw = csv.NewWriter(w)
	}
	for i, fe := range files {
		f, err := storage.OpenFile(ctx, st, fe, memory.DefaultAllocator)
		if err != nil {
			return rows, err
		}
		if cw != nil && i == 0 {
			if err := cw.Write(columnNames(f.Schema)); err != nil {
				f.Close()
				return rows, err
			}
		}
		for rec, err := range f.Batches(ctx, 0) {
			if err != nil {
				f.Close()
				return rows, err
			}
			if cw != nil {
				err = writeCSV(cw, rec)
			} else {
				err = writeJSONL(w, rec)
			}
			if err != nil {
				f.Close()
				return rows, fmt.Errorf("write: %w", err)
			}
			rows += rec.NumRows()
		}
		f.Close()
	}
	if cw != nil {
		cw.Flush()
		return rows, cw.Error()
	}
	return rows, nil
}

func columnNames(s *arrow.Schema) []string {
	names := make([]string, s.NumFields())
	for i, f := range s.Fields() {
		names[i] = f.Name
	}
	return names
}

// writeJSONL writes one JSON object per row, columns in schema order.
func writeJSONL(w io.Writer, rec arrow.RecordBatch) error {
	var buf bytes.Buffer
	names := make([][]byte, rec.NumCols())
	for c := range names {
		names[c], _ = json.Marshal(rec.ColumnName(c))
	}
	for r := 0; r < int(rec.NumRows()); r++ {
		buf.Reset()
		buf.WriteByte('{')
		for c := 0; c < int(rec.NumCols()); c++ {
			if c > 0 {
				buf.WriteByte(',')
			}
			buf.Write(names[c])
			buf.WriteByte(':')
			if err := appendJSON(&buf, rec.Column(c), r); err != nil {
				return fmt.Errorf("column %s row %d: %w", rec.ColumnName(c), r, err)
			}
		}
		buf.WriteString("}\n")
		if _, err := w.Write(buf.Bytes()); err != nil {
			return err
		}
	}
	return nil
}

func appendJSON(buf *bytes.Buffer, col arrow.Array, r int) error {
	b, err := json.Marshal(col.GetOneForMarshal(r))
	if err != nil {
		return err
	}
	buf.Write(b)
	return nil
}

// writeCSV writes scalar columns as text and list columns as JSON arrays.
func writeCSV(cw *csv.Writer, rec arrow.RecordBatch) error {
	row := make([]string, rec.NumCols())
	var buf bytes.Buffer
	for r := 0; r < int(rec.NumRows()); r++ {
		for c := range row {
			switch col := rec.Column(c).(type) {
			case *array.String:
				row[c] = col.Value(r)
			case *array.Boolean:
				row[c] = strconv.FormatBool(col.Value(r))
			default:
				buf.Reset()
				if err := appendJSON(&buf, col, r); err != nil {
					return fmt.Errorf("column %s row %d: %w", rec.ColumnName(c), r, err)
				}
				row[c] = buf.String()
			}
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	return nil
}
