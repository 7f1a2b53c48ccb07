package scripted

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/legorl/legorl/tasks"
)

// SolveAll runs Solve on every instance, parallel at a time (at least
// one), and returns the demonstrations in the instances' order: the
// result is the same at any parallelism. A demonstration is mostly git's
// and the agent's file tools' CPU, so the gain follows the cores: on 2
// cores 4 at a time made about 1.1x the demonstrations per second of one
// at a time (BenchmarkSolveAll, docs/PERFORMANCE.md). progress, when
// not nil, is called after each finished demonstration with the number
// finished so far (from several goroutines, one call at a time). The
// first error stops the rest and is returned.
func SolveAll(ctx context.Context, suiteDir string, ins []*tasks.Instance, agentName string, opt Options, parallel int, progress func(done int)) ([]*Demo, error) {
	parallel = max(1, min(parallel, len(ins)))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := make([]*Demo, len(ins))
	var (
		next     atomic.Int64
		mu       sync.Mutex
		done     int
		firstErr error
		wg       sync.WaitGroup
	)
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(ins) || ctx.Err() != nil {
					return
				}
				d, err := Solve(ctx, suiteDir, ins[i], agentName, opt)
				mu.Lock()
				if err != nil {
					if firstErr == nil {
						firstErr = err
						cancel()
					}
					mu.Unlock()
					return
				}
				out[i] = d
				done++
				if progress != nil {
					progress(done)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return out, nil
}
