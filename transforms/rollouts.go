package transforms

import (
	"context"
	"fmt"
	"sync"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/legorl/legorl/storage"
)

func init() {
	register.DoFn3x1[context.Context, Group, func(GroupResult), error](&rolloutFn{})
	register.Emitter1[GroupResult]()
}

// Rollouts runs each group's rollouts (rollout.Run: sandbox, proxy,
// harness, grading) and writes their rows as one write-once Parquet shard
// per table and group, then the group's claim (see the package doc). A
// group claimed earlier is not run again: its claim is passed on. It
// expects a PCollection<Group> and returns a PCollection<GroupResult>.
//
// Groups are reshuffled first, so that a distributed runner spreads them
// over its workers. Within a worker, the groups of a bundle run
// concurrently: ProcessElement starts a group and returns, FinishBundle
// waits for them and emits their results. The rollouts running at once in
// a worker process are bounded by cfg.Parallel, shared by all its DoFns.
func Rollouts(s beam.Scope, cfg Config, groups beam.PCollection) beam.PCollection {
	s = s.Scope("transforms.Rollouts")
	return beam.ParDo(s, &rolloutFn{Cfg: cfg.WithDefaults()}, beam.Reshuffle(s, groups))
}

type rolloutFn struct {
	Cfg Config

	rt *runtime
	st storage.Store

	mu      sync.Mutex
	ctx     context.Context // of the bundle's groups; ends with the bundle
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	results []GroupResult
	err     error
}

func (f *rolloutFn) Setup(ctx context.Context) error {
	st, err := OpenStore(ctx, f.Cfg)
	if err != nil {
		return fmt.Errorf("transforms: rollout worker: %w", err)
	}
	rt, err := runtimes.acquire(ctx, f.Cfg)
	if err != nil {
		return fmt.Errorf("transforms: rollout worker: %w", err)
	}
	f.rt, f.st = rt, st
	return nil
}

func (f *rolloutFn) Teardown() {
	if f.rt != nil {
		f.rt = nil
		runtimes.release(f.Cfg)
	}
}

func (f *rolloutFn) ProcessElement(ctx context.Context, g Group, emit func(GroupResult)) error {
	if err := f.failed(); err != nil {
		return err
	}
	cfg := f.Cfg
	key := ClaimKey(cfg.RunID, cfg.Stage, cfg.Iteration, g.GroupID)
	cctx, cancel := context.WithTimeout(ctx, cfg.StoreTimeout)
	r, found, err := ReadClaim(cctx, f.st, key)
	cancel()
	if err != nil {
		return fmt.Errorf("transforms: group %s: %w", g.GroupID, err)
	}
	if found {
		if len(r.Rollouts) != len(g.Rollouts) {
			return fmt.Errorf("%w: group %s (task %s) was claimed with %d rollouts, this run launches %d (a different group size for the same run and iteration?)",
				ErrAccounting, g.GroupID, g.Task.Instance.InstanceID, len(r.Rollouts), len(g.Rollouts))
		}
		r.Reused = true
		f.rt.met.Pipeline.group(true)
		emit(r)
		return nil
	}
	f.mu.Lock()
	if f.ctx == nil {
		f.ctx, f.cancel = context.WithCancel(context.WithoutCancel(ctx))
	}
	bctx := f.ctx
	f.mu.Unlock()
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		var r GroupResult
		var err error
		func() {
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("transforms: group %s: panic: %v", g.GroupID, p)
				}
			}()
			r, err = runGroup(bctx, f.rt, f.st, cfg, g)
		}()
		if err == nil {
			err = fault(cfg, "after-claim", g.Task.Instance.InstanceID)
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if err != nil {
			if f.err == nil {
				f.err = err
				f.cancel() // the bundle fails: stop its other groups
			}
			return
		}
		f.results = append(f.results, r)
	}()
	return nil
}

func (f *rolloutFn) failed() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		_, err := f.finishLocked()
		return err
	}
	return nil
}

// finishLocked resets the bundle state after waiting for its groups; f.mu
// is held and released around the wait.
func (f *rolloutFn) finishLocked() (results []GroupResult, err error) {
	f.mu.Unlock()
	f.wg.Wait()
	f.mu.Lock()
	if f.cancel != nil {
		f.cancel()
	}
	results, err = f.results, f.err
	f.ctx, f.cancel, f.results, f.err = nil, nil, nil, nil
	return results, err
}

func (f *rolloutFn) FinishBundle(ctx context.Context, emit func(GroupResult)) error {
	f.mu.Lock()
	results, err := f.finishLocked()
	f.mu.Unlock()
	if err != nil {
		return err
	}
	for _, r := range results {
		emit(r)
	}
	return nil
}
