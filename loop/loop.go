// Package loop is the RL loop `legorl run` drives: prepare (a suite, a
// starting policy, an optional SFT warm start), evaluate on held-out
// tasks, then per iteration run the rollout pipeline on the training
// split, one trainer update, publish the checkpoint to the store, and
// evaluate periodically; at the end, the before/after table.
//
// Everything it writes is write-once and named by the run id and the
// iteration, so running the same config again resumes: prepared files are
// reused, an iteration whose checkpoint and train_steps manifest exist is
// skipped, an interrupted rollout pipeline finishes its claimed groups
// (package transforms), and evals reuse their committed rollouts.
//
// Local layout (WorkDir):
//
//	suite/                   the generated built-in suite (unless Config.Tasks)
//	demos-HARNESS.jsonl      the scripted solver's demonstrations (SFT)
//	tokenizer.json           trained on the demonstrations (unless Config.Policy)
//	checkpoints/init         the initialised policy (unless Config.Policy)
//	checkpoints/sft          the warm-started policy
//	checkpoints/iter-NNNNNN  the policy after iteration N-1's update
//	test-suite/              the test suite's instances (testsplit.go)
//	test-suite.json          its record: the config hash and seed
//	pools/                   the task file of each pipeline (pools.go)
//	processes/               a record per process of the run (Process)
//	summary.json             the run's figures (Result)
//
// In the store: the rollout, train and eval manifests and data of
// packages transforms and trainer, runs/RUN/checkpoints/vNNNNNN/FILE (each
// published checkpoint), and runs/RUN/reports/loop/results.json.
package loop

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/legorl/legorl/loop/stats"
	"github.com/legorl/legorl/pipelines/eval"
	"github.com/legorl/legorl/pipelines/rollout"
	"github.com/legorl/legorl/pipelines/runner"
	"github.com/legorl/legorl/policy/backend"
	"github.com/legorl/legorl/policy/checkpoint"
	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/storage"
	"github.com/legorl/legorl/storage/lease"
	"github.com/legorl/legorl/tasks"
	"github.com/legorl/legorl/trainer"
	"github.com/legorl/legorl/transforms"
)

// Options are the loop's inputs besides its config.
type Options struct {
	// AgentBinary is legorl-agent's path (built-in harnesses).
	AgentBinary string
	// CodeVersion goes into footers and lineages. Defaults to "dev".
	CodeVersion string
	// Runner runs the pipelines. Defaults to Prism in process.
	Runner runner.Options
	// StoreOptions are the store's credentials.
	StoreOptions storage.Options
	// LeaseTTL is how long the run's lease (one writer per run) outlives
	// a holder that stops renewing it: another machine takes a dead run
	// over after it; this machine at once. Defaults to 2 minutes.
	LeaseTTL time.Duration
	// Log hears one line per phase; nil discards them.
	Log io.Writer
	// OnPipeline, when set, is called as a pipeline starts with its config
	// and the number of tasks it runs; the function it returns is called
	// when the pipeline ends (the CLI draws a progress bar in between).
	OnPipeline func(cfg transforms.Config, tasks int) (done func())
	// OnTrain, when set, hears the trainer's progress.
	OnTrain func(trainer.Progress)
	// OnSFT, when set, hears each SFT step.
	OnSFT func(trainer.SFTStep)
	// TrainMetrics, when set, receives the updates' Prometheus metrics.
	// (The rollouts' come from transforms.SetRuntimeMetrics.)
	TrainMetrics *trainer.Metrics
	// Backend runs SFT and the updates (the trainer's recompute, gradients
	// and optimizer). Defaults to the CPU backend. The rollout pipelines'
	// engines open the backend of the same name in their worker processes.
	Backend backend.Backend
	// PrepareOnly stops Run once the starting checkpoint is ready (suite,
	// demonstrations, initialisation and SFT): no eval, no iteration, no
	// summary. `make starter` makes the committed starter checkpoint so.
	PrepareOnly bool
}

// Result is what the loop measured.
type Result struct {
	// Iterations are the iterations of this config, resumed ones included.
	Iterations []IterationResult `json:"iterations"`
	// Evals are the held-out evals, in order (before, periodic, after).
	Evals []EvalResult `json:"evals"`
	// Comparisons pair the first and last evals by task: one per harness,
	// split and mode. The splits are the validation splits of eval.splits
	// (heldout, heldout_family: the config was tuned on them) and their
	// test counterparts, SplitTest (test) and SplitTestFamily
	// (test_family): the same eval on the run's test suite (TestSuite).
	Comparisons []Comparison `json:"comparisons,omitempty"`
	// Probes are rl.probe's measurements, in order; Kept is the iteration
	// count of the policy the final eval measured (rl.probe's best).
	Probes []ProbeResult `json:"rl_probes,omitempty"`
	Kept   *int          `json:"kept_iteration,omitempty"`
	// SFT is what the warm start did, when the config has one.
	SFT *SFTSummary `json:"sft,omitempty"`
	// Start is the starting checkpoint, iteration 0's policy: Config.Policy,
	// or the initialised and (with SFT) warm-started one.
	Start string `json:"start"`
	// TestSuite is the run's test suite (the built-in suite of a seed
	// derived from the config's hash; testsplit.go), absent for a run of a
	// suite file.
	TestSuite *TestSuite `json:"test_suite,omitempty"`
	// WallSeconds is the wall time of the run: the sum of its processes'
	// Seconds (before process records existed, it was the last process's
	// alone).
	WallSeconds float64 `json:"wall_seconds"`
	// Processes are the run's processes (one per `legorl run` of its
	// config: a run stopped and resumed has several), oldest first, each
	// with its start, end, seconds and what it did.
	Processes []Process `json:"processes,omitempty"`
}

// ProbeResult is one rl.probe measurement: pass@1 at temperature 1 of the
// policy after Iteration iterations on the probe's tasks.
type ProbeResult struct {
	Iteration  int     `json:"iteration"`
	Checkpoint string  `json:"checkpoint"`
	Pass1      float64 `json:"pass1"`
	Tasks      int     `json:"tasks"`
	Masked     int     `json:"masked"`
}

// SFTSummary is the warm start's record.
type SFTSummary struct {
	Demos     int                      `json:"demos"`
	Steps     int                      `json:"steps"`
	FinalLoss float64                  `json:"final_loss"`
	Probes    []trainer.SFTProbeResult `json:"probes,omitempty"`
	Kept      *int                     `json:"kept_probe,omitempty"`
	// TrainSeconds is the steps' time and ProbeSeconds the probes', from
	// the checkpoint's lineage, so a resumed run reports the same.
	TrainSeconds float64 `json:"train_seconds"`
	ProbeSeconds float64 `json:"probe_seconds,omitempty"`
}

// IterationResult is one iteration's figures.
type IterationResult struct {
	Iteration     int     `json:"iteration"`
	PolicyVersion int64   `json:"policy_version"` // the version that sampled the rollouts
	Resumed       bool    `json:"resumed"`        // done by an earlier run of the loop
	Launched      int     `json:"launched"`
	Completed     int     `json:"completed"`
	Masked        int     `json:"masked"`
	PassRate      float64 `json:"pass_rate"`
	Trained       int     `json:"trained"`       // segments that carried loss
	ZeroVariance  int     `json:"zero_variance"` // groups without a gradient
	Groups        int     `json:"groups"`        // groups the update saw
	// Repeated counts the iteration's tasks that earlier iterations rolled
	// out already (rl.tasks_per_iteration > 0): 0 while every task is fresh.
	Repeated int `json:"repeated_tasks,omitempty"`
	// ZeroVarianceFrac is ZeroVariance / Groups: the share of tasks that
	// taught nothing (all solved or all failed).
	ZeroVarianceFrac float64 `json:"zero_variance_fraction"`
	Pearson          float64 `json:"pearson"`         // the gate's correlation
	Loss             float64 `json:"loss"`            // mean loss of the update's steps
	RolloutSecs      float64 `json:"rollout_seconds"` // wall time of the pipeline
	TrainSecs        float64 `json:"train_seconds"`
	TrainTokensPS    float64 `json:"train_tokens_per_second"`
	RecompTokPS      float64 `json:"recompute_tokens_per_second"`
	Checkpoint       string  `json:"checkpoint"`
}

// EvalResult is pass@1 per harness and held-out split of one policy, at
// temperature 1 and, with eval.greedy, greedy. The first and the final
// evals also hold the test rows (split test or test_family: the run's
// test suite); the periodic ones (eval.every) only the validation splits.
type EvalResult struct {
	PolicyVersion int64  `json:"policy_version"`
	Checkpoint    string `json:"checkpoint"`
	// Pass1[harness][split] is pass@1 at temperature 1; Tasks[harness][split]
	// the tasks with a completed rollout; CI95 the 95% interval.
	Pass1 map[string]map[string]float64    `json:"pass1"`
	Tasks map[string]map[string]int        `json:"tasks"`
	CI95  map[string]map[string][2]float64 `json:"ci95,omitempty"`
	// Greedy and GreedyCI95 are the same with greedy decoding.
	Greedy     map[string]map[string]float64    `json:"greedy,omitempty"`
	GreedyCI95 map[string]map[string][2]float64 `json:"greedy_ci95,omitempty"`
	// Families[mode][harness][split][family] is pass@1 over the split's
	// tasks of each task family (mode t1 or greedy): where RL gained and
	// where it did not.
	Families map[string]map[string]map[string]map[string]float64 `json:"families,omitempty"`
	// Templates is the same by task template (Instance.Template), for
	// suites whose tasks have one: a family's pass@1 can hide templates
	// solved always and never.
	Templates map[string]map[string]map[string]map[string]float64 `json:"templates,omitempty"`
	// Masked[mode][harness][split] counts the masked rollouts (environment
	// failures: not scored, so not in pass@1 or the paired comparison).
	// Absent when none were.
	Masked map[string]map[string]map[string]int `json:"masked,omitempty"`
	// perTask[mode][harness][split][task] is each task's pass rate, for
	// the paired before/after comparison.
	perTask map[string]map[string]map[string]map[string]float64
}

// Eval modes: temperature 1 (the training distribution) and greedy.
const (
	ModeT1     = transforms.DecodingT1
	ModeGreedy = transforms.DecodingGreedy
)

// Run runs the loop of cfg. It returns what it measured; on error, what it
// measured so far with the error.
func Run(ctx context.Context, cfg Config, o Options) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	if o.CodeVersion == "" {
		o.CodeVersion = "dev"
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	ctx, lost := context.WithCancelCause(ctx)
	defer lost(nil)
	l := &looper{cfg: cfg, o: o, lost: lost}
	defer l.release(ctx)
	var err error
	if l.cfg.WorkDir, err = filepath.Abs(cfg.WorkDir); err != nil {
		return nil, err
	}
	if l.proc, err = startProcess(l.cfg.WorkDir); err != nil {
		return nil, err
	}
	err = l.prepare(ctx)
	if err == nil && !o.PrepareOnly {
		err = l.prepareTest(ctx)
	}
	err = lostLease(ctx, err)
	if err != nil || o.PrepareOnly {
		if ferr := l.proc.finish(err); err == nil {
			err = ferr
		}
		if err != nil {
			return nil, err
		}
		return &Result{SFT: l.sft, Start: l.start}, nil
	}
	res := &Result{SFT: l.sft, Start: l.start, TestSuite: l.test}
	err = lostLease(ctx, l.run(ctx, res))
	if len(res.Evals) > 1 {
		res.Comparisons = compare(res.Evals[0], res.Evals[len(res.Evals)-1])
	}
	if ferr := l.proc.finish(err); err == nil {
		err = ferr
	}
	var perr error
	res.Processes, res.WallSeconds, perr = readProcesses(l.cfg.WorkDir)
	if err == nil {
		err = perr
	}
	if err == nil {
		err = l.storeResult(ctx, res)
	}
	if err == nil {
		err = l.writeSummary(res)
	}
	return res, err
}

type looper struct {
	cfg   Config
	o     Options
	st    storage.Store
	suite string // the suite's path
	start string // the starting checkpoint (iteration 0's policy)
	// instances is the suite, read once (load; a run's suite is prepared
	// before the first pipeline and never changes), snapshots absolute.
	instances []tasks.Instance
	sft       *SFTSummary
	// test is the run's test suite (nil: none), testInstances its
	// instances, read once, snapshots absolute.
	test          *TestSuite
	testInstances []tasks.Instance
	// proc records this process (Process).
	proc *procRecorder
	// lease is the run's, held from prepare on; lost cancels the loop's
	// context when it is lost.
	lease *lease.Lease
	lost  context.CancelCauseFunc
}

// did records in the process's record that it did what.
func (l *looper) did(format string, a ...any) {
	if l.proc != nil {
		l.proc.did(fmt.Sprintf(format, a...))
	}
}

func (l *looper) logf(format string, a ...any) {
	fmt.Fprintf(l.o.Log, "legorl run: "+format+"\n", a...)
}

func (l *looper) ckpt(iteration int) string {
	if iteration == 0 {
		return l.start
	}
	return filepath.Join(l.cfg.WorkDir, "checkpoints", fmt.Sprintf("iter-%06d", iteration))
}

func (l *looper) run(ctx context.Context, res *Result) error {
	cfg := l.cfg
	evalAt := func(i int, test bool) error {
		e, err := l.eval(ctx, l.ckpt(i), test)
		if err != nil {
			return err
		}
		res.Evals = append(res.Evals, e)
		return nil
	}
	if err := evalAt(0, true); err != nil {
		return err
	}
	var keep *keeper
	if p := cfg.RL.Probe; p != nil {
		keep = &keeper{patience: p.Patience}
		if err := l.rlProbe(ctx, 0, keep, res); err != nil {
			return err
		}
	}
	done := 0
	for i := 0; i < cfg.Iterations; i++ {
		it, err := l.iteration(ctx, i)
		if err != nil {
			return fmt.Errorf("iteration %d: %w", i, err)
		}
		res.Iterations = append(res.Iterations, it)
		l.logf("%s", it.summary())
		if !it.Resumed {
			l.did("iteration %d", i)
		}
		done = i + 1
		last := i == cfg.Iterations-1
		if keep != nil && (last || done%cfg.RL.Probe.Every == 0) {
			if err := l.rlProbe(ctx, done, keep, res); err != nil {
				return err
			}
			if keep.stop() && !last {
				l.logf("rl.probe: no new best in %d probes (best pass@1 %.3f after %d iterations): stopping after iteration %d", keep.patience, keep.best, keep.at, i)
				break
			}
		}
		if !last && cfg.Eval.Every > 0 && done%cfg.Eval.Every == 0 {
			if err := evalAt(done, false); err != nil {
				return err
			}
		}
	}
	final := done
	if keep != nil {
		final = keep.at
		res.Kept = &final
		l.logf("rl.probe: the final policy is the best probed one, after %d of %d iterations (probe pass@1 %.3f): %s", final, done, keep.best, l.ckpt(final))
	}
	return evalAt(final, true)
}

// keeper tracks the best policy by rl.probe's pass@1.
type keeper struct {
	patience int
	best     float64
	at       int // the best policy's iteration count
	since    int // probes since the best
	seen     bool
}

// add records a probe of the policy after iteration count at; the earliest
// best is kept.
func (k *keeper) add(at int, pass1 float64) {
	if !k.seen || pass1 > k.best {
		k.best, k.at, k.since, k.seen = pass1, at, 0, true
		return
	}
	k.since++
}

// stop reports whether patience has run out.
func (k *keeper) stop() bool { return k.patience > 0 && k.since >= k.patience }

// rlProbe measures the policy after at iterations on rl.probe's tasks.
func (l *looper) rlProbe(ctx context.Context, at int, keep *keeper, res *Result) error {
	path, err := l.rlProbeTasks()
	if err != nil {
		return err
	}
	start := time.Now()
	committed, err := l.committed(ctx, l.cfg.Run+"-rl-probe", at, []string{l.cfg.Harness})
	if err != nil {
		return err
	}
	r, err := l.probe(ctx, l.ckpt(at), at, path, "rl-probe", l.cfg.RL.Probe.Tasks)
	if err != nil {
		return fmt.Errorf("rl.probe after %d iterations: %w", at, err)
	}
	if !committed {
		l.did("rl.probe after %d iterations", at)
	}
	keep.add(at, r.Pass1)
	res.Probes = append(res.Probes, ProbeResult{Iteration: at, Checkpoint: l.ckpt(at), Pass1: r.Pass1, Tasks: r.Tasks, Masked: r.Masked})
	l.logf("rl.probe after %d iterations: pass@1 %.3f over %d held-out train tasks (%d masked); best %.3f after %d; %s", at, r.Pass1, r.Tasks, r.Masked, keep.best, keep.at,
		time.Since(start).Round(time.Second))
	return nil
}

// iterationReport reads the rollout pipeline's report of iteration i, as
// the last pipeline that ran it stored it.
func (l *looper) iterationReport(ctx context.Context, i int) (transforms.Report, error) {
	pol := l.ckpt(i)
	version, err := policyVersion(pol)
	if err != nil {
		return transforms.Report{}, err
	}
	rep, err := rollout.ReadLatestReport(ctx, l.rolloutConfig(i, pol, version, l.cfg.Harness, transforms.Stage, l.cfg.Group, ""))
	if err != nil {
		return rep, fmt.Errorf("iteration %d's rollout report: %w", i, err)
	}
	return rep, nil
}

// setGroups records how many of the update's groups had no reward variance.
func (it *IterationResult) setGroups(zeroVariance, groups int) {
	it.ZeroVariance, it.Groups = zeroVariance, groups
	if groups > 0 {
		it.ZeroVarianceFrac = float64(zeroVariance) / float64(groups)
	}
}

// iteration runs (or resumes) iteration i: rollouts with policy i, the
// update to policy i+1, its publication.
func (l *looper) iteration(ctx context.Context, i int) (IterationResult, error) {
	cfg := l.cfg
	pol, next := l.ckpt(i), l.ckpt(i+1)
	version, err := policyVersion(pol)
	if err != nil {
		return IterationResult{}, err
	}
	it := IterationResult{Iteration: i, PolicyVersion: version, Checkpoint: next}
	trainRef := storage.ManifestRef{RunID: cfg.Run, Iteration: i, Stage: schemas.StageTrain}
	_, merr := storage.Latest(ctx, l.st, trainRef)
	if merr != nil && !errors.Is(merr, storage.ErrNotFound) {
		return it, merr
	}
	if exists(next) && merr == nil {
		it.Resumed = true
		if err := l.verified(ctx, next, version+1); err != nil {
			return it, fmt.Errorf("iteration %d: resume: %w", i, err)
		}
		rep, err := l.iterationReport(ctx, i)
		if err != nil {
			return it, fmt.Errorf("resume: %w", err)
		}
		it.fromReport(rep)
		if it.Repeated, err = l.repeatedTasks(i); err != nil {
			return it, fmt.Errorf("resume: %w", err)
		}
		lin, err := trainer.ReadLineage(next)
		if err != nil {
			return it, fmt.Errorf("iteration %d: resume: %w", i, err)
		}
		if trainCfg, _ := cfg.trainConfig(i); lin != nil && lin.ConfigHash != trainCfg.Hash() {
			return it, fmt.Errorf("%w: iteration %d: %s was trained with another train config (config_hash %.12s, this config's %.12s): resume with the config that made it, or use another run id and work_dir",
				ErrConfig, i, next, lin.ConfigHash, trainCfg.Hash())
		}
		if lin != nil {
			it.Trained = lin.Data.Trained
			it.setGroups(lin.Data.Groups.ZeroVariance, lin.Data.Groups.Groups)
			if lin.Gate != nil {
				it.Pearson = lin.Gate.Overall.Pearson
			}
			for _, s := range lin.Steps { // the same mean as the update's, from its train_steps rows
				loss, _ := s["loss"].(float64)
				it.Loss += loss / float64(len(lin.Steps))
			}
		}
		return it, l.publish(ctx, next)
	}
	if exists(next) { // a checkpoint whose train_steps never got committed: redo the update
		if err := os.RemoveAll(next); err != nil {
			return it, err
		}
	}
	start := time.Now()
	rc := l.rolloutConfig(i, pol, version, cfg.Harness, transforms.Stage, cfg.Group, "")
	taskPath, n := l.suite, l.countTasks(trainSplit)
	if f, repeated, err := l.iterationTasks(ctx, i); err != nil {
		return it, err
	} else if f != "" {
		taskPath, n, it.Repeated = f, cfg.RL.TasksPerIteration, repeated
	}
	l.logf("iteration %d: rollouts of policy v%d on %d tasks of the training split (G=%d)", i, version, n, cfg.Group)
	done := l.onPipeline(rc, n)
	rep, err := rollout.Run(ctx, rollout.Options{Tasks: taskPath, Splits: trainSplit, Config: rc}, l.runnerOptions("rollout", i))
	done()
	if err != nil {
		return it, err
	}
	it.fromReport(rep)
	it.RolloutSecs = time.Since(start).Seconds()
	if rep.Completed == 0 {
		return it, fmt.Errorf("no rollout completed (%d masked: %s): nothing to train on", rep.Masked, strings.Join(rep.MaskedBy, ", "))
	}
	trainCfg, phase := cfg.trainConfig(i)
	with := ""
	if phase >= 0 {
		with = fmt.Sprintf(" with train_from[%d]", phase)
	}
	l.logf("iteration %d: %d rollouts, pass rate %.3f; training%s", i, rep.Launched, rep.PassRate, with)
	start = time.Now()
	tr, err := trainer.Train(ctx, trainer.Options{Store: l.st, RunID: cfg.Run, Iteration: i, PolicyDir: pol, OutDir: next,
		Config: trainCfg, CodeVersion: l.o.CodeVersion, Progress: l.o.OnTrain, Metrics: l.o.TrainMetrics, Backend: l.o.Backend})
	if err != nil {
		return it, err
	}
	it.TrainSecs = time.Since(start).Seconds()
	u := tr.Update
	it.Trained = u.Trained
	it.setGroups(u.Groups.ZeroVariance, u.Groups.Groups)
	if u.Gate != nil {
		it.Pearson = u.Gate.Overall.Pearson
	}
	var tokens int
	var secs float64
	for _, s := range u.Steps {
		it.Loss += s.Stats.Loss / float64(len(u.Steps))
		tokens += s.Tokens
		secs += s.Seconds
	}
	if secs > 0 {
		it.TrainTokensPS = float64(tokens) / secs
	}
	if u.RecomputeSeconds > 0 {
		it.RecompTokPS = float64(u.RecomputeTokens) / u.RecomputeSeconds
	}
	return it, l.publish(ctx, next)
}

func (it *IterationResult) fromReport(rep transforms.Report) {
	it.Launched, it.Completed, it.Masked, it.PassRate = rep.Launched, rep.Completed, rep.Masked, rep.PassRate
}

func (it IterationResult) summary() string {
	if it.Resumed {
		return fmt.Sprintf("iteration %d: done by an earlier run (policy v%d -> %s, pass rate %.3f)", it.Iteration, it.PolicyVersion, it.Checkpoint, it.PassRate)
	}
	return fmt.Sprintf("iteration %d: policy v%d: %d rollouts (%d completed, %d masked), pass rate %.3f; %d segments trained, %d of %d groups without variance, gate Pearson %.5f, loss %.4f; rollouts %.0fs, update %.0fs (%.0f train tokens/s, %.0f recompute tokens/s) -> %s",
		it.Iteration, it.PolicyVersion, it.Launched, it.Completed, it.Masked, it.PassRate, it.Trained, it.ZeroVariance, it.Groups, it.Pearson, it.Loss,
		it.RolloutSecs, it.TrainSecs, it.TrainTokensPS, it.RecompTokPS, it.Checkpoint)
}

// evalRow is one row of an eval: a split of a suite, labelled (a
// validation split is its own label; the test suite's are test and
// test_family), and its task file.
type evalRow struct {
	label, split, path string
	ins                []tasks.Instance
}

// evalRows are the validation rows of eval.splits and, with test and a
// test suite, their test rows.
func (l *looper) evalRows(test bool) ([]evalRow, error) {
	var rows []evalRow
	for _, split := range l.cfg.Eval.Splits {
		path, ins, err := l.evalTasks(split)
		if err != nil {
			return nil, err
		}
		rows = append(rows, evalRow{split, split, path, ins})
	}
	if !test || l.test == nil {
		return rows, nil
	}
	for _, split := range l.cfg.Eval.Splits {
		path, ins, err := l.testEvalTasks(split)
		if err != nil {
			return nil, err
		}
		rows = append(rows, evalRow{testSplit(split), split, path, ins})
	}
	return rows, nil
}

// eval measures pass@1 of a checkpoint per harness and held-out split,
// at temperature 1 and (eval.greedy) greedily, and with test on the test
// suite's splits too. Each split and mode is its own eval run
// (RUN-eval-heldout, RUN-eval-heldout-greedy, RUN-eval-test, ...),
// iteration = the policy version, so the same policy is never evaluated
// twice: a resumed run reads committed evals back and runs only the
// missing ones.
func (l *looper) eval(ctx context.Context, dir string, test bool) (EvalResult, error) {
	version, err := policyVersion(dir)
	if err != nil {
		return EvalResult{}, err
	}
	e := EvalResult{PolicyVersion: version, Checkpoint: dir, Pass1: map[string]map[string]float64{}, Tasks: map[string]map[string]int{},
		CI95: map[string]map[string][2]float64{}, Families: map[string]map[string]map[string]map[string]float64{},
		perTask: map[string]map[string]map[string]map[string]float64{}}
	modes := []string{ModeT1}
	if l.cfg.Eval.greedy() {
		modes = append(modes, ModeGreedy)
		e.Greedy, e.GreedyCI95 = map[string]map[string]float64{}, map[string]map[string][2]float64{}
	}
	rows, err := l.evalRows(test)
	if err != nil {
		return e, err
	}
	for _, row := range rows {
		split, ins, n := row.label, row.ins, len(row.ins)
		if n == 0 {
			continue
		}
		for _, mode := range modes {
			start := time.Now()
			t, err := retryMasked(l.cfg.Eval.MaxMasked, evalRetries, func(attempt int) (transforms.EvalTable, error) {
				return l.evalRun(ctx, dir, version, row, mode, attempt)
			}, func(attempt, masked, rollouts int) {
				l.logf("eval of policy v%d on %s, %s: %d of %d rollouts masked (environment failures), more than eval.max_masked %g: running it again (%d of %d)",
					version, split, mode, masked, rollouts, l.cfg.Eval.MaxMasked, attempt, evalRetries)
			})
			if err != nil {
				return e, err
			}
			for _, r := range t.Rows {
				p1, ci := e.Pass1, e.CI95
				if mode == ModeGreedy {
					p1, ci = e.Greedy, e.GreedyCI95
				}
				iv := stats.Pass1Interval(r.PerTask)
				set(p1, r.Harness, split, r.Pass1)
				set(ci, r.Harness, split, iv)
				if mode == ModeT1 {
					set(e.Tasks, r.Harness, split, r.Tasks)
				}
				if e.perTask[mode] == nil {
					e.perTask[mode] = map[string]map[string]map[string]float64{}
				}
				set(e.perTask[mode], r.Harness, split, r.PerTask)
				if e.Families[mode] == nil {
					e.Families[mode] = map[string]map[string]map[string]float64{}
				}
				set(e.Families[mode], r.Harness, split, groupPass1(ins, r.PerTask, family))
				if byT := groupPass1(ins, r.PerTask, template); len(byT) > 0 && !untemplated(byT) {
					if e.Templates == nil {
						e.Templates = map[string]map[string]map[string]map[string]float64{}
					}
					if e.Templates[mode] == nil {
						e.Templates[mode] = map[string]map[string]map[string]float64{}
					}
					set(e.Templates[mode], r.Harness, split, byT)
				}
				if r.Masked > 0 {
					if e.Masked == nil {
						e.Masked = map[string]map[string]map[string]int{}
					}
					if e.Masked[mode] == nil {
						e.Masked[mode] = map[string]map[string]int{}
					}
					set(e.Masked[mode], r.Harness, split, r.Masked)
				}
				l.logf("eval of policy v%d (%s): %s on %s: pass@1 %.3f [%.3f, %.3f] over %d tasks (%d masked); %s", version, mode, r.Harness, split,
					r.Pass1, iv[0], iv[1], r.Tasks, r.Masked, time.Since(start).Round(time.Second))
			}
		}
	}
	return e, nil
}

// retryMasked calls run(0), then run(1), ... while the table it returns
// masked more than maxMasked of its rollouts, at most retries times more,
// calling again(attempt, masked, rollouts) before each new attempt. It
// returns the first table within maxMasked, or the last: an attempt is
// never chosen by its pass rate, only by what the environment masked.
func retryMasked(maxMasked float64, retries int, run func(attempt int) (transforms.EvalTable, error), again func(attempt, masked, rollouts int)) (transforms.EvalTable, error) {
	for attempt := 0; ; attempt++ {
		t, err := run(attempt)
		if err != nil || attempt >= retries {
			return t, err
		}
		masked, rollouts := 0, 0
		for _, r := range t.Rows {
			masked += r.Masked
			rollouts += r.Rollouts
		}
		if rollouts == 0 || float64(masked) <= maxMasked*float64(rollouts) {
			return t, nil
		}
		again(attempt+1, masked, rollouts)
	}
}

// evalRun runs one row's eval in one mode. Attempt n > 0 (retryMasked)
// is its own eval run, RUN-eval-LABEL[-greedy]-retryN, so it samples and
// commits afresh and a resumed run finds every attempt where it left it.
func (l *looper) evalRun(ctx context.Context, dir string, version int64, row evalRow, mode string, attempt int) (transforms.EvalTable, error) {
	split, n := row.label, len(row.ins)
	run := evalRun(l.cfg.Run, split)
	if mode == ModeGreedy {
		run += "-greedy"
	}
	if attempt > 0 {
		run += fmt.Sprintf("-retry%d", attempt)
	}
	rc := l.rolloutConfig(int(version), dir, version, l.cfg.Eval.Harnesses[0], "", l.cfg.Eval.Group, run)
	if mode == ModeGreedy {
		rc.TopK = 1
	}
	l.logf("eval of policy v%d on %s, %s (%d tasks, %s)", version, split, mode, n, strings.Join(l.cfg.Eval.Harnesses, ", "))
	committed, err := l.committed(ctx, run, int(version), l.cfg.Eval.Harnesses)
	if err != nil {
		return transforms.EvalTable{}, err
	}
	var dones []func()
	for _, h := range l.cfg.Eval.Harnesses { // each harness commits under its own stage
		hc := rc
		hc.Harness, hc.Stage = h, eval.Stage(h)
		dones = append(dones, l.onPipeline(hc, n))
	}
	t, err := eval.Run(ctx, eval.Options{Tasks: row.path, Harnesses: l.cfg.Eval.Harnesses, Splits: []string{row.split}, Config: rc},
		l.runnerOptions("eval-"+split+"-"+mode, int(version)))
	for _, d := range dones {
		d()
	}
	if err == nil && !committed {
		l.did("eval of policy v%d on %s, %s", version, split, mode)
	}
	return t, err
}

// committed says whether the eval run's rollouts at iteration were
// committed for every harness already (an earlier process ran it).
func (l *looper) committed(ctx context.Context, run string, iteration int, harnesses []string) (bool, error) {
	for _, h := range harnesses {
		_, err := storage.Latest(ctx, l.st, storage.ManifestRef{RunID: run, Iteration: iteration, Stage: eval.Stage(h)})
		if errors.Is(err, storage.ErrNotFound) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
	}
	return true, nil
}

// groupPass1 is the mean pass rate in perTask (task id -> pass rate) of
// each group of tasks, key naming a task's group (family or template);
// tasks without one count under "".
func groupPass1(ins []tasks.Instance, perTask map[string]float64, key func(tasks.Instance) string) map[string]float64 {
	sum, n := map[string]float64{}, map[string]int{}
	for _, in := range ins {
		if v, ok := perTask[in.InstanceID]; ok {
			sum[key(in)] += v
			n[key(in)]++
		}
	}
	for f := range sum {
		sum[f] /= float64(n[f])
	}
	return sum
}

func family(in tasks.Instance) string   { return in.Family }
func template(in tasks.Instance) string { return in.Template }

// untemplated says whether a groupPass1 by template has tasks without one
// (a suite of an older generator, or not generated): then there is no
// by-template view.
func untemplated(byTemplate map[string]float64) bool {
	_, ok := byTemplate[""]
	return ok
}

func set[V any](m map[string]map[string]V, a, b string, v V) {
	if m[a] == nil {
		m[a] = map[string]V{}
	}
	m[a][b] = v
}

// evalRun is the run id of a split's evals.
func evalRun(run, split string) string { return run + "-eval-" + strings.ReplaceAll(split, "_", "-") }

func (l *looper) rolloutConfig(iteration int, policy string, version int64, h, stage string, group int, run string) transforms.Config {
	cfg := l.cfg
	if run == "" {
		run = cfg.Run
	}
	compute, precision := computeOf(l.o.Backend)
	if cfg.Rollout.Precision != "" {
		precision = cfg.Rollout.Precision
	}
	return transforms.Config{
		Compute: compute, Precision: precision,
		Store: cfg.Store, S3Endpoint: cfg.S3Endpoint, RunID: run, Iteration: int32(iteration), Stage: stage, Group: group,
		Harness: h, MaxTurns: cfg.Rollout.MaxTurns, AgentBinary: l.o.AgentBinary, Policy: policy, PolicyVersion: version,
		Template: cfg.Rollout.Template, MaxTokens: cfg.Rollout.MaxTokens, Backend: cfg.Rollout.Backend, Parallel: cfg.Rollout.Parallel,
		AgentTimeout: time.Duration(cfg.Rollout.AgentTimeout), GradeTimeout: time.Duration(cfg.Rollout.GradeTimeout),
		CodeVersion: l.o.CodeVersion, JobID: fmt.Sprintf("loop-%d", time.Now().UnixNano()),
	}
}

func (l *looper) runnerOptions(what string, iteration int) runner.Options {
	ro := l.o.Runner
	if ro.JobName == "" {
		ro.JobName = fmt.Sprintf("legorl-run-%s-%s-%d", l.cfg.Run, what, iteration)
	}
	return ro
}

func (l *looper) onPipeline(cfg transforms.Config, n int) func() {
	if l.o.OnPipeline == nil {
		return func() {}
	}
	return l.o.OnPipeline(cfg, n)
}

// countTasks counts the valid tasks of the splits (for progress; 0 when
// the suite cannot be read, and the pipeline then says why).
func (l *looper) countTasks(splits []string) int {
	all, err := l.load()
	if err != nil {
		return 0
	}
	return tasks.Runnable(all, splits)
}

// publish puts a checkpoint's files under runs/RUN/checkpoints/vNNNNNN/
// with transforms.PutSame: a file already there with the same bytes counts
// as put (a resumed loop publishes again), different bytes are an error.
func (l *looper) publish(ctx context.Context, dir string) error {
	version, err := policyVersion(dir)
	if err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		key := schemas.CheckpointKey(l.cfg.Run, version, e.Name())
		if err := putFile(ctx, l.st, key, filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("publish %s: %w", dir, err)
		}
	}
	return nil
}

func putFile(ctx context.Context, st storage.Store, key, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	return transforms.PutSame(ctx, st, key, f, fi.Size())
}

// storeResult writes the loop's figures to runs/RUN/reports/loop/
// results-vFIRST-vLAST.json (write-once; the same figures again are fine).
func (l *looper) storeResult(ctx context.Context, res *Result) error {
	if len(res.Evals) == 0 {
		return nil
	}
	body, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	first, last := res.Evals[0].PolicyVersion, res.Evals[len(res.Evals)-1].PolicyVersion
	key := schemas.LoopResultKey(l.cfg.Run, first, last, time.Now().UnixNano())
	return transforms.PutSame(ctx, l.st, key, bytes.NewReader(body), int64(len(body)))
}

// policyVersion is a checkpoint's version: lineage.json's, or 0.
func policyVersion(dir string) (int64, error) {
	return checkpoint.Version(dir)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, fs.ErrNotExist)
}
