package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"strconv"
	"strings"
)

// codexPackage is Codex, pinned. The npm package is a Node launcher over a
// native binary from its platform package (@openai/codex-linux-x64).
var codexPackage = npmPackage{Name: "@openai/codex", Version: "0.169.0", Main: "bin/codex.js"}

// Codex is OpenAI's Codex CLI (@openai/codex). It speaks the Responses
// API only (its Chat Completions wire API was removed), streamed, without
// logprobs or temperature. Its tools are exec_command (a shell command in
// "cmd"), write_stdin, request_user_input and view_image.
//
// Its configuration is $CODEX_HOME/config.toml: a [model_providers.legorl]
// entry with base_url (the proxy's), env_key, wire_api = "responses" and
// no retries; check_for_update_on_startup = false; analytics and otel off;
// include_environment_context_time = false and skills.include_instructions
// = false. The last two keep its prompt the same bytes for the same task:
// Codex, a static native binary whose clock no preload can pin (pi's
// pinClock), writes the day and time zone into its environment context,
// and its skills list names CODEX_HOME and the bundled skills (about 2 kB
// that no task here uses).
// Codex writes its state (sqlite files) into CODEX_HOME, so the runner's
// read-only copy is copied to /tmp/codex-home first. It runs as
// `codex exec --skip-git-repo-check --ephemeral --json --disable plugins
// --disable remote_plugin --disable apps --disable multi_agent --disable
// goals -c web_search="disabled" --dangerously-bypass-approvals-and-sandbox
// TASK </dev/null` (without the disables it looks up github.com and
// chatgpt.com; its own sandbox would block the proxy on loopback, and ours
// isolates it anyway). It prints one JSON event per line and ends with
// turn.completed or turn.failed. A turn that failed because the model's
// reply hit its length limit ("Incomplete response returned, reason:
// max_output_tokens") ends the run by the policy's doing: Result reports
// it as StopDone with the flag "truncated", not as an error.
type Codex struct{}

// Name returns "codex".
func (Codex) Name() string { return "codex" }

// WireAPI returns WireResponses.
func (Codex) WireAPI() string { return WireResponses }

// Install installs the pinned package under cacheDir.
func (Codex) Install(ctx context.Context, cacheDir string) (string, error) {
	return codexPackage.install(ctx, cacheDir)
}

// codexState is CODEX_HOME inside the sandbox.
const codexState = "/tmp/codex-home"

// Command points Codex at env.BaseURL.
func (Codex) Command(env Env) (Launch, error) {
	if env.ProgramDir == "" || env.BaseURL == "" || env.TaskFile == "" || env.ConfigDir == "" {
		return Launch{}, fmt.Errorf("harness codex: ProgramDir, BaseURL, TaskFile and ConfigDir are required")
	}
	model := env.Model
	if model == "" {
		model = "legorl"
	}
	q := strconv.Quote
	conf := strings.Join([]string{
		"model = " + q(model),
		`model_provider = "legorl"`,
		"check_for_update_on_startup = false",
		"model_context_window = 32768",
		"include_environment_context_time = false",
		"",
		"[skills]",
		"include_instructions = false",
		"",
		"[analytics]",
		"enabled = false",
		"",
		"[otel]",
		`exporter = "none"`,
		"",
		"[model_providers.legorl]",
		`name = "legorl"`,
		"base_url = " + q(env.BaseURL),
		`env_key = "LEGORL_API_KEY"`,
		`wire_api = "responses"`,
		"request_max_retries = 0",
		"stream_max_retries = 0",
		"",
	}, "\n")
	argv, wenv := wrap(path.Join(env.ConfigDir, "codex"), codexState, env.TaskFile,
		nodePath, codexPackage.script(env.ProgramDir), "exec", "--skip-git-repo-check", "--ephemeral", "--json",
		"--disable", "plugins", "--disable", "remote_plugin", "--disable", "apps", "--disable", "multi_agent",
		"--disable", "goals", "-c", `web_search="disabled"`, "--dangerously-bypass-approvals-and-sandbox")
	return Launch{
		Cmd:   wrapCmd(argv, env.Workspace, append(wenv, "CODEX_HOME="+codexState, "LEGORL_API_KEY=legorl")),
		Files: map[string][]byte{"codex/config.toml": []byte(conf)},
	}, nil
}

// codexEvent is the part of a Codex JSON event that Result reads.
type codexEvent struct {
	Type    string `json:"type"`
	Message string `json:"message"`
	Error   *struct {
		Message string `json:"message"`
	} `json:"error"`
	Item *struct {
		Type             string `json:"type"`
		Command          string `json:"command"`
		AggregatedOutput string `json:"aggregated_output"`
		ExitCode         *int   `json:"exit_code"`
	} `json:"item"`
}

// Result reads Codex's JSON events: each completed command_execution item
// is a tool call; turn.completed ends a run, turn.failed (or a top-level
// error with no turn end) is an error. Codex does not report its model
// calls: Turns is -1 and the runner counts the proxy's.
func (Codex) Result(stdout []byte) (Result, error) {
	out := Result{Turns: -1, ParseFailures: -1, LLMSeconds: -1, ToolSeconds: -1}
	ended, lastErr := false, ""
	jsonLines(stdout, func(l []byte) {
		var e codexEvent
		if json.Unmarshal(l, &e) != nil {
			return
		}
		switch e.Type {
		case "item.completed":
			if e.Item == nil {
				return
			}
			switch e.Item.Type {
			case "command_execution":
				args, _ := json.Marshal(map[string]string{"cmd": e.Item.Command})
				st := stepOf(out.ToolCalls, "exec_command", args, len(e.Item.AggregatedOutput))
				if e.Item.ExitCode != nil {
					st.ExitCode = int32(*e.Item.ExitCode)
				}
				out.ToolCalls++
				out.Steps = append(out.Steps, st)
			case "file_change", "mcp_tool_call", "web_search":
				out.Steps = append(out.Steps, stepOf(out.ToolCalls, e.Item.Type, nil, 0))
				out.ToolCalls++
			}
		case "error":
			lastErr = e.Message
		case "turn.completed":
			ended = true
			out.Stop, out.Error = StopDone, ""
		case "turn.failed":
			ended = true
			out.Stop, out.Error = StopError, "codex: turn failed"
			if e.Error != nil {
				out.Error += ": " + e.Error.Message
				if strings.Contains(e.Error.Message, "max_output_tokens") {
					// The model's reply hit its length limit and Codex gave
					// up: the policy's doing, so a scored end.
					out.Stop, out.Error = StopDone, ""
					out.Flags = append(out.Flags, "truncated")
				}
			}
		}
	})
	if !ended {
		if lastErr != "" {
			return Result{Stop: StopError, Error: "codex: " + lastErr, Turns: -1, ToolCalls: out.ToolCalls,
				ParseFailures: -1, LLMSeconds: -1, ToolSeconds: -1, Steps: out.Steps}, nil
		}
		return Result{}, fmt.Errorf("harness codex: no turn.completed or turn.failed event in its output (%d bytes)", len(stdout))
	}
	return out, nil
}

var _ Harness = Codex{}
