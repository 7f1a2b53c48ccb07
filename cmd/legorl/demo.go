package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/schemas/synth"
	"github.com/legorl/legorl/storage"
)

// runDemo is what `make demo` runs until the RL loop exists: it exercises
// every layer built so far, end to end, on synthetic rows, and says so.
func runDemo(ctx context.Context, env *environ, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("demo", stderr)
	var sf storeFlags
	sf.register(fs, env)
	runID := fs.String("run", "demo-"+time.Now().UTC().Format("20060102-150405"), "run id to write (must be new: data is write-once)")
	iters := fs.Int("iterations", 3, "iterations to write")
	tasks := fs.Int("tasks", 8, "tasks per iteration")
	group := fs.Int("group", 4, "rollouts per task")
	gradeTasks := fs.Int("grade-tasks", 4, "built-in tasks to grade in sandboxes after the storage part; 0 skips it (it needs root, namespaces and python3-pytest)")
	if err := parseFlags(fs, stderr, args); err != nil {
		return err
	}
	if err := storage.CheckName("run id", *runID); err != nil {
		return err
	}
	if *iters < 1 || *tasks < 1 || *group < 1 || *iters > 1000 || *tasks > 10000 || *group > 1024 {
		return fmt.Errorf("--iterations, --tasks and --group must be positive (at most 1000, 10000, 1024)")
	}
	if *gradeTasks < 0 || *gradeTasks > 100 {
		return fmt.Errorf("--grade-tasks must be in [0, 100]")
	}
	st, err := sf.open(ctx, env, true)
	if err != nil {
		return err
	}
	p := func(format string, a ...any) { fmt.Fprintf(stdout, format+"\n", a...) }
	p("legorl demo, part 1: the storage layer end to end (schemas, Parquet, manifests, object store).")
	p("  No engine, proxy, harness or trainer exists yet: the rows below are SYNTHETIC, made by schemas/synth.")
	p("  store: %s   run: %s", st.URI(), *runID)

	cfg := synth.Config{RunID: *runID, Seed: uint64(time.Now().UnixNano()), Iterations: *iters, Tasks: *tasks,
		GroupSize: *group, Turns: 4, PromptTokens: 256, TurnTokens: 64, ObsTokens: 48, MoELayers: 2, TopK: 2, Experts: 8}
	vocab := cfg.Defaults().VocabSize
	start := time.Now()
	for i, it := range synth.Run(cfg) {
		if err := validate(it, vocab); err != nil {
			return fmt.Errorf("iteration %d: %w", i, err)
		}
		files, err := writeIteration(ctx, st, *runID, i, it)
		if err != nil {
			return err
		}
		var bytes int64
		for _, f := range files {
			bytes += f.Size
		}
		p("  [%d/%d] iteration %d: validated and wrote %d rollouts, %d segments, %d steps, %d train steps in %d files (%.1f KiB); manifests committed",
			i+1, *iters, i, len(it.Rollouts), len(it.Segments), len(it.Steps), len(it.TrainSteps), len(files), float64(bytes)/1024)
	}
	p("  wrote in %v; reading back every committed file (sha256 checked) as Arrow batches:", time.Since(start).Round(time.Millisecond))
	for _, tab := range schemas.Tables() {
		files, err := storage.TableFiles(ctx, st, *runID, string(tab))
		if err != nil {
			return err
		}
		var rows int64
		for _, fe := range files {
			f, err := storage.OpenFile(ctx, st, fe, memory.DefaultAllocator)
			if err != nil {
				return err
			}
			for b, err := range f.Batches(ctx, 0) {
				if err != nil {
					f.Close()
					return err
				}
				rows += b.NumRows()
			}
			f.Close()
		}
		p("    %-11s %6d rows in %d files", tab, rows, len(files))
	}
	if err := passRates(ctx, st, *runID, stdout); err != nil {
		return err
	}
	p("  next: legorl export --store %s --run %s --table rollouts --format csv", sf.uri, *runID)
	if *gradeTasks > 0 {
		return demoGrading(ctx, *gradeTasks, stdout)
	}
	return nil
}

func validate(it synth.Iteration, vocab int) error {
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

// writeIteration writes one iteration as the pipeline and trainer will: the
// rollout stage's tables (segments in two shards) under one manifest commit,
// and train_steps under the train stage's.
func writeIteration(ctx context.Context, st storage.Store, runID string, iter int, it synth.Iteration) ([]storage.FileEntry, error) {
	foot := func(t schemas.Table) schemas.Footer {
		return schemas.Footer{SchemaVersion: schemas.Version, Table: t, RunID: runID, ConfigHash: "synthetic",
			PolicyVersion: int64(iter), CodeVersion: version}
	}
	rollout := storage.ManifestRef{RunID: runID, Iteration: iter, Stage: "rollout"}
	half := len(it.Segments) / 2
	var files []storage.FileEntry
	add := func(e storage.FileEntry, err error) error {
		if err == nil {
			files = append(files, e)
		}
		return err
	}
	for _, err := range []func() error{
		func() error {
			return add(storage.WriteFile(ctx, st, rollout.DataKey("rollouts", "shard-000"), foot(schemas.TableRollouts), it.Rollouts))
		},
		func() error {
			return add(storage.WriteFile(ctx, st, rollout.DataKey("segments", "shard-000"), foot(schemas.TableSegments), it.Segments[:half]))
		},
		func() error {
			return add(storage.WriteFile(ctx, st, rollout.DataKey("segments", "shard-001"), foot(schemas.TableSegments), it.Segments[half:]))
		},
		func() error {
			return add(storage.WriteFile(ctx, st, rollout.DataKey("steps", "shard-000"), foot(schemas.TableSteps), it.Steps))
		},
	} {
		if e := err(); e != nil {
			return nil, e
		}
	}
	if _, err := storage.Commit(ctx, st, rollout, files); err != nil {
		return nil, err
	}
	train := storage.ManifestRef{RunID: runID, Iteration: iter, Stage: "train"}
	e, err := storage.WriteFile(ctx, st, train.DataKey("train_steps", "shard-000"), foot(schemas.TableTrainSteps), it.TrainSteps)
	if err != nil {
		return nil, err
	}
	if _, err := storage.Commit(ctx, st, train, []storage.FileEntry{e}); err != nil {
		return nil, err
	}
	return append(files, e), nil
}

// passRates prints, per iteration, the pass rate over completed rollouts and
// the number masked, computed from the rollouts table's Arrow columns.
func passRates(ctx context.Context, st storage.Store, runID string, stdout io.Writer) error {
	files, err := storage.TableFiles(ctx, st, runID, string(schemas.TableRollouts))
	if err != nil {
		return err
	}
	type agg struct{ done, solved, masked int }
	per := map[int32]*agg{}
	var order []int32
	for _, fe := range files {
		f, err := storage.OpenFile(ctx, st, fe, memory.DefaultAllocator)
		if err != nil {
			return err
		}
		idx := func(name string) int { return f.Schema.FieldIndices(name)[0] }
		ci, cs, cr := idx("iteration"), idx("status"), idx("reward")
		for b, err := range f.Batches(ctx, 0) {
			if err != nil {
				f.Close()
				return err
			}
			its := b.Column(ci).(*array.Int32)
			status := b.Column(cs).(*array.String)
			reward := b.Column(cr).(*array.Float64)
			for r := 0; r < int(b.NumRows()); r++ {
				a := per[its.Value(r)]
				if a == nil {
					a = &agg{}
					per[its.Value(r)] = a
					order = append(order, its.Value(r))
				}
				if schemas.Status(status.Value(r)) == schemas.StatusMasked {
					a.masked++
					continue
				}
				a.done++
				if reward.Value(r) == 1 {
					a.solved++
				}
			}
		}
		f.Close()
	}
	fmt.Fprintln(stdout, "  synthetic pass rate per iteration (completed rollouts only; masked ones never count as 0):")
	for _, it := range order {
		a := per[it]
		rate := 0.0
		if a.done > 0 {
			rate = float64(a.solved) / float64(a.done)
		}
		fmt.Fprintf(stdout, "    iteration %d: %5.1f%% of %d completed, %d masked\n", it, 100*rate, a.done, a.masked)
	}
	return nil
}
