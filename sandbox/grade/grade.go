// Package grade turns an agent's diff into a reward, with hidden tests run
// where the agent cannot reach them, and holds the checks around that: the
// host-side diff of a workspace (TakeDiff), validation of instances at
// ingest (Validate), the secrecy scan of agent workspaces (Scan), and the
// red-team suite (redteam_test.go).
//
// Grading (Grader.Grade) always builds a fresh sandbox: the pristine tree
// at base_commit, the agent's diff applied host-side by git apply with a
// clean configuration, files that steer the test runner reverted, the
// hidden test files written only now (replacing any agent version), pinned
// runner settings, and results read from files in a results mount outside
// the workspace, cross-checked (every required test id present and passed,
// exit status 0). Reward is 1 iff every FAIL_TO_PASS and PASS_TO_PASS test
// passed.
package grade

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/legorl/legorl/sandbox"
	"github.com/legorl/legorl/tasks"
	"github.com/legorl/legorl/text"
)

//go:embed runner/run_pytest.py runner/run_fast.py runner/pytest.ini
var runnerFiles embed.FS

// Paths inside the grading sandbox.
const (
	WorkspaceDir = "/workspace"
	ResultsDir   = "/legorl/results" // written by the runner; read by the host after the sandbox is gone
	RunnerDir    = "/legorl/grader"  // grader scripts and pinned configuration, read-only
	GoCacheDir   = "/legorl/gocache" // the seed Go build cache, read-only (GOCACHE)
)

// Grade is the result of grading one diff.
type Grade struct {
	InstanceID string          `json:"instance_id"`
	Reward     float64         `json:"reward"`
	Outcome    sandbox.Outcome `json:"outcome"`
	F2PPassed  []string        `json:"f2p_passed"`
	F2PFailed  []string        `json:"f2p_failed"`
	P2PPassed  []string        `json:"p2p_passed"`
	P2PFailed  []string        `json:"p2p_failed"`
	ExitCode   int             `json:"exit_code"`
	// Infra names the infrastructure failure behind an env_setup_failed
	// grade (one of the Infra* constants, then ": " and what was seen);
	// empty otherwise. Such a grade is never a reward of 0 for the policy:
	// the rollout is masked.
	Infra string `json:"infra,omitempty"`
	// Flags name what the grader neutralised or noticed: a diff touching
	// the hidden tests or runner files, reports that disagree.
	Flags []string `json:"flags,omitempty"`
	// Seconds per phase.
	SetupSeconds float64 `json:"setup_seconds"` // pristine tree, diff applied, hidden tests, sandbox created
	TestSeconds  float64 `json:"test_seconds"`  // the test command
	TotalSeconds float64 `json:"total_seconds"`
	Detail       string  `json:"detail,omitempty"`
}

// Infrastructure failures a grade can end in (Grade.Infra). The test
// runner failing to start or to build is the environment's fault only when
// the task's own gold patch fails the same way in the same environment;
// otherwise the agent's diff broke it, and the grade is a reward of 0.
const (
	// InfraToolchain: the Go toolchain reported an environment error (a
	// read-only or full file system, a missing GOROOT) while building,
	// before any of the task's code ran.
	InfraToolchain = "toolchain"
	// InfraGoldFails: the runner failed to set up (a build failure, a
	// pytest internal or usage error, missing reports), and the gold patch
	// fails in the same environment too.
	InfraGoldFails = "gold_patch_fails"
	// InfraNoGold: the runner failed to set up and the instance has no
	// gold patch to tell the agent's fault from the environment's.
	InfraNoGold = "no_gold_patch"
)

// Options configure a Grader. Zero fields take the defaults in their comments.
type Options struct {
	// Python is the interpreter inside the sandbox, with pytest importable.
	// Defaults to /usr/bin/python3.
	Python string
	// GoRoot is the Go installation the sandbox uses (it must be visible
	// inside: the local backend shows /usr). Defaults to `go env GOROOT`.
	GoRoot string
	// CacheDir holds the seed of the Go build cache (built once per Go
	// version). Defaults to $TMPDIR/legorl-grade.
	CacheDir string
	// Timeout bounds the test command. Defaults to 5 minutes.
	Timeout time.Duration
	// Limits of the grading sandbox. Defaults to the sandbox defaults.
	Limits sandbox.Limits
	// PatchLimits bound the agent's diff. Defaults to tasks.DefaultPatchLimits.
	PatchLimits tasks.PatchLimits
	// Image is the sandbox image (Spec.Image) for instances that name none;
	// an instance's own Image wins. Backends without images (local) ignore
	// it. Empty: the backend's default image.
	Image string
	// PytestOnly runs every Python grade through pytest. By default a grade
	// whose hidden tests and workspace have the plain shape of the built-in
	// suite goes to the fast runner (runner/run_fast.py) first, which gives
	// pytest's per-test answer without importing pytest, or declines, and
	// then the same diff is graded again with pytest in a fresh sandbox.
	PytestOnly bool
}

// Grader grades diffs against tasks in a backend. It caches each task's
// pristine tree and hidden files; it is safe for concurrent use.
type Grader struct {
	backend sandbox.Backend
	opts    Options

	mu       sync.Mutex
	prepared map[string]*prepared
	goSeed   string
	goSeedMu sync.Mutex

	// fastRuns and fastDeclines count the fast runner's runs and declines
	// (the tests read them).
	fastRuns, fastDeclines atomic.Int64
}

// prepared is what a task contributes to every grade, computed once.
type prepared struct {
	base   tasks.Tree
	hidden map[string]*tasks.File // nil: the test patch deletes the path
}

// New returns a Grader over backend.
func New(backend sandbox.Backend, opts Options) *Grader {
	if opts.Python == "" {
		opts.Python = "/usr/bin/python3"
	}
	if opts.CacheDir == "" {
		opts.CacheDir = filepath.Join(os.TempDir(), "legorl-grade")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Minute
	}
	return &Grader{backend: backend, opts: opts, prepared: map[string]*prepared{}}
}

// Grade grades diff against inst with a one-off Grader; see Grader.Grade.
// suiteDir resolves a relative snapshot path.
func GradeDiff(ctx context.Context, backend sandbox.Backend, suiteDir string, inst *tasks.Instance, diff string) (Grade, error) {
	return New(backend, Options{}).Grade(ctx, suiteDir, inst, diff)
}

// Grade grades an agent's diff against inst. Every typed end (patch
// refused, timeout, sandbox failure) is a Grade with its Outcome and
// reward 0; the error is only for an instance that fails Check or a
// canceled ctx.
//
// When the test runner fails to set up (Go build or [setup failed]
// errors, pytest internal or usage errors, missing reports), the grade is
// arbitrated: an environment error the Go toolchain reported while
// building (before any code of the task ran) is the environment's; any
// other setup failure is the environment's only if the gold patch fails
// in the same environment too (graded once more, now). The environment's
// failures end in env_setup_failed with Grade.Infra set, so the rollout
// is masked, never scored 0; the agent's (a diff that does not compile,
// code that kills the runner) stay a reward of 0, flagged
// setup_failed_by_diff.
func (g *Grader) Grade(ctx context.Context, suiteDir string, inst *tasks.Instance, diff string) (Grade, error) {
	gr, setup, err := g.grade(ctx, suiteDir, inst, diff)
	if err != nil || setup == nil {
		return gr, err
	}
	infra := func(kind, detail string) (Grade, error) {
		gr.Outcome, gr.Reward = sandbox.OutcomeEnvSetupFailed, 0
		gr.Infra = kind + ": " + detail
		gr.Detail = "the test runner failed to set up (" + gr.Infra + ")"
		return gr, ctx.Err()
	}
	switch {
	case setup.trusted:
		return infra(InfraToolchain, setup.what)
	case strings.TrimSpace(inst.Patch) == "":
		return infra(InfraNoGold, setup.what)
	case inst.Patch == diff:
		return infra(InfraGoldFails, setup.what)
	}
	gold, gsetup, err := g.grade(ctx, suiteDir, inst, inst.Patch)
	if err != nil {
		return gr, err
	}
	if gold.Reward != 1 || gsetup != nil {
		what := setup.what
		if gsetup != nil {
			what = gsetup.what
		} else if gold.Detail != "" {
			what = gold.Detail
		}
		return infra(InfraGoldFails, text.OneLine(what, 300))
	}
	gr.Flags = append(gr.Flags, "setup_failed_by_diff:"+setup.kind)
	return gr, nil
}

// setupFailure is a test runner that did not get to run the tests.
type setupFailure struct {
	kind    string // go_build, pytest_exit_N, report_missing, ...
	what    string // the line that shows it
	trusted bool   // reported by the toolchain before any task code ran: the environment's
}

// grade is one grading run. It also returns, for a completed run whose
// reward is not 1, the setup failure of the test runner it saw, if any.
func (g *Grader) grade(ctx context.Context, suiteDir string, inst *tasks.Instance, diff string) (Grade, *setupFailure, error) {
	gr, setup, err := g.gradeOnce(ctx, suiteDir, inst, diff)
	if err != nil || gr.Outcome != sandbox.OutcomeCompleted || gr.Reward == 1 {
		return gr, nil, err
	}
	return gr, setup, nil
}

// gradeOnce is one grading run: with the fast runner where the workspace
// allows it and Options.PytestOnly is off, and, if the fast runner
// declines, once more from the start with pytest (a fresh tree, results
// folder and sandbox: nothing of the declined run is read or reused).
func (g *Grader) gradeOnce(ctx context.Context, suiteDir string, inst *tasks.Instance, diff string) (Grade, *setupFailure, error) {
	start := time.Now()
	gr, setup, declined, err := g.gradeRun(ctx, suiteDir, inst, diff, !g.opts.PytestOnly)
	if err != nil || !declined {
		return gr, setup, err
	}
	gr, setup, _, err = g.gradeRun(ctx, suiteDir, inst, diff, false)
	gr.TotalSeconds = time.Since(start).Seconds()
	return gr, setup, err
}

// gradeRun grades once. With fast set, a pytest task whose workspace has
// the plain shape (plainWorkspace) runs the fast runner; declined reports
// that it declined, and then nothing else in the result means anything.
func (g *Grader) gradeRun(ctx context.Context, suiteDir string, inst *tasks.Instance, diff string, fast bool) (_ Grade, _ *setupFailure, declined bool, _ error) {
	start := time.Now()
	gr := Grade{InstanceID: inst.InstanceID, ExitCode: -1}
	var setup *setupFailure
	finish := func(o sandbox.Outcome, detail string) (Grade, *setupFailure, bool, error) {
		gr.Outcome, gr.Detail = o, detail
		gr.TotalSeconds = time.Since(start).Seconds()
		if gr.Reward != 1 {
			gr.Reward = 0
		}
		if err := ctx.Err(); err != nil {
			return gr, nil, false, err
		}
		return gr, setup, false, nil
	}
	if err := inst.Check(); err != nil {
		return gr, nil, false, err
	}
	prep, err := g.prepare(ctx, suiteDir, inst)
	if err != nil {
		return finish(sandbox.OutcomeEnvSetupFailed, err.Error())
	}
	files, err := tasks.ParsePatch(diff, g.opts.PatchLimits)
	if err != nil {
		return finish(sandbox.OutcomePatchInvalid, err.Error())
	}
	tmp, err := os.MkdirTemp("", "legorl-grade-")
	if err != nil {
		return finish(sandbox.OutcomeEnvSetupFailed, err.Error())
	}
	defer os.RemoveAll(tmp)
	ws := filepath.Join(tmp, "ws")
	if err := tasks.WriteTree(ws, prep.base); err != nil {
		return finish(sandbox.OutcomeEnvSetupFailed, err.Error())
	}
	if strings.TrimSpace(diff) != "" {
		if err := gitApply(ctx, ws, diff); err != nil {
			return finish(sandbox.OutcomePatchInvalid, err.Error())
		}
	}
	// What the diff changed is read back from the tree git apply left,
	// not trusted from the parser (no parser differential can hide a file).
	applied, err := ReadWorkspace(ws, DiffLimits{})
	if err != nil {
		return finish(sandbox.OutcomePatchInvalid, err.Error())
	}
	flags, err := neutralise(ws, inst, prep, changedPaths(prep.base, applied, files))
	gr.Flags = flags
	if err != nil {
		return finish(sandbox.OutcomeEnvSetupFailed, err.Error())
	}
	results := filepath.Join(tmp, "results")
	runner := filepath.Join(tmp, "runner")
	for _, d := range []string{results, runner} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return finish(sandbox.OutcomeEnvSetupFailed, err.Error())
		}
	}
	if err := os.Chmod(results, 0o777); err != nil { // the sandbox's root is an unprivileged host uid
		return finish(sandbox.OutcomeEnvSetupFailed, err.Error())
	}
	if err := writeRunner(runner); err != nil {
		return finish(sandbox.OutcomeEnvSetupFailed, err.Error())
	}
	image := inst.Image
	if image == "" {
		image = g.opts.Image
	}
	spec := sandbox.Spec{
		Workspace: ws, WorkspaceDir: WorkspaceDir, Image: image, Limits: g.opts.Limits,
		Mounts: []sandbox.Mount{
			{Source: results, Target: ResultsDir},
			{Source: runner, Target: RunnerDir, ReadOnly: true},
		},
	}
	var cmd sandbox.Cmd
	var stdout bytes.Buffer
	switch inst.TestRunner() {
	case tasks.RunnerGoTest:
		fast = false // the fast runner is Python's
		// go test runs the toolchain at GoRoot inside the sandbox: the
		// local backend shows the host's; an image needs its own there (the
		// docker base image has none, so Go tasks grade on local).
		seed, err := g.goCacheSeed(ctx)
		if err != nil {
			return finish(sandbox.OutcomeEnvSetupFailed, err.Error())
		}
		cache := filepath.Join(tmp, "gocache")
		if err := layerCache(seed, cache); err != nil {
			return finish(sandbox.OutcomeEnvSetupFailed, err.Error())
		}
		spec.Mounts = append(spec.Mounts, sandbox.Mount{Source: cache, Target: GoCacheDir})
		cmd = g.goCmd(inst, &stdout)
	default:
		fast = fast && plainWorkspace(ws)
		if fast {
			cmd = g.fastCmd(inst)
		} else {
			cmd = g.pytestCmd(inst)
		}
	}
	cmd.Timeout = g.opts.Timeout
	sb, err := g.backend.Create(ctx, spec)
	if err != nil {
		return finish(sandbox.OutcomeEnvSetupFailed, err.Error())
	}
	gr.SetupSeconds = time.Since(start).Seconds()
	res, err := sb.Exec(ctx, cmd)
	// Close before reading any result: nothing the tests started can
	// still write to the results mount.
	cerr := sb.Close()
	gr.TestSeconds = res.Duration.Seconds()
	if err != nil {
		return finish(sandbox.OutcomeSandboxCrash, err.Error())
	}
	if cerr != nil {
		return finish(sandbox.OutcomeSandboxCrash, "close: "+cerr.Error())
	}
	if fast {
		g.fastRuns.Add(1)
		if res.Outcome == sandbox.OutcomeCompleted && res.ExitCode == fastDeclined {
			g.fastDeclines.Add(1)
			return gr, nil, true, ctx.Err()
		}
	}
	gr.ExitCode = res.ExitCode
	if res.Outcome != sandbox.OutcomeCompleted {
		return finish(res.Outcome, res.Detail)
	}
	var status map[string]string
	var notes []string
	switch inst.TestRunner() {
	case tasks.RunnerGoTest:
		status, notes = parseGoTest(stdout.Bytes(), res.StdoutTruncated)
		setup = goSetupFailure(stdout.Bytes(), res.ExitCode)
	default:
		status, notes = readPytestResults(results, append(append([]string{}, inst.FailToPass...), inst.PassToPass...))
		setup = pytestSetupFailure(res.ExitCode, notes)
	}
	gr.Flags = append(gr.Flags, notes...)
	for _, id := range inst.FailToPass {
		if status[id] == "passed" {
			gr.F2PPassed = append(gr.F2PPassed, id)
		} else {
			gr.F2PFailed = append(gr.F2PFailed, id)
		}
	}
	for _, id := range inst.PassToPass {
		if status[id] == "passed" {
			gr.P2PPassed = append(gr.P2PPassed, id)
		} else {
			gr.P2PFailed = append(gr.P2PFailed, id)
		}
	}
	detail := ""
	switch {
	case len(gr.F2PFailed)+len(gr.P2PFailed) > 0:
		detail = fmt.Sprintf("%d of %d required tests did not pass", len(gr.F2PFailed)+len(gr.P2PFailed), len(inst.FailToPass)+len(inst.PassToPass))
	case res.ExitCode != 0:
		detail = fmt.Sprintf("every required test passed but the runner exited %d", res.ExitCode)
		gr.Flags = append(gr.Flags, "exit_code_mismatch")
	case len(notes) > 0 && containsPrefix(notes, "report_mismatch"):
		detail = "the runner's reports disagree"
	default:
		gr.Reward = 1
	}
	if len(gr.F2PFailed)+len(gr.P2PFailed) > 0 {
		detail += tail(res.Stdout, res.Stderr)
	}
	return finish(sandbox.OutcomeCompleted, detail)
}

func containsPrefix(xs []string, p string) bool {
	for _, x := range xs {
		if strings.HasPrefix(x, p) {
			return true
		}
	}
	return false
}

// tail returns the end of the test output for the detail field.
func tail(stdout, stderr []byte) string {
	b := append(append([]byte{}, stdout...), stderr...)
	if len(b) > 800 {
		b = b[len(b)-800:]
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return ""
	}
	return ": ..." + s
}

// prepare reads the task's pristine tree and hidden files, once.
func (g *Grader) prepare(ctx context.Context, suiteDir string, inst *tasks.Instance) (*prepared, error) {
	snap := inst.SnapshotDir(suiteDir)
	key := snap + "\x00" + inst.BaseCommit + "\x00" + inst.TestPatch
	g.mu.Lock()
	p := g.prepared[key]
	g.mu.Unlock()
	if p != nil {
		return p, nil
	}
	if snap == "" {
		return nil, fmt.Errorf("%w: %s has no snapshot (image-only tasks need the docker backend's grader)", tasks.ErrSnapshot, inst.InstanceID)
	}
	base, err := tasks.ReadTree(ctx, snap, inst.BaseCommit)
	if err != nil {
		return nil, err
	}
	hidden, err := hiddenFiles(ctx, base, inst.TestPatch)
	if err != nil {
		return nil, err
	}
	p = &prepared{base: base, hidden: hidden}
	g.mu.Lock()
	g.prepared[key] = p
	g.mu.Unlock()
	return p, nil
}

// hiddenFiles applies the (trusted) test patch to the pristine tree and
// returns the resulting content of every path it touches.
func hiddenFiles(ctx context.Context, base tasks.Tree, testPatch string) (map[string]*tasks.File, error) {
	fps, err := tasks.ParsePatch(testPatch, tasks.PatchLimits{MaxBytes: 64 << 20, MaxFiles: 10000})
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "legorl-hidden-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	if err := tasks.WriteTree(tmp, base); err != nil {
		return nil, err
	}
	if err := gitApply(ctx, tmp, testPatch); err != nil {
		return nil, fmt.Errorf("%w: test_patch: %v", tasks.ErrPatch, err)
	}
	out := map[string]*tasks.File{}
	for _, p := range tasks.PatchedPaths(fps) {
		full := filepath.Join(tmp, filepath.FromSlash(p))
		fi, err := os.Lstat(full)
		if errors.Is(err, os.ErrNotExist) {
			out[p] = nil
			continue
		}
		if err != nil {
			return nil, err
		}
		if !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("%w: test_patch leaves %s not a regular file", tasks.ErrPatch, p)
		}
		data, err := os.ReadFile(full)
		if err != nil {
			return nil, err
		}
		mode := tasks.ModeFile
		if fi.Mode()&0o111 != 0 {
			mode = tasks.ModeExec
		}
		out[p] = &tasks.File{Data: data, Mode: mode}
	}
	return out, nil
}

// gitApply applies a patch in dir (which is not a repository) with git's
// clean configuration: no system, global or repository config, no hooks,
// no attributes; the patch comes on stdin.
func gitApply(ctx context.Context, dir, patch string) error {
	cmd := exec.CommandContext(ctx, "git", append(append([]string{}, tasks.GitSafeFlags...),
		"apply", "--whitespace=nowarn", "--unidiff-zero", "-")...)
	cmd.Dir = dir
	cmd.Env = append(tasks.GitEnv(), "GIT_CEILING_DIRECTORIES="+filepath.Dir(dir), "GIT_DIR="+filepath.Join(dir, ".nogit"))
	cmd.Stdin = strings.NewReader(patch)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%w: git apply: %s", tasks.ErrPatch, strings.Join(strings.Fields(stderr.String()), " "))
	}
	return nil
}

// runnerFile reports whether a path steers the test runner rather than
// being code under test; an agent's change to one is reverted.
func runnerFile(runner, p string) bool {
	base := path.Base(p)
	switch base {
	case "conftest.py", "pytest.ini", "tox.ini", "setup.cfg", "sitecustomize.py", "usercustomize.py", "go.mod", "go.sum", "go.work", "go.work.sum":
		return true
	}
	if strings.HasSuffix(base, ".pth") {
		return true
	}
	if runner == tasks.RunnerGoTest && strings.HasSuffix(base, "_test.go") {
		return true
	}
	return false
}

// neutralise undoes what the diff did to runner files, then writes the
// hidden test files over whatever the agent left there. It returns flags
// naming what it found.
func neutralise(ws string, inst *tasks.Instance, prep *prepared, changed []string) ([]string, error) {
	root, err := os.OpenRoot(ws)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	var flags []string
	runner := inst.TestRunner()
	for _, p := range changed {
		if _, ok := prep.hidden[p]; ok {
			flags = append(flags, "touched_hidden_tests:"+p)
			continue // rewritten below
		}
		if !runnerFile(runner, p) {
			continue
		}
		flags = append(flags, "reverted_runner_file:"+p)
		if f, ok := prep.base[p]; ok {
			if err := writeNoFollow(root, p, f.Data, perm(f.Mode)); err != nil {
				return flags, err
			}
		} else if err := removeNoFollow(root, p); err != nil {
			return flags, err
		}
	}
	names := make([]string, 0, len(prep.hidden))
	for p := range prep.hidden {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		f := prep.hidden[p]
		if f == nil {
			if err := removeNoFollow(root, p); err != nil {
				return flags, err
			}
			continue
		}
		if err := writeNoFollow(root, p, f.Data, perm(f.Mode)); err != nil {
			return flags, err
		}
	}
	return flags, nil
}

// changedPaths returns, sorted, every path whose file differs between the
// pristine tree and the tree after the diff, plus the paths the parsed
// patch names.
func changedPaths(base, applied tasks.Tree, files []tasks.FilePatch) []string {
	set := map[string]bool{}
	for p, f := range applied {
		if b, ok := base[p]; !ok || b.Mode != f.Mode || !bytes.Equal(b.Data, f.Data) {
			set[p] = true
		}
	}
	for p := range base {
		if _, ok := applied[p]; !ok {
			set[p] = true
		}
	}
	for _, p := range tasks.PatchedPaths(files) {
		set[p] = true
	}
	out := make([]string, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

func perm(mode uint32) os.FileMode {
	if mode == tasks.ModeExec {
		return 0o755
	}
	return 0o644
}

func writeRunner(dir string) error {
	for _, name := range []string{"run_pytest.py", "run_fast.py", "pytest.ini"} {
		b, err := runnerFiles.ReadFile("runner/" + name)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
