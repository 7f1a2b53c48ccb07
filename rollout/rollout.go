// Package rollout runs one agent episode end to end, without Beam: it
// prepares a sandbox with the task's workspace (only base_commit's
// objects), serves the proxy inside the sandbox's network namespace, runs
// the harness under the agent deadline, takes the diff, grades it in a
// fresh grader sandbox, and returns the rollouts, segments and steps rows
// with a typed termination. The Beam transform wraps Run.
//
// Every infrastructure failure is a masked row, never a reward of 0: a
// workspace or sandbox that cannot be built is env_setup_failed, a sandbox
// that fails under the agent sandbox_crash, a deadline timeout, a context
// overflow in the proxy overlong, and a harness that crashes or ends
// without a result harness_error. Only agent_completed (the agent
// submitted, or stopped by itself, e.g. after K turns without a tool
// call) and max_turns are scored. Every phase has a deadline; nothing
// waits without one.
package rollout

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/legorl/legorl/harness"
	"github.com/legorl/legorl/policy/infer"
	"github.com/legorl/legorl/proxy"
	"github.com/legorl/legorl/sandbox"
	"github.com/legorl/legorl/sandbox/grade"
	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/tasks"
	"github.com/legorl/legorl/text"
)

// Proxy is the model server a rollout talks to, shared by concurrent
// rollouts (*proxy.Proxy). The runner serves it to the sandbox only under
// the rollout's own path, /rollout/<id>/.
type Proxy interface {
	http.Handler
	Open(id string, opt proxy.RolloutOptions) error
	Finish(id string) (proxy.Record, error)
}

// Paths inside the agent sandbox.
const (
	// WorkspaceDir is the task's repository, where the harness starts.
	WorkspaceDir = "/workspace"
	// AgentPath is where the legorl-agent program (Config.AgentBinary)
	// appears, read-only.
	AgentPath = "/legorl/bin/legorl-agent"
	// ConfigDir holds the task file and the harness's Launch.Files,
	// read-only.
	ConfigDir = "/legorl/harness"
	// ProgramDir holds what the harness's Install returned, read-only.
	ProgramDir = "/legorl/program"
	// TaskFile is the problem statement, in ConfigDir.
	TaskFile = ConfigDir + "/task.md"
)

// Config is one rollout. Backend, Proxy, VocabSize, Harness, Instance,
// RunID and RolloutID are required; zero fields take the defaults in their
// comments.
type Config struct {
	// Backend makes the agent's sandbox (and the grader's, unless Grader
	// is set).
	Backend sandbox.Backend
	// Grader grades the diff: a *grade.Grader, or a *grade.Memo that a
	// group's rollouts share so each distinct diff is graded once. Defaults
	// to grade.New(Backend, {}) (one per Run: pass a shared one to reuse
	// its caches).
	Grader Grader
	// Proxy serves the policy; Run opens and finishes RolloutID on it.
	Proxy Proxy
	// VocabSize is the tokenizer's, to validate segments.
	VocabSize int
	// Sampling is the rollout's sampling. Defaults to the proxy's.
	Sampling infer.Sampling
	// PolicyVersion goes in the row when no token was sampled (else the
	// oldest version that sampled one).
	PolicyVersion int64

	Harness harness.Harness
	// AgentBinary is the host path of legorl-agent, shown read-only at
	// AgentPath (built-in harnesses need it). It must be readable and
	// executable by others (the sandbox's root is an unprivileged host
	// uid).
	AgentBinary string
	// CacheDir is where harnesses install their programs. Defaults to
	// $TMPDIR/legorl-harness.
	CacheDir string
	// Model is the model name the harness asks for. Defaults to "legorl".
	Model string
	// MaxTurns bounds the agent's turns (0: the harness's default).
	MaxTurns int

	// SuiteDir resolves the instance's relative snapshot path.
	SuiteDir string
	Instance *tasks.Instance
	// Workspace, when set, is the instance's workspace prepared already
	// (tasks.NewWorkspace of its snapshot and base commit): the sandbox is
	// made from it (a private copy; the folder is never written) instead
	// of a folder Run prepares with git, and the diff is taken against its
	// tree. The G rollouts of a group share one. Defaults to none: Run
	// prepares the workspace itself.
	Workspace *tasks.Workspace

	RunID     string
	Iteration int32
	// GroupID groups the rollouts of one task in one iteration. Defaults
	// to GroupID(RunID, Iteration, task).
	GroupID string
	// RolloutID names the rollout (see ID); [A-Za-z0-9._-], 1-128.
	RolloutID string
	Seed      uint64

	// Limits of the agent sandbox. Defaults to the sandbox defaults.
	Limits sandbox.Limits
	// SetupTimeout bounds the workspace, install and sandbox setup.
	// Defaults to 5 minutes.
	SetupTimeout time.Duration
	// AgentTimeout bounds the harness's run. Defaults to 30 minutes.
	AgentTimeout time.Duration
	// GradeTimeout bounds grading. Defaults to 10 minutes.
	GradeTimeout time.Duration
	// DiffLimits bound the agent's diff. Defaults to grade's.
	DiffLimits grade.DiffLimits
	// TempDir holds the rollout's host files. Defaults to os.TempDir().
	TempDir string
}

// Grader grades an agent's diff against an instance (grade.Grader.Grade).
type Grader interface {
	Grade(ctx context.Context, suiteDir string, inst *tasks.Instance, diff string) (grade.Grade, error)
}

// Sentinel errors.
var (
	// ErrConfig: a required field is missing or malformed.
	ErrConfig = errors.New("rollout: bad config")
	// ErrInvalidRows: a row the run built fails its schema's validation
	// (a bug: the rows are returned with the error).
	ErrInvalidRows = errors.New("rollout: invalid rows")
)

var idRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

func (c Config) check() error {
	switch {
	case c.Backend == nil || c.Proxy == nil || c.Harness == nil || c.Instance == nil:
		return fmt.Errorf("%w: Backend, Proxy, Harness and Instance are required", ErrConfig)
	case c.VocabSize <= 0:
		return fmt.Errorf("%w: VocabSize is required", ErrConfig)
	case c.RunID == "":
		return fmt.Errorf("%w: RunID is required", ErrConfig)
	case !idRE.MatchString(c.RolloutID):
		return fmt.Errorf("%w: rollout id %q: want 1-128 of [A-Za-z0-9._-]", ErrConfig, c.RolloutID)
	}
	return nil
}

// DefaultDeadlines gives the phase deadlines of a rollout (Config's
// SetupTimeout, AgentTimeout, GradeTimeout) with each one not positive
// replaced by its default: 5, 30 and 10 minutes. The pipelines' configs
// (transforms.Config) default theirs here too.
func DefaultDeadlines(setup, agent, grading time.Duration) (time.Duration, time.Duration, time.Duration) {
	if setup <= 0 {
		setup = 5 * time.Minute
	}
	if agent <= 0 {
		agent = 30 * time.Minute
	}
	if grading <= 0 {
		grading = 10 * time.Minute
	}
	return setup, agent, grading
}

func (c Config) withDefaults() Config {
	if c.Grader == nil {
		c.Grader = grade.New(c.Backend, grade.Options{})
	}
	if c.CacheDir == "" {
		c.CacheDir = filepath.Join(os.TempDir(), "legorl-harness")
	}
	if c.Model == "" {
		c.Model = "legorl"
	}
	if c.GroupID == "" {
		c.GroupID = GroupID(c.RunID, c.Iteration, c.Instance.InstanceID)
	}
	c.SetupTimeout, c.AgentTimeout, c.GradeTimeout = DefaultDeadlines(c.SetupTimeout, c.AgentTimeout, c.GradeTimeout)
	return c
}

// ID is the deterministic rollout id of the index-th rollout of a task in
// an iteration of a run.
func ID(runID string, iteration int32, taskID string, index int) string {
	return hash("rollout", runID, strconv.Itoa(int(iteration)), taskID, strconv.Itoa(index))
}

// Seed is the deterministic sampling seed of the index-th rollout of a
// task in an iteration of a run; base mixes in a seed of the user's
// choosing (0 is a fine default).
func Seed(base uint64, runID string, iteration int32, taskID string, index int) uint64 {
	h := sha256.New()
	for _, p := range []string{"seed", strconv.FormatUint(base, 10), runID, strconv.Itoa(int(iteration)), taskID, strconv.Itoa(index)} {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return binary.BigEndian.Uint64(h.Sum(nil)) >> 1 // fits the rows' int64 seed column
}

// GroupID is the id shared by the rollouts of a task in an iteration.
func GroupID(runID string, iteration int32, taskID string) string {
	return hash("group", runID, strconv.Itoa(int(iteration)), taskID)
}

func hash(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// DiffFlagPrefix begins the flag that carries the sha256 of the rollout's
// workspace diff (DiffFlag), so that a replay of the rollout can compare
// its diff byte for byte with the one graded (legorl audit --replay).
const DiffFlagPrefix = "diff_sha256:"

// DiffFlag is the flag of a workspace diff: DiffFlagPrefix and the diff's
// sha256 in hex.
func DiffFlag(diff string) string {
	sum := sha256.Sum256([]byte(diff))
	return DiffFlagPrefix + hex.EncodeToString(sum[:])
}

// DiffHash returns the diff sha256 a rollout row's flags carry (DiffFlag);
// "" when they carry none (the diff was refused, the rollout ended before
// its diff was taken, or it was recorded before rows carried the hash).
func DiffHash(flags []string) string {
	for _, f := range flags {
		if h, ok := strings.CutPrefix(f, DiffFlagPrefix); ok {
			return h
		}
	}
	return ""
}

// Waits that have no deadline of their own in the config.
const (
	// agentGrace is how long after the agent deadline Run stops waiting
	// for the sandbox to report the kill.
	agentGrace = 30 * time.Second
	// finishWait bounds the wait for the proxy's call in flight once the
	// agent is gone (its request context is canceled then).
	finishWait = 30 * time.Second
	// serveWait bounds the wait for the HTTP server to stop.
	serveWait = 5 * time.Second
	// tailBytes is how much of the harness's stdout is kept for its result.
	tailBytes = 1 << 20
)

// run is the state of one Run.
type run struct {
	cfg   Config
	row   schemas.Rollout
	start time.Time
}

// Run runs one rollout and returns its rows. Every end of the episode is a
// row with a typed termination; the error is for a bad Config, a rollout
// id already open on the proxy, rows that fail validation (returned with
// it), or ctx ending (the row is then a masked timeout).
func Run(ctx context.Context, cfg Config) (schemas.Rollout, []schemas.Segment, []schemas.Step, error) {
	if err := cfg.check(); err != nil {
		return schemas.Rollout{}, nil, nil, err
	}
	cfg = cfg.withDefaults()
	r := &run{cfg: cfg, start: time.Now()}
	r.row = schemas.Rollout{
		RunID: cfg.RunID, Iteration: cfg.Iteration, TaskID: cfg.Instance.InstanceID, GroupID: cfg.GroupID,
		RolloutID: cfg.RolloutID, Harness: cfg.Harness.Name(), PolicyVersion: cfg.PolicyVersion, Seed: int64(cfg.Seed),
		StartedAtMs: r.start.UnixMilli(), F2PPassed: []string{}, F2PFailed: []string{}, P2PPassed: []string{}, P2PFailed: []string{},
		Flags: []string{},
	}
	segs, steps, err := r.episode(ctx)
	if err != nil && r.row.Termination == "" { // the rollout never started
		return r.row, nil, nil, err
	}
	if err == nil {
		err = ctx.Err()
	}
	if verr := r.validate(segs, steps); verr != nil {
		return r.row, segs, steps, verr
	}
	return r.row, segs, steps, err
}

// end sets the termination (and the status it implies).
func (r *run) end(t schemas.Termination, detail string) {
	r.row.Termination, r.row.Status = t, t.Status()
	if r.row.Status == schemas.StatusMasked {
		r.row.Reward = 0
		r.row.Error = text.OneLine(detail, 2000)
	} else {
		r.row.Error = ""
	}
}

func (r *run) flag(f string) {
	for _, x := range r.row.Flags {
		if x == f {
			return
		}
	}
	r.row.Flags = append(r.row.Flags, f)
}

// episode runs the phases. It returns an error only for what Run returns
// one for; every other end is recorded in r.row.
func (r *run) episode(ctx context.Context) ([]schemas.Segment, []schemas.Step, error) {
	cfg := r.cfg
	tmp, err := os.MkdirTemp(cfg.TempDir, "legorl-rollout-")
	if err != nil {
		r.end(schemas.TerminationEnvSetupFailed, err.Error())
		return nil, nil, nil
	}
	defer os.RemoveAll(tmp)

	// Setup: workspace, harness files, sandbox, proxy, listener.
	sctx, scancel := context.WithTimeout(ctx, cfg.SetupTimeout)
	defer scancel()
	setupFail := func(what string, err error) ([]schemas.Segment, []schemas.Step, error) {
		r.row.SetupSeconds = time.Since(r.start).Seconds()
		t := schemas.TerminationEnvSetupFailed
		if sctx.Err() != nil {
			t = schemas.TerminationTimeout
		}
		r.end(t, what+": "+err.Error())
		return nil, nil, nil
	}
	ws := filepath.Join(tmp, "ws")
	var pristine tasks.Tree
	if cfg.Workspace != nil {
		// The sandbox gets a private copy and never writes the original
		// (sandbox.Spec.Workspace), so rollouts can share it.
		ws, pristine = cfg.Workspace.Dir, cfg.Workspace.Tree
	} else {
		snap := cfg.Instance.SnapshotDir(cfg.SuiteDir)
		if err := tasks.PrepareWorkspace(sctx, snap, cfg.Instance.BaseCommit, ws); err != nil {
			return setupFail("workspace", err)
		}
		if pristine, err = tasks.ReadTree(sctx, snap, cfg.Instance.BaseCommit); err != nil {
			return setupFail("pristine tree", err)
		}
	}
	hostCfg := filepath.Join(tmp, "harness")
	if err := os.Mkdir(hostCfg, 0o755); err != nil {
		return setupFail("harness folder", err)
	}
	if err := os.Chmod(hostCfg, 0o755); err != nil { // the sandbox's root is another host uid
		return setupFail("harness folder", err)
	}
	if err := os.WriteFile(filepath.Join(hostCfg, path.Base(TaskFile)), []byte(cfg.Instance.ProblemStatement), 0o644); err != nil {
		return setupFail("task file", err)
	}
	prog, err := cfg.Harness.Install(sctx, cfg.CacheDir)
	if err != nil {
		return setupFail("install "+cfg.Harness.Name(), err)
	}
	mounts := []sandbox.Mount{{Source: hostCfg, Target: ConfigDir, ReadOnly: true}}
	if cfg.AgentBinary != "" {
		mounts = append(mounts, sandbox.Mount{Source: cfg.AgentBinary, Target: AgentPath, ReadOnly: true})
	}
	if prog != "" {
		mounts = append(mounts, sandbox.Mount{Source: prog, Target: ProgramDir, ReadOnly: true})
	}
	sb, err := cfg.Backend.Create(sctx, sandbox.Spec{Workspace: ws, WorkspaceDir: WorkspaceDir, Image: cfg.Instance.Image, Mounts: mounts, Limits: cfg.Limits})
	if err != nil {
		return setupFail("sandbox", err)
	}
	defer sb.Close()
	if err := cfg.Proxy.Open(cfg.RolloutID, proxy.RolloutOptions{RunID: cfg.RunID, Iteration: cfg.Iteration, Seed: cfg.Seed, Sampling: cfg.Sampling}); err != nil {
		return nil, nil, err
	}
	fin := &finisher{p: cfg.Proxy, id: cfg.RolloutID}
	defer fin.finish() // on every early return; a no-op after the first
	ln, err := sb.Listen(sctx, 0)
	if err != nil {
		r.row.SetupSeconds = time.Since(r.start).Seconds()
		r.end(schemas.TerminationSandboxCrash, "listen: "+err.Error())
		return nil, nil, nil
	}
	port := ln.Addr().(*net.TCPAddr).Port
	env := harness.Env{
		BaseURL:   fmt.Sprintf("http://127.0.0.1:%d/rollout/%s/v1", port, cfg.RolloutID),
		Model:     cfg.Model,
		TaskFile:  TaskFile,
		Workspace: WorkspaceDir,
		MaxTurns:  cfg.MaxTurns,
		ConfigDir: ConfigDir,
	}
	if prog != "" {
		env.ProgramDir = ProgramDir
	}
	if cfg.AgentBinary != "" {
		env.AgentPath = AgentPath
	}
	launch, err := cfg.Harness.Command(env)
	if err == nil {
		err = writeFiles(hostCfg, launch.Files)
	}
	if err != nil {
		ln.Close()
		r.row.SetupSeconds = time.Since(r.start).Seconds()
		r.end(schemas.TerminationHarnessError, "command: "+err.Error())
		return nil, nil, nil
	}
	r.row.SetupSeconds = time.Since(r.start).Seconds()

	// Agent: serve the proxy on the listener while the harness runs.
	gate := &gate{prefix: "/rollout/" + cfg.RolloutID + "/", next: cfg.Proxy}
	srvCtx, stopSrv := context.WithCancel(ctx)
	srv := &http.Server{Handler: gate, ReadHeaderTimeout: time.Minute,
		BaseContext: func(net.Listener) context.Context { return srvCtx },
		ErrorLog:    log.New(io.Discard, "", 0)}
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.Serve(ln)
	}()
	stdout := &tailBuffer{max: tailBytes}
	stderr := &tailBuffer{max: 4 << 10}
	cmd := launch.Cmd
	cmd.Timeout = cfg.AgentTimeout
	cmd.Stdout, cmd.Stderr = stdout, stderr
	actx, acancel := context.WithTimeout(ctx, cfg.AgentTimeout+agentGrace)
	agentStart := time.Now()
	res, execErr := sb.Exec(actx, cmd)
	acancel()
	r.row.AgentSeconds = time.Since(agentStart).Seconds()
	stopSrv() // cancels the calls in flight
	srv.Close()
	select {
	case <-served:
	case <-time.After(serveWait):
	}
	rec, finErr := fin.finish()
	r.row.LLMSeconds = gate.seconds()

	// What the agent left, read before the sandbox goes.
	diff, diffErr := grade.TakeDiff(pristine, sb.HostWorkspace(), cfg.DiffLimits)
	if diffErr == nil {
		r.row.DiffBytes = int64(len(diff))
		r.flag(DiffFlag(diff))
	}
	sb.Close()

	hres, herr := cfg.Harness.Result(stdout.Bytes())
	r.count(rec, hres, herr)
	steps := r.steps(hres, herr)
	segs := rec.Segments
	if finErr != nil {
		r.end(schemas.TerminationHarnessError, "proxy: "+finErr.Error())
		return segs, steps, nil
	}
	if !r.terminate(ctx, res, execErr, rec, hres, herr, stderr.String()) {
		return segs, steps, nil
	}

	// Grade: only a scored rollout's reward means anything.
	if diffErr != nil {
		r.flag("diff_refused")
		return segs, steps, nil
	}
	gctx, gcancel := context.WithTimeout(ctx, cfg.GradeTimeout)
	defer gcancel()
	g, gerr := cfg.Grader.Grade(gctx, cfg.SuiteDir, cfg.Instance, diff)
	r.row.GradeSeconds = g.TotalSeconds
	for _, f := range g.Flags {
		r.flag(f)
	}
	switch {
	case gerr != nil && gctx.Err() != nil:
		r.end(schemas.TerminationTimeout, "grade: "+gerr.Error())
		return segs, steps, nil
	case gerr != nil:
		r.end(schemas.TerminationEnvSetupFailed, "grade: "+gerr.Error())
		return segs, steps, nil
	}
	switch g.Outcome {
	case sandbox.OutcomeCompleted:
	case sandbox.OutcomeSandboxCrash:
		r.end(schemas.TerminationSandboxCrash, "grade: "+g.Detail)
		return segs, steps, nil
	case sandbox.OutcomeEnvSetupFailed:
		r.end(schemas.TerminationEnvSetupFailed, "grade: "+g.Detail)
		return segs, steps, nil
	default: // the agent's code: a refused patch, tests that hang or blow the limits
		r.flag("grade_" + string(g.Outcome))
	}
	r.row.Reward = g.Reward
	r.row.F2PPassed, r.row.F2PFailed = nonNil(g.F2PPassed), nonNil(g.F2PFailed)
	r.row.P2PPassed, r.row.P2PFailed = nonNil(g.P2PPassed), nonNil(g.P2PFailed)
	return segs, steps, nil
}

// terminate decides how the agent phase ended, and reports whether the
// rollout is scored (and so graded).
func (r *run) terminate(ctx context.Context, res sandbox.Result, execErr error, rec proxy.Record,
	hres harness.Result, herr error, stderr string) bool {
	why := func(s string) string {
		if t := strings.TrimSpace(stderr); t != "" {
			s += "; stderr: " + t
		}
		return s
	}
	switch {
	case execErr != nil && (ctx.Err() != nil || res.Outcome == sandbox.OutcomeTimeout):
		r.end(schemas.TerminationTimeout, "agent: "+execErr.Error())
	case execErr != nil:
		r.end(schemas.TerminationSandboxCrash, "agent: "+execErr.Error())
	case res.Outcome == sandbox.OutcomeSandboxCrash:
		r.end(schemas.TerminationSandboxCrash, "agent: "+res.Detail)
	case rec.Metrics.Overlong:
		r.end(schemas.TerminationOverlong, "the context outgrew the model")
	case res.Outcome == sandbox.OutcomeTimeout:
		r.end(schemas.TerminationTimeout, fmt.Sprintf("agent: no end within %s", r.cfg.AgentTimeout))
	case herr != nil:
		r.end(schemas.TerminationHarnessError, why(fmt.Sprintf("%s: outcome %s, exit %d%s: %v",
			r.cfg.Harness.Name(), res.Outcome, res.ExitCode, detail(res.Detail), herr)))
	case hres.Stop == harness.StopError:
		r.end(schemas.TerminationHarnessError, why(r.cfg.Harness.Name()+": "+hres.Error))
	case hres.Stop == harness.StopMaxTurns:
		r.end(schemas.TerminationMaxTurns, "")
	default:
		if hres.Stop == harness.StopNoToolCalls {
			r.flag("no_tool_calls")
		}
		r.end(schemas.TerminationAgentCompleted, "")
	}
	return r.row.Status == schemas.StatusCompleted
}

func detail(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

// count fills the counts and times from the proxy's metrics and the
// harness's result (which wins where it knows better).
func (r *run) count(rec proxy.Record, hres harness.Result, herr error) {
	m := rec.Metrics
	r.row.NumLLMCalls = int32(m.Calls)
	r.row.NumTurns = int32(m.Calls - m.SideRequests)
	r.row.NumToolCalls = int32(m.ToolCalls)
	r.row.ToolParseFailures = int32(m.ToolParseFailures)
	r.row.ToolsSeconds = max(0, r.row.AgentSeconds-r.row.LLMSeconds)
	if m.BadOutput {
		r.flag("bad_output")
	}
	if m.StreamMismatches > 0 {
		r.flag("stream_mismatch")
	}
	if len(m.Forks) > 0 {
		r.flag("forked")
	}
	first := true
	for _, s := range rec.Segments {
		for i, mk := range s.LossMask {
			if mk == 1 && (first || s.PolicyVersions[i] < r.row.PolicyVersion) {
				r.row.PolicyVersion, first = s.PolicyVersions[i], false
			}
		}
	}
	if herr != nil {
		return
	}
	if hres.Turns >= 0 {
		r.row.NumTurns = int32(hres.Turns)
	}
	if hres.ToolCalls >= 0 {
		r.row.NumToolCalls = int32(hres.ToolCalls)
	}
	if hres.ParseFailures > 0 {
		r.row.ToolParseFailures += int32(hres.ParseFailures)
	}
	if hres.ToolSeconds >= 0 {
		r.row.ToolsSeconds = hres.ToolSeconds
	}
	for _, f := range hres.Flags {
		r.flag(f)
	}
}

// steps are the harness's steps with the rollout's identity.
func (r *run) steps(hres harness.Result, herr error) []schemas.Step {
	if herr != nil {
		return nil
	}
	out := make([]schemas.Step, 0, len(hres.Steps))
	for _, s := range hres.Steps {
		s.RunID, s.Iteration, s.RolloutID = r.cfg.RunID, r.cfg.Iteration, r.cfg.RolloutID
		out = append(out, s)
	}
	return out
}

// validate checks every row.
func (r *run) validate(segs []schemas.Segment, steps []schemas.Step) error {
	if err := r.row.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidRows, err)
	}
	for i := range segs {
		if err := segs[i].Validate(r.cfg.VocabSize); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidRows, err)
		}
	}
	for i := range steps {
		if err := steps[i].Validate(); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidRows, err)
		}
	}
	return nil
}

// writeFiles writes a launch's files under dir, readable by the sandbox.
func writeFiles(dir string, files map[string][]byte) error {
	for name, data := range files {
		if !filepath.IsLocal(name) {
			return fmt.Errorf("harness file %q is not a local path", name)
		}
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// finisher finishes a rollout on the proxy once, waiting at most
// finishWait for the call in flight.
type finisher struct {
	p    Proxy
	id   string
	once sync.Once
	rec  proxy.Record
	err  error
}

func (f *finisher) finish() (proxy.Record, error) {
	f.once.Do(func() {
		type out struct {
			rec proxy.Record
			err error
		}
		ch := make(chan out, 1)
		go func() {
			rec, err := f.p.Finish(f.id)
			ch <- out{rec, err}
		}()
		select {
		case o := <-ch:
			f.rec, f.err = o.rec, o.err
		case <-time.After(finishWait):
			f.err = fmt.Errorf("a call of rollout %s still runs %s after the agent ended", f.id, finishWait)
		}
	})
	return f.rec, f.err
}

// gate serves the proxy to one rollout's sandbox: only paths under the
// rollout's own prefix (no other rollout's, no default rollout), and it
// adds up the time spent in calls.
type gate struct {
	prefix string
	next   http.Handler
	mu     sync.Mutex
	busy   time.Duration
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	if !strings.HasPrefix(p, g.prefix) || path.Clean(p) != p || r.URL.RawPath != "" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, `{"error":{"message":"rollout: only %s is served here","type":"invalid_request_error","param":null,"code":null}}`+"\n", g.prefix)
		return
	}
	start := time.Now()
	g.next.ServeHTTP(w, r)
	g.mu.Lock()
	g.busy += time.Since(start)
	g.mu.Unlock()
}

func (g *gate) seconds() float64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.busy.Seconds()
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > 2*t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) Bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.b
	if len(b) > t.max {
		b = b[len(b)-t.max:]
	}
	return append([]byte(nil), b...)
}

func (t *tailBuffer) String() string { return string(t.Bytes()) }

func nonNil(xs []string) []string {
	if xs == nil {
		return []string{}
	}
	return xs
}
