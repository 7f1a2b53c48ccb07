package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
)

// openCodePackage is OpenCode, pinned. bin/opencode.exe is a native (Bun)
// binary that the package's install script takes from its platform
// package.
var openCodePackage = npmPackage{Name: "opencode-ai", Version: "1.18.33", Main: "bin/opencode.exe"}

// OpenCode is the OpenCode agent (opencode-ai). It speaks Chat
// Completions through @ai-sdk/openai-compatible, streamed, with
// max_tokens and without logprobs or temperature; its tools are bash,
// edit (filePath, oldString, newString), glob, grep, read (filePath),
// skill, task, todowrite and write. Before the first turn it sends a title
// request without tools (a side request).
//
// Its configuration is the JSON file named by OPENCODE_CONFIG: a provider
// "legorl" with npm @ai-sdk/openai-compatible and options.baseURL (the
// proxy's), autoupdate off, sharing disabled, snapshots off, bash and edit
// allowed, webfetch denied. Snapshots (a git copy of the workspace taken
// at every step, for the user to undo) change nothing the model sees;
// without them its first model call came after 0.59x the time
// (docs/results/opencode-induct/snapshot-ab.txt). The OPENCODE_DISABLE_*
// variables (autoupdate, models fetch, LSP download, share, default
// plugins, Claude Code files, external skills) and private HOME and XDG
// folders under /tmp keep it offline. It runs as `opencode run --format json TASK` and prints one
// JSON event per line. It needs about 570 MB of memory. Its wall clock
// starts at ClockEpoch (libfaketime, fakeClock): it writes the day into
// its system prompt.
type OpenCode struct{}

// Name returns "opencode".
func (OpenCode) Name() string { return "opencode" }

// WireAPI returns WireChat.
func (OpenCode) WireAPI() string { return WireChat }

// Install installs the pinned package under cacheDir.
func (OpenCode) Install(ctx context.Context, cacheDir string) (string, error) {
	return openCodePackage.install(ctx, cacheDir)
}

// openCodeState is OpenCode's private HOME inside the sandbox.
const openCodeState = "/tmp/opencode-home"

// Command points OpenCode at env.BaseURL.
func (OpenCode) Command(env Env) (Launch, error) {
	if env.ProgramDir == "" || env.BaseURL == "" || env.TaskFile == "" || env.ConfigDir == "" {
		return Launch{}, fmt.Errorf("harness opencode: ProgramDir, BaseURL, TaskFile and ConfigDir are required")
	}
	model := env.Model
	if model == "" {
		model = "legorl"
	}
	conf, err := json.MarshalIndent(map[string]any{
		"$schema": "https://opencode.ai/config.json", "autoupdate": false, "share": "disabled", "snapshot": false,
		"model": "legorl/" + model, "small_model": "legorl/" + model,
		"provider": map[string]any{"legorl": map[string]any{
			"npm": "@ai-sdk/openai-compatible", "name": "legorl",
			"options": map[string]any{"baseURL": env.BaseURL, "apiKey": "legorl"},
			"models":  map[string]any{model: map[string]any{"name": model, "limit": map[string]int{"context": 32768, "output": 4096}}},
		}},
		"permission": map[string]any{"bash": "allow", "edit": "allow", "webfetch": "deny"},
	}, "", "  ")
	if err != nil {
		return Launch{}, err
	}
	h := openCodeState
	argv, wenv := wrap(path.Join(env.ConfigDir, "opencode"), h+"/config", env.TaskFile,
		openCodePackage.script(env.ProgramDir), "run", "--format", "json")
	wenv = append(wenv, "HOME="+h, "XDG_CONFIG_HOME="+h+"/.config", "XDG_DATA_HOME="+h+"/.local/share",
		"XDG_CACHE_HOME="+h+"/.cache", "XDG_STATE_HOME="+h+"/.local/state", "OPENCODE_CONFIG="+h+"/config/opencode.json",
		"OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_MODELS_FETCH=1", "OPENCODE_DISABLE_LSP_DOWNLOAD=1",
		"OPENCODE_DISABLE_SHARE=1", "OPENCODE_DISABLE_DEFAULT_PLUGINS=1", "OPENCODE_DISABLE_CLAUDE_CODE=1",
		"OPENCODE_DISABLE_EXTERNAL_SKILLS=1")
	wenv = append(wenv, fakeClock(path.Base(openCodePackage.Main))...)
	return Launch{
		Cmd:   wrapCmd(argv, env.Workspace, wenv),
		Files: map[string][]byte{"opencode/opencode.json": conf},
	}, nil
}

// openCodeEvent is the part of an OpenCode JSON event that Result reads.
type openCodeEvent struct {
	Type  string          `json:"type"`
	Error json.RawMessage `json:"error"`
	Part  *struct {
		Tool  string `json:"tool"`
		State *struct {
			Status string          `json:"status"`
			Input  json.RawMessage `json:"input"`
			Output string          `json:"output"`
			Error  string          `json:"error"`
		} `json:"state"`
	} `json:"part"`
}

// Result reads OpenCode's JSON events: step_finish events are turns,
// tool_use events tool calls, an error event ends the run on an error.
func (OpenCode) Result(stdout []byte) (Result, error) {
	out := Result{ParseFailures: -1, LLMSeconds: -1, ToolSeconds: -1}
	events := 0
	jsonLines(stdout, func(l []byte) {
		var e openCodeEvent
		if json.Unmarshal(l, &e) != nil || e.Type == "" {
			return
		}
		events++
		switch e.Type {
		case "step_finish":
			out.Turns++
		case "tool_use":
			if e.Part == nil {
				return
			}
			st := stepOf(out.Turns, e.Part.Tool, nil, 0)
			if s := e.Part.State; s != nil {
				st.Arguments = string(s.Input)
				st.ObservationBytes = int64(len(s.Output) + len(s.Error))
				if s.Status == "error" {
					st.ExitCode = 1
				}
			}
			out.ToolCalls++
			out.Steps = append(out.Steps, st)
		case "error":
			out.Stop, out.Error = StopError, "opencode: "+tail(e.Error, 1000)
		}
	})
	if events == 0 {
		return Result{}, fmt.Errorf("harness opencode: no JSON event in its output (%d bytes)", len(stdout))
	}
	if out.Stop == "" {
		out.Stop = StopDone
	}
	return out, nil
}

var _ Harness = OpenCode{}
