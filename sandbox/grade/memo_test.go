package grade_test

import (
	"context"
	"reflect"
	"sync"
	"testing"

	"github.com/legorl/legorl/sandbox"
	"github.com/legorl/legorl/sandbox/grade"
)

// TestMemo: rollouts of a group that leave the same diff share one grade,
// the same as grading it alone, flags included (a row must not say which
// rollout graded first); grades that are not a finished test run (an
// environment that cannot run the tests, a canceled grade) are never
// shared.
func TestMemo(t *testing.T) {
	in := pick(t, "python", "")
	ctx := context.Background()

	t.Run("same diffs graded once", func(t *testing.T) {
		gr := grade.New(backend(), grade.Options{})
		m := grade.NewMemo(gr)
		diffs := []string{in.Patch, in.Patch, "", in.Patch, "", in.Patch, in.Patch, ""}
		got := make([]grade.Grade, len(diffs))
		errs := make([]error, len(diffs))
		var wg sync.WaitGroup
		for i, d := range diffs {
			wg.Go(func() { got[i], errs[i] = m.Grade(ctx, "", in, d) })
		}
		wg.Wait()
		if runs, _ := gr.FastCounts(); runs != 2 {
			t.Fatalf("%d grading runs for 2 distinct diffs among %d", runs, len(diffs))
		}
		alone := map[string]grade.Grade{}
		for _, d := range []string{in.Patch, ""} {
			alone[d] = mustGradeWith(t, grade.New(backend(), grade.Options{}), in, d)
		}
		key := func(g grade.Grade) []any {
			return []any{g.Reward, g.Outcome, g.F2PPassed, g.F2PFailed, g.P2PPassed, g.P2PFailed, g.ExitCode, g.Infra, g.Flags}
		}
		for i, g := range got {
			if errs[i] != nil {
				t.Fatalf("grade %d: %v", i, errs[i])
			}
			if !reflect.DeepEqual(key(g), key(alone[diffs[i]])) {
				t.Errorf("grade %d: %v, graded alone %v", i, key(g), key(alone[diffs[i]]))
			}
		}
		if n := m.Reused(); n != int64(len(diffs)-2) {
			t.Fatalf("%d grades reused, want %d", n, len(diffs)-2)
		}
		if got[0].Reward != 1 || got[2].Reward != 0 {
			t.Fatalf("rewards %v and %v, want 1 for the gold patch and 0 for no diff", got[0].Reward, got[2].Reward)
		}
		got[0].F2PPassed[0] = "changed"
		if got[1].F2PPassed[0] == "changed" {
			t.Fatal("reused grades share their test lists")
		}
	})

	t.Run("infrastructure failures not shared", func(t *testing.T) {
		m := grade.NewMemo(grade.New(backend(), grade.Options{Python: "/nonexistent/python3"}))
		for i := range 2 {
			g, err := m.Grade(ctx, "", in, "")
			if err != nil {
				t.Fatal(err)
			}
			if g.Outcome != sandbox.OutcomeEnvSetupFailed || m.Reused() != 0 {
				t.Fatalf("grade %d: outcome %s, %d reused; want env_setup_failed graded by itself", i, g.Outcome, m.Reused())
			}
		}
	})

	t.Run("canceled grade not shared", func(t *testing.T) {
		gr := grade.New(backend(), grade.Options{})
		m := grade.NewMemo(gr)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := m.Grade(cctx, "", in, in.Patch); err == nil {
			t.Fatal("a canceled grade returned no error")
		}
		g, err := m.Grade(ctx, "", in, in.Patch)
		if err != nil {
			t.Fatal(err)
		}
		if g.Reward != 1 || m.Reused() != 0 {
			t.Fatalf("after a canceled grade: reward %v, %d reused; want 1 graded afresh", g.Reward, m.Reused())
		}
	})
}
