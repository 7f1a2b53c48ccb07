package main

import (
	"context"
	"errors"
	"io"
	"strings"

	"github.com/legorl/legorl/loop"
	"github.com/legorl/legorl/loop/replay"
	"github.com/legorl/legorl/pipelines/runner"
	"github.com/legorl/legorl/storage"
	"github.com/legorl/legorl/transforms"
)

// runAudit is `legorl audit`: the offline reproducibility audit of a run
// (loop.Audit), or with --replay or --rollouts the rollout audit
// (loop/replay): one line per check on stdout; any failure exits non-zero.
func runAudit(ctx context.Context, env *environ, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("audit", stderr)
	var sf storeFlags
	sf.register(fs, env)
	run := fs.String("run", "", "run id (required)")
	ckpts := fs.String("checkpoints", "", "checkpoint folders, comma-separated: lineage checks, and the weights of each policy version for the logprob check")
	sample := fs.Int("sample", 32, "segments per iteration and policy version whose logprobs are recomputed")
	minPearson := fs.Float64("min-pearson", 0.99, "the recomputed and recorded logprobs' Pearson correlation must reach this")
	runnerName := fs.String("runner", runner.Prism, "Beam runner: prism or universal")
	endpoint := fs.String("endpoint", "", "job server HOST:PORT (--runner universal)")
	var ro replay.Options
	fs.IntVar(&ro.Sample, "replay", 0, "replay N scored rollouts in fresh sandboxes, their recorded completions served in place of the model, and compare prompts, diff, reward, outcome (instead of the other checks)")
	rollouts := fs.String("rollouts", "", "replay these rollout ids, comma-separated")
	fs.StringVar(&ro.Suite, "tasks", "", "replay: the run's task suite")
	fs.StringVar(&ro.Policy, "policy", "", "replay: a checkpoint folder of the run's model (its tokenizer.json)")
	fs.StringVar(&ro.Template, "template", "qwen3", "replay: the run's chat template: "+templateNames)
	fs.StringVar(&ro.AgentBinary, "agent", "", "replay: the legorl-agent program; defaults to legorl-agent beside legorl")
	fs.IntVar(&ro.MaxTurns, "max-turns", 30, "replay: the run's agent turns at most")
	fs.StringVar(&ro.Sandbox, "backend", "local", "replay: sandbox backend: "+strings.Join(backendNames(), ", "))
	fs.IntVar(&ro.Parallel, "parallel", 1, "replay: rollouts replayed at once")
	if err := parseFlags(fs, stderr, args); err != nil {
		return err
	}
	if *run == "" {
		return errors.New("--run is required (see legorl audit -h)")
	}
	transforms.SetStoreOptions(storage.Options{AccessKey: env.AccessKey, SecretKey: env.SecretKey, SessionToken: env.Session, Region: env.Region})
	st, err := sf.open(ctx, env, false)
	if err != nil {
		return err
	}
	if ro.Sample > 0 || *rollouts != "" {
		if ro.AgentBinary == "" {
			if ro.AgentBinary, err = findAgent(); err != nil {
				return err
			}
		}
		ro.Store, ro.RunID, ro.Rollouts, ro.JobID, ro.CodeVersion = st, *run, strings.Split(*rollouts, ","), newJobID(), version
		_, err = replay.Run(ctx, ro, stdout)
		return err
	}
	var dirs []string
	for _, dir := range strings.Split(*ckpts, ",") {
		if dir = strings.TrimSpace(dir); dir != "" {
			dirs = append(dirs, dir)
		}
	}
	return loop.Audit(ctx, loop.AuditOptions{Store: st,
		Files:       transforms.AuditConfig{Store: sf.uri, S3Endpoint: sf.endpoint, RunID: *run, JobID: newJobID()},
		Runner:      runner.Options{Runner: *runnerName, Endpoint: *endpoint},
		Checkpoints: dirs, Sample: *sample, MinPearson: *minPearson}, stdout)
}
