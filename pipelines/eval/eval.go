// Package eval is the eval pipeline: pass@1 (and pass@k when G > 1) of a
// policy per harness on the held-out tasks of a suite. Each harness's
// rollouts run and commit like the rollout pipeline's, under the stage
// "eval-HARNESS" of the run and iteration (its own ids, claims and
// manifest, so a rerun resumes it); the table is stored beside them.
//
// Use a run id of its own for evals (e.g. "RUN-eval"): readers that merge
// every stage of a run (storage.TableFiles) would otherwise see the eval
// rollouts among the training ones.
package eval

import (
	"context"
	"fmt"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/legorl/legorl/pipelines/runner"
	"github.com/legorl/legorl/storage"
	"github.com/legorl/legorl/tasks"
	"github.com/legorl/legorl/transforms"
)

// Options configure the eval.
type Options struct {
	// Tasks is the suite, a path the workers can read.
	Tasks string
	// Harnesses to evaluate, each on every task.
	Harnesses []string
	// Splits are the task splits evaluated (tasks without a split are
	// always). Defaults to the held-out instances and families.
	Splits []string
	// Config is the rollouts' config; its Harness and Stage are set per
	// harness.
	Config transforms.Config
}

// Stage is the manifest stage of a harness's eval rollouts.
func Stage(harness string) string { return "eval-" + harness }

func (o Options) withDefaults() Options {
	if len(o.Splits) == 0 {
		o.Splits = []string{tasks.SplitHeldout, tasks.SplitHeldoutFamily}
	}
	o.Config = o.Config.WithDefaults()
	return o
}

// Build adds the eval pipeline to s and returns its PCollection of one
// transforms.EvalTable.
func Build(s beam.Scope, opt Options) beam.PCollection {
	opt = opt.withDefaults()
	s = s.Scope("eval")
	valid, rejected := transforms.Validate(s, transforms.ReadTasks(s, opt.Tasks))
	held := transforms.FilterSplit(s, opt.Splits, valid)
	var tagged, reports []beam.PCollection
	for _, h := range opt.Harnesses {
		cfg := opt.Config
		cfg.Harness, cfg.Stage = h, Stage(h)
		hs := s.Scope(h)
		groups := transforms.Expand(hs, cfg, held)
		results := transforms.Rollouts(hs, cfg, groups)
		reports = append(reports, transforms.Commit(hs, cfg, groups, results, rejected))
		tagged = append(tagged, transforms.TagHarness(hs, h, results))
	}
	return transforms.StoreEvalTable(s, opt.Config, opt.Config.Group, opt.Splits, beam.Flatten(s, tagged...), beam.Flatten(s, reports...))
}

// Run checks the options, runs the eval and returns its table.
func Run(ctx context.Context, opt Options, ro runner.Options) (transforms.EvalTable, error) {
	opt = opt.withDefaults()
	if len(opt.Harnesses) == 0 {
		return transforms.EvalTable{}, fmt.Errorf("%w: no harness to evaluate", transforms.ErrConfig)
	}
	seen := map[string]bool{}
	for _, h := range opt.Harnesses {
		cfg := opt.Config
		cfg.Harness, cfg.Stage = h, Stage(h)
		if err := cfg.Check(); err != nil {
			return transforms.EvalTable{}, err
		}
		if seen[h] {
			return transforms.EvalTable{}, fmt.Errorf("%w: harness %s given twice", transforms.ErrConfig, h)
		}
		seen[h] = true
	}
	if err := storage.CheckName("job id", opt.Config.JobID); err != nil {
		return transforms.EvalTable{}, err
	}
	err := runner.RunNew(ctx, ro, "eval", func(s beam.Scope) { Build(s, opt) })
	defer transforms.CloseRuntimes()
	if err != nil {
		return transforms.EvalTable{}, err
	}
	st, err := transforms.OpenStore(ctx, opt.Config)
	if err != nil {
		return transforms.EvalTable{}, err
	}
	var t transforms.EvalTable
	err = transforms.ReadJSON(ctx, st, transforms.EvalReportKey(opt.Config.RunID, opt.Config.Iteration, opt.Config.JobID), "eval pipeline: the table", &t)
	return t, err
}
