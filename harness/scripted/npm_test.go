package scripted_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
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

// TestHarnessNPMDemos: for a few training instances of each language, the
// real programs pi, Codex and OpenCode, driven by the scripted replies,
// leave a diff that passes the hidden tests, and the demonstration is the
// program's own conversation: its system prompt, its tools, the task as
// the last user message before the replies, calls of its tools with its
// arguments, and nothing that names the host's folders.
func TestHarnessNPMDemos(t *testing.T) {
	cache := harnesstest.Cache(t)
	dir, ins := suite(t, 12)
	ctx := context.Background()
	g := grade.New(local.New(local.Options{InitPath: localtest.Init(t)}), grade.Options{})
	for _, agent := range []string{"pi", "codex", "opencode"} {
		t.Run(agent, func(t *testing.T) {
			for _, in := range trainingPicks(t, ins) {
				start := time.Now()
				d, err := scripted.Solve(ctx, dir, in, agent, scripted.Options{HarnessCache: cache})
				if err != nil {
					t.Fatalf("%s: %v", in.InstanceID, err)
				}
				t.Logf("%s: %s demonstration in %s", in.InstanceID, agent, time.Since(start).Round(time.Millisecond))
				gr, err := g.Grade(ctx, dir, in, d.Diff)
				if err != nil {
					t.Fatal(err)
				}
				if gr.Reward != 1 {
					t.Errorf("%s %s (%s): %s", in.InstanceID, agent, in.Family, gradeReport(gr, d))
				}
				checkShape(t, d)
				want := in.ProblemStatement
				if agent == "opencode" {
					want = `"` + want + `"` // opencode run quotes its message's words
				}
				if task := d.Messages[firstReply(d)-1]; task.Role != "user" || task.Content != want {
					t.Errorf("%s: the message before the first reply is %s %q, want the problem statement", agent, task.Role, task.Content)
				}
				var b bytes.Buffer
				scripted.WriteJSONL(&b, []*scripted.Demo{d})
				for _, host := range []string{cache, os.TempDir() + "/legorl-scripted"} {
					if strings.Contains(b.String(), host) {
						t.Errorf("%s: the line names the host's folder %s", in.InstanceID, host)
					}
				}
			}
		})
	}
}

// firstReply is the index of the first assistant message.
func firstReply(d *scripted.Demo) int {
	return slices.IndexFunc(d.Messages, func(m scripted.Message) bool { return m.Role == "assistant" })
}

// checkNPMShape: the program's tools, calls of them in its own argument
// names (one reading the first file, then edits), and a last turn
// without a call, which ends the program's run.
func checkNPMShape(t *testing.T, d *scripted.Demo, tools []string, read, edit string, editKeys ...string) {
	t.Helper()
	var names []string
	for _, tl := range d.Tools {
		names = append(names, tl.Name)
		if !json.Valid(tl.Parameters) {
			t.Errorf("tool %s: parameters %q", tl.Name, tl.Parameters)
		}
	}
	if !slices.Equal(names, tools) {
		t.Errorf("%s: tools %v, want %s's %v", d.InstanceID, names, d.Agent, tools)
	}
	var calls []string
	for _, m := range d.Messages {
		for _, tc := range m.ToolCalls {
			calls = append(calls, tc.Name)
			var args map[string]any
			if err := json.Unmarshal(tc.Arguments, &args); err != nil {
				t.Errorf("%s: %s arguments %s: %v", d.InstanceID, tc.Name, tc.Arguments, err)
			}
			if len(calls) > 1 {
				for _, k := range editKeys {
					if v, ok := args[k].(string); !ok || v == "" {
						t.Errorf("%s: %s arguments %s lack %s", d.InstanceID, tc.Name, tc.Arguments, k)
					}
				}
			}
		}
	}
	if len(calls) < 2 || calls[0] != read || slices.ContainsFunc(calls[1:], func(c string) bool { return c != edit }) {
		t.Errorf("%s: tool calls %v, want %s then %s", d.InstanceID, calls, read, edit)
	}
	if last := d.Messages[len(d.Messages)-1]; len(last.ToolCalls) != 0 || last.Content == "" {
		t.Errorf("%s: %s's run ends with %+v, want text without a call", d.InstanceID, d.Agent, last)
	}
}

// checkCodexShape: Codex's instructions as a developer (system) message,
// its environment context naming the rollout's workspace and no day, its
// exec_command tool running cat and then apply_patch.
func checkCodexShape(t *testing.T, d *scripted.Demo) {
	t.Helper()
	if sys := d.Messages[0].Content; d.Messages[0].Role != "system" || !strings.Contains(sys, "You are a coding agent running in the Codex CLI") {
		t.Errorf("%s: Codex's first message %s %.200q", d.InstanceID, d.Messages[0].Role, sys)
	}
	env := ""
	for _, m := range d.Messages[:firstReply(d)] {
		if strings.Contains(m.Content, "<environment_context>") {
			env = m.Content
		}
	}
	if !strings.Contains(env, "<cwd>"+scripted.DefaultWorkdir+"</cwd>") || strings.Contains(env, "current_date>") {
		t.Errorf("%s: Codex's environment context %q, want the rollout's workspace and no day", d.InstanceID, env)
	}
	checkNPMShape(t, d, []string{"exec_command", "write_stdin", "request_user_input", "view_image"}, "exec_command", "exec_command", "cmd")
	for i, m := range d.Messages {
		for j, tc := range m.ToolCalls {
			if i > firstReply(d) && !strings.Contains(string(tc.Arguments), `apply_patch <<'EOF'\n*** Begin Patch`) {
				t.Errorf("%s: call %d of message %d is not an apply_patch: %s", d.InstanceID, j, i, tc.Arguments)
			}
		}
	}
}

// checkOpenCodeShape: OpenCode's system prompt naming the rollout's
// workspace, its tools, read and edit with its argument names.
func checkOpenCodeShape(t *testing.T, d *scripted.Demo) {
	t.Helper()
	for _, want := range []string{"You are opencode", "Working directory: " + scripted.DefaultWorkdir, "Today's date: Thu Jan 01 2026"} {
		if !strings.Contains(d.Messages[0].Content, want) {
			t.Errorf("%s: OpenCode's system prompt lacks %q (the pinned day, harness.ClockEpoch)", d.InstanceID, want)
		}
	}
	checkNPMShape(t, d, []string{"bash", "edit", "glob", "grep", "read", "skill", "task", "todowrite", "write"}, "read", "edit",
		"filePath", "oldString", "newString")
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
