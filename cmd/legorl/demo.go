package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/legorl/legorl/monitor"
	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/schemas/synth"
	"github.com/legorl/legorl/storage"
	"github.com/legorl/legorl/storage/synthstore"
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
	o := synthstore.Options{ConfigHash: "synthetic", CodeVersion: version, VocabSize: cfg.Defaults().VocabSize}
	start := time.Now()
	for i, it := range synth.Run(cfg) {
		files, err := synthstore.WriteIteration(ctx, st, *runID, i, it, o)
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
	for _, tab := range []schemas.Table{schemas.TableRollouts, schemas.TableSegments, schemas.TableSteps, schemas.TableTrainSteps} { // a run's tables (replay is an audit's)
		files, rows, err := storage.CountRows(ctx, st, *runID, string(tab))
		if err != nil {
			return err
		}
		p("    %-11s %6d rows in %d files", tab, rows, files)
	}
	fes, err := storage.TableFiles(ctx, st, *runID, string(schemas.TableRollouts))
	if err != nil {
		return err
	}
	var rs []schemas.Rollout
	for _, fe := range fes {
		rows, err := storage.ReadRows[schemas.Rollout](ctx, st, fe)
		if err != nil {
			return err
		}
		rs = append(rs, rows...)
	}
	p("  synthetic pass rate per iteration (completed rollouts only; masked ones never count as 0):")
	for _, pt := range monitor.RewardCurves(rs).Series[0].Points {
		rate := 0.0
		if pt.Completed > 0 {
			rate = float64(pt.Solved) / float64(pt.Completed)
		}
		p("    iteration %d: %5.1f%% of %d completed, %d masked", pt.Iteration, 100*rate, pt.Completed, pt.Masked)
	}
	p("  next: legorl export --store %s --run %s --table rollouts --format csv", sf.uri, *runID)
	if *gradeTasks > 0 {
		return demoGrading(ctx, *gradeTasks, stdout)
	}
	return nil
}
