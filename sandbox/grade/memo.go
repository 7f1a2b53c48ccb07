package grade

import (
	"context"
	"crypto/sha256"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/legorl/legorl/sandbox"
	"github.com/legorl/legorl/tasks"
)

// Memo grades each distinct diff of a group once. The G rollouts of a
// group work on one task, and many leave the same diff: in a demo run 42%
// of the rollouts left none, and about 5 in 6 repeated one their group had
// already left. A grade is a function of the instance and the diff
// (Grader.Grade builds a fresh sandbox from the pristine tree and applies
// the diff), so the repeats take the first grade, with the seconds they
// waited for it as its time. A reused grade carries no flag of its own:
// which rollout of a group grades first is a matter of timing, and a row
// must say the same when its run is replayed (Reused counts them).
//
// Only a grade whose tests ran (OutcomeCompleted, reward 0 or 1) is
// reused. An infrastructure failure, a timeout, a sandbox crash or a
// canceled grade is never shared: the next rollout with that diff grades
// it again itself, so one rollout's failure never becomes another's
// reward. A diff whose tests pass by chance is graded once per group: its
// copies share one draw.
//
// A Memo is safe for concurrent use; rollouts with the same diff that
// arrive while it is graded wait for that grade.
type Memo struct {
	g      *Grader
	reused atomic.Int64

	mu    sync.Mutex
	calls map[memoKey]*memoCall
}

type memoKey struct {
	suiteDir, instance string
	diff               [sha256.Size]byte
}

// memoCall is one grade in flight or done; done closes when it ends, and
// ok then says whether gr may be reused.
type memoCall struct {
	done chan struct{}
	gr   Grade
	ok   bool
}

// NewMemo returns a Memo that grades with g.
func NewMemo(g *Grader) *Memo {
	return &Memo{g: g, calls: map[memoKey]*memoCall{}}
}

// Grade grades diff against inst as Grader.Grade does, or returns the
// grade of the same diff graded already (see Memo).
func (m *Memo) Grade(ctx context.Context, suiteDir string, inst *tasks.Instance, diff string) (Grade, error) {
	key := memoKey{suiteDir: suiteDir, instance: inst.InstanceID, diff: sha256.Sum256([]byte(diff))}
	start := time.Now()
	m.mu.Lock()
	if c, ok := m.calls[key]; ok {
		m.mu.Unlock()
		select {
		case <-c.done:
		case <-ctx.Done():
			return Grade{InstanceID: inst.InstanceID, ExitCode: -1, TotalSeconds: time.Since(start).Seconds()}, ctx.Err()
		}
		if !c.ok {
			return m.g.Grade(ctx, suiteDir, inst, diff)
		}
		m.reused.Add(1)
		return reused(c.gr, time.Since(start)), nil
	}
	c := &memoCall{done: make(chan struct{})}
	m.calls[key] = c
	m.mu.Unlock()

	gr, err := m.g.Grade(ctx, suiteDir, inst, diff)
	if err == nil && gr.Outcome == sandbox.OutcomeCompleted && gr.Infra == "" {
		c.gr, c.ok = gr, true
	} else {
		m.mu.Lock()
		delete(m.calls, key) // the next one with this diff grades it itself
		m.mu.Unlock()
	}
	close(c.done)
	return gr, err
}

// Reused is how many grades m handed out again rather than graded.
func (m *Memo) Reused() int64 { return m.reused.Load() }

// reused is a copy of gr for another rollout: its own slices, and the
// time it waited in place of the grading phases.
func reused(gr Grade, waited time.Duration) Grade {
	gr.F2PPassed, gr.F2PFailed = slices.Clone(gr.F2PPassed), slices.Clone(gr.F2PFailed)
	gr.P2PPassed, gr.P2PFailed = slices.Clone(gr.P2PPassed), slices.Clone(gr.P2PFailed)
	gr.Flags = slices.Clone(gr.Flags)
	gr.SetupSeconds, gr.TestSeconds, gr.TotalSeconds = 0, 0, waited.Seconds()
	return gr
}
