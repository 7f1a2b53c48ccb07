package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"path"

	"github.com/legorl/legorl/sandbox"
	"github.com/legorl/legorl/schemas"
)

// piPackage is pi, pinned.
var piPackage = npmPackage{Name: "@mariozechner/pi-coding-agent", Version: "0.73.1", Main: "dist/cli.js"}

// Pi is the pi coding agent (@mariozechner/pi-coding-agent): the smallest
// prompts of the npm harnesses (a ~2.3 kB system prompt and four tools:
// read, bash, edit, write). It speaks Chat Completions (streamed, no
// logprobs, no temperature).
//
// Its configuration is an agent folder (PI_CODING_AGENT_DIR) holding
// models.json, with a provider of api "openai-completions" whose baseUrl is
// the proxy's, and settings.json turning its retries off (a proxy error is
// a decision, not a hiccup). pi writes auth.json there, so the runner's
// read-only copy is copied to /tmp/pi-agent first. PI_OFFLINE=1,
// PI_TELEMETRY=0 and PI_SKIP_VERSION_CHECK=1 keep it off the network; it
// runs as `pi --provider legorl --model M --mode json --no-session -p TASK`
// and prints one JSON event per line, ending with agent_end. It exits 0
// even when the model call failed: Result reads the last assistant
// message's stopReason. Its wall clock starts at ClockEpoch (a preload,
// pinClock): pi writes the day into its system prompt, and the same task
// must render the same tokens on any day.
type Pi struct{}

// Name returns "pi".
func (Pi) Name() string { return "pi" }

// WireAPI returns WireChat.
func (Pi) WireAPI() string { return WireChat }

// Install installs the pinned package under cacheDir.
func (Pi) Install(ctx context.Context, cacheDir string) (string, error) {
	return piPackage.install(ctx, cacheDir)
}

// piState is pi's writable agent folder inside the sandbox.
const piState = "/tmp/pi-agent"

// Command points pi at env.BaseURL.
func (Pi) Command(env Env) (Launch, error) {
	if env.ProgramDir == "" || env.BaseURL == "" || env.TaskFile == "" || env.ConfigDir == "" {
		return Launch{}, fmt.Errorf("harness pi: ProgramDir, BaseURL, TaskFile and ConfigDir are required")
	}
	model := env.Model
	if model == "" {
		model = "legorl"
	}
	models, err := json.MarshalIndent(map[string]any{"providers": map[string]any{"legorl": map[string]any{
		"baseUrl": env.BaseURL, "api": "openai-completions", "apiKey": "legorl",
		"models": []any{map[string]any{"id": model, "name": model, "reasoning": false, "input": []string{"text"},
			"contextWindow": 32768, "maxTokens": 4096,
			"cost": map[string]float64{"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}}},
	}}}, "", "  ")
	if err != nil {
		return Launch{}, err
	}
	settings := []byte(`{"retry": {"enabled": false, "provider": {"maxRetries": 0}}}` + "\n")
	files := map[string][]byte{"pi/models.json": models, "pi/settings.json": settings}
	args := append([]string{nodePath}, pinClock(files, env.ConfigDir)...)
	argv, wenv := wrap(path.Join(env.ConfigDir, "pi"), piState, env.TaskFile,
		append(args, piPackage.script(env.ProgramDir), "--provider", "legorl", "--model", model,
			"--mode", "json", "--no-session", "-p")...)
	return Launch{
		Cmd: wrapCmd(argv, env.Workspace, append(wenv, "PI_CODING_AGENT_DIR="+piState,
			"PI_OFFLINE=1", "PI_TELEMETRY=0", "PI_SKIP_VERSION_CHECK=1")),
		Files: files,
	}, nil
}

// piEvent is the part of a pi JSON event that Result reads.
type piEvent struct {
	Type     string          `json:"type"`
	ToolName string          `json:"toolName"`
	Args     json.RawMessage `json:"args"`
	IsError  bool            `json:"isError"`
	Result   json.RawMessage `json:"result"`
	Messages []struct {
		Role         string `json:"role"`
		StopReason   string `json:"stopReason"`
		ErrorMessage string `json:"errorMessage"`
	} `json:"messages"`
}

// Result reads pi's JSON events: turns are turn_end events, tool calls
// tool_execution_end events; the run's end is the last assistant
// message of agent_end.
func (Pi) Result(stdout []byte) (Result, error) {
	out := Result{Turns: 0, ToolCalls: 0, ParseFailures: -1, LLMSeconds: -1, ToolSeconds: -1}
	ended := false
	var pending []piEvent
	jsonLines(stdout, func(l []byte) {
		var e piEvent
		if json.Unmarshal(l, &e) != nil {
			return
		}
		switch e.Type {
		case "turn_end":
			out.Turns++
		case "tool_execution_start":
			pending = append(pending, e)
		case "tool_execution_end":
			out.ToolCalls++
			st := stepOf(out.Turns, e.ToolName, nil, len(e.Result))
			for i, p := range pending {
				if p.ToolName == e.ToolName {
					st.Arguments = string(p.Args)
					pending = append(pending[:i], pending[i+1:]...)
					break
				}
			}
			if e.IsError {
				st.ExitCode = 1
			}
			out.Steps = append(out.Steps, st)
		case "agent_end":
			ended = true
			out.Stop, out.Error = StopDone, ""
			for i := len(e.Messages) - 1; i >= 0; i-- {
				m := e.Messages[i]
				if m.Role != "assistant" {
					continue
				}
				if m.StopReason == "error" || m.StopReason == "aborted" {
					out.Stop, out.Error = StopError, "pi: "+m.StopReason+": "+m.ErrorMessage
				}
				break
			}
		}
	})
	if !ended {
		return Result{}, fmt.Errorf("harness pi: no agent_end event in its output (%d bytes)", len(stdout))
	}
	return out, nil
}

var _ Harness = Pi{}

// stepOf is one tool call as a step row.
func stepOf(turn int, tool string, args []byte, obsBytes int) schemas.Step {
	return schemas.Step{Turn: int32(max(turn, 0)), ToolName: tool, Arguments: string(args), ObservationBytes: int64(max(obsBytes, 0))}
}

// wrapCmd is a Cmd in dir with env.
func wrapCmd(argv []string, dir string, env []string) sandbox.Cmd {
	return sandbox.Cmd{Args: argv, Dir: dir, Env: env}
}
