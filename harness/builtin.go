package harness

import (
	"context"
	"fmt"
	"strconv"

	"github.com/legorl/legorl/harness/agent"
	"github.com/legorl/legorl/sandbox"
	"github.com/legorl/legorl/schemas"
)

// Builtin is one of the built-in agents (harness/agent), run as the
// legorl-agent program that the runner shows inside the sandbox at
// Env.AgentPath. It speaks Chat Completions.
type Builtin struct {
	// Agent is "bash" or "tools".
	Agent string
	// Args are extra flags of legorl-agent (e.g. "--max-idle-turns", "2",
	// "--context-chars", "8000").
	Args []string
}

// Bash is the bash-only agent: one fenced command per turn.
func Bash() Builtin { return Builtin{Agent: "bash"} }

// Tools is the function-calling agent with history condensation.
func Tools() Builtin { return Builtin{Agent: "tools"} }

// Name returns the agent's name.
func (b Builtin) Name() string { return b.Agent }

// WireAPI returns WireChat.
func (b Builtin) WireAPI() string { return WireChat }

// Install does nothing: the runner provides legorl-agent.
func (b Builtin) Install(context.Context, string) (string, error) { return "", nil }

// Command runs legorl-agent AGENT against the proxy in the workspace.
func (b Builtin) Command(env Env) (Launch, error) {
	if b.Agent != "bash" && b.Agent != "tools" {
		return Launch{}, fmt.Errorf("%w: built-in agent %q", ErrUnknown, b.Agent)
	}
	if env.AgentPath == "" || env.BaseURL == "" || env.TaskFile == "" {
		return Launch{}, fmt.Errorf("harness %s: AgentPath, BaseURL and TaskFile are required", b.Agent)
	}
	args := []string{env.AgentPath, b.Agent,
		"--base-url", env.BaseURL, "--task-file", env.TaskFile, "--workdir", env.Workspace}
	if env.Model != "" {
		args = append(args, "--model", env.Model)
	}
	if env.MaxTurns > 0 {
		args = append(args, "--max-turns", strconv.Itoa(env.MaxTurns))
	}
	args = append(args, b.Args...)
	return Launch{Cmd: sandbox.Cmd{Args: args, Dir: env.Workspace}}, nil
}

// Result reads legorl-agent's result line.
func (b Builtin) Result(stdout []byte) (Result, error) {
	r, err := agent.ParseResult(stdout)
	if err != nil {
		return Result{}, fmt.Errorf("harness %s: %w", b.Agent, err)
	}
	out := Result{Stop: r.Stop, Turns: r.Turns, ToolCalls: r.ToolCalls, ParseFailures: r.ParseFailures,
		LLMSeconds: r.LLMSeconds, ToolSeconds: r.ToolSeconds, Error: r.Error}
	switch r.Stop {
	case agent.StopSubmitted, agent.StopMaxTurns, agent.StopNoToolCalls, agent.StopError:
	default:
		return Result{}, fmt.Errorf("harness %s: unknown stop reason %q", b.Agent, r.Stop)
	}
	if r.Condensations > 0 {
		out.Flags = append(out.Flags, "condensed")
	}
	for _, s := range r.Steps {
		out.Steps = append(out.Steps, schemas.Step{Turn: int32(s.Turn), ToolName: s.Tool, Arguments: s.Arguments,
			ObservationBytes: int64(s.ObservationBytes), ExitCode: int32(s.ExitCode), ParseFailure: s.ParseFailure, Seconds: s.Seconds})
	}
	return out, nil
}

var _ Harness = Builtin{}
