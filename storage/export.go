package storage

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Export writes every row of the files, each verified as OpenFile does,
// in format "jsonl" (one JSON object per row, columns in schema order) or
// "csv" (a header of column names, then strings and booleans as text and
// every other value, lists included, as JSON). It returns the number of
// rows written.
func Export(ctx context.Context, st Getter, files []FileEntry, format string, w io.Writer) (int64, error) {
	var rows int64
	if format != "jsonl" && format != "csv" {
		return 0, fmt.Errorf("storage: unknown export format %q: want jsonl or csv", format)
	}
	var cw *csv.Writer
	if format == "csv" {
		cw = csv.NewWriter(w)
	}
	for i, fe := range files {
		f, err := OpenFile(ctx, st, fe, memory.DefaultAllocator)
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
