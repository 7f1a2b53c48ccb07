package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/legorl/legorl/sandbox/grade"
	"github.com/legorl/legorl/sandbox/local"
	"github.com/legorl/legorl/tasks/builtin"
)

// demoGrading is the demo's second part: it generates n built-in Python
// tasks and grades, in fresh local sandboxes, each task's gold patch (which
// must earn reward 1) and an empty diff (the unfixed base, reward 0). No
// agent exists yet, so these two stand in for a perfect and an idle one.
func demoGrading(ctx context.Context, n int, stdout io.Writer) error {
	dir, err := os.MkdirTemp("", "legorl-demo-suite-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p := func(format string, a ...any) { fmt.Fprintf(stdout, format+"\n", a...) }
	p("legorl demo, part 2: real tasks graded in real sandboxes (no agent yet).")
	suite, err := builtin.Generate(ctx, dir, builtin.Options{N: n, Seed: 1, Languages: []string{"python"}})
	if err != nil {
		return fmt.Errorf("generate tasks: %w", err)
	}
	p("  generated %d built-in Python tasks (a small repo with one bug, hidden tests, a gold patch) in %s", len(suite), dir)
	b := local.New(local.Options{})
	defer b.Close()
	g := grade.New(b, grade.Options{Timeout: 2 * time.Minute})
	p("  grading each task's gold patch and an empty diff in fresh local sandboxes (namespaces, cgroups, no network):")
	var gold, base float64
	for i := range suite {
		inst := &suite[i]
		gg, err := g.Grade(ctx, dir, inst, inst.Patch)
		if err != nil {
			return fmt.Errorf("grade %s: %w", inst.InstanceID, err)
		}
		gb, err := g.Grade(ctx, dir, inst, "")
		if err != nil {
			return fmt.Errorf("grade %s: %w", inst.InstanceID, err)
		}
		gold += gg.Reward
		base += gb.Reward
		p("    %-28s %-16s gold patch: reward %.0f (%s, %.1fs)   empty diff: reward %.0f (%d of %d hidden tests fail)",
			inst.InstanceID, inst.Family, gg.Reward, gg.Outcome, gg.TotalSeconds, gb.Reward, len(gb.F2PFailed)+len(gb.P2PFailed), len(inst.FailToPass)+len(inst.PassToPass))
	}
	p("  gold patches earned %.0f/%d, empty diffs %.0f/%d", gold, len(suite), base, len(suite))
	if gold != float64(len(suite)) || base != 0 {
		return fmt.Errorf("grading is wrong: gold patches must all earn 1 and empty diffs 0")
	}
	return nil
}
