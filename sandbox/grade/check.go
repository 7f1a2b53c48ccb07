package grade

import (
	"context"
	"fmt"
	"strings"

	"github.com/legorl/legorl/tasks"
	"github.com/legorl/legorl/text"
)

// CheckEnvironment grades the gold patch of the first instance of each
// test runner in insts (each must earn reward 1), so that a machine that
// cannot run a runner's tests is found before a run, not after it. Such a
// machine masks every rollout that needs that runner, as it should (the
// environment failed, not the agent), and a run on it goes on learning
// from nothing. Python instances are graded through pytest, which the fast
// runner can do without: an agent's broken diff falls back to pytest. It
// returns an error naming the runner, the instance and what the grade saw.
func (g *Grader) CheckEnvironment(ctx context.Context, suiteDir string, insts []tasks.Instance) error {
	seen := map[string]bool{}
	for i := range insts {
		in := &insts[i]
		runner := in.TestRunner()
		if seen[runner] || strings.TrimSpace(in.Patch) == "" || in.Check() != nil {
			continue
		}
		seen[runner] = true
		gg := g
		if runner == tasks.RunnerPytest && !g.opts.PytestOnly {
			o := g.opts
			o.PytestOnly = true
			gg = New(g.backend, o)
		}
		gr, err := gg.Grade(ctx, suiteDir, in, in.Patch)
		if err != nil {
			return fmt.Errorf("grade: check %s on %s: %w", runnerName(runner), in.InstanceID, err)
		}
		if gr.Reward != 1 {
			what := gr.Infra
			if what == "" {
				what = gr.Detail
			}
			return fmt.Errorf("grade: the gold patch of %s fails its %s tests here (%s: %s); %s",
				in.InstanceID, runnerName(runner), gr.Outcome, text.OneLine(what, 200), g.hint(runner))
		}
	}
	return nil
}

// hint says what a runner needs.
func (g *Grader) hint(runner string) string {
	if runner == tasks.RunnerPytest {
		return fmt.Sprintf("the sandbox's %s must import pytest (Debian: apt-get install python3-pytest; make pytest-ref)", g.opts.Python)
	}
	return fmt.Sprintf("the sandbox must see a working Go toolchain at %s and a writable build cache seed under %s", g.goRoot(), g.opts.CacheDir)
}

// runnerName is a test runner as a user knows it.
func runnerName(runner string) string {
	if runner == tasks.RunnerGoTest {
		return "go test"
	}
	return runner
}
