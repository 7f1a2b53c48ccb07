package transforms

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/legorl/legorl/harness"
	"github.com/legorl/legorl/rollout"
	"github.com/legorl/legorl/sandbox/grade"
	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/storage"
	"github.com/legorl/legorl/tasks"
	"github.com/legorl/legorl/text"
)

// runGroup runs a group whose claim does not exist yet: its rollouts side
// by side (each waits for a slot of the worker's bound), the tail-kill, then
// its shard and claim. The error is for what must fail the bundle (a bad
// config, rows that fail validation, the store); every rollout ending is an
// Outcome.
func runGroup(ctx context.Context, rt *runtime, st storage.Store, cfg Config, g Group) (GroupResult, error) {
	h, err := harness.Lookup(cfg.Harness)
	if err != nil {
		return GroupResult{}, err
	}
	type result struct {
		row   schemas.Rollout
		segs  []schemas.Segment
		steps []schemas.Step
		err   error
		took  time.Duration
	}
	n := len(g.Rollouts)
	res := make([]result, n)
	ws, cleanup := groupWorkspace(ctx, cfg, g)
	defer cleanup()
	grader := groupGrader(rt, n)
	tail := newTailKiller(n, cfg.TailShare, cfg.TailGrace)
	defer tail.stop()
	var wg sync.WaitGroup
	// Groups take the worker's slots in turn, each all of its own before
	// the next: groups then finish (and are claimed) about in order, not
	// all at the end, which is what a crash loses and progress shows.
	rt.admit.Lock()
	for i, spec := range g.Rollouts {
		rctx, cancel := context.WithCancel(ctx)
		tail.track(i, cancel)
		slot := false
		select { // a slot of the worker's bound
		case rt.slots <- struct{}{}:
			slot = true
		case <-ctx.Done():
		}
		tail.started(i)
		rt.met.Pipeline.rolloutLaunched()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cancel()
			defer tail.done(i)
			if slot {
				defer func() { <-rt.slots }()
			}
			r := &res[i]
			start := time.Now()
			r.row, r.segs, r.steps, r.err = runOne(rctx, rt, cfg, h, g, spec, ws, grader)
			r.took = time.Since(start)
		}()
	}
	rt.admit.Unlock()
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return GroupResult{}, err
	}

	out := GroupResult{GroupID: g.GroupID, TaskID: g.Task.Instance.InstanceID, Attempt: newAttempt()}
	var sh shard
	for i, r := range res {
		if r.err != nil && r.row.Termination == "" || errors.Is(r.err, rollout.ErrInvalidRows) {
			return GroupResult{}, fmt.Errorf("transforms: rollout %s of task %s: %w", g.Rollouts[i].RolloutID, out.TaskID, r.err)
		}
		row := r.row
		killed := tail.killed(i) && row.Status == schemas.StatusMasked
		if killed {
			row.Termination, row.Status = schemas.TerminationTimeout, schemas.StatusMasked
			row.Error = text.OneLine("tail-kill: the rest of the group ended "+cfg.TailGrace.String()+" earlier; "+row.Error, 2000)
			row.Flags = appendFlag(row.Flags, "tail_killed")
		}
		rt.met.Pipeline.rolloutEnded(row, r.took)
		sh.rollouts = append(sh.rollouts, row)
		sh.segments = append(sh.segments, r.segs...)
		sh.steps = append(sh.steps, r.steps...)
		out.Rollouts = append(out.Rollouts, Outcome{RolloutID: row.RolloutID, Status: string(row.Status),
			Termination: string(row.Termination), Reward: row.Reward, TailKilled: killed,
			Seconds: row.SetupSeconds + row.AgentSeconds + row.GradeSeconds})
	}

	sctx, cancel := context.WithTimeout(ctx, cfg.StoreTimeout)
	defer cancel()
	out.Files, err = writeShard(sctx, st, cfg.ref(), g.GroupID+"."+out.Attempt, cfg.footer, sh)
	if err != nil {
		return GroupResult{}, fmt.Errorf("transforms: group %s of task %s: %w", g.GroupID, out.TaskID, err)
	}
	if err := fault(cfg, "after-shard", out.TaskID); err != nil {
		return GroupResult{}, err
	}
	out, err = putClaim(sctx, st, ClaimKey(cfg.RunID, cfg.Stage, cfg.Iteration, g.GroupID), out)
	if err == nil {
		rt.met.Pipeline.group(out.Reused)
	}
	return out, err
}

// fault returns ErrFault when cfg injects one at point for the task.
func fault(cfg Config, point, taskID string) error {
	if cfg.TestFault != point || (cfg.TestFaultTask != "" && cfg.TestFaultTask != taskID) {
		return nil
	}
	if cfg.TestFaultOnce != "" {
		f, err := os.OpenFile(cfg.TestFaultOnce, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return nil // the fault already happened
		}
		f.Close()
	}
	return fmt.Errorf("%w: %s, task %s", ErrFault, point, taskID)
}

// SplitFlag prefixes the flag that records a rollout's task split in
// the rollouts table ("split:train", "split:heldout", ...): which pool of
// the suite each rollout drew from.
const SplitFlag = "split:"

// hardSlack is how long past the sum of its phase deadlines a rollout may
// take before its runner is abandoned (Run honours its deadlines; this is
// the backstop that keeps a stuck rollout from stalling the run).
const hardSlack = 3 * time.Minute

// groupWorkspace prepares the task's workspace once for the group's
// rollouts to make their sandboxes from (tasks.Workspace: git's six
// processes once per group, not once per rollout). It returns nil where
// the group has one rollout, or where preparing fails: each rollout then
// prepares its own and ends as its own setup fails, exactly as without the
// shared one.
func groupWorkspace(ctx context.Context, cfg Config, g Group) (*tasks.Workspace, func()) {
	if len(g.Rollouts) < 2 {
		return nil, func() {}
	}
	dir, err := os.MkdirTemp("", "legorl-group-")
	if err != nil {
		return nil, func() {}
	}
	cleanup := func() { os.RemoveAll(dir) }
	sctx, cancel := context.WithTimeout(ctx, cfg.SetupTimeout)
	defer cancel()
	in := g.Task.Instance
	ws, err := tasks.NewWorkspace(sctx, in.SnapshotDir(g.Task.SuiteDir), in.BaseCommit, filepath.Join(dir, "ws"))
	if err != nil {
		cleanup()
		return nil, func() {}
	}
	return ws, cleanup
}

// groupGrader is the grader of a group of n rollouts: for two or more, a
// grade.Memo over the worker's grader, so each distinct diff the group
// leaves is graded once (most repeat: see grade.Memo); for one, the
// worker's grader itself; nil (rollout.Config's default) where the worker
// has none.
func groupGrader(rt *runtime, n int) rollout.Grader {
	switch {
	case rt.Grader == nil:
		return nil // not a nil *grade.Grader inside the interface
	case n < 2:
		return rt.Grader
	}
	return grade.NewMemo(rt.Grader)
}

// runOne runs one rollout under the hard deadline; ws, when not nil, is
// its task's prepared workspace (groupWorkspace), and grader grades it
// (groupGrader).
func runOne(ctx context.Context, rt *runtime, cfg Config, h harness.Harness, g Group, spec Spec, ws *tasks.Workspace, grader rollout.Grader) (schemas.Rollout, []schemas.Segment, []schemas.Step, error) {
	in := g.Task.Instance
	rc := rollout.Config{
		Backend: rt.Backend, Grader: grader, Proxy: rt.Proxy, VocabSize: rt.Tokenizer.VocabSize(),
		PolicyVersion: cfg.PolicyVersion, Harness: h, AgentBinary: cfg.AgentBinary, MaxTurns: cfg.MaxTurns,
		SuiteDir: g.Task.SuiteDir, Instance: &in, Workspace: ws, RunID: cfg.RunID, Iteration: cfg.Iteration, GroupID: g.GroupID,
		RolloutID: spec.RolloutID, Seed: uint64(spec.Seed),
		SetupTimeout: cfg.SetupTimeout, AgentTimeout: cfg.AgentTimeout, GradeTimeout: cfg.GradeTimeout,
	}
	limit := cfg.SetupTimeout + cfg.AgentTimeout + cfg.GradeTimeout + hardSlack
	type out struct {
		row   schemas.Rollout
		segs  []schemas.Segment
		steps []schemas.Step
		err   error
	}
	ch := make(chan out, 1)
	start := time.Now()
	go func() {
		var o out
		o.row, o.segs, o.steps, o.err = rollout.Run(ctx, rc)
		ch <- o
	}()
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case o := <-ch:
		if in.Split != "" && o.err == nil {
			o.row.Flags = append(o.row.Flags, SplitFlag+in.Split)
		}
		return o.row, o.segs, o.steps, o.err
	case <-t.C:
		// Abandoned: its goroutine ends when Run does; the row says why.
		row := maskedRow(cfg, g, spec, schemas.TerminationTimeout,
			fmt.Sprintf("the rollout ran past its hard deadline %s and was abandoned", limit))
		row.StartedAtMs = start.UnixMilli()
		row.AgentSeconds = time.Since(start).Seconds()
		return row, nil, nil, nil
	}
}

// maskedRow is the row of a rollout that ended without Run's row.
func maskedRow(cfg Config, g Group, spec Spec, t schemas.Termination, detail string) schemas.Rollout {
	return schemas.Rollout{
		RunID: cfg.RunID, Iteration: cfg.Iteration, TaskID: g.Task.Instance.InstanceID, GroupID: g.GroupID,
		RolloutID: spec.RolloutID, Harness: cfg.Harness, PolicyVersion: cfg.PolicyVersion, Seed: spec.Seed,
		Status: t.Status(), Termination: t, Error: text.OneLine(detail, 2000),
		F2PPassed: []string{}, F2PFailed: []string{}, P2PPassed: []string{}, P2PFailed: []string{}, Flags: splitFlags(g.Task.Instance.Split, "abandoned"),
	}
}

// tailKiller kills the rest of a group once share of it has ended and
// grace has passed since. The grace starts only once every rollout of the
// group has started (got its slot of the worker's bound): a rollout that
// waits behind other groups is not late.
type tailKiller struct {
	mu      sync.Mutex
	n, need int
	grace   time.Duration
	ended   int
	begun   int
	cancels []context.CancelFunc
	fin     []bool
	kill    []bool
	timer   *time.Timer
}

func newTailKiller(n int, share float64, grace time.Duration) *tailKiller {
	need := n + 1 // off
	if share < 1 && n > 1 {
		need = max(1, int(math.Ceil(share*float64(n))))
	}
	return &tailKiller{n: n, need: need, grace: grace, cancels: make([]context.CancelFunc, n), fin: make([]bool, n), kill: make([]bool, n)}
}

func (k *tailKiller) track(i int, cancel context.CancelFunc) {
	k.mu.Lock()
	k.cancels[i] = cancel
	k.mu.Unlock()
}

func (k *tailKiller) started(i int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.begun++
	k.arm()
}

func (k *tailKiller) done(i int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.fin[i] = true
	k.ended++
	k.arm()
}

// arm starts the grace once share of the group has ended, every rollout
// has started and some still run; k.mu is held.
func (k *tailKiller) arm() {
	if k.timer == nil && k.ended >= k.need && k.ended < k.n && k.begun == k.n {
		k.timer = time.AfterFunc(k.grace, k.fire)
	}
}

func (k *tailKiller) fire() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for i, f := range k.fin {
		if !f {
			k.kill[i] = true
			k.cancels[i]()
		}
	}
}

func (k *tailKiller) killed(i int) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.kill[i]
}

func (k *tailKiller) stop() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.timer != nil {
		k.timer.Stop()
	}
}

func appendFlag(flags []string, f string) []string {
	for _, x := range flags {
		if x == f {
			return flags
		}
	}
	return append(flags, f)
}

func splitFlags(split string, flags ...string) []string {
	if split != "" {
		flags = append(flags, SplitFlag+split)
	}
	return flags
}
