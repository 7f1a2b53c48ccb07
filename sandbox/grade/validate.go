package grade

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/legorl/legorl/sandbox"
	"github.com/legorl/legorl/tasks"
	"github.com/legorl/legorl/text"
)

// Validate checks an instance at ingest: its fields (Instance.Check), the
// gold patch graded runs times (every FAIL_TO_PASS and PASS_TO_PASS test
// passes, the same way every time), and the base graded once (every
// FAIL_TO_PASS test fails, every PASS_TO_PASS test passes). A rejected
// instance returns an error wrapping one of the tasks sentinels
// (tasks.Reason names it).
func (g *Grader) Validate(ctx context.Context, suiteDir string, inst *tasks.Instance, runs int) error {
	if runs < 1 {
		runs = 1
	}
	if err := inst.Check(); err != nil {
		return err
	}
	if _, err := g.prepare(ctx, suiteDir, inst); err != nil {
		return err
	}
	var first *Grade
	for i := range runs {
		// Not arbitrated (Grade would call a gold patch that fails to set
		// up the environment's failure): here the gold patch is what is
		// checked, and only the toolchain's own environment errors are
		// the environment's.
		gr, setup, err := g.grade(ctx, suiteDir, inst, inst.Patch)
		if err != nil {
			return err
		}
		if setup != nil && setup.trusted {
			return fmt.Errorf("%w: %s: gold patch run %d: %s", tasks.ErrEnv, inst.InstanceID, i+1, setup.what)
		}
		switch gr.Outcome {
		case sandbox.OutcomeCompleted:
		case sandbox.OutcomePatchInvalid:
			return fmt.Errorf("%w: %s: gold patch: %s", tasks.ErrPatch, inst.InstanceID, gr.Detail)
		case sandbox.OutcomeTimeout:
			return fmt.Errorf("%w: %s: gold patch run %d timed out", tasks.ErrGoldFails, inst.InstanceID, i+1)
		default:
			return fmt.Errorf("%w: %s: gold patch run %d: %s: %s", tasks.ErrEnv, inst.InstanceID, i+1, gr.Outcome, gr.Detail)
		}
		if first != nil && (!slices.Equal(first.F2PFailed, gr.F2PFailed) || !slices.Equal(first.P2PFailed, gr.P2PFailed)) {
			return fmt.Errorf("%w: %s: gold patch runs 1 and %d disagree (failed %v then %v; run 1: exit %d, %s; run %d: exit %d, %s)", tasks.ErrFlaky, inst.InstanceID, i+1,
				append(first.F2PFailed, first.P2PFailed...), append(gr.F2PFailed, gr.P2PFailed...),
				first.ExitCode, text.OneLine(first.Detail, 300), i+1, gr.ExitCode, text.OneLine(gr.Detail, 300))
		}
		if first == nil {
			first = &gr
		}
	}
	if failed := append(append([]string{}, first.F2PFailed...), first.P2PFailed...); len(failed) > 0 {
		return fmt.Errorf("%w: %s: %s failed with the gold patch", tasks.ErrGoldFails, inst.InstanceID, strings.Join(failed, ", "))
	}
	if first.Reward != 1 {
		return fmt.Errorf("%w: %s: gold patch: %s", tasks.ErrGoldFails, inst.InstanceID, first.Detail)
	}
	base, setup, err := g.grade(ctx, suiteDir, inst, "")
	if err != nil {
		return err
	}
	if setup != nil && setup.trusted {
		return fmt.Errorf("%w: %s: base run: %s", tasks.ErrEnv, inst.InstanceID, setup.what)
	}
	if base.Outcome != sandbox.OutcomeCompleted && base.Outcome != sandbox.OutcomeTimeout {
		return fmt.Errorf("%w: %s: base run: %s: %s", tasks.ErrEnv, inst.InstanceID, base.Outcome, base.Detail)
	}
	if len(base.F2PPassed) > 0 {
		return fmt.Errorf("%w: %s: %s", tasks.ErrF2PPassesOnBase, inst.InstanceID, strings.Join(base.F2PPassed, ", "))
	}
	if base.Outcome == sandbox.OutcomeCompleted && len(base.P2PFailed) > 0 {
		return fmt.Errorf("%w: %s: %s", tasks.ErrP2PFailsOnBase, inst.InstanceID, strings.Join(base.P2PFailed, ", "))
	}
	return nil
}

// Report is the validation result of one instance.
type Report struct {
	InstanceID string
	Err        error // nil: valid
}

// ValidateSuite validates every instance, jobs at a time, and returns one
// report per instance in input order; a rejected instance does not stop
// the rest. Duplicate ids are rejected (all but the first).
func (g *Grader) ValidateSuite(ctx context.Context, s *tasks.Suite, runs, jobs int) []Report {
	if jobs < 1 {
		jobs = 1
	}
	out := make([]Report, len(s.Instances))
	seen := map[string]bool{}
	sem := make(chan struct{}, jobs)
	var wg sync.WaitGroup
	for i := range s.Instances {
		in := &s.Instances[i]
		out[i].InstanceID = in.InstanceID
		if seen[in.InstanceID] {
			out[i].Err = fmt.Errorf("%w: %s", tasks.ErrDuplicate, in.InstanceID)
			continue
		}
		seen[in.InstanceID] = true
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out[i].Err = g.Validate(ctx, s.Dir, in, runs)
		}()
	}
	wg.Wait()
	return out
}
