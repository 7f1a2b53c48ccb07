package transforms

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/schemas/synth"
	"github.com/legorl/legorl/storage"
)

// parquetOf encodes rows as one legorl Parquet file (footer and all), the
// way the sinks write them.
func parquetOf[R any](t *testing.T, rows []R) []byte {
	t.Helper()
	var table schemas.Table
	switch any(*new(R)).(type) {
	case schemas.Rollout:
		table = schemas.TableRollouts
	case schemas.Segment:
		table = schemas.TableSegments
	case schemas.Step:
		table = schemas.TableSteps
	case schemas.TrainStep:
		table = schemas.TableTrainSteps
	}
	dir := t.TempDir()
	st, err := storage.Open(context.Background(), "file://"+dir, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	footer := schemas.Footer{SchemaVersion: schemas.Version, Table: table, RunID: "r", ConfigHash: "c", PolicyVersion: 1, CodeVersion: "test"}
	if _, err := storage.WriteFile(context.Background(), st, "f.parquet", footer, rows); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "f.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestValidateRows(t *testing.T) {
	it := synth.Run(synth.Config{}.Defaults())[0]
	rollouts := append([]schemas.Rollout(nil), it.Rollouts...)
	rollouts[1].RolloutID = "" // invalid
	segments := append([]schemas.Segment(nil), it.Segments...)
	segments[2].Logprobs = segments[2].Logprobs[:0] // lengths disagree
	tests := []struct {
		name    string
		table   schemas.Table
		data    []byte
		rows    int64
		bad     string // prefix of the first invalid row's message; "" when all are valid
		wantErr string
	}{
		{"rollouts", schemas.TableRollouts, parquetOf(t, it.Rollouts), int64(len(it.Rollouts)), "", ""},
		{"invalid rollout", schemas.TableRollouts, parquetOf(t, rollouts), int64(len(rollouts)), "row 1: ", ""},
		{"segments", schemas.TableSegments, parquetOf(t, it.Segments), int64(len(it.Segments)), "", ""},
		{"invalid segment", schemas.TableSegments, parquetOf(t, segments), int64(len(segments)), "row 2: ", ""},
		{"steps", schemas.TableSteps, parquetOf(t, it.Steps), int64(len(it.Steps)), "", ""},
		{"train steps", schemas.TableTrainSteps, parquetOf(t, it.TrainSteps), int64(len(it.TrainSteps)), "", ""},
		{"not parquet", schemas.TableSteps, []byte("PAR1 not really"), 0, "", "parquet"},
		{"unknown table", schemas.Table("weights"), nil, 0, "", "unknown table weights"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ids []string
			n, bad, err := validateRows(tt.table, tt.data, func(id string) { ids = append(ids, id) })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(strings.ToLower(err.Error()), tt.wantErr) {
					t.Fatalf("err = %v, want one naming %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || n != tt.rows || (tt.bad == "") != (bad == "") || !strings.HasPrefix(bad, tt.bad) {
				t.Fatalf("validateRows = %d, %q, %v; want %d rows, bad %q", n, bad, err, tt.rows, tt.bad)
			}
			if tt.table == schemas.TableRollouts && len(ids) != len(rollouts) {
				t.Errorf("rolloutID heard %d ids, want one per row (%d)", len(ids), len(rollouts))
			}
		})
	}
}
