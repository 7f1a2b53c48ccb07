package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/legorl/legorl/schemas"
)

// claudePackage is Claude Code, pinned. bin/claude.exe is a native binary
// that the package's install script takes from its platform package.
var claudePackage = npmPackage{Name: "@anthropic-ai/claude-code", Version: "2.1.332", Main: "bin/claude.exe"}

// ClaudeCode is Anthropic's Claude Code (@anthropic-ai/claude-code). It
// speaks Anthropic Messages (POST /v1/messages?beta=true, streamed, with
// thinking, context_management and output_config fields, no temperature);
// its main tools are Bash (command), Read, Edit (file_path, old_string,
// new_string) and Write.
//
// It takes its configuration from the environment: ANTHROPIC_BASE_URL is
// the proxy's base URL without /v1 (Claude Code adds /v1/messages),
// ANTHROPIC_API_KEY any key, CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1,
// DISABLE_TELEMETRY=1, DISABLE_AUTOUPDATER=1 and CLAUDE_CODE_MAX_RETRIES=0
// keep it offline and make a proxy error final, IS_SANDBOX=1 lets
// --dangerously-skip-permissions run as root, and HOME and
// CLAUDE_CONFIG_DIR are private folders under /tmp. It runs as
// `claude -p --model M --output-format stream-json --verbose
// --dangerously-skip-permissions [--max-turns N] TASK` and prints one JSON
// event per line (its messages), ending with a result object.
//
// The model it asks for is a Claude model's name, not Env.Model (the
// proxy serves the policy under any name): with a name it does not know,
// Claude Code 2.1 puts a "system" message among the messages (after the
// first user message), which the Messages API, and so the proxy, refuse.
type ClaudeCode struct {
	// Model is the model name Claude Code asks for. Defaults to
	// "claude-sonnet-4-5".
	Model string
}

// Name returns "claude".
func (ClaudeCode) Name() string { return "claude" }

// WireAPI returns WireMessages.
func (ClaudeCode) WireAPI() string { return WireMessages }

// Install installs the pinned package under cacheDir.
func (ClaudeCode) Install(ctx context.Context, cacheDir string) (string, error) {
	return claudePackage.install(ctx, cacheDir)
}

// claudeState is Claude Code's private HOME inside the sandbox.
const claudeState = "/tmp/claude-home"

// Command points Claude Code at env.BaseURL.
func (c ClaudeCode) Command(env Env) (Launch, error) {
	if env.ProgramDir == "" || env.BaseURL == "" || env.TaskFile == "" || env.ConfigDir == "" {
		return Launch{}, fmt.Errorf("harness claude: ProgramDir, BaseURL, TaskFile and ConfigDir are required")
	}
	model := c.Model
	if model == "" {
		model = "claude-sonnet-4-5"
	}
	args := []string{claudePackage.script(env.ProgramDir), "-p", "--model", model, "--output-format", "stream-json",
		"--verbose", "--dangerously-skip-permissions"}
	if env.MaxTurns > 0 {
		args = append(args, "--max-turns", strconv.Itoa(env.MaxTurns))
	}
	argv, wenv := wrap(path.Join(env.ConfigDir, "claude"), claudeState+"/.claude", env.TaskFile, args...)
	wenv = append(wenv, "HOME="+claudeState, "CLAUDE_CONFIG_DIR="+claudeState+"/.claude",
		"ANTHROPIC_BASE_URL="+strings.TrimSuffix(env.BaseURL, "/v1"), "ANTHROPIC_API_KEY=legorl",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1", "DISABLE_AUTOUPDATER=1",
		"CLAUDE_CODE_MAX_RETRIES=0", "IS_SANDBOX=1")
	return Launch{
		Cmd:   wrapCmd(argv, env.Workspace, wenv),
		Files: map[string][]byte{"claude/settings.json": []byte("{}\n")},
	}, nil
}

// claudeResult is a Claude Code event (--output-format stream-json): a
// message, or the result object at its end.
type claudeResult struct {
	Type    string `json:"type"`
	Message *struct {
		ID      string `json:"id"`
		Content []struct {
			Type    string          `json:"type"`
			Name    string          `json:"name"`
			Input   json.RawMessage `json:"input"`
			Content json.RawMessage `json:"content"`
			IsError bool            `json:"is_error"`
		} `json:"content"`
	} `json:"message"`
	Subtype       string  `json:"subtype"`
	IsError       bool    `json:"is_error"`
	NumTurns      *int    `json:"num_turns"`
	Result        string  `json:"result"`
	DurationAPIMs float64 `json:"duration_api_ms"`
}

// Result reads Claude Code's events: the tool_use blocks of assistant
// messages are tool calls (their tool_result blocks, in the next user
// message, the observations); the result object's subtype success ends
// the run, error_max_turns is the turn budget, anything else (or
// is_error) an error.
func (ClaudeCode) Result(stdout []byte) (Result, error) {
	return claudeEvents("claude", stdout)
}

// claudeEvents reads a Claude Code style event stream (Claude Code's
// stream-json, qwen-code's json output).
func claudeEvents(name string, stdout []byte) (Result, error) {
	var last *claudeResult
	var steps []schemas.Step
	turns, results, lastID := 0, 0, ""
	jsonLines(stdout, func(l []byte) {
		var r claudeResult
		if json.Unmarshal(l, &r) != nil {
			return
		}
		switch {
		case r.Type == "result":
			last = &r
		case r.Type == "assistant" && r.Message != nil:
			if r.Message.ID == "" || r.Message.ID != lastID { // one message streams as several events
				turns++
			}
			lastID = r.Message.ID
			for _, c := range r.Message.Content {
				if c.Type == "tool_use" {
					steps = append(steps, stepOf(turns-1, c.Name, c.Input, 0))
				}
			}
		case r.Type == "user" && r.Message != nil:
			for _, c := range r.Message.Content {
				if c.Type == "tool_result" && results < len(steps) {
					steps[results].ObservationBytes = int64(len(c.Content))
					if c.IsError {
						steps[results].ExitCode = 1
					}
					results++
				}
			}
		}
	})
	if last == nil {
		return Result{}, fmt.Errorf("harness %s: no result object in its output (%d bytes)", name, len(stdout))
	}
	out := Result{Turns: -1, ToolCalls: len(steps), ParseFailures: -1, LLMSeconds: -1, ToolSeconds: -1, Steps: steps}
	if last.NumTurns != nil {
		out.Turns = *last.NumTurns
	}
	if last.DurationAPIMs > 0 {
		out.LLMSeconds = last.DurationAPIMs / 1000
	}
	switch {
	case last.Subtype == "error_max_turns":
		out.Stop = StopMaxTurns
	case last.Subtype != "success" || last.IsError:
		out.Stop, out.Error = StopError, name+": "+last.Subtype+": "+tail([]byte(last.Result), 1000)
	default:
		out.Stop = StopDone
	}
	return out, nil
}

var _ Harness = ClaudeCode{}
