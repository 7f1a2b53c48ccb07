package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/legorl/legorl/pipelines/rollout"
	"github.com/legorl/legorl/pipelines/runner"
	"github.com/legorl/legorl/policy/checkpoint"
	"github.com/legorl/legorl/storage"
	"github.com/legorl/legorl/tasks"
	"github.com/legorl/legorl/transforms"
)

// pipelineFlags are the flags of `legorl rollout` without --task: the
// Beam pipeline over a whole suite.
type pipelineFlags struct {
	group        *int
	splits       *string
	runnerName   *string
	endpoint     *string
	envType      *string
	envConfig    *string
	beamFlags    beamFlagList
	parallel     *int
	tailShare    *float64
	tailGrace    *time.Duration
	setupTimeout *time.Duration
	remote       remoteFlags
	compute      computeFlags
	metricsAddr  *string
}

// beamFlagList collects --beam name=value.
type beamFlagList map[string]string

func (b beamFlagList) String() string { return "" }
func (b beamFlagList) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want name=value, got %q", s)
	}
	b[k] = v
	return nil
}

func addPipelineFlags(fs *flag.FlagSet) *pipelineFlags {
	p := &pipelineFlags{beamFlags: beamFlagList{}}
	p.group = fs.Int("group", 1, "pipeline: G, rollouts per task")
	p.runnerName = fs.String("runner", runner.Prism, "pipeline: Beam runner: prism (in process, bound to loopback) or universal (a job server at --endpoint)")
	p.endpoint = fs.String("endpoint", "", "pipeline: job server HOST:PORT (--runner universal: Flink, Spark, a Prism)")
	p.envType = fs.String("environment-type", "", "pipeline: how the job server starts workers: LOOPBACK, PROCESS, EXTERNAL or DOCKER (default: loopback for prism)")
	p.envConfig = fs.String("environment-config", "", "pipeline: the environment's configuration (e.g. PROCESS: {\"command\": \"/path/to/legorl\"})")
	fs.Var(p.beamFlags, "beam", "pipeline: another Beam option passed through, name=value (repeatable)")
	p.parallel = fs.Int("parallel", 4, "pipeline: rollouts running at once per worker process (they share one engine)")
	p.tailShare = fs.Float64("tail-share", 0.75, "pipeline: once this share of a group has ended, the rest get --tail-grace more, then are killed and masked as timeout (1: off)")
	p.tailGrace = fs.Duration("tail-grace", 10*time.Minute, "pipeline: see --tail-share")
	p.setupTimeout = fs.Duration("setup-timeout", 5*time.Minute, "deadline of a rollout's setup (workspace, harness install, sandbox boot)")
	p.remote = addRemoteFlags(fs)
	p.compute = addComputeFlags(fs)
	p.metricsAddr = fs.String("metrics-addr", "", "pipeline: serve Prometheus metrics at http://ADDR/metrics while it runs, e.g. 127.0.0.1:9090 (rollouts of workers in this process: the default prism loopback); empty: off")
	return p
}

// rolloutArgs are the flags both forms of `legorl rollout` share.
type rolloutArgs struct {
	suite, harness, policy, run, template, agent, backend string
	iteration, maxTurns, maxTokens                        int
	seed                                                  uint64
	agentTimeout, gradeTimeout                            time.Duration
}

// runRolloutPipeline is `legorl rollout` without --task: the rollout
// pipeline over the whole suite, G rollouts per task, committed as one
// manifest version of the run and iteration. Progress goes to stderr and a
// one-line summary to stdout. Running it again for the same run and
// iteration (after a crash, kill -9 included) finishes the run without
// running a finished group again and without duplicates.
func runRolloutPipeline(ctx context.Context, env *environ, sf *storeFlags, a rolloutArgs, pf *pipelineFlags, stdout, stderr io.Writer) error {
	if a.suite == "" || a.harness == "" || a.policy == "" || a.run == "" {
		return errors.New("--tasks, --harness, --policy and --run are required (and --task for a single rollout; see legorl rollout -h)")
	}
	cfg, st, suite, err := pipelineConfig(ctx, env, sf, a, pf)
	if err != nil {
		return err
	}
	suitePath, err := filepath.Abs(a.suite)
	if err != nil {
		return err
	}
	splits := strings.Split(*pf.splits, ",")
	total := tasks.Runnable(suite.Instances, splits)
	stopMetrics, err := pf.startMetrics(ctx, "rollout", stderr)
	if err != nil {
		return err
	}
	defer stopMetrics()
	start := time.Now()
	stopProgress := progress(ctx, st, cfg, total, stderr)
	rep, err := rollout.Run(ctx, rollout.Options{Tasks: suitePath, Splits: splits, Config: cfg}, pf.runnerOptions("legorl-rollout-"+a.run))
	stopProgress()
	if err != nil {
		return err
	}
	for _, r := range rep.Rejected {
		fmt.Fprintf(stderr, "legorl rollout: rejected %s: %s: %s\n", r.TaskID, r.Reason, r.Detail)
	}
	fmt.Fprintln(stdout, rep.Summary(time.Since(start)))
	return nil
}

// startMetrics serves the rollout runtime's metrics (transforms.RuntimeMetrics:
// pipeline, engine, proxy, sandbox) at --metrics-addr, when it is set, for
// the DoFns of this process; the returned function stops serving and
// detaches them.
func (pf *pipelineFlags) startMetrics(ctx context.Context, name string, stderr io.Writer) (stop func(), err error) {
	if *pf.metricsAddr == "" {
		return func() {}, nil
	}
	reg := newRegistry()
	rm := newRuntimeMetrics(reg)
	stopServing, err := startMetrics(ctx, name, *pf.metricsAddr, reg, stderr)
	if err != nil {
		return nil, err
	}
	transforms.SetRuntimeMetrics(rm)
	return func() {
		transforms.SetRuntimeMetrics(transforms.RuntimeMetrics{})
		stopServing()
	}, nil
}

// runnerOptions are the Beam runner's options from the flags.
func (pf *pipelineFlags) runnerOptions(job string) runner.Options {
	return runner.Options{Runner: *pf.runnerName, Endpoint: *pf.endpoint, EnvironmentType: *pf.envType,
		EnvironmentConfig: *pf.envConfig, Flags: pf.beamFlags, JobName: job}
}

// pipelineConfig checks the flags of a pipeline command and returns the
// rollouts' config, the store and the suite.
func pipelineConfig(ctx context.Context, env *environ, sf *storeFlags, a rolloutArgs, pf *pipelineFlags) (transforms.Config, storage.Store, *tasks.Suite, error) {
	fail := func(err error) (transforms.Config, storage.Store, *tasks.Suite, error) {
		return transforms.Config{}, nil, nil, err
	}
	if *pf.group < 1 || *pf.group > 1024 {
		return fail(fmt.Errorf("--group %d: want 1 to 1024", *pf.group))
	}
	if a.iteration < 0 || a.iteration > 999999 {
		return fail(fmt.Errorf("--iteration %d out of range", a.iteration))
	}
	suite, err := tasks.Load(a.suite)
	if err != nil {
		return fail(err)
	}
	policy, err := filepath.Abs(a.policy)
	if err != nil {
		return fail(err)
	}
	if _, err := os.Stat(filepath.Join(policy, "tokenizer.json")); err != nil {
		return fail(fmt.Errorf("policy: %w", err))
	}
	polVersion, err := checkpoint.VerifiedVersion(policy)
	if err != nil {
		return fail(err)
	}
	if a.agent == "" {
		if a.agent, err = findAgent(); err != nil {
			return fail(err)
		}
	}
	rem, err := pf.remote.value()
	if err != nil {
		return fail(err)
	}
	cfg := transforms.Config{
		Store: sf.uri, S3Endpoint: sf.endpoint, RunID: a.run, Iteration: int32(a.iteration), Group: *pf.group, SeedBase: a.seed,
		Harness: a.harness, MaxTurns: a.maxTurns, AgentBinary: a.agent, Policy: policy, PolicyVersion: polVersion,
		Template: a.template, MaxTokens: a.maxTokens, RemoteURL: rem.URL, RemoteKind: rem.Kind,
		Compute: *pf.compute.name, Precision: *pf.compute.precision,
		Backend: a.backend, Parallel: *pf.parallel, SetupTimeout: *pf.setupTimeout, AgentTimeout: a.agentTimeout,
		GradeTimeout: a.gradeTimeout, TailShare: *pf.tailShare, TailGrace: *pf.tailGrace, CodeVersion: version,
		JobID: newJobID(),
	}
	if *pf.tailShare >= 1 {
		cfg.TailShare = 1
	}
	if err := cfg.Check(); err != nil {
		return fail(err)
	}
	transforms.SetStoreOptions(storage.Options{AccessKey: env.AccessKey, SecretKey: env.SecretKey, SessionToken: env.Session, Region: env.Region})
	st, err := sf.open(ctx, env, true)
	if err != nil {
		return fail(err)
	}
	return cfg, st, suite, nil
}

// progress shows finished groups (claims in the store) against the valid
// tasks: a bar redrawn on a terminal, else a line when the count changes
// (at most every 10 seconds). It reads the store, so it works with any
// runner. The returned function stops it.
func progress(ctx context.Context, st storage.Store, cfg transforms.Config, total int, w io.Writer) func() {
	tty := isTerminal(w)
	cfg = cfg.WithDefaults()
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		prefix := transforms.ClaimPrefix(cfg.RunID, cfg.Stage, cfg.Iteration)
		last, lastAt, start := -1, time.Time{}, time.Now()
		for {
			keys, err := st.List(ctx, prefix)
			if err == nil {
				done := len(keys)
				el := time.Since(start).Round(time.Second)
				switch {
				case tty:
					fmt.Fprintf(w, "\r%s %d/%d groups (%d rollouts each) %s ", bar(done, total, 30), done, total, cfg.Group, el)
				case done != last && time.Since(lastAt) >= 10*time.Second:
					fmt.Fprintf(w, "legorl rollout: %d/%d groups done (%d rollouts each), %s\n", done, total, cfg.Group, el)
					last, lastAt = done, time.Now()
				}
			}
			select {
			case <-ctx.Done():
				if tty {
					fmt.Fprint(w, "\n")
				}
				return
			case <-tick.C:
			}
		}
	}()
	return func() { cancel(); wg.Wait() }
}

func bar(done, total, width int) string {
	n := 0
	if total > 0 {
		n = min(width, done*width/total)
	}
	return "[" + strings.Repeat("#", n) + strings.Repeat(".", width-n) + "]"
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// newJobID names one pipeline run's report.
func newJobID() string {
	var b [4]byte
	rand.Read(b[:])
	return time.Now().UTC().Format("20060102T150405") + "-" + hex.EncodeToString(b[:])
}
