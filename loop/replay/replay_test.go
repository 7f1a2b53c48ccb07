package replay

import (
	"strings"
	"testing"

	preplay "github.com/legorl/legorl/policy/replay"
	"github.com/legorl/legorl/rollout"
	"github.com/legorl/legorl/schemas"
)

// TestCompare: each difference gets its type, and the first cause wins
// when there are several.
func TestCompare(t *testing.T) {
	rec := schemas.Rollout{RunID: "r", RolloutID: "x", TaskID: "t", Harness: "bash", Reward: 1,
		Termination: schemas.TerminationAgentCompleted, NumTurns: 3, NumToolCalls: 2, DiffBytes: 10,
		Flags: []string{"split:train", rollout.DiffFlag("0123456789")}, F2PPassed: []string{"a"}, P2PPassed: []string{"b", "c"}}
	served := preplay.Report{Calls: 3, Served: 3, Requests: 3}
	for _, c := range []struct {
		name   string
		edit   func(*schemas.Rollout, *preplay.Report)
		want   schemas.Mismatch
		detail string
	}{
		{"same", func(*schemas.Rollout, *preplay.Report) {}, schemas.MismatchNone, ""},
		{"test order", func(g *schemas.Rollout, _ *preplay.Report) { g.P2PPassed = []string{"c", "b"} }, schemas.MismatchNone, ""},
		{"diff", func(g *schemas.Rollout, _ *preplay.Report) { g.Flags = []string{rollout.DiffFlag("0123456788")} }, schemas.MismatchDiff, "diff sha256 "},
		{"diff not taken", func(g *schemas.Rollout, _ *preplay.Report) { g.Flags, g.DiffBytes = nil, 11 }, schemas.MismatchDiff, "diff sha256 "},
		{"reward", func(g *schemas.Rollout, _ *preplay.Report) { g.Reward = 0 }, schemas.MismatchReward, "reward 1 -> 0"},
		{"tests", func(g *schemas.Rollout, _ *preplay.Report) { g.P2PPassed, g.P2PFailed = []string{"b"}, []string{"c"} }, schemas.MismatchReward, "p2p_failed [] -> [c]"},
		{"turns", func(g *schemas.Rollout, _ *preplay.Report) { g.NumTurns = 4 }, schemas.MismatchOutcome, "turns 3 -> 4"},
		{"termination", func(g *schemas.Rollout, _ *preplay.Report) { g.Termination = schemas.TerminationMaxTurns }, schemas.MismatchOutcome, "termination agent_completed -> max_turns"},
		{"fewer calls", func(_ *schemas.Rollout, r *preplay.Report) { r.Served, r.Requests = 2, 2 }, schemas.MismatchPrompt, "stopped after 2 of the 3"},
		{"prompt first", func(g *schemas.Rollout, r *preplay.Report) {
			g.Reward, g.NumTurns = 0, 1
			r.Served, r.Divergence = 1, &preplay.Divergence{Call: 1, Token: 7, Want: 5, Got: 6, WantLen: 9, GotLen: 9}
		}, schemas.MismatchPrompt, "prompt token 7 is 6, recorded 5"},
		{"diff before reward", func(g *schemas.Rollout, _ *preplay.Report) { g.Flags, g.Reward = nil, 0 }, schemas.MismatchDiff, "reward 1 -> 0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, rep := rec, served
			c.edit(&got, &rep)
			row := Compare(rec, got, rep)
			row.JobID = "j"
			if row.Mismatch != c.want || row.Reproduced != (c.want == schemas.MismatchNone) || !strings.Contains(row.Detail, c.detail) {
				t.Fatalf("mismatch %q reproduced %v detail %q; want %q with %q", row.Mismatch, row.Reproduced, row.Detail, c.want, c.detail)
			}
			if err := row.Validate(); err != nil {
				t.Fatal(err)
			}
			if line := Line(row); !strings.Contains(line, "x") || strings.Contains(line, "\n") ||
				strings.HasPrefix(line, "FAIL "+string(c.want)) == row.Reproduced {
				t.Fatalf("line %q", line)
			}
		})
	}
}
