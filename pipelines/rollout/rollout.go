// Package rollout is the rollout pipeline: read a task suite, validate it
// (a bad instance goes to the rejected output with its reason), expand
// each task to its group of G rollouts with deterministic ids and seeds,
// run the groups (sandbox, proxy, harness, grading; an engine shared per
// worker process; deadlines and a tail-kill), write each group's rows as
// write-once Parquet shards with a claim, and commit the iteration's
// manifest once, after checking that launched = completed + masked.
//
// Running it again for the same run and iteration is safe at any point:
// groups already claimed are not run again, and the commit adds nothing
// twice (see package transforms). So a scheduled run is a plain cron line
// that starts the same command again; one that was killed (a reboot,
// kill -9, an OOM) finishes where it stopped, and one that had finished
// only checks and exits:
//
//	*/15 * * * * legorl rollout --tasks /data/suite --harness bash --policy /ckpt/v3 \
//	    --group 8 --store s3://bucket/legorl --run nightly --iteration 3 >>/var/log/legorl.log 2>&1
//
// Two copies running at once are safe too (each group is claimed once),
// but they duplicate work: use flock(1) in the cron line to skip a start
// while one runs.
package rollout

import (
	"context"
	"fmt"
	"path"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/legorl/legorl/pipelines/runner"
	"github.com/legorl/legorl/storage"
	"github.com/legorl/legorl/tasks"
	"github.com/legorl/legorl/transforms"
)

// Options configure the pipeline.
type Options struct {
	// Tasks is the suite (a .jsonl or .parquet file, or a folder with
	// tasks.jsonl), a path the workers can read.
	Tasks string
	// Splits are the task splits rolled out (tasks without a split always
	// are). Defaults to the training split: held-out instances and
	// families are for evals and never feed an update.
	Splits []string
	// Config configures the rollouts (transforms.Config).
	Config transforms.Config
}

// Outputs are the pipeline's PCollections.
type Outputs struct {
	Rejected beam.PCollection // PCollection<transforms.Rejected>
	Groups   beam.PCollection // PCollection<transforms.Group>: what was launched
	Results  beam.PCollection // PCollection<transforms.GroupResult>
	Report   beam.PCollection // PCollection<transforms.Report>: one element, after the commit
}

// Build adds the rollout pipeline to s: read, validate, keep the tasks of
// opt.Splits, expand, run, commit.
func Build(s beam.Scope, opt Options) Outputs {
	s = s.Scope("rollout")
	cfg := opt.Config.WithDefaults()
	if len(opt.Splits) == 0 {
		opt.Splits = []string{tasks.SplitTrain}
	}
	ts := transforms.ReadTasks(s, opt.Tasks)
	valid, rejected := transforms.Validate(s, ts)
	valid = transforms.FilterSplit(s, opt.Splits, valid)
	groups := transforms.Expand(s, cfg, valid)
	results := transforms.Rollouts(s, cfg, groups)
	report := transforms.Commit(s, cfg, groups, results, rejected)
	return Outputs{Rejected: rejected, Groups: groups, Results: results, Report: report}
}

// Run checks the options, builds the pipeline, runs it on the runner and
// returns the report the commit stored. With an in-process runner (Prism
// with loopback workers, direct) the engines and backends the workers
// loaded are closed at the end.
func Run(ctx context.Context, opt Options, ro runner.Options) (transforms.Report, error) {
	cfg := opt.Config.WithDefaults()
	if err := cfg.Check(); err != nil {
		return transforms.Report{}, err
	}
	if err := storage.CheckName("job id", cfg.JobID); err != nil {
		return transforms.Report{}, err
	}
	opt.Config = cfg
	err := runner.RunNew(ctx, ro, "rollout", func(s beam.Scope) { Build(s, opt) })
	defer transforms.CloseRuntimes()
	if err != nil {
		return transforms.Report{}, err
	}
	return ReadReport(ctx, cfg)
}

// ReadReport reads the report a pipeline run stored.
func ReadReport(ctx context.Context, cfg transforms.Config) (transforms.Report, error) {
	cfg = cfg.WithDefaults()
	st, err := transforms.OpenStore(ctx, cfg)
	if err != nil {
		return transforms.Report{}, err
	}
	var rep transforms.Report
	err = transforms.ReadJSON(ctx, st, transforms.ReportKey(cfg.RunID, cfg.Stage, cfg.Iteration, cfg.JobID), "rollout pipeline: the report", &rep)
	return rep, err
}

// ReadLatestReport reads the report of the last pipeline run that stored
// one for cfg's run, stage and iteration, whatever its job id: a resumed
// loop asks for the figures of an iteration an earlier process ran. Job
// ids of one loop sort in time order ("loop-" and the start's nanoseconds).
func ReadLatestReport(ctx context.Context, cfg transforms.Config) (transforms.Report, error) {
	cfg = cfg.WithDefaults()
	st, err := transforms.OpenStore(ctx, cfg)
	if err != nil {
		return transforms.Report{}, err
	}
	dir := path.Dir(transforms.ReportKey(cfg.RunID, cfg.Stage, cfg.Iteration, "x")) + "/"
	keys, err := st.List(ctx, dir)
	if err != nil {
		return transforms.Report{}, fmt.Errorf("rollout pipeline: list the reports in %s: %w", dir, err)
	}
	if len(keys) == 0 {
		return transforms.Report{}, fmt.Errorf("rollout pipeline: no report in %s: %w", dir, storage.ErrNotFound)
	}
	var rep transforms.Report
	err = transforms.ReadJSON(ctx, st, keys[len(keys)-1], "rollout pipeline: the report", &rep)
	return rep, err
}
