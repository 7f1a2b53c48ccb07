package harness

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// npmHarnesses are the adapters of the npm programs.
var npmHarnesses = []Harness{Pi{}, Codex{}, OpenCode{}, ClaudeCode{}, QwenCode{}}

// TestNPMCommand: each adapter runs its program from the program folder
// through sh (config copied to a writable folder, the task as the last
// argument), with the proxy's base URL in its config or environment.
func TestNPMCommand(t *testing.T) {
	env := Env{BaseURL: "http://127.0.0.1:9/rollout/r1/v1", Model: "m", TaskFile: "/cfg/task.md", Workspace: "/workspace",
		MaxTurns: 7, ConfigDir: "/cfg", ProgramDir: "/prog"}
	for _, h := range npmHarnesses {
		t.Run(h.Name(), func(t *testing.T) {
			l, err := h.Command(env)
			if err != nil {
				t.Fatal(err)
			}
			a := l.Cmd.Args
			if len(a) < 5 || a[0] != "/bin/sh" || a[1] != "-c" || !strings.HasPrefix(a[4], "/") || l.Cmd.Dir != "/workspace" {
				t.Fatalf("args %q dir %q", a, l.Cmd.Dir)
			}
			if !slices.ContainsFunc(a, func(s string) bool { return strings.HasPrefix(s, "/prog/node_modules/") }) {
				t.Errorf("args %q: no program under /prog", a)
			}
			if !slices.Contains(l.Cmd.Env, "LEGORL_TASK=/cfg/task.md") || len(l.Files) == 0 {
				t.Errorf("env %q files %v", l.Cmd.Env, l.Files)
			}
			for name := range l.Files {
				if !strings.HasPrefix(name, h.Name()+"/") && name != clockFile {
					t.Errorf("file %q outside %s/", name, h.Name())
				}
			}
			all := strings.Join(l.Cmd.Env, "\n")
			for _, b := range l.Files {
				all += string(b)
			}
			want := env.BaseURL
			if h.WireAPI() == WireMessages {
				want = strings.TrimSuffix(want, "/v1") + "\n"
			}
			if !strings.Contains(all+"\n", want) {
				t.Errorf("the base URL %q is in neither its env nor its files:\n%s", want, all)
			}
			if _, err := h.Command(Env{}); err == nil {
				t.Error("Command accepted an empty Env")
			}
		})
	}
}

func TestNPMResult(t *testing.T) {
	tests := []struct {
		name  string
		h     Harness
		out   string
		stop  string
		tools int
		err   bool
	}{
		{"pi", Pi{}, `{"type":"session"}
{"type":"tool_execution_start","toolName":"bash","args":{"command":"ls"}}
{"type":"tool_execution_end","toolName":"bash","result":{"content":[{"type":"text","text":"a.py"}]},"isError":false}
{"type":"turn_end"}
{"type":"turn_end"}
{"type":"agent_end","messages":[{"role":"user"},{"role":"assistant","stopReason":"toolUse"},{"role":"toolResult"},{"role":"assistant","stopReason":"stop"}]}
`, StopDone, 1, false},
		{"pi error", Pi{}, `{"type":"agent_end","messages":[{"role":"assistant","stopReason":"error","errorMessage":"500 boom"}]}`, StopError, 0, false},
		{"pi nothing", Pi{}, "Error: no model\n", "", 0, true},
		{"codex", Codex{}, `{"type":"thread.started","thread_id":"x"}
{"type":"item.completed","item":{"id":"item_0","type":"error","message":"Model metadata for ` + "`m`" + ` not found."}}
{"type":"turn.started"}
{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"/bin/bash -lc ls","aggregated_output":"a.py\n","exit_code":0,"status":"completed"}}
{"type":"item.completed","item":{"id":"item_2","type":"agent_message","text":"done"}}
{"type":"turn.completed","usage":{"input_tokens":1}}
`, StopDone, 1, false},
		{"codex failed", Codex{}, `{"type":"turn.started"}
{"type":"error","message":"stream error"}
{"type":"turn.failed","error":{"message":"stream error"}}`, StopError, 0, false},
		{"codex truncated", Codex{}, `{"type":"turn.failed","error":{"message":"Incomplete response returned, reason: max_output_tokens"}}`, StopDone, 0, false},
		{"codex nothing", Codex{}, "", "", 0, true},
		{"opencode", OpenCode{}, `{"type":"step_start","part":{}}
{"type":"tool_use","part":{"tool":"read","state":{"status":"completed","input":{"filePath":"a.py"},"output":"x"}}}
{"type":"step_finish","part":{}}
{"type":"text","part":{"text":"done"}}
{"type":"step_finish","part":{}}`, StopDone, 1, false},
		{"opencode error", OpenCode{}, `{"type":"error","error":{"name":"APIError","data":{"message":"bad"}}}`, StopError, 0, false},
		{"opencode nothing", OpenCode{}, "panic\n", "", 0, true},
		{"claude", ClaudeCode{}, `{"type":"system","subtype":"init"}
{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"Fixing."}]}}
{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","name":"Bash","input":{"command":"ls"}}]}}
{"type":"user","message":{"content":[{"type":"tool_result","content":"a.py","is_error":false}]}}
{"type":"result","subtype":"success","is_error":false,"num_turns":2,"result":"done","duration_api_ms":1500}`, StopDone, 1, false},
		{"claude max turns", ClaudeCode{}, `{"type":"result","subtype":"error_max_turns","is_error":true,"num_turns":3}`, StopMaxTurns, 0, false},
		{"claude api error", ClaudeCode{}, `{"type":"result","subtype":"success","is_error":true,"result":"API Error: 400"}`, StopError, 0, false},
		{"qwen array", QwenCode{}, `[{"type":"system","subtype":"init"},{"type":"assistant","message":{"id":"a","content":[{"type":"tool_use","name":"read_file","input":{"file_path":"/w/a.py"}}]}},{"type":"user","message":{"content":[{"type":"tool_result","content":"x"}]}},{"type":"result","subtype":"success","is_error":false,"num_turns":2}]`, StopDone, 1, false},
		{"qwen nothing", QwenCode{}, "", "", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := tt.h.Result([]byte(tt.out))
			if (err != nil) != tt.err {
				t.Fatalf("Result: %v", err)
			}
			if err != nil {
				return
			}
			if r.Stop != tt.stop || r.ToolCalls != tt.tools || len(r.Steps) != tt.tools || (r.Stop == StopError) != (r.Error != "") {
				t.Errorf("got %+v", r)
			}
			for _, s := range r.Steps {
				if s.ToolName == "" || s.Arguments == "" || s.ObservationBytes <= 0 {
					t.Errorf("step %+v", s)
				}
			}
		})
	}
}

// TestNPMInstalled: a folder where the pinned package is already installed
// (as make test-harnesses leaves tools/harnesses) is used as it is, with
// no npm run; one with another version is not.
func TestNPMInstalled(t *testing.T) {
	dir := t.TempDir()
	write := func(version string) {
		pkg := filepath.Join(dir, "node_modules", "@mariozechner", "pi-coding-agent")
		if err := os.MkdirAll(filepath.Join(pkg, "dist"), 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(pkg, "package.json"), []byte(`{"version": "`+version+`"}`), 0o644)
		os.WriteFile(filepath.Join(pkg, "dist", "cli.js"), nil, 0o644)
	}
	write(piPackage.Version)
	got, err := Pi{}.Install(context.Background(), dir)
	if err != nil || got != dir {
		t.Fatalf("Install = %q, %v; want %q", got, err, dir)
	}
	write("0.0.1")
	if piPackage.installedIn(dir) {
		t.Error("another version counted as installed")
	}
	if _, err := (Pi{}).Install(context.Background(), ""); err == nil {
		t.Error("Install accepted no cache folder")
	}
}
