package scripted_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/legorl/legorl/harness"
	"github.com/legorl/legorl/harness/harnesstest"
	"github.com/legorl/legorl/harness/scripted"
	"github.com/legorl/legorl/sandbox/grade"
	"github.com/legorl/legorl/sandbox/local"
	"github.com/legorl/legorl/sandbox/local/localtest"
	"github.com/legorl/legorl/tasks"
)

// TestHarnessPiDemos: for a few training instances of each language, the
// real pi program, driven by the scripted replies, leaves a diff that
// passes the hidden tests, and the demonstration is pi's own
// conversation: its system prompt, its four tools, the task as the user
// message, calls of pi's tools with pi's arguments.
func TestHarnessPiDemos(t *testing.T) {
	cache := harnesstest.Cache(t)
	dir, ins := suite(t, 12)
	ctx := context.Background()
	g := grade.New(local.New(local.Options{InitPath: localtest.Init(t)}), grade.Options{})
	for _, in := range trainingPicks(t, ins) {
		start := time.Now()
		d, err := scripted.Solve(ctx, dir, in, "pi", scripted.Options{HarnessCache: cache})
		if err != nil {
			t.Fatalf("%s: %v", in.InstanceID, err)
		}
		t.Logf("%s: pi demonstration in %s", in.InstanceID, time.Since(start).Round(time.Millisecond))
		gr, err := g.Grade(ctx, dir, in, d.Diff)
		if err != nil {
			t.Fatal(err)
		}
		if gr.Reward != 1 {
			t.Errorf("%s pi (%s): %s", in.InstanceID, in.Family, gradeReport(gr, d))
		}
		checkShape(t, d)
		if d.Messages[1].Content != in.ProblemStatement {
			t.Errorf("user message %q, want the problem statement", d.Messages[1].Content)
		}
		var b bytes.Buffer
		scripted.WriteJSONL(&b, []*scripted.Demo{d})
		if strings.Contains(b.String(), cache) {
			t.Errorf("%s: the line names the host's install folder %s", in.InstanceID, cache)
		}
	}
}

// checkPiShape: pi's system prompt (naming the rollout's folders and the
// pinned day, not today), its tools read, bash, edit, write, calls of read
// and edit with pi's arguments, and a last turn without a call (which ends
// pi's run).
func checkPiShape(t *testing.T, d *scripted.Demo) {
	t.Helper()
	sys := d.Messages[0].Content
	for _, want := range []string{"operating inside pi, a coding agent harness", "Current working directory: " + scripted.DefaultWorkdir,
		"Current date: " + harness.ClockEpoch[:len("2006-01-02")],
		scripted.ProgramDir + "/node_modules/@mariozechner/pi-coding-agent/README.md"} {
		if !strings.Contains(sys, want) {
			t.Errorf("%s: pi's system prompt lacks %q:\n%s", d.InstanceID, want, sys)
		}
	}
	var names []string
	for _, tl := range d.Tools {
		names = append(names, tl.Name)
		if !json.Valid(tl.Parameters) {
			t.Errorf("tool %s: parameters %q", tl.Name, tl.Parameters)
		}
	}
	if !slices.Equal(names, []string{"read", "bash", "edit", "write"}) {
		t.Errorf("%s: tools %v, want pi's read bash edit write", d.InstanceID, names)
	}
	used := map[string]int{}
	for _, m := range d.Messages {
		for _, tc := range m.ToolCalls {
			used[tc.Name]++
			if tc.Name != "edit" {
				continue
			}
			var args struct {
				Path  string `json:"path"`
				Edits []struct {
					OldText *string `json:"oldText"`
					NewText *string `json:"newText"`
				} `json:"edits"`
			}
			if err := json.Unmarshal(tc.Arguments, &args); err != nil || args.Path == "" || len(args.Edits) == 0 ||
				args.Edits[0].OldText == nil || args.Edits[0].NewText == nil || *args.Edits[0].OldText == "" {
				t.Errorf("%s: edit arguments %s (%v)", d.InstanceID, tc.Arguments, err)
			}
		}
	}
	if used["read"] != 1 || used["edit"] < 1 || len(used) != 2 {
		t.Errorf("%s: tool calls %v, want one read and edits", d.InstanceID, used)
	}
	if last := d.Messages[len(d.Messages)-1]; len(last.ToolCalls) != 0 || last.Content == "" {
		t.Errorf("%s: pi's run ends with %+v, want text without a call", d.InstanceID, last)
	}
}

// TestPiNotInstalled: without pi installed and no npm to install it, Solve
// fails at once with one line naming the cache and make test-harnesses.
func TestPiNotInstalled(t *testing.T) {
	dir, ins := suite(t, 6)
	i := slices.IndexFunc(ins, func(in tasks.Instance) bool { return in.Split == tasks.SplitTrain || in.Split == tasks.SplitSFT })
	if i < 0 {
		t.Fatal("no training instance")
	}
	cache := t.TempDir()
	t.Setenv("PATH", t.TempDir()) // no npm
	_, err := scripted.Solve(context.Background(), dir, &ins[i], "pi", scripted.Options{HarnessCache: cache})
	if !errors.Is(err, scripted.ErrNotInstalled) || strings.Contains(err.Error(), "\n") ||
		!strings.Contains(err.Error(), cache) || !strings.Contains(err.Error(), "make test-harnesses") {
		t.Errorf("err %v, want ErrNotInstalled on one line naming %s and make test-harnesses", err, cache)
	}
}
