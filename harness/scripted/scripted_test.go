package scripted_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/legorl/legorl/harness/scripted"
	"github.com/legorl/legorl/sandbox/grade"
	"github.com/legorl/legorl/sandbox/local"
	"github.com/legorl/legorl/sandbox/local/localtest"
	"github.com/legorl/legorl/tasks"
	"github.com/legorl/legorl/tasks/builtin"
)

// suite generates a small built-in suite and returns its folder and
// instances.
// trainingPicks returns the first two training (or SFT) instances of each
// language in ins; the test fails when Python or Go has none.
func trainingPicks(t *testing.T, ins []tasks.Instance) []*tasks.Instance {
	t.Helper()
	langs := map[string]int{}
	var out []*tasks.Instance
	for i := range ins {
		in := &ins[i]
		if (in.Split != tasks.SplitTrain && in.Split != tasks.SplitSFT) || langs[in.Language] >= 2 {
			continue
		}
		langs[in.Language]++
		out = append(out, in)
	}
	if langs["python"] == 0 || langs["go"] == 0 {
		t.Errorf("languages covered: %v", langs)
	}
	return out
}

// gradeReport says how a demonstration's diff graded, and shows the diff.
func gradeReport(gr grade.Grade, d *scripted.Demo) string {
	return fmt.Sprintf("reward %v %s, F2P failed %v, P2P failed %v, flags %v, detail %q; diff:\n%s",
		gr.Reward, gr.Outcome, gr.F2PFailed, gr.P2PFailed, gr.Flags, gr.Detail, d.Diff)
}

func suite(t *testing.T, n int) (string, []tasks.Instance) {
	t.Helper()
	dir := t.TempDir()
	ins, err := builtin.Generate(context.Background(), dir, builtin.Options{N: n, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	return dir, ins
}

func TestRefusesHeldout(t *testing.T) {
	dir, ins := suite(t, 14)
	seen := map[string]bool{}
	training := func(split string) bool { return split == tasks.SplitTrain || split == tasks.SplitSFT }
	for i := range ins {
		in := &ins[i]
		if training(in.Split) {
			continue
		}
		seen[in.Split] = true
		for _, a := range scripted.Formats() {
			if _, err := scripted.Solve(context.Background(), dir, in, a, scripted.Options{}); !errors.Is(err, scripted.ErrHeldout) || !strings.Contains(err.Error(), in.InstanceID) {
				t.Errorf("%s (%s) %s: err %v, want ErrHeldout naming the task", in.InstanceID, in.Split, a, err)
			}
		}
	}
	if !seen[tasks.SplitHeldoutFamily] {
		t.Errorf("no held-out family in the suite: %v", seen)
	}
	// A relabelled held-out instance is still refused, as train or sft.
	for i := range ins {
		if !training(ins[i].Split) {
			for _, split := range []string{tasks.SplitTrain, tasks.SplitSFT} {
				in := ins[i]
				in.Split = split
				if err := scripted.CheckTrain(&in); !errors.Is(err, scripted.ErrHeldout) {
					t.Errorf("%s relabelled %s: %v", in.InstanceID, split, err)
				}
			}
		}
	}
}

// builtinFormats are the formats of the built-in agents, which need no
// installed program (pi's: pi_test.go).
var builtinFormats = []string{"bash", "tools"}

// TestDemosGrade: for a few training instances of each language, both
// built-in agents' demonstrations leave a diff that passes the hidden
// tests, and their conversations have the agents' shape.
func TestDemosGrade(t *testing.T) {
	if testing.Short() {
		t.Skip("grades in a sandbox")
	}
	dir, ins := suite(t, 12)
	ctx := context.Background()
	g := grade.New(local.New(local.Options{InitPath: localtest.Init(t)}), grade.Options{})
	for _, in := range trainingPicks(t, ins) {
		for _, a := range builtinFormats {
			d, err := scripted.Solve(ctx, dir, in, a, scripted.Options{})
			if err != nil {
				t.Fatalf("%s %s: %v", in.InstanceID, a, err)
			}
			gr, err := g.Grade(ctx, dir, in, d.Diff)
			if err != nil {
				t.Fatal(err)
			}
			if gr.Reward != 1 {
				t.Errorf("%s %s (%s): %s", in.InstanceID, a, in.Family, gradeReport(gr, d))
			}
			checkShape(t, d)
		}
	}
}

// TestSedInserts: with SedInserts, a Python missing_case fix (new lines
// after one matched line) is a sed whose replacement holds \n, and it
// grades; without it the same task's fix is a git apply.
func TestSedInserts(t *testing.T) {
	if testing.Short() {
		t.Skip("grades in a sandbox")
	}
	ctx := context.Background()
	dir := t.TempDir()
	ins, err := builtin.Generate(ctx, dir, builtin.Options{N: 60, Seed: 9, Languages: []string{"python"}})
	if err != nil {
		t.Fatal(err)
	}
	g := grade.New(local.New(local.Options{InitPath: localtest.Init(t)}), grade.Options{})
	done := 0
	for i := range ins {
		in := &ins[i]
		if in.Family != "missing_case" || scripted.CheckTrain(in) != nil || done == 3 {
			continue
		}
		done++
		fix := func(opt scripted.Options) (string, *scripted.Demo) {
			d, err := scripted.Solve(ctx, dir, in, "bash", opt)
			if err != nil {
				t.Fatal(err)
			}
			return d.Messages[4].Content, d // system, task, cat, its output, the fix
		}
		if plain, _ := fix(scripted.Options{}); !strings.Contains(plain, "git apply") {
			t.Errorf("%s without SedInserts: fix %q, want a git apply", in.InstanceID, plain)
		}
		sed, d := fix(scripted.Options{SedInserts: true})
		if !strings.Contains(sed, "sed -i 's/") || !strings.Contains(sed, `\n`) || strings.Contains(sed, "git apply") {
			t.Errorf("%s with SedInserts: fix %q, want a sed with \\n", in.InstanceID, sed)
		}
		gr, err := g.Grade(ctx, dir, in, d.Diff)
		if err != nil {
			t.Fatal(err)
		}
		if gr.Reward != 1 {
			t.Errorf("%s: the sed fix grades %v (%s); diff:\n%s", in.InstanceID, gr.Reward, gr.Detail, d.Diff)
		}
		checkShape(t, d)
	}
	if done == 0 {
		t.Fatal("no training missing_case instance in the suite")
	}
}

// checkShape checks a demonstration's line and conversation: one line
// naming no temporary folder, tool results answering the calls before
// them, and the agent's own shape. (That SFT renders it with the chat
// template is checked where both may be imported: cmd/legorl's SFT tests.)
func checkShape(t *testing.T, d *scripted.Demo) {
	t.Helper()
	var b bytes.Buffer
	if err := scripted.WriteJSONL(&b, []*scripted.Demo{d}); err != nil {
		t.Fatal(err)
	}
	if strings.Count(b.String(), "\n") != 1 || strings.Contains(b.String(), "legorl-scripted-") {
		t.Errorf("%s: the line names the temporary folder or is not one line", d.InstanceID)
	}
	ms := d.Messages
	if len(ms) < 5 || ms[0].Role != "system" || ms[len(ms)-1].Role != "assistant" {
		t.Fatalf("%s %s: roles %v", d.InstanceID, d.Agent, ms)
	}
	if d.Agent != "codex" && (ms[1].Role != "user" || !strings.Contains(ms[0].Content, scripted.DefaultWorkdir)) {
		t.Errorf("%s: the second message is %s's, or the system prompt does not name %s", d.Agent, ms[1].Role, scripted.DefaultWorkdir)
	}
	calls := map[string]bool{}
	for i, m := range ms {
		for _, tc := range m.ToolCalls {
			calls[tc.ID] = true
			if !json.Valid(tc.Arguments) {
				t.Errorf("message %d: arguments %q", i, tc.Arguments)
			}
		}
		if m.Role == "tool" && !calls[m.ToolCallID] {
			t.Errorf("message %d answers call %q, which was not made", i, m.ToolCallID)
		}
	}
	last := ms[len(ms)-1]
	switch d.Agent {
	case "bash":
		if len(d.Tools) != 0 || !strings.Contains(last.Content, "```bash\necho COMPLETE_TASK_AND_SUBMIT\n```") {
			t.Errorf("bash demo ends with %q", last.Content)
		}
	case "tools":
		if len(d.Tools) != 5 || len(last.ToolCalls) != 1 || last.ToolCalls[0].Name != "submit" {
			t.Errorf("tools demo: %d tools, last %+v", len(d.Tools), last)
		}
	case "pi":
		checkPiShape(t, d)
	case "codex":
		checkCodexShape(t, d)
	case "opencode":
		checkOpenCodeShape(t, d)
	default:
		t.Errorf("agent %q", d.Agent)
	}
}

// solveAllPicks returns the training (or SFT) instances of ins.
func solveAllPicks(ins []tasks.Instance) []*tasks.Instance {
	var out []*tasks.Instance
	for i := range ins {
		if ins[i].Split == tasks.SplitTrain || ins[i].Split == tasks.SplitSFT {
			out = append(out, &ins[i])
		}
	}
	return out
}

// TestSolveAll: the demonstrations at any parallelism are Solve's, in the
// instances' order, with progress counted up to the end; a held-out
// instance among them fails the whole call with ErrHeldout.
func TestSolveAll(t *testing.T) {
	dir, ins := suite(t, 14)
	picks := solveAllPicks(ins)
	if len(picks) < 6 {
		t.Fatalf("%d training instances, want at least 6", len(picks))
	}
	ctx := context.Background()
	var want []string
	for _, in := range picks {
		d, err := scripted.Solve(ctx, dir, in, "tools", scripted.Options{})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, demoJSON(t, d))
	}
	for _, parallel := range []int{0, 4} { // 0 runs one at a time
		var calls []int
		got, err := scripted.SolveAll(ctx, dir, picks, "tools", scripted.Options{}, parallel, func(done int) { calls = append(calls, done) })
		if err != nil {
			t.Fatalf("parallel %d: %v", parallel, err)
		}
		if len(got) != len(picks) || len(calls) != len(picks) || calls[len(calls)-1] != len(picks) {
			t.Fatalf("parallel %d: %d demos, progress %v, want %d of each", parallel, len(got), calls, len(picks))
		}
		for i, d := range got {
			if d.InstanceID != picks[i].InstanceID || demoJSON(t, d) != want[i] {
				t.Errorf("parallel %d: demo %d is %s, not Solve's demonstration of %s", parallel, i, d.InstanceID, picks[i].InstanceID)
			}
		}
	}
	var held *tasks.Instance
	for i := range ins {
		if ins[i].Split != tasks.SplitTrain && ins[i].Split != tasks.SplitSFT {
			held = &ins[i]
			break
		}
	}
	bad := append(append([]*tasks.Instance{}, picks[:3]...), held)
	bad = append(bad, picks[3:]...)
	if _, err := scripted.SolveAll(ctx, dir, bad, "tools", scripted.Options{}, 2, nil); !errors.Is(err, scripted.ErrHeldout) || !strings.Contains(err.Error(), held.InstanceID) {
		t.Errorf("with held-out %s: err %v, want ErrHeldout naming it", held.InstanceID, err)
	}
}

func demoJSON(t *testing.T, d *scripted.Demo) string {
	t.Helper()
	var b bytes.Buffer
	if err := scripted.WriteJSONL(&b, []*scripted.Demo{d}); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// BenchmarkSolveAll: tools demonstrations of a suite's training instances,
// one at a time and four at a time; demos/s is the figure.
func BenchmarkSolveAll(b *testing.B) {
	dir := b.TempDir()
	ins, err := builtin.Generate(context.Background(), dir, builtin.Options{N: 60, Seed: 7, Languages: []string{"python"}})
	if err != nil {
		b.Fatal(err)
	}
	picks := solveAllPicks(ins)
	for _, parallel := range []int{1, 4} {
		b.Run(fmt.Sprintf("parallel=%d", parallel), func(b *testing.B) {
			for b.Loop() {
				if _, err := scripted.SolveAll(context.Background(), dir, picks, "tools", scripted.Options{}, parallel, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*len(picks))/b.Elapsed().Seconds(), "demos/s")
		})
	}
}
