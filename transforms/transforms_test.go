package transforms

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/legorl/legorl/harness/agent"
	"github.com/legorl/legorl/policy/model"
	"github.com/legorl/legorl/policy/tokenizer"
	"github.com/legorl/legorl/rollout"
	"github.com/legorl/legorl/sandbox/grade"
	"github.com/legorl/legorl/sandbox/local/localtest"
	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/storage"
	"github.com/legorl/legorl/tasks"
	"github.com/legorl/legorl/tasks/builtin"
)

// Unit tests build pipelines on the direct runner. The test binary doubles
// as legorl-agent: TestRuntimeMetrics's rollouts show it inside the
// sandbox, where it runs as the agent when called that way.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && slices.Contains(agent.Names(), os.Args[1]) {
		os.Exit(agent.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	localtest.MustInstall() // the sandbox init make build ships, beside this binary
	ptest.MainWithDefault(m, "direct")
}

// flaky is a store whose puts of matching keys reach the store and then
// report an error, once each: a reply lost after the write.
type flaky struct {
	storage.Store
	match string
	fails atomic.Int32
}

func (f *flaky) Put(ctx context.Context, key string, body io.Reader, size int64) error {
	n := int32(0)
	if strings.Contains(key, f.match) {
		n = f.fails.Add(1)
	}
	if err := f.Store.Put(ctx, key, body, size); err != nil {
		return err
	}
	if n == 1 {
		return errors.New("connection reset after the put")
	}
	return nil
}

func TestSameContentPut(t *testing.T) {
	ctx := context.Background()
	st, err := storage.NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	put := sameContent{st}
	if err := put.Put(ctx, "a/b", strings.NewReader("hello"), 5); err != nil {
		t.Fatal(err)
	}
	// The same bytes again: success, not ErrExists.
	if err := put.Put(ctx, "a/b", strings.NewReader("hello"), 5); err != nil {
		t.Errorf("identical put: %v", err)
	}
	// A plain reader (not seekable) is spooled and compared the same way.
	if err := put.Put(ctx, "a/b", io.MultiReader(strings.NewReader("hel"), strings.NewReader("lo")), 5); err != nil {
		t.Errorf("identical put from a stream: %v", err)
	}
	if err := put.Put(ctx, "a/b", strings.NewReader("world"), 5); !errors.Is(err, ErrConflict) {
		t.Errorf("different bytes: %v, want ErrConflict", err)
	}
	// A put whose reply is lost after the write is retried, meets its own
	// bytes, and succeeds.
	fl := &flaky{Store: st, match: "lost"}
	if err := (sameContent{fl}).Put(ctx, "a/lost", bytes.NewReader([]byte("data")), 4); err != nil {
		t.Errorf("put with a lost reply: %v", err)
	}
	if fl.fails.Load() != 2 {
		t.Errorf("%d puts, want 2 (the failed one and its retry)", fl.fails.Load())
	}
}

// TestClaimAndRetriedWrite: a group's files are written through a store
// that loses the reply of the claim's put, then the bundle is "retried":
// the claim holds, the second attempt adopts the first's claim, and the
// manifest commit of the claimed files lists each rollout once.
func TestClaimAndRetriedWrite(t *testing.T) {
	ctx := context.Background()
	base, err := storage.NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	st := &flaky{Store: base, match: "/claims/"}
	cfg := Config{Store: base.URI(), RunID: "r1", Iteration: 2, Group: 2, Harness: "bash", Policy: "p"}.WithDefaults()
	g := NewGroup(cfg.RunID, cfg.Stage, cfg.Iteration, cfg.Group, 0, Task{Instance: tasks.Instance{InstanceID: "t1"}})
	attempt := func() (GroupResult, error) {
		out := GroupResult{GroupID: g.GroupID, TaskID: "t1", Attempt: newAttempt()}
		var sh shard
		for _, s := range g.Rollouts {
			row := maskedRow(cfg, g, s, schemas.TerminationTimeout, "test")
			sh.rollouts = append(sh.rollouts, row)
			out.Rollouts = append(out.Rollouts, Outcome{RolloutID: s.RolloutID, Status: string(row.Status), Termination: string(row.Termination)})
		}
		files, err := writeShard(ctx, st, cfg.ref(), g.GroupID+"."+out.Attempt, cfg.footer, sh)
		if err != nil {
			return out, err
		}
		out.Files = files
		return putClaim(ctx, st, ClaimKey(cfg.RunID, cfg.Stage, cfg.Iteration, g.GroupID), out)
	}
	first, err := attempt()
	if err != nil {
		t.Fatalf("first attempt (claim reply lost, then retried): %v", err)
	}
	if first.Reused {
		t.Error("the first attempt adopted a claim")
	}
	second, err := attempt() // the retried bundle: new files, same claim key
	if err != nil {
		t.Fatal(err)
	}
	if !second.Reused || second.Attempt != first.Attempt {
		t.Fatalf("second attempt: reused %v attempt %s, want the first's %s", second.Reused, second.Attempt, first.Attempt)
	}
	got, found, err := ReadClaim(ctx, base, ClaimKey(cfg.RunID, cfg.Stage, cfg.Iteration, g.GroupID))
	if err != nil || !found || got.Attempt != first.Attempt {
		t.Fatalf("claim: %+v %v %v", got, found, err)
	}
	rep, files, err := Account(cfg.RunID, cfg.Iteration, []Group{g}, []GroupResult{first, second})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Launched != 2 || rep.Masked != 2 || len(files) != 1 {
		t.Errorf("report %+v, %d files", rep, len(files))
	}
	for range 2 { // a rerun of the commit adds nothing
		if _, err := storage.Commit(ctx, base, cfg.ref(), files); err != nil {
			t.Fatal(err)
		}
	}
	ms, err := storage.Manifests(ctx, base, cfg.RunID)
	if err != nil || len(ms) != 1 || ms[0].Version != 1 || len(ms[0].Files) != 1 {
		t.Fatalf("manifests %+v %v", ms, err)
	}
	// Two attempts' files exist, one is committed.
	keys, _ := base.List(ctx, "runs/r1/data/rollouts/")
	if len(keys) != 2 {
		t.Errorf("rollouts files %v, want 2 (one orphaned)", keys)
	}
}

func TestAccount(t *testing.T) {
	g := NewGroup("r", "", 0, 2, 0, Task{Instance: tasks.Instance{InstanceID: "a"}})
	h := NewGroup("r", "", 0, 1, 0, Task{Instance: tasks.Instance{InstanceID: "b"}})
	ok := func(gr Group, status ...string) GroupResult {
		r := GroupResult{GroupID: gr.GroupID, TaskID: gr.Task.Instance.InstanceID, Attempt: "x",
			Files: []storage.FileEntry{{Table: "rollouts", Key: "k-" + gr.GroupID}}}
		for i, s := range gr.Rollouts {
			o := Outcome{RolloutID: s.RolloutID, Status: status[i], Termination: "agent_completed", Reward: 1}
			if status[i] == "masked" {
				o.Termination, o.Reward = "timeout", 0
			}
			r.Rollouts = append(r.Rollouts, o)
		}
		return r
	}
	tests := []struct {
		name    string
		results []GroupResult
		want    string // error substring; "" for success
	}{
		{"ok", []GroupResult{ok(g, "completed", "masked"), ok(h, "completed")}, ""},
		{"same claim twice", []GroupResult{ok(g, "completed", "masked"), ok(g, "completed", "masked"), ok(h, "completed")}, ""},
		{"missing group", []GroupResult{ok(g, "completed", "masked")}, "launched 3 != completed 1 + masked 1"},
		{"two attempts", []GroupResult{ok(g, "completed", "masked"), func() GroupResult { r := ok(g, "completed", "masked"); r.Attempt = "y"; return r }(), ok(h, "completed")}, "attempts"},
		{"other G", []GroupResult{ok(g, "completed", "masked"), func() GroupResult { r := ok(h, "completed"); r.Rollouts = append(r.Rollouts, r.Rollouts[0]); return r }()}, "different --group"},
		{"unknown group", []GroupResult{ok(g, "completed", "masked"), ok(h, "completed"), {GroupID: "zzz"}}, "not launched"},
		{"bad status", []GroupResult{ok(g, "completed", "lost"), ok(h, "completed")}, `status "lost"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, files, err := Account("r", 0, []Group{g, h}, tt.results)
			if tt.want != "" {
				if !errors.Is(err, ErrAccounting) || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("err %v, want ErrAccounting with %q", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if rep.Launched != 3 || rep.Completed != 2 || rep.Masked != 1 || rep.Passed != 2 || rep.PassRate != 1 ||
				len(files) != 2 || fmt.Sprint(rep.MaskedBy) != "[timeout=1]" {
				t.Errorf("report %+v, %d files", rep, len(files))
			}
			// Per task: a's masked rollout is not counted, b's one passed.
			if fmt.Sprint(rep.Tasks) != "[{a 1 1} {b 1 1}]" {
				t.Errorf("per-task outcomes %v", rep.Tasks)
			}
		})
	}
}

// TestAccountPerTask: the report counts each task's completed and passed
// rollouts apart; masked ones count in neither.
func TestAccountPerTask(t *testing.T) {
	g := NewGroup("r", "", 0, 3, 0, Task{Instance: tasks.Instance{InstanceID: "a"}})
	r := GroupResult{GroupID: g.GroupID, TaskID: "a", Attempt: "x"}
	for i, s := range g.Rollouts {
		o := Outcome{RolloutID: s.RolloutID, Status: "completed", Termination: "agent_completed", Reward: float64(i % 2)}
		if i == 2 {
			o.Status, o.Termination = "masked", "timeout"
		}
		r.Rollouts = append(r.Rollouts, o)
	}
	rep, _, err := Account("r", 0, []Group{g}, []GroupResult{r})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(rep.Tasks) != "[{a 2 1}]" {
		t.Errorf("per-task outcomes %v, want [{a 2 1}]", rep.Tasks)
	}
}

func TestTailKiller(t *testing.T) {
	k := newTailKiller(4, 0.5, 20*time.Millisecond)
	var killed atomic.Int32
	for i := range 4 {
		k.track(i, func() { killed.Add(1) })
	}
	for i := range 3 {
		k.started(i)
	}
	k.done(0)
	time.Sleep(40 * time.Millisecond)
	if killed.Load() != 0 {
		t.Fatal("killed before half of the group ended")
	}
	k.done(1) // half, but rollout 3 has not started: no grace yet
	time.Sleep(40 * time.Millisecond)
	if killed.Load() != 0 {
		t.Fatal("the grace ran while a rollout waited for its slot")
	}
	k.started(3) // the grace starts
	time.Sleep(10 * time.Millisecond)
	k.done(2) // ends within the grace
	time.Sleep(50 * time.Millisecond)
	if killed.Load() != 1 || !k.killed(3) || k.killed(2) {
		t.Errorf("killed %d, 3 killed %v, 2 killed %v; want only 3", killed.Load(), k.killed(3), k.killed(2))
	}
	k.done(3)
	k.stop()

	off := newTailKiller(3, 1, time.Millisecond)
	for i := range 3 {
		off.track(i, func() { t.Error("the tail-kill is off at share 1") })
		off.started(i)
	}
	off.done(0)
	off.done(1)
	time.Sleep(10 * time.Millisecond)
	off.stop()
}

// TestValidateAndExpand: a suite with a good task, a task whose snapshot is
// missing, a malformed one and a differing duplicate; the good one expands
// to G groups' specs with deterministic ids and seeds.
func TestValidateAndExpand(t *testing.T) {
	dir := t.TempDir()
	ins, err := builtin.Generate(context.Background(), dir, builtin.Options{N: 2, Seed: 3, Languages: []string{"python"}})
	if err != nil {
		t.Fatal(err)
	}
	good, dup := ins[0], ins[1]
	noSnap := good
	noSnap.InstanceID, noSnap.Snapshot = "no-snapshot", "repos/missing"
	bad := good
	bad.InstanceID, bad.BaseCommit = "bad-commit", "not hex"
	dup2 := dup
	dup2.ProblemStatement += " (edited)"
	f, err := os.Create(filepath.Join(dir, "suite.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := tasks.WriteJSONL(f, []tasks.Instance{good, noSnap, bad, dup, dup2, good}); err != nil {
		t.Fatal(err)
	}
	f.Close()

	cfg := Config{RunID: "run-v", Iteration: 4, Group: 3, SeedBase: 9}
	p, s := beam.NewPipelineWithRoot()
	valid, rejected := Validate(s, ReadTasks(s, filepath.Join(dir, "suite.jsonl")))
	passert.Equals(s, beam.ParDo(s, func(r Rejected) string { return r.TaskID + ":" + r.Reason }, rejected),
		"no-snapshot:snapshot", "bad-commit:invalid", dup.InstanceID+":duplicate")
	groups := Expand(s, cfg, valid)
	want := NewGroup("run-v", "", 4, 3, 9, Task{SuiteDir: dir, Instance: good})
	passert.Equals(s, beam.ParDo(s, func(g Group) string { return fmt.Sprint(g.GroupID, g.Rollouts) }, groups),
		fmt.Sprint(want.GroupID, want.Rollouts))
	if err := ptest.Run(p); err != nil {
		t.Fatal(err)
	}
	if want.Rollouts[1].RolloutID != rollout.ID("run-v", 4, good.InstanceID, 1) || want.GroupID != rollout.GroupID("run-v", 4, good.InstanceID) ||
		want.Rollouts[0].Seed == want.Rollouts[1].Seed || want.Rollouts[2].Seed != int64(rollout.Seed(9, "run-v", 4, good.InstanceID, 2)) {
		t.Errorf("ids and seeds %+v", want)
	}
}

// TestCommitFn commits claimed groups through the pipeline's Commit on the
// direct runner: one manifest version; a group missing fails the commit.
func TestCommitFn(t *testing.T) {
	ctx := context.Background()
	st, err := storage.NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Store: st.URI(), RunID: "run-c", Iteration: 1, Group: 1, Harness: "bash", Policy: "p", JobID: "j1"}.WithDefaults()
	var groups []Group
	var results []GroupResult
	for _, id := range []string{"t1", "t2"} {
		g := NewGroup(cfg.RunID, cfg.Stage, cfg.Iteration, 1, 0, Task{Instance: tasks.Instance{InstanceID: id}})
		row := maskedRow(cfg, g, g.Rollouts[0], schemas.TerminationSandboxCrash, "test")
		files, err := writeShard(ctx, st, cfg.ref(), g.GroupID+".a", cfg.footer, shard{rollouts: []schemas.Rollout{row}})
		if err != nil {
			t.Fatal(err)
		}
		groups = append(groups, g)
		results = append(results, GroupResult{GroupID: g.GroupID, TaskID: id, Attempt: "a", Files: files,
			Rollouts: []Outcome{{RolloutID: row.RolloutID, Status: "masked", Termination: "sandbox_crash"}}})
	}
	run := func(results []GroupResult) error {
		p, s := beam.NewPipelineWithRoot()
		rep := Commit(s, cfg, beam.CreateList(s, groups), beam.CreateList(s, results),
			beam.CreateList(s, []Rejected{{TaskID: "x", Reason: "invalid"}}))
		passert.Equals(s, beam.ParDo(s, func(r Report) string { return fmt.Sprint(r.Launched, r.Masked, r.MaskedBy, len(r.Rejected)) }, rep),
			"2 2 [sandbox_crash=2] 1")
		return ptest.Run(p)
	}
	if err := run(results[:1]); err == nil || !strings.Contains(err.Error(), "launched 2 != completed 0 + masked 1") {
		t.Fatalf("a group missing: %v", err)
	}
	if _, err := storage.Latest(ctx, st, cfg.ref()); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("a failed accounting committed: %v", err)
	}
	if err := run(results); err != nil {
		t.Fatal(err)
	}
	m, err := storage.Latest(ctx, st, cfg.ref())
	if err != nil || m.Version != 1 || len(m.Files) != 2 {
		t.Fatalf("manifest %+v %v", m, err)
	}
	cfg.JobID = "j2"
	if err := run(results); err != nil { // the same commit again: no new version
		t.Fatal(err)
	}
	if m, _ := storage.Latest(ctx, st, cfg.ref()); m.Version != 1 {
		t.Errorf("a repeated commit wrote version %d", m.Version)
	}
}

// TestRuntimeShared: the DoFns of a process share one runtime per
// checkpoint and version, loaded once; the last release closes it, and a
// new version is another runtime.
func TestRuntimeShared(t *testing.T) {
	const tokPath = "../policy/tokenizer/testdata/small/tokenizer.json"
	tok, err := tokenizer.Load(tokPath)
	if err != nil {
		t.Fatal(err)
	}
	mc, err := model.ParseConfig([]byte(fmt.Sprintf(`{"model_type": "qwen3", "vocab_size": %d, "hidden_size": 16,
		"intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 8,
		"max_position_embeddings": 512, "tie_word_embeddings": true}`, tok.VocabSize())))
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.New(mc, 1)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := m.Save(filepath.Join(dir, "policy"), model.SaveOptions{TokenizerFiles: []string{tokPath}}); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Store: "file://" + filepath.Join(dir, "store"), RunID: "r", Harness: "bash", Policy: filepath.Join(dir, "policy"), PolicyVersion: 1}.WithDefaults()
	reg := &registry{m: map[string]*entry{}}
	ctx := context.Background()
	a, err := reg.acquire(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := reg.acquire(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if a != b || reg.m[cfg.runtimeKey()].refs != 2 {
		t.Fatalf("two DoFns got runtimes %p and %p", a, b)
	}
	next := cfg
	next.PolicyVersion = 2
	c, err := reg.acquire(ctx, next)
	if err != nil {
		t.Fatal(err)
	}
	if c == a {
		t.Error("a new policy version shares the old runtime")
	}
	reg.release(cfg)
	reg.release(cfg)
	reg.release(next)
	if len(reg.m) != 0 {
		t.Errorf("%d runtimes left after the last release", len(reg.m))
	}
	bad := cfg
	bad.Policy = filepath.Join(dir, "missing")
	if _, err := reg.acquire(ctx, bad); err == nil || len(reg.m) != 0 {
		t.Errorf("a missing checkpoint: %v, %d runtimes left", err, len(reg.m))
	}
}

func TestEvalTable(t *testing.T) {
	if got := PassAtK(5, 2, 2); math.Abs(got-0.7) > 1e-12 {
		t.Errorf("pass@2 of 2/5 = %v, want 0.7", got)
	}
	if PassAtK(4, 0, 2) != 0 || PassAtK(4, 3, 2) != 1 || math.Abs(PassAtK(3, 1, 1)-1.0/3) > 1e-12 {
		t.Error("PassAtK edge cases")
	}
	var rs []EvalRollout
	add := func(h, task string, rewards ...float64) {
		for _, r := range rewards {
			st := "completed"
			if r < 0 {
				st, r = "masked", 0
			}
			rs = append(rs, EvalRollout{Harness: h, TaskID: task, Status: st, Reward: r})
		}
	}
	add("bash", "a", 1, 0)  // 1/2
	add("bash", "b", 0, -1) // 0/1, too few for pass@2
	add("tools", "a", 1, 1)
	add("tools", "b", -1, -1) // all masked: not a task of the table
	tab := Table("r", 1, 2, rs)
	want := []EvalRow{
		{Harness: "bash", Tasks: 2, Rollouts: 4, Masked: 1, Pass1: 0.25, PassK: 1, TasksK: 1, PerTask: map[string]float64{"a": 0.5, "b": 0}},
		{Harness: "tools", Tasks: 1, Rollouts: 4, Masked: 2, Pass1: 1, PassK: 1, TasksK: 1, PerTask: map[string]float64{"a": 1}},
	}
	if fmt.Sprint(tab.Rows) != fmt.Sprint(want) {
		t.Errorf("table %+v\nwant  %+v", tab.Rows, want)
	}
}

// A group of two or more rollouts prepares its task's workspace once, in a
// folder its cleanup removes; a group of one, or a snapshot that cannot be
// prepared, gets none, and its rollouts prepare (and fail) on their own.
func TestGroupWorkspace(t *testing.T) {
	ctx := context.Background()
	suite := t.TempDir()
	base, err := tasks.CreateRepo(ctx, filepath.Join(suite, "repos", "x"), tasks.Tree{"a.py": {Data: []byte("x = 1\n"), Mode: tasks.ModeFile}}, "base")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{}.WithDefaults()
	group := func(n int, commit string) Group {
		return Group{GroupID: "g", Task: Task{SuiteDir: suite, Instance: tasks.Instance{InstanceID: "x", Snapshot: "repos/x", BaseCommit: commit}},
			Rollouts: make([]Spec, n)}
	}
	ws, cleanup := groupWorkspace(ctx, cfg, group(2, base))
	if ws == nil {
		t.Fatal("a group of 2 got no shared workspace")
	}
	if string(ws.Tree["a.py"].Data) != "x = 1\n" {
		t.Errorf("tree %v", ws.Tree)
	}
	if b, err := os.ReadFile(filepath.Join(ws.Dir, "a.py")); err != nil || string(b) != "x = 1\n" {
		t.Errorf("prepared a.py %q, %v", b, err)
	}
	cleanup()
	if _, err := os.Stat(ws.Dir); !os.IsNotExist(err) {
		t.Errorf("after cleanup the prepared folder is still there: %v", err)
	}
	for name, g := range map[string]Group{"one rollout": group(1, base), "unknown commit": group(2, strings.Repeat("0", 40))} {
		ws, cleanup := groupWorkspace(ctx, cfg, g)
		cleanup()
		if ws != nil {
			t.Errorf("%s: got a shared workspace", name)
		}
	}
	// A group of two or more shares a grade.Memo; one rollout grades
	// with the worker's grader.
	rt := &runtime{Runtime: &rollout.Runtime{Grader: grade.New(nil, grade.Options{})}}
	if _, ok := groupGrader(rt, 2).(*grade.Memo); !ok {
		t.Error("a group of 2 does not share a grade.Memo")
	}
	if g, ok := groupGrader(rt, 1).(*grade.Grader); !ok || g != rt.Grader {
		t.Error("a group of 1 does not grade with the worker's grader")
	}
	if g := groupGrader(&runtime{Runtime: &rollout.Runtime{}}, 2); g != nil {
		t.Errorf("a worker without a grader gave %T, want nil for rollout's default", g)
	}
}
