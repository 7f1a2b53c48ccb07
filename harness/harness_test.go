package harness

import (
	"errors"
	"reflect"
	"testing"
)

func TestLookup(t *testing.T) {
	if got := Names(); !reflect.DeepEqual(got, []string{"bash", "claude", "codex", "opencode", "pi", "qwen", "tools"}) {
		t.Errorf("Names() = %v", got)
	}
	for _, n := range Names() {
		h, err := Lookup(n)
		want := map[string]string{"codex": WireResponses, "claude": WireMessages}[n]
		if want == "" {
			want = WireChat
		}
		if err != nil || h.Name() != n || h.WireAPI() != want {
			t.Errorf("Lookup(%q) = %v, %v", n, h, err)
		}
	}
	if _, err := Lookup("openhands"); !errors.Is(err, ErrUnknown) {
		t.Errorf("Lookup(openhands): %v", err)
	}
}

func TestBuiltinCommand(t *testing.T) {
	env := Env{BaseURL: "http://127.0.0.1:9/rollout/r1/v1", Model: "m", TaskFile: "/cfg/task.md", Workspace: "/workspace",
		MaxTurns: 7, AgentPath: "/bin/legorl-agent"}
	h := Builtin{Agent: "tools", Args: []string{"--keep-turns", "2"}}
	l, err := h.Command(env)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/bin/legorl-agent", "tools", "--base-url", env.BaseURL, "--task-file", "/cfg/task.md", "--workdir", "/workspace",
		"--model", "m", "--max-turns", "7", "--keep-turns", "2"}
	if !reflect.DeepEqual(l.Cmd.Args, want) || l.Cmd.Dir != "/workspace" || len(l.Files) != 0 {
		t.Errorf("launch %+v", l)
	}
	if _, err := (Builtin{Agent: "tools"}).Command(Env{}); err == nil {
		t.Error("Command without an agent path succeeded")
	}
	if _, err := (Builtin{Agent: "zsh"}).Command(env); !errors.Is(err, ErrUnknown) {
		t.Errorf("unknown agent: %v", err)
	}
}

func TestBuiltinResult(t *testing.T) {
	out := []byte("log line\n" + `{"agent":"tools","stop":"no_tool_calls","submitted":false,"turns":4,"tool_calls":2,"parse_failures":1,` +
		`"idle_turns":3,"condensations":1,"llm_seconds":1.5,"tool_seconds":0.25,` +
		`"steps":[{"turn":1,"tool":"bash","arguments":"{\"command\":\"ls\"}","observation_bytes":12,"exit_code":0,"parse_failure":false,"seconds":0.1}]}` + "\n")
	r, err := Tools().Result(out)
	if err != nil {
		t.Fatal(err)
	}
	if r.Stop != StopNoToolCalls || r.Turns != 4 || r.ToolCalls != 2 || r.ParseFailures != 1 || r.ToolSeconds != 0.25 ||
		!reflect.DeepEqual(r.Flags, []string{"condensed"}) || len(r.Steps) != 1 || r.Steps[0].ToolName != "bash" || r.Steps[0].ObservationBytes != 12 {
		t.Errorf("result %+v", r)
	}
	for _, bad := range []string{"", "panic: boom\n", `{"agent":"tools","stop":"exploded"}`} {
		if _, err := Tools().Result([]byte(bad)); err == nil {
			t.Errorf("Result(%q) succeeded", bad)
		}
	}
}
