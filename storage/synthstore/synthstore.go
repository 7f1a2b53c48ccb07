// Package synthstore writes synthetic iterations (schemas/synth) into a
// store the way the rollout pipeline and the trainer write real ones: the
// rollout stage's rollouts, segments (in two shards) and steps under one
// manifest commit, and train_steps under the train stage's. For tests,
// benchmarks and the foundation demo (`legorl demo`).
package synthstore

import (
	"context"
	"fmt"

	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/schemas/synth"
	"github.com/legorl/legorl/storage"
)

// Options label the files written.
type Options struct {
	// ConfigHash and CodeVersion go into every file's footer; the policy
	// version is the iteration.
	ConfigHash  string
	CodeVersion string
	// VocabSize bounds the segments' token ids in validation.
	VocabSize int
}

// Validate checks every row of an iteration against its schema.
func Validate(it synth.Iteration, vocab int) error {
	for i := range it.Rollouts {
		if err := it.Rollouts[i].Validate(); err != nil {
			return err
		}
	}
	for i := range it.Segments {
		if err := it.Segments[i].Validate(vocab); err != nil {
			return err
		}
	}
	for i := range it.Steps {
		if err := it.Steps[i].Validate(); err != nil {
			return err
		}
	}
	for i := range it.TrainSteps {
		if err := it.TrainSteps[i].Validate(); err != nil {
			return err
		}
	}
	return nil
}

// WriteIteration validates iteration iter of run and writes it to st:
// the rollout stage's files under one manifest commit, then, when there
// are train steps, train_steps under the train stage's. It returns the
// entries of the files written, in that order.
func WriteIteration(ctx context.Context, st storage.Store, run string, iter int, it synth.Iteration, o Options) ([]storage.FileEntry, error) {
	if err := Validate(it, o.VocabSize); err != nil {
		return nil, fmt.Errorf("iteration %d: %w", iter, err)
	}
	foot := func(t schemas.Table) schemas.Footer {
		return schemas.Footer{SchemaVersion: schemas.Version, Table: t, RunID: run, ConfigHash: o.ConfigHash,
			PolicyVersion: int64(iter), CodeVersion: o.CodeVersion}
	}
	ref := storage.ManifestRef{RunID: run, Iteration: iter, Stage: schemas.StageRollout}
	half := len(it.Segments) / 2
	var files []storage.FileEntry
	for _, w := range []struct {
		table schemas.Table
		shard string
		write func(key string, f schemas.Footer) (storage.FileEntry, error)
	}{
		{schemas.TableRollouts, "shard-000", func(k string, f schemas.Footer) (storage.FileEntry, error) {
			return storage.WriteFile(ctx, st, k, f, it.Rollouts)
		}},
		{schemas.TableSegments, "shard-000", func(k string, f schemas.Footer) (storage.FileEntry, error) {
			return storage.WriteFile(ctx, st, k, f, it.Segments[:half])
		}},
		{schemas.TableSegments, "shard-001", func(k string, f schemas.Footer) (storage.FileEntry, error) {
			return storage.WriteFile(ctx, st, k, f, it.Segments[half:])
		}},
		{schemas.TableSteps, "shard-000", func(k string, f schemas.Footer) (storage.FileEntry, error) {
			return storage.WriteFile(ctx, st, k, f, it.Steps)
		}},
	} {
		e, err := w.write(ref.DataKey(string(w.table), w.shard), foot(w.table))
		if err != nil {
			return nil, err
		}
		files = append(files, e)
	}
	if _, err := storage.Commit(ctx, st, ref, files); err != nil {
		return nil, err
	}
	if len(it.TrainSteps) == 0 {
		return files, nil
	}
	train := storage.ManifestRef{RunID: run, Iteration: iter, Stage: schemas.StageTrain}
	e, err := storage.WriteFile(ctx, st, train.DataKey(string(schemas.TableTrainSteps), "shard-000"), foot(schemas.TableTrainSteps), it.TrainSteps)
	if err != nil {
		return nil, err
	}
	if _, err := storage.Commit(ctx, st, train, []storage.FileEntry{e}); err != nil {
		return nil, err
	}
	return append(files, e), nil
}
