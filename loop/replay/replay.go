// Package replay is the rollout audit: it runs stored rollouts of a run
// again and checks that each re-earns its reward. For each rollout it
// starts the same harness in a fresh sandbox on the same task, serves the
// recorded completions through the proxy in place of the model (the
// replay engine, policy/replay, which refuses a request whose prompt
// tokens are not the recorded ones and names the first divergent token
// and call), lets the harness execute them, grades the workspace diff
// with the hidden tests, and compares with the stored row: the diff byte
// for byte (its sha256, rollout.DiffFlag), the reward and test results,
// the termination, the number of turns and of tool calls.
//
// A difference is typed (schemas.Mismatch), causes first: a prompt
// divergence (the harness rendered a different request: clock,
// randomness, environment), a diff divergence (the environment changed
// what a command did, or the stored diff was changed), a reward
// divergence (the grader or the tests are not deterministic, or the
// stored reward was changed), an outcome divergence (the rest). Each
// replay is one line of output and one row of the run's replay table.
package replay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/legorl/legorl/harness"
	preplay "github.com/legorl/legorl/policy/replay"
	"github.com/legorl/legorl/rollout"
	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/storage"
	"github.com/legorl/legorl/tasks"
)

// ErrInput: the replay cannot start: an unknown run, a run without a
// rollouts or segments table, a rollout not in the run or without
// segments, a task not in the suite.
var ErrInput = errors.New("replay")

// ErrMismatch: some replayed rollout did not reproduce.
var ErrMismatch = errors.New("replay: rollouts did not reproduce")

// Options configure Run. Store, RunID, Suite and Policy are required.
type Options struct {
	// Store holds the run.
	Store storage.Store
	RunID string
	// Rollouts names the rollouts to replay (empty names are skipped).
	// Defaults to a sample of Sample scored rollouts.
	Rollouts []string
	// Sample is how many scored rollouts (status completed) to draw when
	// Rollouts is empty; 0 or more than the run has: all of them.
	Sample int
	// Seed draws the sample. Defaults to 0.
	Seed uint64
	// Suite is the run's task suite (tasks.Load: a file or a folder).
	Suite string
	// Policy is a checkpoint folder of the run's model family: only its
	// tokenizer.json is read (the prompts are rendered and tokenized as
	// in the run; no weights are loaded).
	Policy string
	// Template is the chat template the run used. Defaults to qwen3.
	Template string
	// Sandbox is the sandbox backend (rollout.SandboxLocal or
	// rollout.SandboxDocker). Defaults to local.
	Sandbox string
	// AgentBinary is the legorl-agent program (built-in harnesses).
	AgentBinary string
	// MaxTurns is the run's turn budget (a harness given another one asks
	// for other calls). Defaults to 0: the harness's default.
	MaxTurns int
	// Parallel is how many rollouts replay at once. Defaults to 1.
	Parallel int
	// AgentTimeout and GradeTimeout bound each replay's phases. Default
	// to rollout's.
	AgentTimeout, GradeTimeout time.Duration
	// JobID names this replay in the table; required to write it.
	JobID string
	// CodeVersion goes into the table's file footers.
	CodeVersion string
	// NoWrite leaves the replay table unwritten. Defaults to false.
	NoWrite bool
}

// Result sums up a replay.
type Result struct {
	// Rows are the replay table's rows, in the order of the sample.
	Rows []schemas.Replay
	// Keys are the replay table files written.
	Keys []string
}

// Reproduced counts the rows that reproduced.
func (r Result) Reproduced() int {
	n := 0
	for _, x := range r.Rows {
		if x.Reproduced {
			n++
		}
	}
	return n
}

// target is one rollout to replay.
type target struct {
	row  schemas.Rollout
	segs []schemas.Segment
	inst *tasks.Instance
	// suiteDir resolves the instance's snapshot (tasks.Suite.Dir).
	suiteDir string
}

// Run replays the chosen rollouts of o.RunID, writes one line per rollout
// to w (ok, or FAIL with the mismatch type, the rollout id and what
// differed) and a summary line, and commits the rows to the replay
// table. It fails with ErrInput before replaying anything when the input
// is bad, and with ErrMismatch when a rollout did not reproduce.
func Run(ctx context.Context, o Options, w io.Writer) (Result, error) {
	if o.Store == nil || o.RunID == "" || o.Suite == "" || o.Policy == "" {
		return Result{}, fmt.Errorf("%w: a store, a run, the run's suite and a policy folder (tokenizer.json) are required", ErrInput)
	}
	o.Parallel = max(o.Parallel, 1)
	targets, err := load(ctx, o)
	if err != nil {
		return Result{}, err
	}
	eng := preplay.New()
	rt, err := rollout.New(ctx, rollout.Options{Policy: o.Policy, Template: o.Template, Sandbox: o.Sandbox, Generator: eng,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return Result{}, err
	}
	defer rt.Close()

	res := Result{Rows: make([]schemas.Replay, len(targets))}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, o.Parallel)
	var firstErr error
	start := time.Now()
	for i, tg := range targets {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			row, err := replayOne(ctx, o, rt, eng, tg)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			res.Rows[i] = row
			fmt.Fprintln(w, Line(row))
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return res, firstErr
	}
	wall := time.Since(start)
	if !o.NoWrite {
		if res.Keys, err = write(ctx, o, res.Rows); err != nil {
			return res, err
		}
	}
	fmt.Fprintln(w, Summary(o.RunID, res.Rows, wall, o.Parallel))
	if n := len(res.Rows) - res.Reproduced(); n > 0 {
		return res, fmt.Errorf("%w: %d of %d rollouts of run %s", ErrMismatch, n, len(res.Rows), o.RunID)
	}
	return res, nil
}

// load reads the run's rollouts, picks the targets, and reads their
// segments and tasks.
func load(ctx context.Context, o Options) ([]target, error) {
	ms, err := storage.Manifests(ctx, o.Store, o.RunID)
	if err != nil {
		return nil, err
	}
	files := map[string][]storage.FileEntry{} // table -> rollout-stage files
	iters := map[string]int{}                 // file key -> iteration
	for _, m := range ms {
		if m.Stage != schemas.StageRollout {
			continue
		}
		for _, f := range m.Files {
			files[f.Table] = append(files[f.Table], f)
			iters[f.Key] = m.Iteration
		}
	}
	for _, t := range []schemas.Table{schemas.TableRollouts, schemas.TableSegments} {
		if len(files[string(t)]) == 0 {
			return nil, fmt.Errorf("%w: run %q has no %s table in %s (not a run, or not one that ran rollouts)", ErrInput, o.RunID, t, o.Store.URI())
		}
	}
	var rows []schemas.Rollout
	for _, f := range files[string(schemas.TableRollouts)] {
		rs, err := storage.ReadRows[schemas.Rollout](ctx, o.Store, f)
		if err != nil {
			return nil, err
		}
		rows = append(rows, rs...)
	}
	picked, err := pick(o, rows)
	if err != nil {
		return nil, err
	}
	want := map[string]int{}
	needIter := map[int]bool{}
	for i, r := range picked {
		want[r.RolloutID] = i
		needIter[int(r.Iteration)] = true
	}
	targets := make([]target, len(picked))
	for i, r := range picked {
		targets[i].row = r
	}
	for _, f := range files[string(schemas.TableSegments)] {
		if !needIter[iters[f.Key]] {
			continue
		}
		segs, err := storage.ReadRows[schemas.Segment](ctx, o.Store, f)
		if err != nil {
			return nil, err
		}
		for _, s := range segs {
			if i, ok := want[s.RolloutID]; ok {
				targets[i].segs = append(targets[i].segs, s)
			}
		}
	}
	suite, err := tasks.Load(o.Suite)
	if err != nil {
		return nil, fmt.Errorf("%w: suite: %w", ErrInput, err)
	}
	for i := range targets {
		tg := &targets[i]
		if len(tg.segs) == 0 {
			return nil, fmt.Errorf("%w: rollout %s of run %s has no segments: nothing to replay", ErrInput, tg.row.RolloutID, o.RunID)
		}
		if _, err := preplay.Calls(tg.segs); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInput, err)
		}
		if _, err := harness.Lookup(tg.row.Harness); err != nil {
			return nil, fmt.Errorf("%w: rollout %s: %w", ErrInput, tg.row.RolloutID, err)
		}
		inst, ok := suite.Find(tg.row.TaskID)
		if !ok {
			return nil, fmt.Errorf("%w: task %s of rollout %s is not in %s: pass the run's suite", ErrInput, tg.row.TaskID, tg.row.RolloutID, o.Suite)
		}
		tg.inst, tg.suiteDir = inst, suite.Dir
		tg.row.GroupID = cmp.Or(tg.row.GroupID, rollout.GroupID(o.RunID, tg.row.Iteration, tg.row.TaskID))
	}
	return targets, nil
}

// pick returns the named rollouts, or a sample of the scored ones in a
// stable order.
func pick(o Options, rows []schemas.Rollout) ([]schemas.Rollout, error) {
	byID := map[string]schemas.Rollout{}
	for _, r := range rows {
		byID[r.RolloutID] = r
	}
	var out []schemas.Rollout
	for _, id := range o.Rollouts {
		if id = strings.TrimSpace(id); id != "" {
			r, ok := byID[id]
			if !ok {
				return nil, fmt.Errorf("%w: rollout %q is not in run %s", ErrInput, id, o.RunID)
			}
			out = append(out, r)
		}
	}
	if len(out) > 0 {
		return out, nil
	}
	var scored []schemas.Rollout
	for _, r := range rows {
		if r.Status == schemas.StatusCompleted && r.NumLLMCalls > 0 {
			scored = append(scored, r)
		}
	}
	if len(scored) == 0 {
		return nil, fmt.Errorf("%w: run %s has no scored rollout to replay", ErrInput, o.RunID)
	}
	slices.SortFunc(scored, func(a, b schemas.Rollout) int {
		return cmp.Or(cmp.Compare(a.Iteration, b.Iteration), strings.Compare(a.RolloutID, b.RolloutID))
	})
	if o.Sample <= 0 || o.Sample >= len(scored) {
		return scored, nil
	}
	rng := rand.New(rand.NewPCG(o.Seed, 0x7e91a7))
	idx := rng.Perm(len(scored))[:o.Sample]
	slices.Sort(idx)
	for _, j := range idx {
		out = append(out, scored[j])
	}
	return out, nil
}

// replayOne runs one rollout again and compares.
func replayOne(ctx context.Context, o Options, rt *rollout.Runtime, eng *preplay.Engine, tg target) (schemas.Replay, error) {
	rec := tg.row
	h, _ := harness.Lookup(rec.Harness) // load checked it
	if err := eng.Add(rec.RolloutID, tg.segs); err != nil {
		return schemas.Replay{}, err
	}
	start := time.Now()
	got, _, _, err := rollout.Run(ctx, rollout.Config{
		Backend: rt.Backend, Grader: rt.Grader, Proxy: rt.Proxy, VocabSize: rt.Tokenizer.VocabSize(), PolicyVersion: rec.PolicyVersion,
		Harness: h, AgentBinary: o.AgentBinary, MaxTurns: o.MaxTurns, SuiteDir: tg.suiteDir, Instance: tg.inst,
		RunID: rec.RunID, Iteration: rec.Iteration, GroupID: rec.GroupID, RolloutID: rec.RolloutID, Seed: uint64(rec.Seed),
		AgentTimeout: o.AgentTimeout, GradeTimeout: o.GradeTimeout,
	})
	rep, _ := eng.Done(rec.RolloutID)
	if err != nil && (got.RolloutID == "" || ctx.Err() != nil) {
		return schemas.Replay{}, fmt.Errorf("replay of rollout %s: %w", rec.RolloutID, err)
	}
	row := Compare(rec, got, rep)
	row.JobID, row.Seconds, row.ReplayedAtMs = o.JobID, time.Since(start).Seconds(), start.UnixMilli()
	return row, nil
}

// Compare compares a stored rollout row with its replay (got) and what
// the replay engine served, and returns the replay row (without JobID,
// Seconds and ReplayedAtMs). The mismatch is the first kind, causes first
// (schemas.Mismatches); the detail lists every difference.
func Compare(rec, got schemas.Rollout, rep preplay.Report) schemas.Replay {
	row := schemas.Replay{
		RunID: rec.RunID, Iteration: rec.Iteration, RolloutID: rec.RolloutID, TaskID: rec.TaskID, Harness: rec.Harness,
		DivergentCall: -1, DivergentToken: -1, CallsRecorded: int32(rep.Calls), CallsServed: int32(rep.Served),
		Reward: rec.Reward, ReplayedReward: got.Reward, Termination: rec.Termination, ReplayedTermination: got.Termination,
		NumTurns: rec.NumTurns, ReplayedNumTurns: got.NumTurns, NumToolCalls: rec.NumToolCalls, ReplayedToolCalls: got.NumToolCalls,
		DiffBytes: rec.DiffBytes, ReplayedDiffBytes: got.DiffBytes,
		DiffSHA256: rollout.DiffHash(rec.Flags), ReplayedDiffSHA256: rollout.DiffHash(got.Flags),
	}
	var kinds []schemas.Mismatch
	var details []string
	add := func(k schemas.Mismatch, format string, args ...any) {
		if !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
		details = append(details, fmt.Sprintf(format, args...))
	}
	if d := rep.Divergence; d != nil {
		row.DivergentCall, row.DivergentToken = int32(d.Call), int32(d.Token)
		add(schemas.MismatchPrompt, "%s", d)
	} else if rep.Served < rep.Calls {
		row.DivergentCall = int32(rep.Requests)
		add(schemas.MismatchPrompt, "the harness stopped after %d of the %d recorded calls", rep.Served, rep.Calls)
	}
	switch {
	case row.DiffSHA256 != "" && row.DiffSHA256 != row.ReplayedDiffSHA256:
		add(schemas.MismatchDiff, "diff sha256 %s (%d B) -> %s (%d B)", short(row.DiffSHA256), rec.DiffBytes, short(row.ReplayedDiffSHA256), got.DiffBytes)
	case rec.DiffBytes != got.DiffBytes:
		add(schemas.MismatchDiff, "diff %d B -> %d B", rec.DiffBytes, got.DiffBytes)
	}
	if rec.Reward != got.Reward {
		add(schemas.MismatchReward, "reward %g -> %g", rec.Reward, got.Reward)
	}
	for _, l := range []struct {
		name     string
		rec, got []string
	}{
		{"f2p_passed", rec.F2PPassed, got.F2PPassed}, {"f2p_failed", rec.F2PFailed, got.F2PFailed},
		{"p2p_passed", rec.P2PPassed, got.P2PPassed}, {"p2p_failed", rec.P2PFailed, got.P2PFailed},
	} {
		if !slices.Equal(sorted(l.rec), sorted(l.got)) {
			add(schemas.MismatchReward, "%s %v -> %v", l.name, l.rec, l.got)
		}
	}
	if rec.Termination != got.Termination {
		why := ""
		if got.Error != "" {
			why = " (" + got.Error + ")"
		}
		add(schemas.MismatchOutcome, "termination %s -> %s%s", rec.Termination, got.Termination, why)
	}
	if rec.NumTurns != got.NumTurns {
		add(schemas.MismatchOutcome, "turns %d -> %d", rec.NumTurns, got.NumTurns)
	}
	if rec.NumToolCalls != got.NumToolCalls {
		add(schemas.MismatchOutcome, "tool calls %d -> %d", rec.NumToolCalls, got.NumToolCalls)
	}
	row.Reproduced = len(kinds) == 0
	if !row.Reproduced {
		slices.SortFunc(kinds, func(a, b schemas.Mismatch) int {
			return slices.Index(schemas.Mismatches(), a) - slices.Index(schemas.Mismatches(), b)
		})
		row.Mismatch = kinds[0]
		row.Detail = strings.Join(details, "; ")
		if len(row.Detail) > 2000 {
			row.Detail = row.Detail[:2000] + "…"
		}
	}
	return row
}

func sorted(xs []string) []string { return slices.Sorted(slices.Values(xs)) }

func short(h string) string {
	if h == "" {
		return "none"
	}
	return h[:min(12, len(h))]
}

// Line is a replay row as one line of output: "ok" and what reproduced,
// or "FAIL", the mismatch type, the rollout id and what differed.
func Line(r schemas.Replay) string {
	if r.Reproduced {
		diff := "diff " + short(r.ReplayedDiffSHA256)
		if r.DiffSHA256 == "" {
			diff = fmt.Sprintf("diff %d B (size only: no sha256 recorded)", r.ReplayedDiffBytes)
		}
		return fmt.Sprintf("ok   replay   %s %d calls, %s, reward %g, %s, %d turns, %d tool calls (%.2f s)",
			r.RolloutID, r.CallsServed, diff, r.ReplayedReward, r.ReplayedTermination, r.ReplayedNumTurns, r.ReplayedToolCalls, r.Seconds)
	}
	return fmt.Sprintf("FAIL %-8s %s %s", r.Mismatch, r.RolloutID, r.Detail)
}

// Summary is the closing line: the share reproduced bit for bit, the
// mismatches by type, and the wall time per replayed rollout.
func Summary(run string, rows []schemas.Replay, wall time.Duration, parallel int) string {
	n := map[schemas.Mismatch]int{}
	for _, r := range rows {
		n[r.Mismatch]++
	}
	var kinds []string
	for _, k := range schemas.Mismatches() {
		kinds = append(kinds, fmt.Sprintf("%d %s", n[k], k))
	}
	per := 0.0
	if len(rows) > 0 {
		per = wall.Seconds() / float64(len(rows))
	}
	return fmt.Sprintf("replay of run %s: %d of %d rollouts reproduced bit for bit (%.1f%%); mismatches: %s; %.2f s wall per rollout (%d at a time)",
		run, n[schemas.MismatchNone], len(rows), 100*float64(n[schemas.MismatchNone])/float64(max(len(rows), 1)), strings.Join(kinds, ", "), per, parallel)
}

// write commits the rows to the replay table: one file per iteration,
// under the replay stage's manifest of that iteration.
func write(ctx context.Context, o Options, rows []schemas.Replay) ([]string, error) {
	if o.JobID == "" {
		return nil, fmt.Errorf("%w: a job id is required to write the replay table", ErrInput)
	}
	byIter := map[int32][]schemas.Replay{}
	for _, r := range rows {
		byIter[r.Iteration] = append(byIter[r.Iteration], r)
	}
	var keys []string
	for _, it := range slices.Sorted(maps.Keys(byIter)) {
		for i := range byIter[it] {
			if err := byIter[it][i].Validate(); err != nil {
				return keys, err
			}
		}
		ref := storage.ManifestRef{RunID: o.RunID, Iteration: int(it), Stage: schemas.StageReplay}
		foot := schemas.Footer{SchemaVersion: schemas.Version, Table: schemas.TableReplay, RunID: o.RunID,
			ConfigHash: "legorl-replay", CodeVersion: o.CodeVersion}
		e, err := storage.WriteFile(ctx, o.Store, ref.DataKey(string(schemas.TableReplay), o.JobID), foot, byIter[it])
		if err != nil {
			return keys, err
		}
		if _, err := storage.Commit(ctx, o.Store, ref, []storage.FileEntry{e}); err != nil {
			return keys, err
		}
		keys = append(keys, e.Key)
	}
	return keys, nil
}
