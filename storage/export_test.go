package storage

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"strings"
	"testing"

	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/schemas/synth"
)

// TestExport: both formats write every row of every file, columns in
// schema order (JSONL keys, the CSV header), strings as text in CSV and
// lists as JSON; an unknown format is refused before anything is read.
func TestExport(t *testing.T) {
	ctx := context.Background()
	st, err := NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	it := synth.Run(synth.Config{RunID: "ex", Seed: 1, Iterations: 1, Tasks: 2, GroupSize: 2, Turns: 2, PromptTokens: 4, TurnTokens: 3, ObsTokens: 2, VocabSize: 100})[0]
	foot := schemas.Footer{SchemaVersion: schemas.Version, Table: schemas.TableSegments, RunID: "ex", ConfigHash: "c", CodeVersion: "t"}
	var files []FileEntry
	for i, part := range [][]schemas.Segment{it.Segments[:1], it.Segments[1:]} {
		e, err := WriteFile(ctx, st, "runs/ex/data/segments/iter-000000/rollout-"+string(rune('a'+i))+".parquet", foot, part)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, e)
	}
	sch, err := schemas.ArrowSchema(schemas.TableSegments)
	if err != nil {
		t.Fatal(err)
	}
	cols := sch.Fields()
	lp, id := sch.FieldIndices("logprobs")[0], sch.FieldIndices("rollout_id")[0]
	for _, format := range []string{"jsonl", "csv"} {
		t.Run(format, func(t *testing.T) {
			var b bytes.Buffer
			n, err := Export(ctx, st, files, format, &b)
			if err != nil || n != int64(len(it.Segments)) {
				t.Fatalf("%d rows (%v), want %d", n, err, len(it.Segments))
			}
			if format == "csv" {
				recs, err := csv.NewReader(&b).ReadAll()
				if err != nil || len(recs) != len(it.Segments)+1 {
					t.Fatalf("%d records (%v)", len(recs), err)
				}
				for c, f := range cols {
					if recs[0][c] != f.Name {
						t.Errorf("header column %d is %q, want %q", c, recs[0][c], f.Name)
					}
				}
				if recs[1][id] != it.Segments[0].RolloutID || !strings.HasPrefix(recs[1][lp], "[") {
					t.Errorf("first row %q", recs[1])
				}
				return
			}
			lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
			if len(lines) != len(it.Segments) {
				t.Fatalf("%d lines", len(lines))
			}
			dec := json.NewDecoder(strings.NewReader(lines[0]))
			dec.Token() // {
			for c := 0; dec.More(); c++ {
				k, _ := dec.Token()
				var v json.RawMessage
				if err := dec.Decode(&v); err != nil {
					t.Fatal(err)
				}
				if k != cols[c].Name {
					t.Errorf("key %d is %v, want %s", c, k, cols[c].Name)
				}
			}
			var row struct {
				RolloutID string    `json:"rollout_id"`
				Logprobs  []float32 `json:"logprobs"`
			}
			if err := json.Unmarshal([]byte(lines[len(lines)-1]), &row); err != nil {
				t.Fatal(err)
			}
			last := it.Segments[len(it.Segments)-1]
			if row.RolloutID != last.RolloutID || len(row.Logprobs) != len(last.Logprobs) {
				t.Errorf("last row %+v, want rollout %s with %d logprobs", row, last.RolloutID, len(last.Logprobs))
			}
		})
	}
	if _, err := Export(ctx, st, files, "xml", &bytes.Buffer{}); err == nil {
		t.Error("format xml accepted")
	}
}
