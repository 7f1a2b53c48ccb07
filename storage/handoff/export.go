package handoff

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/storage"
)

// Summary counts what Export wrote.
type Summary struct {
	Files, Samples, Masked int
	Paths                  []string
}

// Export reads a run's committed rollouts and segments from st and writes
// them in format under dir, one file per iteration named ITERATION.pt
// (slime) or ITERATION.jsonl (verl). Each file is written whole or not at
// all (a temporary file renamed into place); dir is created if missing.
func Export(ctx context.Context, st storage.Store, run string, format Format, dir string) (Summary, error) {
	var sum Summary
	rollouts, err := readTable[schemas.Rollout](ctx, st, run, string(schemas.TableRollouts))
	if err != nil {
		return sum, err
	}
	segments, err := readTable[schemas.Segment](ctx, st, run, string(schemas.TableSegments))
	if err != nil {
		return sum, err
	}
	iters, err := Join(rollouts, segments)
	if err != nil {
		return sum, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return sum, fmt.Errorf("handoff: %w", err)
	}
	for _, samples := range iters {
		it := int(samples[0].Segment.Iteration)
		var buf bytes.Buffer
		if format == Slime {
			err = WriteSlime(&buf, it, samples)
		} else {
			err = WriteVerl(&buf, samples)
		}
		if err != nil {
			return sum, err
		}
		path := filepath.Join(dir, strconv.Itoa(it)+format.Ext())
		if err := writeFile(path, buf.Bytes()); err != nil {
			return sum, err
		}
		sum.Files++
		sum.Paths = append(sum.Paths, path)
		sum.Samples += len(samples)
		for _, s := range samples {
			if s.masked() {
				sum.Masked++
			}
		}
	}
	return sum, nil
}

// readTable reads every committed file of a table of run.
func readTable[T any](ctx context.Context, st storage.Store, run, table string) ([]T, error) {
	files, err := storage.TableFiles(ctx, st, run, table)
	if err != nil {
		return nil, err
	}
	var out []T
	for _, f := range files {
		rows, err := storage.ReadRows[T](ctx, st, f)
		if err != nil {
			return nil, err
		}
		out = append(out, rows...)
	}
	return out, nil
}

// writeFile writes data to a temporary file beside path and renames it
// into place, so path holds all of data or its old content.
func writeFile(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("handoff: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("handoff: %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("handoff: %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("handoff: %w", err)
	}
	return nil
}
