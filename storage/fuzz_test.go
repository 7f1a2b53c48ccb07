package storage_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/schemas/synth"
	"github.com/legorl/legorl/storage"
)

// FuzzDecodeFile feeds DecodeFile arbitrary bytes, seeded with small valid
// files of every table and truncations of them. It must never panic: a
// file either decodes and every batch reads, or it fails with ErrCorrupt
// naming the file.
//
//	go test -run '^$' -fuzz FuzzDecodeFile -fuzztime 60s ./storage
func FuzzDecodeFile(f *testing.F) {
	it := synth.Run(synth.Config{
		RunID: "fz", Iterations: 1, Tasks: 1, GroupSize: 2, Turns: 2,
		PromptTokens: 6, TurnTokens: 4, ObsTokens: 2, MoELayers: 1, TopK: 2,
	})[0]
	seeds := [][]byte{
		fileBytes(f, schemas.TableRollouts, it.Rollouts),
		fileBytes(f, schemas.TableSegments, it.Segments),
		fileBytes(f, schemas.TableSteps, it.Steps),
		fileBytes(f, schemas.TableTrainSteps, it.TrainSteps[:1]),
	}
	for _, b := range seeds {
		f.Add(b)
		f.Add(b[:len(b)/2])
		f.Add(b[:len(b)-1])
		f.Add(b[:len(b)-8])
		f.Add(b[len(b)/2:])
	}
	f.Add([]byte("PAR1"))
	f.Add([]byte("PAR1\x00\x00\x00\x00PAR1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ctx := context.Background()
		mem := memory.NewGoAllocator()
		file, err := storage.DecodeFile("fuzz.parquet", data, mem)
		if err != nil {
			checkCorrupt(t, err)
			return
		}
		defer file.Close()
		for b, err := range file.Batches(ctx, 3) {
			if err != nil {
				checkCorrupt(t, err)
				return
			}
			if b.NumCols() != int64(file.Schema.NumFields()) {
				t.Fatalf("batch has %d columns, schema %d", b.NumCols(), file.Schema.NumFields())
			}
		}
	})
}

func checkCorrupt(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, storage.ErrCorrupt) || !strings.Contains(err.Error(), "fuzz.parquet") {
		t.Fatalf("got %v, want ErrCorrupt naming fuzz.parquet", err)
	}
}
