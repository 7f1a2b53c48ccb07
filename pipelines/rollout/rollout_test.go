package rollout

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/legorl/legorl/harness/agent"
	"github.com/legorl/legorl/pipelines/runner"
	"github.com/legorl/legorl/policy/model"
	"github.com/legorl/legorl/policy/tokenizer"
	rolloutrt "github.com/legorl/legorl/rollout"
	"github.com/legorl/legorl/sandbox/local/localtest"
	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/storage"
	"github.com/legorl/legorl/tasks"
	"github.com/legorl/legorl/tasks/builtin"
	"github.com/legorl/legorl/transforms"
)

// The test binary doubles as legorl-agent: the rollouts show it inside
// the sandbox, where it runs as the agent when called that way.
// allSplits rolls out every task of the fixtures: these tests are about
// the pipeline's mechanics, not about which split trains.
var allSplits = []string{tasks.SplitSFT, tasks.SplitTrain, tasks.SplitHeldout, tasks.SplitHeldoutFamily}

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && slices.Contains(agent.Names(), os.Args[1]) {
		if tailSlow(os.Args) {
			time.Sleep(5 * time.Minute) // until TestTailKill's tail-kill ends it
		}
		os.Exit(agent.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	localtest.MustInstall() // the sandbox init make build ships, beside this binary
	code := m.Run()
	if fx.dir != "" {
		os.RemoveAll(fx.dir)
	}
	os.Exit(code)
}

const testTokenizer = "../../policy/tokenizer/testdata/small/tokenizer.json"

var fx struct {
	once   sync.Once
	err    error
	dir    string
	suite  string
	ins    []tasks.Instance
	policy string
	self   string
}

// setup makes a two-task built-in suite and a tiny random-weight policy
// whose vocabulary is the test tokenizer's.
func setup(t testing.TB) {
	t.Helper()
	fx.once.Do(func() {
		if fx.dir, fx.err = os.MkdirTemp("", "legorl-pipeline-"); fx.err != nil {
			return
		}
		fx.suite = filepath.Join(fx.dir, "suite")
		if fx.ins, fx.err = builtin.Generate(context.Background(), fx.suite, builtin.Options{N: 2, Seed: 5, Languages: []string{"python"}}); fx.err != nil {
			return
		}
		tok, err := tokenizer.Load(testTokenizer)
		if err != nil {
			fx.err = err
			return
		}
		cfg, err := model.ParseConfig([]byte(fmt.Sprintf(`{"model_type": "qwen3", "vocab_size": %d, "hidden_size": 64,
			"intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
			"max_position_embeddings": 4096, "tie_word_embeddings": true}`, tok.VocabSize())))
		if err != nil {
			fx.err = err
			return
		}
		m, err := model.New(cfg, 7)
		if err != nil {
			fx.err = err
			return
		}
		fx.policy = filepath.Join(fx.dir, "policy")
		if fx.err = m.Save(fx.policy, model.SaveOptions{TokenizerFiles: []string{testTokenizer}}); fx.err != nil {
			return
		}
		fx.self, fx.err = os.Executable()
	})
	if fx.err != nil {
		t.Fatal(fx.err)
	}
}

func config(t testing.TB, run string) transforms.Config {
	return transforms.Config{
		Store: "file://" + filepath.Join(t.TempDir(), "store"), RunID: run, Iteration: 1, Group: 2,
		Harness: "bash", MaxTurns: 2, MaxTokens: 16, AgentBinary: fx.self, Policy: fx.policy, PolicyVersion: 3,
		SetupTimeout: time.Minute, AgentTimeout: 2 * time.Minute, GradeTimeout: 2 * time.Minute,
	}
}

// committedRollouts reads every rollouts row the manifests of the run name.
func committedRollouts(t *testing.T, st storage.Store, run string) []schemas.Rollout {
	t.Helper()
	ctx := context.Background()
	files, err := storage.TableFiles(ctx, st, run, "rollouts")
	if err != nil {
		t.Fatal(err)
	}
	var rows []schemas.Rollout
	for _, f := range files {
		rs, err := storage.ReadRows[schemas.Rollout](ctx, st, f)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, rs...)
	}
	return rows
}

// TestRetryAndResume runs the pipeline on Prism four times on one run:
// (1) a fault after a group's files are put and before its claim fails the
// run; (2) a fault after the same group's claim, before its bundle ends,
// fails it again; (3) a clean run completes: it reuses the claimed group
// instead of running it again, and the manifest lists each rollout once
// (the first attempt's files stay orphaned); (4) a rerun of the finished
// run runs nothing and commits no new version.
func TestRetryAndResume(t *testing.T) {
	setup(t)
	ctx := context.Background()
	cfg := config(t, "retry")
	once := filepath.Join(t.TempDir(), "fault")
	run := func(fault, task, job string) (transforms.Report, error, time.Duration) {
		c := cfg
		c.TestFault, c.TestFaultTask, c.TestFaultOnce, c.JobID = fault, task, once+"-"+job, job
		start := time.Now()
		rep, err := Run(ctx, Options{Tasks: fx.suite, Splits: allSplits, Config: c}, runner.Options{})
		return rep, err, time.Since(start)
	}
	st, err := storage.Open(ctx, cfg.Store, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	claim := func(task string) bool {
		g := transforms.NewGroup(cfg.RunID, "", cfg.Iteration, cfg.Group, 0, transforms.Task{Instance: tasks.Instance{InstanceID: task}})
		_, found, err := transforms.ReadClaim(ctx, st, transforms.ClaimKey(cfg.RunID, transforms.Stage, cfg.Iteration, g.GroupID))
		if err != nil {
			t.Fatal(err)
		}
		return found
	}
	t0 := fx.ins[0].InstanceID

	_, err, d := run("after-shard", t0, "j1")
	if err == nil || !strings.Contains(err.Error(), "injected fault") {
		t.Fatalf("run 1: %v, want the injected fault", err)
	}
	t.Logf("run 1 (fault after %s's shard): %s: %v", t0, d, oneLine(err.Error()))
	if claim(t0) {
		t.Fatal("run 1 claimed the group it failed before claiming")
	}
	if _, err := storage.Latest(ctx, st, storage.ManifestRef{RunID: cfg.RunID, Iteration: 1, Stage: "rollout"}); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("a failed run committed: %v", err)
	}

	_, err, d = run("after-claim", t0, "j2")
	if err == nil || !strings.Contains(err.Error(), "injected fault") {
		t.Fatalf("run 2: %v, want the injected fault", err)
	}
	t.Logf("run 2 (fault after %s's claim): %s", t0, d)
	if !claim(t0) {
		t.Fatal("run 2 did not claim the group it failed after claiming")
	}

	rep, err, d := run("", "", "j3")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("run 3: %s: %+v", d, rep)
	if rep.Launched != 4 || rep.Completed+rep.Masked != 4 || rep.Reused < 2 || rep.Ran+rep.Reused != 4 || rep.ManifestVersion != 1 || len(rep.Rejected) != 0 {
		t.Errorf("run 3 report %+v", rep)
	}
	rows := committedRollouts(t, st, cfg.RunID)
	seen := map[string]int{}
	for _, r := range rows {
		seen[r.RolloutID]++
		if err := r.Validate(); err != nil {
			t.Error(err)
		}
		if r.PolicyVersion != 3 && r.Status == schemas.StatusCompleted {
			t.Errorf("rollout %s: policy version %d", r.RolloutID, r.PolicyVersion)
		}
		t.Logf("%s %s %s/%s reward %v turns %d", r.TaskID, r.RolloutID, r.Status, r.Termination, r.Reward, r.NumTurns)
	}
	if len(rows) != 4 || len(seen) != 4 {
		t.Errorf("%d rows, %d rollout ids, want 4 and 4: %v", len(rows), len(seen), seen)
	}
	orphans, _ := st.List(ctx, "runs/retry/data/rollouts/")
	if len(orphans) < 3 {
		t.Errorf("rollouts files %v: want run 1's orphan beside the 2 committed", orphans)
	}
	segs, err := storage.TableFiles(ctx, st, cfg.RunID, "segments")
	if err != nil || len(segs) != 2 {
		t.Errorf("segments files %d (%v), want one per group", len(segs), err)
	}

	rep, err, d = run("", "", "j4")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("run 4: %s: %+v", d, rep)
	if rep.Ran != 0 || rep.Reused != 4 || rep.ManifestVersion != 1 {
		t.Errorf("run 4 report %+v: want nothing run and no new manifest version", rep)
	}
}

// tailRun and tailTask name TestTailKill's group. Its agents other than
// the first sleep (tailSlow), so the first always ends before the rest and
// the tail-kill always has something to kill: without that, the three
// rollouts step through the shared engine in lockstep and can all end
// within the grace.
const tailRun, tailTask = "tail", "builtin__young_station-5-0"

// tailSlow reports whether the agent's command line (its --base-url names
// the rollout) is one of TestTailKill's rollouts after the first.
func tailSlow(args []string) bool {
	i := slices.Index(args, "--base-url")
	if i < 0 || i+1 >= len(args) {
		return false
	}
	for _, idx := range []int{1, 2} {
		if strings.Contains(args[i+1], "/rollout/"+rolloutrt.ID(tailRun, 1, tailTask, idx)+"/") {
			return true
		}
	}
	return false
}

// TestTailKill: a group of three running side by side, the tail-kill at a
// third of the group with no grace: once the first rollout ends the others
// (whose agents sleep) are killed and masked as timeout, and the accounting
// holds.
func TestTailKill(t *testing.T) {
	setup(t)
	if fx.ins[0].InstanceID != tailTask {
		t.Fatalf("the fixture's first task is %s, not tailTask %s: update tailTask", fx.ins[0].InstanceID, tailTask)
	}
	ctx := context.Background()
	cfg := config(t, tailRun)
	cfg.Group, cfg.Parallel, cfg.TailShare, cfg.TailGrace = 3, 3, 0.3, time.Millisecond
	suite := filepath.Join(t.TempDir(), "one.jsonl")
	f, err := os.Create(suite)
	if err != nil {
		t.Fatal(err)
	}
	in := fx.ins[0]
	in.Snapshot = in.SnapshotDir(fx.suite)
	tasks.WriteJSONL(f, []tasks.Instance{in, {InstanceID: "broken"}})
	f.Close()
	rep, err := Run(ctx, Options{Tasks: suite, Splits: allSplits, Config: cfg}, runner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", rep)
	if rep.Launched != 3 || rep.Completed+rep.Masked != 3 || rep.Masked != 2 || len(rep.Rejected) != 1 || rep.Rejected[0].Reason != "invalid" {
		t.Errorf("report %+v", rep)
	}
	st, _ := storage.Open(ctx, cfg.Store, storage.Options{})
	killed := 0
	for _, r := range committedRollouts(t, st, cfg.RunID) {
		if slices.Contains(r.Flags, "tail_killed") {
			killed++
			if r.Termination != schemas.TerminationTimeout || r.Status != schemas.StatusMasked || !strings.HasPrefix(r.Error, "tail-kill") {
				t.Errorf("tail-killed row %+v", r)
			}
		}
	}
	if killed != 2 || killed != rep.Masked {
		t.Errorf("%d rows tail-killed of %d masked, want the 2 sleeping ones", killed, rep.Masked)
	}
}

func oneLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
